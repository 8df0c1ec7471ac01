package semantic

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// w004Steps are the three ops the W-004 tests apply, as shell scripts
// run in a stage. Names with invalid UTF-8 go through every one of them.
var w004Steps = []string{
	`printf 'one\n2\n3\n4\n5\n6\n7\n8\n' > a.txt; echo n1 > "$(printf 'n\377.txt')"; echo f1 > f1.txt`,
	`printf 'one\n2\n3\n4\n5\n6\n7\neight\n' > a.txt; echo b2 > b.txt; rm c.txt; mkdir d; echo x > d/x; ln -s ../a.txt d/l
	 echo n2 > "$(printf 'n\377.txt')"; chmod 600 keep.txt; rm -r sub; mkdir "$(printf '\377dir')"; echo y > "$(printf '\377dir/y')"`,
	`echo b3 > b.txt; rm f1.txt`,
}

// w004Env makes a workspace under base (a fresh temporary directory when
// "") with its history of three ops, and returns the op ids and the
// workspace's snapshot right after each.
func w004Env(t *testing.T, base string, failpoints bool, env ...string) (*lcEnv, []string, []string) {
	t.Helper()
	if base == "" {
		base = t.TempDir()
	}
	e := &lcEnv{t: t, bin: wtxtest.Binary(t, failpoints), ws: filepath.Join(base, "ws"), st: filepath.Join(base, "state"),
		marks: filepath.Join(base, "marks"), env: env}
	for _, d := range []string{e.ws, e.marks, filepath.Join(e.ws, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n", "c.txt": "c\n", "keep.txt": "k\n",
		"sub/s.txt": "s\n", "n\xff.txt": "n0\n"} {
		if err := os.WriteFile(filepath.Join(e.ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var ops, snaps []string
	for i, script := range w004Steps {
		a := e.answer(e.must("--json", "run", "--backend", "copy", "--apply-on-success", "--", "sh", "-c", script))
		if a.OpID == "" {
			t.Fatalf("step %d applied no op", i+1)
		}
		ops = append(ops, a.OpID)
		snaps = append(snaps, wtxtest.MustSnapshot(t, e.ws))
	}
	return e, ops, snaps
}

// withoutRoot drops a snapshot's line for the tree's root directory, whose
// bits are the view's own.
func withoutRoot(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(l, ". ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

type w004Begin struct {
	Tx      string `json:"tx"`
	Backend string `json:"backend"`
	At      string `json:"at"`
	SetBack int    `json:"set_back"`
	Error   struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// beginAt opens a stage at op with backend; ok is false (and the reason
// logged) when the backend cannot stage here.
func beginAt(e *lcEnv, op, backend string) (w004Begin, bool) {
	e.t.Helper()
	r := e.run("--json", "begin", "--at", op, "--backend", backend)
	var b w004Begin
	if err := json.Unmarshal([]byte(r.stdout), &b); err != nil {
		e.t.Fatalf("begin --at: %v\n%s\n%s", err, r.stdout, r.stderr)
	}
	if r.code != 0 {
		if b.Error.Code == "precondition.unsupported" || b.Error.Code == "precondition.confinement" {
			e.t.Logf("backend %s: %s", backend, b.Error.Message)
			return b, false
		}
		e.t.Fatalf("begin --at %s --backend %s: exit %d: %s", op, backend, r.code, r.stdout)
	}
	return b, true
}

// checkW004View opens a stage at op 1 and returns what broke W-004: a view
// that is not the workspace right after op 1, a workspace that changed, a
// stage that does not start with an empty change set.
func checkW004View(e *lcEnv, ops, snaps []string, backend string) (bad []string, ok bool) {
	e.t.Helper()
	now := wtxtest.MustSnapshot(e.t, e.ws)
	b, ok := beginAt(e, ops[0], backend)
	if !ok {
		return nil, false
	}
	if b.At != ops[0] || b.Backend != backend {
		bad = append(bad, fmt.Sprintf("begin answered at %q backend %q", b.At, b.Backend))
	}
	// The view, copied out by a command run in it.
	e.must("run", "--tx", b.Tx, "--", "sh", "-c", `cp -a . "$MARKS/view-$1"`, "sh", backend)
	got := wtxtest.MustSnapshot(e.t, filepath.Join(e.marks, "view-"+backend))
	if withoutRoot(got) != withoutRoot(snaps[0]) {
		bad = append(bad, fmt.Sprintf("the view is not the workspace right after %s:\n got: %q\nwant: %q", ops[0], withoutRoot(got), withoutRoot(snaps[0])))
	}
	if wtxtest.MustSnapshot(e.t, e.ws) != now {
		bad = append(bad, "the workspace changed")
	}
	// Its base is that state: nothing is staged.
	st := e.must("--json", "status", b.Tx)
	if a := e.answer(st); len(a.Changes) != 0 {
		bad = append(bad, fmt.Sprintf("a stage opened at an op starts with %d change(s): %+v", len(a.Changes), a.Changes))
	}
	var at w004Begin
	if err := json.Unmarshal([]byte(st.stdout), &at); err != nil || at.At != ops[0] {
		bad = append(bad, fmt.Sprintf("status says the stage is at %q (%v), want %s", at.At, err, ops[0]))
	}
	// A path set back that the workspace no longer has can be removed in
	// the stage like any other (an overlay's upper directory then holds no
	// trace of it).
	if r := e.run("rm", "c.txt", "--tx", b.Tx); r.code != 0 {
		bad = append(bad, fmt.Sprintf("rm of c.txt (set back) in the stage: exit %d: %s", r.code, r.stderr))
	} else if a := e.answer(e.must("--json", "status", b.Tx)); len(a.Changes) != 1 || a.Changes[0].Path != "c.txt" || a.Changes[0].Action != "deleted" {
		bad = append(bad, fmt.Sprintf("after rm of c.txt (set back, not in the workspace) the stage holds %+v, want c.txt deleted", a.Changes))
	}
	e.must("drop", b.Tx)
	return bad, true
}

// TestW004_BeginAtGivesTheTreeAfterTheOp checks W-004's first half on
// every backend that stages here: begin --at OP gives a view (and a base)
// that is the workspace right after OP — later ops' writes set back,
// names with invalid UTF-8 included — and leaves the workspace as it is.
// Clone is tried on an XFS loop filesystem where one can be mounted.
func TestW004_BeginAtGivesTheTreeAfterTheOp(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"overlay", "copy", "clone"} {
		t.Run(backend, func(t *testing.T) {
			base := ""
			if backend == "clone" {
				if runtime.GOOS != "linux" {
					t.Skip("clone on a loop filesystem: Linux only")
				}
				base = wtxtest.NewLoopFS(t, "xfs", 320, []string{"-m", "reflink=1"}, "").Dir
			}
			e, ops, snaps := w004Env(t, base, false)
			bad, ok := checkW004View(e, ops, snaps, backend)
			if !ok {
				t.Skipf("backend %s cannot stage here", backend)
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}

// TestW004_NegativeControlNothingSetBack opens the stage with the set-back
// switched off (the view is the workspace as it is now): the check must
// find the view wrong.
func TestW004_NegativeControlNothingSetBack(t *testing.T) {
	t.Parallel()
	e, ops, snaps := w004Env(t, "", true, "WTX_DISABLE=at-setback")
	bad, ok := checkW004View(e, ops, snaps, "copy")
	if !ok {
		t.Skip("backend copy cannot stage here")
	}
	t.Logf("negative control (set-back off): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with the set-back switched off nothing broke: the check cannot fail")
	}
}

// TestW004_ApplyAtOpGoesThroughTheChecks: a stage opened at op 1 is applied
// against the workspace as it is now. A new file lands; a path op 2 wrote
// that the stage changes again is drift, refused with nothing written,
// and rebase --merge merges it three-way (the state after op 1 is the
// original); paths set back that the stage left alone stay as the later
// ops made them.
func TestW004_ApplyAtOpGoesThroughTheChecks(t *testing.T) {
	t.Parallel()
	e, ops, snaps := w004Env(t, "", false)
	b, ok := beginAt(e, ops[0], "copy")
	if !ok {
		t.Skip("backend copy cannot stage here")
	}
	e.must("run", "--tx", b.Tx, "--", "sh", "-c",
		`printf 'one\n2\n3\nfour\n5\n6\n7\n8\n' > a.txt; echo e > "$(printf 'e\377.txt')"`)
	r := e.run("--json", "apply", b.Tx)
	a := e.answer(r)
	if r.code != 2 || a.Error.Code != "refusal.target-changed" || !strings.Contains(r.stdout, `"a.txt"`) {
		t.Fatalf("apply of a path a later op wrote: want refusal.target-changed naming a.txt, got exit %d: %s", r.code, r.stdout)
	}
	if wtxtest.MustSnapshot(t, e.ws) != snaps[2] {
		t.Fatal("a refused apply changed the workspace")
	}
	e.must("apply", b.Tx, "--path", "e\xff.txt")
	if got, err := os.ReadFile(filepath.Join(e.ws, "e\xff.txt")); err != nil || string(got) != "e\n" {
		t.Fatalf("the new file did not land: %q %v", got, err)
	}
	m := e.must("--json", "rebase", b.Tx, "--merge")
	if !strings.Contains(m.stdout, `"merged":["a.txt"]`) {
		t.Fatalf("rebase --merge: %s", m.stdout)
	}
	e.must("apply", b.Tx)
	want := map[string]string{"a.txt": "one\n2\n3\nfour\n5\n6\n7\neight\n", "b.txt": "b3\n", "n\xff.txt": "n2\n", "d/x": "x\n"}
	for name, content := range want {
		if got, err := os.ReadFile(filepath.Join(e.ws, name)); err != nil || string(got) != content {
			t.Errorf("%q after the apply: %q (%v), want %q", name, got, err, content)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.ws, "c.txt")); err == nil {
		t.Error("c.txt, removed by a later op and set back in the stage only, came back")
	}
}

// TestW004_BeginAtRefuses: an unknown op, an empty --at, and an op whose later ops'
// pre-images were collected (gc --prune-history), are refused with their
// codes, leaving no stage and the workspace as it was.
func TestW004_BeginAtRefuses(t *testing.T) {
	t.Parallel()
	e, ops, snaps := w004Env(t, "", false)
	r := e.run("--json", "begin", "--at", "op-20000101T000000Z-00000000", "--backend", "copy")
	if a := e.answer(r); r.code != 1 || a.Error.Code != "not-found.op" {
		t.Errorf("begin --at an unknown op: want not-found.op, got exit %d: %s", r.code, r.stdout)
	}
	r = e.run("--json", "begin", "--at", "", "--backend", "copy")
	if a := e.answer(r); r.code != 1 || a.Error.Code != "usage.invalid" {
		t.Errorf("begin --at \"\": want usage.invalid, got exit %d: %s", r.code, r.stdout)
	}
	e.must("drop", "--all")
	e.must("gc", "--prune-history", "--older-than", "0")
	r = e.run("--json", "begin", "--at", ops[0], "--backend", "copy")
	a := e.answer(r)
	if r.code != 1 || a.Error.Code != "io.state-missing" || !strings.Contains(a.Error.Message, ops[0]) {
		t.Errorf("begin --at an op whose later pre-images were collected: want io.state-missing naming %s, got exit %d: %s", ops[0], r.code, r.stdout)
	}
	if l := e.answer(e.must("--json", "list")); len(l.Stages) != 0 {
		t.Errorf("a refused begin --at left %d open stage(s)", len(l.Stages))
	}
	if wtxtest.MustSnapshot(t, e.ws) != snaps[2] {
		t.Error("a refused begin --at changed the workspace")
	}
	// The last op has no later op: nothing to set back, nothing missing.
	e.must("begin", "--at", ops[2], "--backend", "copy")
}

// TestW004_MCPBeginAt: the MCP begin tool opens a stage at a past op too,
// and reads back the staged file as it was right after the op; an unknown
// op is refused with its code.
func TestW004_MCPBeginAt(t *testing.T) {
	t.Parallel()
	e, ops, _ := w004Env(t, "", false)
	s := startMCP(t, e.bin, e.ws, e.st, nil)
	var b w004Begin
	s.call("begin", map[string]any{"at": ops[0], "backend": "copy"}).decode(t, &b)
	if b.At != ops[0] || b.SetBack == 0 {
		t.Fatalf("begin at %s answered at %q, %d path(s) set back", ops[0], b.At, b.SetBack)
	}
	var rd struct {
		Content string `json:"content"`
	}
	s.call("read", map[string]any{"tx": b.Tx, "path": "a.txt"}).decode(t, &rd)
	if want := "one\n2\n3\n4\n5\n6\n7\n8\n"; rd.Content != want {
		t.Errorf("a.txt in a stage at %s: %q, want %q", ops[0], rd.Content, want)
	}
	if code := s.call("begin", map[string]any{"at": "op-20000101T000000Z-00000000"}).errorCode(); code != "not-found.op" {
		t.Errorf("begin at an unknown op: code %q, want not-found.op", code)
	}
}
