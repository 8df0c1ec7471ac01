package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Targets: ratios of wtx's time to its baseline's, at most.
const (
	targetOpenRun  = 1.0 // open+run+scan vs git status
	targetScan     = 1.5 // status / diff --stat / diff vs git's
	targetModified = 1.5 // apply or undo of modified files vs cp -a + sync
	targetNew      = 1.2 // apply of new files vs cp -a + sync
	targetDirty    = 1.3 // with dirty data vs without
	targetSyscalls = 30  // per changed file
)

// openRun times 'wtx run -- true' against 'git status' (and 'try -n true'
// when try is installed) on the same tree.
func (b *bench) openRun() error {
	git, err := b.gitTree()
	if err != nil {
		return err
	}
	progress("open+run+scan")
	res := result{Scenario: "open+run+scan", Command: "wtx run -- true", Target: targetOpenRun}
	if git != "" {
		res.Baseline = "git status"
	}
	try, _ := exec.LookPath("try")
	var trySamples []float64
	if _, err := b.wtxCmd("--json", "run", "--", "true"); err != nil { // warm-up
		return err
	}
	for res.more(b.cfg) {
		if err := b.settle(); err != nil {
			return err
		}
		s, err := b.wtxCmd("--json", "run", "--", "true") // an empty run settles its stage
		if err != nil {
			return err
		}
		res.add(s)
		if git != "" {
			if err := b.settle(); err != nil {
				return err
			}
			c, err := b.exec(git, "git", "status", "--porcelain")
			if err != nil {
				return err
			}
			res.addBaseline(c)
		}
		if try != "" {
			if err := b.settle(); err != nil {
				return err
			}
			c, err := b.exec(b.ws, try, "-n", "true")
			if err != nil {
				return err
			}
			trySamples = append(trySamples, c.took.Seconds())
		}
	}
	b.record(res.done())
	if try != "" {
		t := res
		t.Baseline, t.BaselineSamples, t.Target = "try -n true", trySamples, 0
		b.record(t.done())
	} else {
		b.note("try is not installed: 'try -n true' is not measured beside open+run+scan")
	}
	return nil
}

// changeScan times 'wtx status', 'wtx diff --stat' and 'wtx diff' on one
// stage as it accumulates 1,000, 10,000 and 20,000 changed files, against
// git's with the same changes.
func (b *bench) changeScan() error {
	git, err := b.gitTree()
	if err != nil {
		return err
	}
	tx, prev := "", 0
	for _, n := range b.counts(1000, 10000, 20000) {
		progress("status and diff, %d changed", n)
		list, err := b.list(prev, n)
		if err != nil {
			return err
		}
		args := []string{"--json", "run"}
		if tx != "" {
			args = append(args, "--tx", tx)
		}
		s, err := b.wtxCmd(append(args, "--", "sh", "-c", mutate, "sh", list)...)
		if err != nil {
			return err
		}
		if tx, err = txOf(s); err != nil {
			return err
		}
		if git != "" {
			if _, err := b.exec(git, "sh", "-c", mutate, "sh", list); err != nil {
				return err
			}
		}
		if err := b.settle(); err != nil {
			return err
		}
		for _, c := range []struct {
			name    string
			wtx     []string
			baseArg []string
		}{
			{"status", []string{"status", tx}, []string{"status", "--porcelain"}},
			{"diff --stat", []string{"diff", "--stat", tx}, []string{"diff", "--stat"}},
			{"diff", []string{"diff", tx}, []string{"diff"}},
		} {
			res := result{Scenario: fmt.Sprintf("%s, %d changed", c.name, n), Command: "wtx " + c.name, Target: targetScan}
			if _, err := b.wtxCmd(c.wtx...); err != nil { // warm-up, like git's below
				return err
			}
			if git != "" {
				res.Baseline = "git " + c.name
				if _, err := b.exec(git, "git", c.baseArg...); err != nil {
					return err
				}
			}
			for res.more(b.cfg) {
				s, err := b.wtxCmd(c.wtx...)
				if err != nil {
					return err
				}
				res.add(s)
				if git != "" {
					g, err := b.exec(git, "git", c.baseArg...)
					if err != nil {
						return err
					}
					res.addBaseline(g)
				}
			}
			b.record(res.done())
		}
		prev = n
	}
	_, err = b.wtxCmd("drop", tx)
	return err
}

// durableApply times 'wtx apply' of 1,000 and 10,000 modified files, and
// 'wtx undo' of that op, each against 'cp -a' of the same files over a
// copy of the tree, then sync.
func (b *bench) durableApply() error {
	dst, err := b.spareTree()
	if err != nil {
		return err
	}
	for _, n := range b.counts(1000, 10000) {
		progress("durable apply and undo, %d modified", n)
		list, err := b.list(0, n)
		if err != nil {
			return err
		}
		apply := result{Scenario: fmt.Sprintf("durable apply, %d modified", n), Command: "wtx apply",
			Baseline: "cp -a + sync", Target: targetModified}
		undo := result{Scenario: fmt.Sprintf("undo, %d modified", n), Command: "wtx undo",
			Baseline: "cp -a + sync", Target: targetModified}
		for apply.more(b.cfg) {
			err := b.applyUndo(list, func() (sample, error) {
				return b.exec(b.ws, "sh", "-c", copyFiles, "sh", dst, list)
			}, &apply, &undo)
			if err != nil {
				return err
			}
		}
		b.record(apply.done(), undo.done())
	}
	return nil
}

// applyUndo stages the mutation of the files in list, applies it (timed
// into apply, with baseline() after it), undoes the op (timed into undo,
// with baseline() after it), syncing between all of them.
func (b *bench) applyUndo(list string, baseline func() (sample, error), apply, undo *result) error {
	return b.applyUndoOf([]string{"sh", "-c", mutate, "sh", list}, baseline, baseline, apply, undo)
}

func (b *bench) applyUndoOf(argv []string, applyBase, undoBase func() (sample, error), apply, undo *result) error {
	s, err := b.wtxCmd(append([]string{"--json", "run", "--"}, argv...)...)
	if err != nil {
		return err
	}
	tx, err := txOf(s)
	if err != nil {
		return err
	}
	if err := b.settle(); err != nil {
		return err
	}
	a, err := b.wtxCmd("--json", "apply", tx)
	if err != nil {
		return err
	}
	apply.add(a)
	op, err := opOf(a)
	if err != nil {
		return err
	}
	for _, step := range []func() error{
		b.settle,
		func() error { c, err := applyBase(); apply.addBaseline(c); return err },
		b.settle,
	} {
		if err := step(); err != nil {
			return err
		}
	}
	u, err := b.wtxCmd("--json", "undo", op)
	if err != nil {
		return err
	}
	undo.add(u)
	for _, step := range []func() error{
		b.settle,
		func() error { c, err := undoBase(); undo.addBaseline(c); return err },
		b.settle,
	} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// newFiles times the apply of a stage that added a package-like tree of
// small files (an 'npm install') against 'cp -a' of it and sync, and its
// undo against 'rm -rf' of it and sync.
func (b *bench) newFiles() error {
	if b.cfg.pkgFiles == 0 {
		return nil
	}
	pkg := filepath.Join(b.work, "pkg")
	progress("generating a package-like tree of %d small files", b.cfg.pkgFiles)
	if err := writeSynthetic(pkg, synthSpec{Files: b.cfg.pkgFiles, Seed: b.cfg.seed + 100, Small: true}); err != nil {
		return err
	}
	dst, err := b.spareTree()
	if err != nil {
		return err
	}
	const name = "node_modules.wtx-bench"
	target := filepath.Join(dst, name)
	progress("durable apply and undo, %d new", b.cfg.pkgFiles)
	apply := result{Scenario: fmt.Sprintf("durable apply, %d new", b.cfg.pkgFiles), Command: "wtx apply",
		Baseline: "cp -a + sync", Target: targetNew}
	undo := result{Scenario: fmt.Sprintf("undo, %d new", b.cfg.pkgFiles), Command: "wtx undo",
		Baseline: "rm -rf + sync", Target: targetModified}
	for apply.more(b.cfg) {
		err := b.applyUndoOf([]string{"cp", "-a", pkg, name},
			func() (sample, error) { return b.exec("", "sh", "-c", `cp -a "$1" "$2" && sync`, "sh", pkg, target) },
			func() (sample, error) { return b.exec("", "sh", "-c", `rm -rf "$1" && sync`, "sh", target) },
			&apply, &undo)
		if err != nil {
			return err
		}
	}
	b.record(apply.done(), undo.done())
	return os.RemoveAll(pkg)
}

// syscalls counts the system calls of the apply of 1,000 modified files
// with 'strace -c -f'.
func (b *bench) syscalls() error {
	strace, err := exec.LookPath("strace")
	if err != nil {
		b.note("strace is not installed: syscalls per changed file are not measured")
		return nil
	}
	n := min(1000, len(b.order))
	progress("syscalls of an apply of %d modified", n)
	list, err := b.list(0, n)
	if err != nil {
		return err
	}
	s, err := b.wtxCmd("--json", "run", "--", "sh", "-c", mutate, "sh", list)
	if err != nil {
		return err
	}
	tx, err := txOf(s)
	if err != nil {
		return err
	}
	out := filepath.Join(b.work, "strace.txt")
	a, err := b.exec("", strace, "-f", "-c", "-o", out, b.wtx, "-C", b.ws, "--json", "apply", tx)
	if err != nil {
		return err
	}
	total, top, err := straceCounts(out)
	if err != nil {
		return err
	}
	var detail []string
	for _, c := range top[:min(6, len(top))] {
		detail = append(detail, fmt.Sprintf("%s %d", c.name, c.calls))
	}
	sched := 0
	for _, c := range top {
		if runtimeCalls[c.name] {
			sched += c.calls
		}
	}
	op, err := opOf(a)
	if err != nil {
		return err
	}
	if _, err := b.wtxCmd("undo", op); err != nil {
		return err
	}
	// The same apply once more, counted by the kernel's own tracepoint
	// where perf can read it: strace stops the process at every call,
	// which holds each past the Go scheduler's 20 µs tick and so
	// multiplies the runtime's own futex and nanosleep calls.
	kernel, ok, err := b.perfSyscalls(list)
	if err != nil {
		return err
	}
	straceFig := count{Name: fmt.Sprintf("syscalls per changed file (apply of %d modified, strace -c -f)", n),
		Value: float64(total) / float64(n),
		Detail: fmt.Sprintf("%d in all: %s; %.1f per file without the Go runtime's scheduling calls (%d)",
			total, strings.Join(detail, ", "), float64(total-sched)/float64(n), sched)}
	if !ok {
		straceFig.Target = targetSyscalls
		b.figures = append(b.figures, straceFig)
		b.note("perf cannot count system calls here (perf, and tracefs mounted at /sys/kernel/tracing, are needed): only strace's count, which the tracing inflates, is given")
		return nil
	}
	b.figures = append(b.figures, count{Name: fmt.Sprintf("syscalls per changed file (apply of %d modified, perf stat raw_syscalls:sys_enter)", n),
		Value: float64(kernel) / float64(n), Target: targetSyscalls, Detail: fmt.Sprintf("%d in all", kernel)}, straceFig)
	return nil
}

// perfSyscalls stages the change of the files named in list, applies it
// under 'perf stat -e raw_syscalls:sys_enter' and undoes it again; it
// returns the apply's system calls, and false where perf cannot count them.
func (b *bench) perfSyscalls(list string) (int64, bool, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return 0, false, nil
	}
	s, err := b.wtxCmd("--json", "run", "--", "sh", "-c", mutate, "sh", list)
	if err != nil {
		return 0, false, err
	}
	tx, err := txOf(s)
	if err != nil {
		return 0, false, err
	}
	out := filepath.Join(b.work, "perf.csv")
	a, err := b.exec("", perf, "stat", "-x", ",", "-o", out, "-e", "raw_syscalls:sys_enter", "--", b.wtx, "-C", b.ws, "--json", "apply", tx)
	if err != nil {
		// perf without the tracepoint (tracefs not mounted, not
		// allowed) fails before it runs wtx: the stage is still open.
		if _, derr := b.wtxCmd("drop", tx); derr != nil {
			return 0, false, derr
		}
		return 0, false, nil
	}
	op, err := opOf(a)
	if err != nil {
		return 0, false, err
	}
	if _, err := b.wtxCmd("undo", op); err != nil {
		return 0, false, err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		return 0, false, err
	}
	calls, ok := perfCount(data, "raw_syscalls:sys_enter")
	return calls, ok, nil
}

// perfCount reads the count of event from the CSV 'perf stat -x ,' wrote
// (value,unit,event,…); false when the event is missing or not counted.
func perfCount(csv []byte, event string) (int64, bool) {
	for _, line := range strings.Split(string(csv), "\n") {
		f := strings.Split(line, ",")
		if len(f) < 3 || f[2] != event {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		return v, err == nil
	}
	return 0, false
}

// runtimeCalls are the calls the Go runtime makes to schedule goroutines
// and threads, signal and collect garbage, whatever the program does: the
// syscall figure is printed with and without them.
var runtimeCalls = map[string]bool{
	"futex": true, "nanosleep": true, "sched_yield": true, "epoll_pwait": true,
	"tgkill": true, "getpid": true, "gettid": true, "rt_sigreturn": true, "rt_sigprocmask": true,
	"rt_sigaction": true, "sigaltstack": true, "madvise": true, "mmap": true, "munmap": true,
	"clone": true, "clone3": true, "rseq": true, "set_robust_list": true, "sched_getaffinity": true,
}

type syscallCount struct {
	name  string
	calls int
}

// straceCounts reads the summary 'strace -c' wrote: the total number of
// calls and the calls of each syscall, most first.
func straceCounts(path string) (int, []syscallCount, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	total := -1
	var each []syscallCount
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// "% time seconds usecs/call calls [errors] syscall"
		if len(f) < 5 || strings.HasPrefix(f[0], "-") || f[0] == "%" {
			continue
		}
		calls, err := strconv.Atoi(f[3])
		if err != nil {
			continue
		}
		name := f[len(f)-1]
		if name == "total" {
			total = calls
			continue
		}
		each = append(each, syscallCount{name, calls})
	}
	if total < 0 {
		return 0, nil, fmt.Errorf("strace wrote no total to %s:\n%s", path, data)
	}
	slices.SortFunc(each, func(a, b syscallCount) int { return b.calls - a.calls })
	return total, each, nil
}

// dirtyData times 'wtx run -- true' and a 1,000-file apply right after
// -dirty bytes of unrelated data were written (not synced) on the same
// filesystem, against the same command without them.
func (b *bench) dirtyData() error {
	if b.cfg.dirty == 0 {
		b.note("-dirty 0: the dirty-data scenarios are skipped")
		return nil
	}
	size := bytesIEC(b.cfg.dirty)
	dirty := filepath.Join(b.work, "dirty.bin")
	var seen []int64
	makeDirty := func() error {
		if err := writeDirty(dirty, b.cfg.dirty); err != nil {
			return err
		}
		seen = append(seen, dirtyKiB())
		return nil
	}
	dropDirty := func() error {
		// Unlinking drops the dirty pages without writing them back.
		if err := os.Remove(dirty); err != nil {
			return err
		}
		return b.settle()
	}
	progress("run -- true with %s of dirty data", size)
	runRes := result{Scenario: fmt.Sprintf("run -- true, %s dirty", size), Command: "wtx run -- true",
		Baseline: "same, no dirty data", Target: targetDirty}
	for runRes.more(b.cfg) {
		if err := b.settle(); err != nil {
			return err
		}
		q, err := b.wtxCmd("--json", "run", "--", "true")
		if err != nil {
			return err
		}
		runRes.addBaseline(q)
		if err := makeDirty(); err != nil {
			return err
		}
		d, err := b.wtxCmd("--json", "run", "--", "true")
		if err != nil {
			return err
		}
		runRes.add(d)
		if err := dropDirty(); err != nil {
			return err
		}
	}
	b.record(runRes.done())

	n := min(1000, len(b.order))
	progress("apply of %d modified with %s of dirty data", n, size)
	list, err := b.list(0, n)
	if err != nil {
		return err
	}
	applyRes := result{Scenario: fmt.Sprintf("apply %d modified, %s dirty", n, size), Command: "wtx apply",
		Baseline: "same, no dirty data", Target: targetDirty}
	applyOnce := func(withDirty bool) (sample, error) {
		s, err := b.wtxCmd("--json", "run", "--", "sh", "-c", mutate, "sh", list)
		if err != nil {
			return sample{}, err
		}
		tx, err := txOf(s)
		if err != nil {
			return sample{}, err
		}
		if err := b.settle(); err != nil {
			return sample{}, err
		}
		if withDirty {
			if err := makeDirty(); err != nil {
				return sample{}, err
			}
		}
		a, err := b.wtxCmd("--json", "apply", tx)
		if err != nil {
			return sample{}, err
		}
		if withDirty {
			if err := dropDirty(); err != nil {
				return sample{}, err
			}
		}
		op, err := opOf(a)
		if err != nil {
			return sample{}, err
		}
		if err := b.settle(); err != nil {
			return sample{}, err
		}
		_, err = b.wtxCmd("undo", op)
		return a, err
	}
	for applyRes.more(b.cfg) {
		q, err := applyOnce(false)
		if err != nil {
			return err
		}
		applyRes.addBaseline(q)
		d, err := applyOnce(true)
		if err != nil {
			return err
		}
		applyRes.add(d)
	}
	b.record(applyRes.done())
	if len(seen) > 0 {
		var f []float64
		for _, k := range seen {
			f = append(f, float64(k))
		}
		b.note("dirty data in the page cache just before the timed commands (/proc/meminfo Dirty): median %s", bytesIEC(int64(median(f))<<10))
	}
	return nil
}

// writeDirty writes size bytes of incompressible data to path without
// syncing them.
func writeDirty(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	buf := make([]byte, 8<<20)
	r := rand.New(rand.NewPCG(uint64(size), 0xd1e7))
	for i := 0; i+8 <= len(buf); i += 8 {
		v := r.Uint64()
		for j := range 8 {
			buf[i+j] = byte(v >> (8 * j))
		}
	}
	for left := size; left > 0; left -= int64(len(buf)) {
		buf[0]++ // no two chunks alike
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// dirtyKiB reads Dirty from /proc/meminfo (0 where it cannot).
func dirtyKiB() int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Dirty:" {
			n, _ := strconv.ParseInt(f[1], 10, 64) // 0 if malformed
			return n
		}
	}
	return 0
}

// scaleTrees measures, on synthetic trees of each -scale size (small
// files), open+run+scan, status after 100 changes and a 1,000-file apply,
// with peak RSS against the budget of 100 MB + 200 bytes per entry.
func (b *bench) scaleTrees() error {
	for _, n := range b.cfg.scale {
		if err := b.scaleTree(n); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) scaleTree(n int) error {
	top := filepath.Join(b.work, fmt.Sprintf("scale-%d", n))
	ws, state := filepath.Join(top, "ws"), filepath.Join(top, "state")
	defer os.RemoveAll(top)
	progress("scale: generating a synthetic tree of %d small files", n)
	if err := writeSynthetic(ws, synthSpec{Files: n, Seed: b.cfg.seed + uint64(n), Small: true}); err != nil {
		return err
	}
	st, err := statTree(ws)
	if err != nil {
		return err
	}
	entries := int64(st.NFiles + st.Dirs + st.Symlinks)
	budget := 100_000_000 + 200*entries
	order := slices.Clone(st.Files)
	r := rand.New(rand.NewPCG(b.cfg.seed, uint64(n)))
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	w := func(args ...string) (sample, error) {
		return b.execIn(state, "", b.wtx, append([]string{"-C", ws}, args...)...)
	}
	label := fmt.Sprintf("scale %dk", n/1000)
	if err := b.settle(); err != nil {
		return err
	}

	progress("%s: open+run+scan", label)
	open := result{Scenario: label + ": open+run+scan", Command: "wtx run -- true", RSSBudget: budget}
	for open.more(b.cfg) {
		s, err := w("--json", "run", "--", "true")
		if err != nil {
			return err
		}
		open.add(s)
	}
	b.record(open.done())

	progress("%s: status after 100 changes", label)
	list, err := b.writeList(order[:100])
	if err != nil {
		return err
	}
	s, err := w("--json", "run", "--", "sh", "-c", mutate, "sh", list)
	if err != nil {
		return err
	}
	tx, err := txOf(s)
	if err != nil {
		return err
	}
	status := result{Scenario: label + ": status, 100 changed", Command: "wtx status", RSSBudget: budget}
	for status.more(b.cfg) {
		s, err := w("status", tx)
		if err != nil {
			return err
		}
		status.add(s)
	}
	b.record(status.done())
	if _, err := w("drop", tx); err != nil {
		return err
	}

	k := min(1000, len(order))
	progress("%s: apply of %d modified", label, k)
	list, err = b.writeList(order[:k])
	if err != nil {
		return err
	}
	apply := result{Scenario: fmt.Sprintf("%s: apply, %d modified", label, k), Command: "wtx apply",
		Baseline: "cp -a + sync", Target: targetModified, RSSBudget: budget}
	for i := 0; apply.more(b.cfg); i++ {
		s, err := w("--json", "run", "--", "sh", "-c", mutate, "sh", list)
		if err != nil {
			return err
		}
		tx, err := txOf(s)
		if err != nil {
			return err
		}
		if err := b.settle(); err != nil {
			return err
		}
		a, err := w("apply", tx)
		if err != nil {
			return err
		}
		apply.add(a)
		if err := b.settle(); err != nil {
			return err
		}
		dst := filepath.Join(top, fmt.Sprintf("copy-%d", i))
		if err := os.Mkdir(dst, 0o755); err != nil {
			return err
		}
		c, err := b.execIn(state, ws, "sh", "-c", copyFiles, "sh", dst, list)
		if err != nil {
			return err
		}
		apply.addBaseline(c)
	}
	b.record(apply.done())
	return nil
}
