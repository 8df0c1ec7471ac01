package crash

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// soak reports whether WTX_SOAK=1 asks for the long runs: more change sets
// in every harness of this package.
func soak() bool { return os.Getenv("WTX_SOAK") == "1" }

// scratch returns a fresh directory for one fixture, removed when t ends:
// under $WTX_CRASH_DIR when set, else in memory (/dev/shm) where there is
// such a directory, since the harness spends its time in fsync and a
// SIGKILL needs no disk to be realistic, else in the usual temporary
// directory.
func scratch(t testing.TB) string {
	t.Helper()
	parent := os.Getenv("WTX_CRASH_DIR")
	if parent == "" {
		if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() && unix.Access("/dev/shm", unix.W_OK) == nil {
			parent = "/dev/shm"
		}
	}
	if parent == "" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp(parent, "wtx-crash-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = removeTree(dir) }) // scratch under /dev/shm: best effort
	return dir
}

// removeTree removes the tree at p, directories an op closed to their
// owner (read-only) included: an ordinary user cannot empty those.
func removeTree(p string) error {
	_ = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(q, 0o700) // what stays fails RemoveAll below
		}
		return nil
	})
	return os.RemoveAll(p)
}

// result is the outcome of one wtx invocation.
type result struct {
	code   int
	killed bool // ended by SIGKILL (a failpoint fired)
	stdout string
	stderr string
}

func (r result) String() string {
	return fmt.Sprintf("exit %d killed=%v stdout=%q stderr=%q", r.code, r.killed, r.stdout, r.stderr)
}

// fixture is one change set: a workspace and a state root at fixed paths
// (a workspace's identity is its path), saved templates of both taken right
// after 'wtx run' staged the change, and the before- and after-images.
type fixture struct {
	t      testing.TB
	bin    string
	dir    string
	ws, st string
	stage  string
	script string
	before string // the workspace before the change
	after  string // the workspace after a direct run of the change
	// templates of ws and st, restored before every crash
	tmplWS, tmplST string
	// runEnv is added to the environment of the run that stages the change
	runEnv []string
}

// newFixture builds the change set of seed: a random tree of about paths
// entries and a random script of about ops changes, staged with 'wtx run'.
func newFixture(t testing.TB, seed uint64, paths, ops int) *fixture {
	t.Helper()
	return newFixtureWith(t, seed, paths, ops, nil)
}

// newFixtureWith is newFixture with runEnv added to the environment of the
// 'wtx run' that stages the change set.
func newFixtureWith(t testing.TB, seed uint64, paths, ops int, runEnv []string) *fixture {
	t.Helper()
	dir := scratch(t)
	f := &fixture{t: t, bin: wtxtest.Binary(t, true), dir: dir, runEnv: runEnv,
		ws: filepath.Join(dir, "ws"), st: filepath.Join(dir, "st"),
		tmplWS: filepath.Join(dir, "tmpl-ws"), tmplST: filepath.Join(dir, "tmpl-st")}
	if err := os.Mkdir(f.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := wtxtest.RandomTree(rand.New(rand.NewPCG(seed, 1)), f.ws, paths); err != nil {
		t.Fatal(err)
	}
	f.before = wtxtest.MustSnapshot(t, f.ws)
	// A script that happens to make no net change is replaced by the next.
	rng := rand.New(rand.NewPCG(seed, 2))
	for try := 0; ; try++ {
		script, err := wtxtest.ChangeScript(rng, f.ws, ops)
		if err != nil {
			t.Fatal(err)
		}
		f.after = f.direct(script)
		if f.after != f.before {
			f.script = script
			break
		}
		if try == 10 {
			t.Fatalf("seed %d: no script with a net change", seed)
		}
	}
	f.stage = f.runScript(f.script)
	f.save()
	return f
}

// newFixedFixture builds a change set from a hand-written tree (made by
// setup in the workspace) and script.
func newFixedFixture(t testing.TB, setup func(ws string), script string) *fixture {
	t.Helper()
	return newFixedFixtureWith(t, setup, script, nil)
}

// newFixedFixtureWith is newFixedFixture with runEnv added to the
// environment of the 'wtx run' that stages the change set.
func newFixedFixtureWith(t testing.TB, setup func(ws string), script string, runEnv []string) *fixture {
	t.Helper()
	dir := scratch(t)
	f := &fixture{t: t, bin: wtxtest.Binary(t, true), dir: dir, runEnv: runEnv,
		ws: filepath.Join(dir, "ws"), st: filepath.Join(dir, "st"),
		tmplWS: filepath.Join(dir, "tmpl-ws"), tmplST: filepath.Join(dir, "tmpl-st")}
	if err := os.Mkdir(f.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	setup(f.ws)
	f.before = wtxtest.MustSnapshot(t, f.ws)
	f.script = script
	f.after = f.direct(script)
	f.stage = f.runScript(script)
	f.save()
	return f
}

// direct runs script on a copy of the workspace and returns the copy's
// snapshot: the after-image.
func (f *fixture) direct(script string) string {
	f.t.Helper()
	cp, err := os.MkdirTemp(f.dir, "direct-")
	if err != nil {
		f.t.Fatal(err)
	}
	defer os.RemoveAll(cp)
	if err := os.Remove(cp); err != nil {
		f.t.Fatal(err)
	}
	if err := wtxtest.CopyTree(f.ws, cp); err != nil {
		f.t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Dir = cp
	if out, err := cmd.CombinedOutput(); err != nil {
		f.t.Fatalf("change script: %v\n%s\n%s", err, out, script)
	}
	return wtxtest.MustSnapshot(f.t, cp)
}

// runScript stages script with 'wtx run' and returns the stage id.
func (f *fixture) runScript(script string) string {
	f.t.Helper()
	path := filepath.Join(f.dir, "change.sh")
	if err := os.WriteFile(path, []byte(script), 0o600); err != nil {
		f.t.Fatal(err)
	}
	// The copy backend keeps the whole stage in plain files, so the
	// templates can be copied (an overlay upper holds whiteouts and xattrs).
	r := f.wtx(f.runEnv, "--json", "run", "--backend", "copy", "--", "sh", path)
	if r.code != 0 {
		f.t.Fatalf("wtx run: %v\n%s", r, script)
	}
	var out struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Tx == "" {
		f.t.Fatalf("wtx run --json: no stage id in %q: %v", r.stdout, err)
	}
	if got := wtxtest.MustSnapshot(f.t, f.ws); got != f.before {
		f.t.Fatalf("wtx run changed the workspace")
	}
	return out.Tx
}

// save takes the templates of the current workspace and state root.
func (f *fixture) save() {
	f.t.Helper()
	for _, p := range [][2]string{{f.ws, f.tmplWS}, {f.st, f.tmplST}} {
		if err := removeTree(p[1]); err != nil {
			f.t.Fatal(err)
		}
		if err := wtxtest.CopyTree(p[0], p[1]); err != nil {
			f.t.Fatal(err)
		}
	}
}

// restore puts the workspace and state root back as save left them.
func (f *fixture) restore() {
	f.t.Helper()
	for _, p := range [][2]string{{f.tmplWS, f.ws}, {f.tmplST, f.st}} {
		if err := removeTree(p[1]); err != nil {
			f.t.Fatal(err)
		}
		if err := wtxtest.CopyTree(p[0], p[1]); err != nil {
			f.t.Fatal(err)
		}
	}
}

// wtx runs the failpoint binary on the fixture's workspace and state root,
// with env added to a clean environment (no failpoint variables inherited).
func (f *fixture) wtx(env []string, args ...string) result {
	f.t.Helper()
	cmd := exec.Command(f.bin, append([]string{"-C", f.ws}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WTX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "WTX_STATE_DIR="+f.st)
	cmd.Env = append(cmd.Env, env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		f.t.Fatalf("wtx %v: %v", args, err)
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		r.killed = true
	}
	return r
}

// points runs env's wtx command with WTX_FAILPOINT_COUNT and returns the
// names of the crash points it hit, in order (point k is names[k-1]).
func (f *fixture) points(env []string, args ...string) ([]string, result) {
	f.t.Helper()
	cnt := filepath.Join(f.dir, "count")
	os.Remove(cnt)
	r := f.wtx(append(env, "WTX_FAILPOINT_COUNT="+cnt), args...)
	data, err := os.ReadFile(cnt)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		f.t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if _, name, ok := strings.Cut(line, " "); ok {
			names = append(names, name)
		}
	}
	return names, r
}

// committedAt returns the 1-based index of the first point at or after
// which the op's commit marker is durable (len(names)+1 if never).
func committedAt(names []string, marker string) int {
	for i, n := range names {
		if n == marker {
			return i + 1
		}
	}
	return len(names) + 1
}

func (f *fixture) snapshot() string { return wtxtest.MustSnapshot(f.t, f.ws) }

// pending lists the journals waiting for recovery in the state root.
func (f *fixture) pending() []string {
	f.t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(f.st, "workspaces", "*", "journal"))
	var out []string
	for _, d := range dirs {
		ops, err := journal.Pending(d)
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, ops...)
	}
	return out
}

// journalDir returns the workspace's journal directory in the state root.
func (f *fixture) journalDir() string {
	f.t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(f.st, "workspaces", "*"))
	if len(dirs) != 1 {
		f.t.Fatalf("want one workspace state dir, found %v", dirs)
	}
	return filepath.Join(dirs[0], "journal")
}

// settled checks the workspace after a recovery: it holds want (one of
// the images, or either when want is ""), no temporary debris, no journal.
// It returns the violations found.
func (f *fixture) settled(label, want string) []string {
	var v []string
	got := f.snapshot()
	switch {
	case want == "" && got != f.before && got != f.after:
		v = append(v, fmt.Sprintf("%s: workspace is neither the before- nor the after-image (diff to after):\n%s", label, diffLines(f.after, got)))
	case want != "" && got != want:
		side := "after"
		if want == f.before {
			side = "before"
		}
		v = append(v, fmt.Sprintf("%s: workspace is not the %s-image:\n%s", label, side, diffLines(want, got)))
	}
	if d := wtxtest.Debris(f.ws); len(d) > 0 {
		v = append(v, fmt.Sprintf("%s: temporary debris left: %v", label, d))
	}
	if p := f.pending(); len(p) > 0 {
		v = append(v, fmt.Sprintf("%s: journal still pending after recovery: %v", label, p))
	}
	return v
}

// diffLines shows how got differs from want: "-" lines are missing from
// got, "+" lines are in got only.
func diffLines(want, got string) string {
	w, g := lineSet(want), lineSet(got)
	var out []string
	for l := range w {
		if !g[l] {
			out = append(out, "  - "+l)
		}
	}
	for l := range g {
		if !w[l] {
			out = append(out, "  + "+l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][4:] < out[j][4:] })
	return strings.Join(out, "\n")
}

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(s, "\n") {
		m[l] = true
	}
	return m
}

// byPath splits a snapshot into its lines by path.
func byPath(s string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(s, "\n") {
		p, _, _ := strings.Cut(l, " ")
		m[p] = l
	}
	return m
}

// changedPaths lists the paths whose lines differ between two snapshots.
func changedPaths(a, b string) []string {
	ma, mb := byPath(a), byPath(b)
	var out []string
	for p, l := range ma {
		if mb[p] != l {
			out = append(out, p)
		}
	}
	for p := range mb {
		if _, ok := ma[p]; !ok {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// tally accumulates a harness's figures across parallel subtests.
type tally struct {
	changeSets, crashes, recoveryCrashes, violations atomic.Int64

	mu    sync.Mutex
	first []string // the first few violations, for the report
}

func (t *tally) add(v []string) {
	if len(v) == 0 {
		return
	}
	t.violations.Add(int64(len(v)))
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.first) < 5 {
		t.first = append(t.first, v...)
	}
}

// expectKilled checks that a crash at point k (of n) behaved: killed when
// k <= n, finished otherwise.
func expectKilled(label string, k, n int, r result) []string {
	if k <= n && !r.killed {
		return []string{fmt.Sprintf("%s: crash point %d of %d did not kill wtx: %v", label, k, n, r)}
	}
	if k > n && r.killed {
		return []string{fmt.Sprintf("%s: killed past the last point %d: %v", label, n, r)}
	}
	return nil
}

// opID reads the op_id field of a --json answer.
func opID(t testing.TB, r result) string {
	t.Helper()
	var out struct {
		OpID string `json:"op_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.OpID == "" {
		t.Fatalf("no op_id in %v", r)
	}
	return out.OpID
}

func fp(k int) []string { return []string{"WTX_FAILPOINT=" + strconv.Itoa(k)} }

// joinLines is the snapshot whose lines by path are m.
func joinLines(m map[string]string) string {
	lines := make([]string, 0, len(m))
	for _, l := range m {
		lines = append(lines, l)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
