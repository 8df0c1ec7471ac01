package powerloss

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// maxPoint bounds the failpoint index a cycle crashes at: an apply of the
// small change sets below hits fewer points than this, so an index beyond
// its own count lets it finish and be acknowledged.
const maxPoint = 40

// ackShare is the share of cycles armed past every point, so that the
// apply is acknowledged and the filesystem is shut down right after.
const ackShare = 0.25

// xfsArgs makes XFS without reflink: with it, the copy_file_range wtx
// copies files with clones extents that are already durable and so hides
// a missing data fsync, as ext4's auto_da_alloc hides one on rename.
var xfsArgs = []string{"-f", "-m", "reflink=0"}

func cycles(pr, soak int) int {
	if os.Getenv("WTX_SOAK") != "" {
		return soak
	}
	return pr
}

func TestL3_PowerLossXFS(t *testing.T) {
	powerLoss(t, "xfs", wtxtest.NewLoopFS(t, "xfs", 320, xfsArgs, ""), nil, false, cycles(60, 2000))
}

func TestL3_PowerLossExt4NoAutoDaAlloc(t *testing.T) {
	powerLoss(t, "ext4 (noauto_da_alloc)", wtxtest.NewLoopFS(t, "ext4", 128, nil, "noauto_da_alloc"), nil, false, cycles(60, 2000))
}

// TestL3_PowerLossXFSEachFile runs the XFS cycles with syncfs switched
// off: wtx then syncs each file and directory, as it does when much else
// is dirty in the page cache (fsx.BulkSync) and where there is no syncfs.
func TestL3_PowerLossXFSEachFile(t *testing.T) {
	powerLoss(t, "xfs, each file synced", wtxtest.NewLoopFS(t, "xfs", 320, xfsArgs, ""),
		[]string{"WTX_DISABLE=syncfs"}, false, cycles(40, 2000))
}

// TestL3_PowerLossXFSEachFileStateElsewhere is the per-file path with the
// state directory on another file system: no later write to the
// workspace's file system (the journal's removal, the database) can carry
// a change the apply made in place, a mode, to the disk with it.
func TestL3_PowerLossXFSEachFileStateElsewhere(t *testing.T) {
	powerLoss(t, "xfs, each file synced, state elsewhere", wtxtest.NewLoopFS(t, "xfs", 320, xfsArgs, ""),
		[]string{"WTX_DISABLE=syncfs"}, true, cycles(40, 2000))
}

// powerLoss runs n cycles on fsys with env for every wtx (the state
// directory on another file system with stateElsewhere), and reports
// every violation.
func powerLoss(t *testing.T, label string, fsys *wtxtest.LoopFS, env []string, stateElsewhere bool, n int) {
	h := newHarness(t, fsys, env)
	if stateElsewhere {
		h.state = t.TempDir()
	}
	st := h.run(n, false)
	t.Logf("%s: %d cycles (%d crashed at a failpoint, %d acknowledged then shut down), %d violations",
		label, st.cycles, st.crashed, st.acked, len(st.violations))
	for _, v := range st.violations {
		t.Error(v)
	}
}

// TestL3_NegativeControlNoFsync is the harness's teeth: with every wtx
// fsync switched off, XFS must lose an acknowledged apply (or leave a
// torn one) within the cycle budget.
func TestL3_NegativeControlNoFsync(t *testing.T) {
	fsys := wtxtest.NewLoopFS(t, "xfs", 320, xfsArgs, "")
	h := newHarness(t, fsys, []string{"WTX_DISABLE=fsync"})
	st := h.run(cycles(100, 300), true)
	t.Logf("negative control (xfs, fsync disabled): %d violations in %d cycles (%d crashed, %d acknowledged); first after %d cycles",
		len(st.violations), st.cycles, st.crashed, st.acked, st.first)
	if len(st.violations) == 0 {
		t.Fatalf("with fsync disabled the harness found no violation in %d cycles: it cannot tell a durable apply from a lucky one", st.cycles)
	}
	t.Logf("first violation: %s", st.violations[0])
}

type harness struct {
	t     *testing.T
	fs    *wtxtest.LoopFS
	bin   string
	state string
	env   []string
	rng   *rand.Rand
}

type stats struct {
	cycles, crashed, acked int
	// first is the number of cycles up to and including the first violation.
	first      int
	violations []string
}

func newHarness(t *testing.T, fsys *wtxtest.LoopFS, env []string) *harness {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WTX_SEED"); s != "" {
		fmt.Sscan(s, &seed)
	}
	t.Logf("seed %d (WTX_SEED reruns it)", seed)
	h := &harness{t: t, fs: fsys, bin: wtxtest.Binary(t, true), state: filepath.Join(fsys.Dir, "state"),
		env: env, rng: rand.New(rand.NewPCG(seed, 0x706f7765726c6f73))}
	if err := os.Mkdir(filepath.Join(fsys.Dir, "w"), 0o755); err != nil {
		t.Fatal(err)
	}
	return h
}

// run runs n cycles; with stopEarly it stops a few cycles after the first
// violation.
func (h *harness) run(n int, stopEarly bool) stats {
	var st stats
	for i := 0; i < n; i++ {
		acked, crashed, v := h.cycle(i)
		st.cycles++
		if acked {
			st.acked++
		}
		if crashed {
			st.crashed++
		}
		if v != "" {
			st.violations = append(st.violations, fmt.Sprintf("cycle %d: %s", i, v))
			if st.first == 0 {
				st.first = i + 1
			}
		}
		if h.t.Failed() || stopEarly && st.first != 0 && i >= st.first+4 {
			break
		}
	}
	return st
}

// cycle runs one stage, crash, remount and recovery; it fails the test on
// harness trouble and returns a description of any violation.
func (h *harness) cycle(i int) (acked, crashed bool, violation string) {
	t := h.t
	scratch := t.TempDir()
	ws := filepath.Join(h.fs.Dir, "w", fmt.Sprint(i))
	tr := randomTree(h.rng)
	script := randomScript(h.rng, tr)
	for _, root := range []string{ws, scratch} {
		if err := tr.write(root); err != nil {
			t.Fatal(err)
		}
	}
	sh := exec.Command("sh", "-c", script)
	sh.Dir = scratch
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("cycle %d: change script in scratch: %v: %s\n%s", i, err, out, script)
	}
	before := wtxtest.MustSnapshot(t, ws)
	after := wtxtest.MustSnapshot(t, scratch)
	// --keep: a script whose net change is empty must still leave a stage
	// for the apply below (a run that changed nothing settles it otherwise).
	if code, _, stderr := h.wtx(ws, nil, "run", "--keep", "--", "sh", "-c", script); code != 0 {
		t.Fatalf("cycle %d: wtx run exited %d: %s", i, code, stderr)
	}
	// Everything up to here is durable: the power cut is aimed at the apply.
	if err := wtxtest.SyncFS(h.fs.Dir); err != nil {
		t.Fatal(err)
	}

	k := maxPoint + 1
	if h.rng.Float64() >= ackShare {
		k = 1 + h.rng.IntN(maxPoint)
	}
	env := []string{fmt.Sprintf("WTX_FAILPOINT=%d", k), "WTX_FAILPOINT_ACTION=shutdown:" + h.fs.Dir}
	code, sig, stderr := h.wtx(ws, env, "apply", "--json")
	switch {
	case code == 0:
		acked = true
		if err := h.fs.Shutdown(); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
	case sig == syscall.SIGKILL:
		crashed = true
		if strings.Contains(stderr, "failpoint:") {
			t.Fatalf("cycle %d: the crash did not shut the filesystem down: %s", i, stderr)
		}
	default:
		t.Fatalf("cycle %d: wtx apply (failpoint %d) exited %d: %s", i, k, code, stderr)
	}
	if err := h.fs.Remount(); err != nil {
		t.Fatalf("cycle %d: %v", i, err)
	}

	if code, _, stderr := h.wtx(ws, nil, "list", "--json"); code != 0 {
		return acked, crashed, fmt.Sprintf("failpoint %d: recovery (wtx list) exited %d: %s", k, code, strings.TrimSpace(stderr))
	}
	got, err := wtxtest.Snapshot(ws)
	if err != nil {
		return acked, crashed, fmt.Sprintf("failpoint %d: snapshot after recovery: %v", k, err)
	}
	var problems []string
	switch {
	case acked && got != after:
		problems = append(problems, fmt.Sprintf("acknowledged apply is not durable:\n%s", diffLines(after, got)))
	case got != before && got != after:
		problems = append(problems, fmt.Sprintf("workspace is neither before- nor after-image:\nagainst before:\n%s\nagainst after:\n%s",
			diffLines(before, got), diffLines(after, got)))
	}
	if d := wtxtest.Debris(ws); len(d) > 0 {
		problems = append(problems, fmt.Sprintf("debris: %v", d))
	}
	sum := sha256.Sum256([]byte(ws))
	if left, _ := filepath.Glob(filepath.Join(h.state, "workspaces", hex.EncodeToString(sum[:])[:16], "journal", "*")); len(left) > 0 {
		problems = append(problems, fmt.Sprintf("journal left after recovery: %v", left))
	}
	if len(problems) == 0 {
		return acked, crashed, ""
	}
	return acked, crashed, fmt.Sprintf("failpoint %d (acknowledged %v): %s\nscript: %s", k, acked, strings.Join(problems, "; "), shortLines(script))
}

// wtx runs the failpoint build on workspace ws and returns its exit code
// (-1 when a signal ended it), the signal, and its output.
func (h *harness) wtx(ws string, env []string, args ...string) (int, syscall.Signal, string) {
	h.t.Helper()
	cmd := exec.Command(h.bin, append([]string{"-C", ws}, args...)...)
	cmd.Env = append(append(append(os.Environ(), "WTX_STATE_DIR="+h.state), h.env...), env...)
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		h.t.Fatalf("wtx %v: %v", args, err)
	}
	var sig syscall.Signal
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		sig = ws.Signal()
	}
	return cmd.ProcessState.ExitCode(), sig, stderr.String()
}

// short cuts a long line for a report.
func short(l string) string {
	if len(l) > 100 {
		return fmt.Sprintf("%s... (%d bytes)", l[:100], len(l))
	}
	return l
}

// shortLines cuts every long line of s, and s after 20 lines.
func shortLines(s string) string {
	ls := strings.Split(s, "\n")
	if len(ls) > 20 {
		ls = append(ls[:20], fmt.Sprintf("... (%d lines)", len(ls)))
	}
	for i := range ls {
		ls[i] = short(ls[i])
	}
	return strings.Join(ls, "\n")
}

// diffLines lists the snapshot lines only in want (-) and only in got (+).
func diffLines(want, got string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	w, g := in(want), in(got)
	var out []string
	for _, l := range strings.Split(want, "\n") {
		if !g[l] {
			out = append(out, "  - "+short(l))
		}
	}
	for _, l := range strings.Split(got, "\n") {
		if !w[l] {
			out = append(out, "  + "+short(l))
		}
	}
	return strings.Join(out, "\n")
}
