package concurrency

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// gcOutcome is what one gc stress run saw.
type gcOutcome struct {
	cycles, applies, undos, crashes, recoveries int
	gcRuns                                      int64
	// windowGCs counts the gc runs of A that finished while B's apply was
	// held in the window where its blobs are in the store and nothing
	// names them yet; with the store lock there can be none.
	windowGCs int
	failures  []string
	lost      []string // pre- or post-images of recorded ops gone or damaged
}

// gcScript is cycle i's change: it rewrites a, grows b, and either makes
// the directory d with two files or removes it (the removal unlinks d's
// files, whose pre-images then live only in the blob store until the op
// is recorded).
func gcScript(i int) string {
	return fmt.Sprintf(`printf 'a%[1]d\n' > a
printf 'b%[1]d\n' >> b
if [ -d d ]; then rm -rf d; else mkdir d && printf 'x%[1]d\n' > d/x && printf 'y%[1]d\n' > d/y; fi
`, i)
}

// wsImage describes a workspace: every path with its content.
func wsImage(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		line := rel
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %q", data)
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// scratchDir is a fresh directory in memory where there is one (the stress
// spends its time in fsync, which a SIGKILL does not need), else on disk.
func scratchDir(t testing.TB) string {
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && unix.Access("/dev/shm", unix.W_OK) == nil {
		dir, err := os.MkdirTemp("/dev/shm", "wtx-gc-")
		if err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

// gcStress runs 'wtx gc --older-than 0' in a loop from workspace A while
// workspace B, on the same state root, goes through cycles: stage a change,
// apply it (killed at a random failpoint half of the time, and held for a
// moment before its journal is written), recover, apply again if it was
// rolled back, and in two cycles of three undo it the same way. Every command
// that was not killed must succeed and every recovery must leave B at the
// image before or after the change; at the end every pre- and post-image
// of every recorded op of B must be in the store, intact. stop, when set,
// ends the run at the first failure.
//
// One apply does not leave the race to chance. The contents of a run's
// apply are named by the stage before the apply stores them (its base
// manifest and the run's kept contents), but an apply of some hunks of a
// file writes a content nothing names until its journal is written. That
// apply is held (windowHold) right before its journal is written, its blobs
// stored, and a gc of A runs inside the hold: the store lock makes that gc
// wait until B is done; without it gc sweeps the content and the apply
// cannot write it.
func gcStress(t *testing.T, env []string, cycles int, stop bool) gcOutcome {
	root := scratchDir(t)
	bin := wtxtest.Binary(t, true)
	state := filepath.Join(root, "state")
	a := env0(bin, filepath.Join(root, "a"), state, env)
	b := env0(bin, filepath.Join(root, "b"), state, env)
	for _, dir := range []string{a.ws, b.ws} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "a"), []byte("base\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b.ws, "h"), []byte(hunkLines()), 0o644); err != nil {
		t.Fatal(err)
	}
	var o gcOutcome
	var mu sync.Mutex
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		o.failures = append(o.failures, fmt.Sprintf(format, args...))
	}
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(o.failures) > 0
	}
	// A has history of its own, so its gc has stages to remove too.
	if tx, r := a.stage(t, "echo a-side > a"); tx == "" || a.wtx(t, nil, "apply", tx).code != 0 {
		t.Fatalf("workspace A: %v", r)
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			if r := a.wtx(t, nil, "gc", "--older-than", "0"); r.code != 0 {
				fail("gc in A: exit %d: %s", r.code, r.stderr)
			}
			atomic.AddInt64(&o.gcRuns, 1)
			time.Sleep(20 * time.Millisecond) // B's commands get the lock in between
		}
	}()

	rng := rand.New(rand.NewPCG(3, uint64(cycles)))
	pause := "WTX_FAILPOINT_PAUSE=apply:before-journal:15ms"
	killed := func(r result) bool { return r.code == -1 || r.code == 137 }
	// do runs a wtx command of B that may be killed at a random point
	// (when crash is set) and recovers.
	do := func(crash bool, args ...string) result {
		extra := []string{pause}
		if crash {
			extra = append(extra, fmt.Sprintf("WTX_FAILPOINT=%d", 1+rng.IntN(24)))
		}
		r := b.wtx(t, extra, args...)
		if killed(r) {
			o.crashes++
			rr := b.wtx(t, nil, "--json", "recover")
			o.recoveries++
			if rr.code != 0 {
				fail("recover after %v was killed: exit %d: %s %s", args, rr.code, rr.stdout, rr.stderr)
			}
		} else if r.code != 0 {
			fail("cycle %d: %v: exit %d: %s %s", o.cycles-1, args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	// applyInWindow runs an apply of B (args) held in the window and runs
	// a gc of A once B is in it.
	applyInWindow := func(args ...string) result {
		trace := filepath.Join(root, "window-trace")
		extra := []string{"WTX_FAILPOINT_PAUSE=apply:before-journal:" + windowHold.String(), "WTX_FAILPOINT_COUNT=" + trace}
		done := make(chan result, 1)
		go func() { done <- b.wtx(t, extra, args...) }()
		last := func() string {
			data, _ := os.ReadFile(trace) // not there yet: B has hit no failpoint
			lines := strings.Fields(string(data))
			if len(lines) == 0 {
				return ""
			}
			return lines[len(lines)-1]
		}
		for last() != "apply:before-journal" {
			select {
			case r := <-done:
				fail("%v in B ended before its journal was written: exit %d: %s %s", args, r.code, r.stdout, r.stderr)
				return r
			case <-time.After(5 * time.Millisecond):
			}
		}
		if r := a.wtx(t, nil, "gc", "--older-than", "0"); r.code != 0 {
			fail("gc in A during B's %v: exit %d: %s", args, r.code, r.stderr)
		}
		if last() == "apply:before-journal" && len(done) == 0 {
			o.windowGCs++
		}
		r := <-done
		if r.code != 0 {
			fail("%v in B, with a gc of A run in its window: exit %d: %s %s", args, r.code, r.stdout, r.stderr)
		}
		return r
	}
	for i := 0; i < cycles && !(stop && failed()); i++ {
		o.cycles++
		before := wsImage(t, b.ws)
		direct := filepath.Join(root, fmt.Sprintf("direct-%d", i))
		if err := wtxtest.CopyTree(b.ws, direct); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("sh", "-c", gcScript(i))
		cmd.Dir = direct
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("script: %v: %s", err, out)
		}
		after := wsImage(t, direct)
		os.RemoveAll(direct)

		tx, r := b.stage(t, gcScript(i))
		if tx == "" {
			fail("cycle %d: wtx run in B: exit %d: %s", i, r.code, r.stderr)
			continue
		}
		do(rng.IntN(2) == 0, "--json", "apply", tx)
		o.applies++
		switch got := wsImage(t, b.ws); got {
		case after:
		case before:
			if r := do(false, "--json", "apply", tx); r.code != 0 {
				continue
			}
			if got := wsImage(t, b.ws); got != after {
				fail("cycle %d: apply again did not land the change:\n%s\nwant:\n%s", i, got, after)
				continue
			}
		default:
			fail("cycle %d: after apply and recovery B is neither before nor after the change:\n%s", i, got)
			continue
		}
		if i%3 == 2 {
			continue // d stays as this cycle left it: the next one flips it
		}
		op := lastOp(t, b)
		if op == "" {
			fail("cycle %d: no op recorded for the apply", i)
			continue
		}
		do(rng.IntN(2) == 0, "--json", "undo", op)
		o.undos++
		switch got := wsImage(t, b.ws); got {
		case before:
		case after:
			if r := do(false, "--json", "undo", op); r.code != 0 {
				continue
			}
			if got := wsImage(t, b.ws); got != before {
				fail("cycle %d: undo again did not restore B:\n%s\nwant:\n%s", i, got, before)
			}
		default:
			fail("cycle %d: after undo and recovery B is neither before nor after it:\n%s", i, got)
		}
	}
	// Last, the held apply takes one of two hunks of h: the content it
	// writes is new (neither the stage's base nor what its run kept).
	if tx, r := b.stage(t, hunkScript); tx == "" {
		t.Fatalf("workspace B: run: %v", r)
	} else if r := applyInWindow("--json", "apply", tx, "--path", "h", "--hunks", "1"); r.code == 0 {
		if data, err := os.ReadFile(filepath.Join(b.ws, "h")); err != nil || string(data) != hunkLines(1) {
			fail("apply of h's first hunk wrote %q (%v), want %q", data, err, hunkLines(1))
		}
	}
	close(done)
	wg.Wait()
	o.lost = lostImages(t, b, state)
	return o
}

// hunkScript rewrites the first and the last of h's twenty lines: two
// hunks.
const hunkScript = `i=1; while [ $i -le 20 ]; do if [ $i = 1 ] || [ $i = 20 ]; then echo "LINE $i"; else echo "line $i"; fi; i=$((i+1)); done > h`

// hunkLines is h with the lines upper listed in capitals.
func hunkLines(upper ...int) string {
	var sb strings.Builder
	for i := 1; i <= 20; i++ {
		if slices.Contains(upper, i) {
			fmt.Fprintf(&sb, "LINE %d\n", i)
		} else {
			fmt.Fprintf(&sb, "line %d\n", i)
		}
	}
	return sb.String()
}

// windowHold is how long the first apply is held in its window: long
// enough for a gc run, started once the apply is in it, to finish inside.
const windowHold = 3 * time.Second

func env0(bin, ws, state string, extra []string) env {
	return env{bin: bin, ws: ws, state: state, extra: extra}
}

// lastOp is the id of B's newest op.
func lastOp(t testing.TB, e env) string {
	ops := opLog(t, e)
	if len(ops) == 0 {
		return ""
	}
	return ops[len(ops)-1].ID
}

type loggedOp struct {
	ID      string `json:"op_id"`
	Changes []struct {
		Path   string `json:"path"`
		Digest string `json:"digest"`
		Before *struct {
			Digest string `json:"digest"`
		} `json:"before"`
	} `json:"changes"`
}

func opLog(t testing.TB, e env) []loggedOp {
	r := e.wtx(t, nil, "--json", "log")
	var out struct {
		Ops []loggedOp `json:"ops"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Errorf("wtx log: exit %d: %s %s", r.code, r.stdout, r.stderr)
	}
	return out.Ops
}

// lostImages lists the file images of B's recorded ops that are not in the
// store intact: undo and show need every one.
func lostImages(t testing.TB, e env, state string) []string {
	var lost []string
	for _, op := range opLog(t, e) {
		for _, c := range op.Changes {
			ds := []string{c.Digest}
			if c.Before != nil {
				ds = append(ds, c.Before.Digest)
			}
			for _, d := range ds {
				h, ok := strings.CutPrefix(d, "sha256:")
				if !ok || len(h) != 64 {
					continue
				}
				data, err := os.ReadFile(filepath.Join(state, "objects", h[:2], h[2:]))
				sum := sha256.Sum256(data)
				if err != nil || hex.EncodeToString(sum[:]) != h {
					lost = append(lost, fmt.Sprintf("op %s, %s: %s (%v)", op.ID, c.Path, d, err))
				}
			}
		}
	}
	return lost
}

// TestI_003_GCSeesEveryWorkspace: gc of one workspace, looping, never
// removes what another workspace's applies, undos, crashes and recoveries
// need (I-003).
func TestI_003_GCSeesEveryWorkspace(t *testing.T) {
	cycles := 15
	if soak() {
		cycles = 600
	}
	start := time.Now()
	o := gcStress(t, nil, cycles, false)
	t.Logf("gc stress: %d cycles (%d applies, %d undos, %d crashes, %d recoveries) against %d gc runs in %v: %d failures, %d lost images",
		o.cycles, o.applies, o.undos, o.crashes, o.recoveries, o.gcRuns, time.Since(start).Round(time.Millisecond), len(o.failures), len(o.lost))
	if o.applies+o.undos < cycles {
		t.Errorf("only %d applies and undos in %d cycles; want at least one a cycle", o.applies+o.undos, cycles)
	}
	if o.gcRuns < 10 {
		t.Errorf("gc ran only %d times", o.gcRuns)
	}
	if o.windowGCs != 0 {
		t.Errorf("a gc of A finished while B's apply held blobs that nothing names yet: the store lock did not make it wait")
	}
	for i, f := range append(o.failures, o.lost...) {
		if i == 5 {
			t.Errorf("... and %d more", len(o.failures)+len(o.lost)-5)
			break
		}
		t.Error(f)
	}
}

// TestI_003_GCStressNegativeControl runs the same stress with the blob
// store lock switched off: gc must then take something B needs.
func TestI_003_GCStressNegativeControl(t *testing.T) {
	o := gcStress(t, []string{"WTX_DISABLE=store-lock"}, 30, true)
	t.Logf("negative control (store lock off): %d cycles against %d gc runs (%d inside the apply's window): %d failures, %d lost images",
		o.cycles, o.gcRuns, o.windowGCs, len(o.failures), len(o.lost))
	if o.windowGCs == 0 {
		t.Fatalf("no gc of A finished while B's apply was held in its window (%v): the control proves nothing", windowHold)
	}
	if len(o.failures)+len(o.lost) == 0 {
		t.Fatal("with the blob store lock off the stress found nothing wrong: it cannot detect gc sweeping in-flight blobs")
	}
	if len(o.failures) > 0 {
		t.Logf("first failure: %s", strings.SplitN(o.failures[0], "\n", 2)[0])
	}
}
