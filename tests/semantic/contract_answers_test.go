package semantic

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The per-file transaction contract (SPEC §4): every --json answer has a
// shape, kept as a golden file per command under testdata/answers. A shape
// is the answer with every value replaced by its JSON type (an array by
// the shape of its first member), so ids, digests and times do not matter
// but a field that appears, goes or changes type does. Run with -update to
// rewrite the goldens after a deliberate change (and say so in the README's
// JSON section).

var updateGolden = flag.Bool("update", false, "rewrite the golden answer shapes")

// shapeOf renders v's shape: one line per field path, sorted.
func shapeOf(v any) string {
	var lines []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if len(x) == 0 {
				lines = append(lines, prefix+" {}")
			}
			for k, c := range x {
				walk(prefix+"."+k, c)
			}
		case []any:
			if len(x) == 0 {
				lines = append(lines, prefix+" []")
				return
			}
			walk(prefix+"[]", x[0])
		case string:
			lines = append(lines, prefix+" string")
		case float64:
			lines = append(lines, prefix+" number")
		case bool:
			lines = append(lines, prefix+" bool")
		case nil:
			lines = append(lines, prefix+" null")
		}
	}
	walk("", v)
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n"
}

// answerOf parses a --json answer: exactly one JSON object on stdout.
func answerOf(t *testing.T, r wtxResult) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("stdout is not one JSON object (%v): %q (stderr %q)", err, r.stdout, r.stderr)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON value: %q", r.stdout)
	}
	return m
}

// golden checks the answer's shape against testdata/answers/NAME.shape.
// optionalShape lists members an answer carries only when their value is
// known: a conflict's base digest is known when the stage hashed the path
// before it drifted (a lazy view hashes only what it must, and a racily
// clean stat tuple makes it hash), so its presence depends on timing.
var optionalShape = map[string]bool{".error.conflicts[].base string": true}

func withoutOptional(shape string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(shape, "\n") {
		if !optionalShape[strings.TrimSuffix(line, "\n")] {
			b.WriteString(line)
		}
	}
	return b.String()
}

func golden(t *testing.T, name string, ans map[string]any) {
	t.Helper()
	got := withoutOptional(shapeOf(ans))
	p := filepath.Join("testdata", "answers", name+".shape")
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: no golden shape (run with -update): %v", name, err)
	}
	if got != withoutOptional(string(want)) {
		t.Errorf("%s: the answer's shape changed:\n--- want\n%s--- got\n%s", name, want, got)
	}
}

type contractEnv struct {
	t         *testing.T
	ws, state string
}

func newContractEnv(t *testing.T, files map[string]string) *contractEnv {
	e := &contractEnv{t: t, ws: t.TempDir(), state: t.TempDir()}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(e.ws, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// json runs wtx --json args with stdin and returns the answer, checking the
// exit status.
func (e *contractEnv) json(code int, stdin string, args ...string) map[string]any {
	e.t.Helper()
	r := runWtxStdin(e.t, e.ws, e.state, stdin, append([]string{"--json"}, args...)...)
	if r.code != code {
		e.t.Fatalf("wtx --json %v: exit %d, want %d\nstdout %s\nstderr %s", args, r.code, code, r.stdout, r.stderr)
	}
	ans := answerOf(e.t, r)
	want := "ok"
	if code != 0 {
		want = "error"
	}
	if ans["status"] != want || ans["schema_version"] != float64(1) {
		e.t.Fatalf("wtx --json %v: status %v, schema_version %v", args, ans["status"], ans["schema_version"])
	}
	return ans
}

func (e *contractEnv) write(name, content string) {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, name), []byte(content), 0o644); err != nil {
		e.t.Fatal(err)
	}
}

func str(v any) string { return fmt.Sprint(v) }

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

func TestContractAnswerShapes(t *testing.T) {
	t.Parallel()
	e := newContractEnv(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "b.txt": "bee\n", "c.txt": "sea\n"})

	begin := e.json(0, "", "begin", "--name", "work")
	golden(t, "begin", begin)
	tx := str(begin["tx"])

	// Write answers: changes[] (SPEC §4 change objects) and strategy.
	w := e.json(0, "new\n", "write", "n.txt", "--tx", tx)
	golden(t, "write", w)
	if w["strategy"] != "staged" || len(list(w["changes"])) != 1 {
		t.Fatalf("write: strategy %v, changes %v", w["strategy"], w["changes"])
	}
	if ch := list(w["changes"])[0].(map[string]any); ch["action"] != "added" || ch["path"] != "n.txt" || ch["before"] != nil {
		t.Fatalf("write of a new file: change %v", ch)
	}
	ed := e.json(0, "", "edit", "a.txt", "--old", "two", "--new", "TWO", "--tx", tx)
	golden(t, "edit", ed)
	if ch := list(ed["changes"])[0].(map[string]any); ch["action"] != "modified" || ch["before"] == nil {
		t.Fatalf("edit: change %v", ch)
	}
	rm := e.json(0, "", "rm", "c.txt", "--tx", tx)
	golden(t, "rm", rm)
	if ch := list(rm["changes"])[0].(map[string]any); ch["action"] != "deleted" || ch["type"] != nil {
		t.Fatalf("rm: a deleted entry has only before: %v", ch)
	}
	golden(t, "read", e.json(0, "", "read", "b.txt", "--tx", tx))

	// status --json: one level, no duplicated stage member.
	st := e.json(0, "", "status", tx)
	golden(t, "status", st)
	if _, dup := st["stage"]; dup {
		t.Fatalf("status --json repeats itself under stage: %v", st)
	}
	golden(t, "diff", e.json(0, "", "diff", tx))
	golden(t, "list", e.json(0, "", "list"))

	// drop-op returns the dropped op numbers.
	e.json(0, "x\n", "write", "x.txt", "--tx", tx)
	e.json(0, "y\n", "write", "y.txt", "--tx", tx)
	dop := e.json(0, "", "drop-op", tx, "5")
	golden(t, "drop-op", dop)
	if got := fmt.Sprint(dop["dropped"]); got != "[5 6]" {
		t.Fatalf("drop-op %s 5 dropped %s, want [5 6]", tx, got)
	}

	// Drift: someone changes b.txt (read) and a.txt (edited) meanwhile.
	e.write("a.txt", "one\ntwo\nthree\nfour\n")
	ref := e.json(2, "", "apply", tx)
	golden(t, "apply-refused", ref)
	dr := e.json(0, "", "diff", "--drift", tx)
	golden(t, "diff-drift", dr)
	e.json(0, "", "rebase", tx)
	golden(t, "rebase", e.json(0, "", "rebase", tx))

	// commit is apply; op_id is null when nothing was applied.
	ap := e.json(0, "", "commit", tx)
	golden(t, "commit", ap)
	if ap["command"] != "commit" || ap["op_id"] == nil || ap["strategy"] != "journaled" {
		t.Fatalf("commit: %v", ap)
	}
	op := str(ap["op_id"])
	again := e.json(0, "", "apply", tx)
	golden(t, "apply-nothing", again)
	if v, ok := again["op_id"]; !ok || v != nil {
		t.Fatalf("an apply that applied nothing: op_id %v (present %v), want null", v, ok)
	}

	golden(t, "log", e.json(0, "", "log"))
	golden(t, "show", e.json(0, "", "show", op))
	golden(t, "undo", e.json(0, "", "undo", op))

	// abort is drop, and names what it discarded.
	t2 := str(e.json(0, "", "begin")["tx"])
	e.json(0, "gone\n", "write", "d.txt", "--tx", t2)
	e.json(0, "", "edit", "b.txt", "--old", "bee", "--new", "BEE", "--tx", t2)
	fk := e.json(0, "", "fork", t2)
	golden(t, "fork", fk)
	ab := e.json(0, "", "abort", t2)
	golden(t, "abort", ab)
	if ab["command"] != "abort" || fmt.Sprint(ab["discarded"]) != "[b.txt d.txt]" {
		t.Fatalf("abort: %v", ab)
	}
	golden(t, "drop", e.json(0, "", "drop", str(fk["tx"])))

	// batch: changes[] on success, per-element diagnostics on failure.
	bok := e.json(0, `{"command":"write","path":"e.txt","content":"e\n"}`+"\n", "batch", "--atomic")
	golden(t, "batch", bok)
	if len(list(bok["changes"])) != 1 || bok["strategy"] != "journaled" {
		t.Fatalf("batch: %v", bok)
	}
	bad := e.json(1, `{"command":"write","path":"f.txt","content":"f\n"}`+"\n"+
		`{"command":"edit","path":"nope","old":"a","new":"b"}`+"\n"+
		`{"command":"rm","path":"gone"}`+"\n", "batch", "--atomic")
	golden(t, "batch-failed", bad)
	diags := list(bad["error"].(map[string]any)["diagnostics"])
	if len(diags) != 3 || diags[0].(map[string]any)["status"] != "ok" || diags[1].(map[string]any)["status"] != "error" || diags[2].(map[string]any)["status"] != "error" {
		t.Fatalf("batch diagnostics: %v", diags)
	}
	if _, err := os.Stat(filepath.Join(e.ws, "f.txt")); err == nil {
		t.Fatal("a failed batch applied its first item")
	}
	golden(t, "gc", e.json(0, "", "gc"))

	// Usage errors and unknown commands answer with the envelope too.
	for name, args := range map[string][]string{
		"unknown-command": {"frobnicate"},
		"unknown-flag":    {"status", "--frob"},
		"usage-args":      {"status", "one", "two"},
	} {
		ans := e.json(1, "", args...)
		golden(t, name, ans)
		if ans["error"].(map[string]any)["code"] != "usage.invalid" {
			t.Errorf("%v: %v", args, ans)
		}
	}
	// --json given after the unknown command, too.
	if ans := answerOf(t, runWtx(t, e.ws, e.state, "frobnicate", "--json")); ans["status"] != "error" {
		t.Errorf("frobnicate --json: %v", ans)
	}
}

// TestContractRebaseOfferedByTrial: a drift refusal offers rebase only
// when trying it succeeds, and the offered repair then works.
func TestContractRebaseOfferedByTrial(t *testing.T) {
	t.Parallel()
	e := newContractEnv(t, map[string]string{"a.txt": "one\ntwo\nthree\n", "w.txt": "whole\n"})
	tx := str(e.json(0, "", "begin")["tx"])
	e.json(0, "", "edit", "a.txt", "--old", "one", "--new", "ONE", "--tx", tx)
	e.write("a.txt", "one\ntwo\nthree changed\n")
	actions := func(ans map[string]any) []string {
		var out []string
		for _, r := range list(ans["error"].(map[string]any)["repairs"]) {
			out = append(out, str(r.(map[string]any)["action"]))
		}
		return out
	}
	got := actions(e.json(2, "", "apply", tx))
	if len(got) < 1 || got[0] != "rebase" {
		t.Fatalf("a drift a rebase can carry: repairs %v, want rebase first", got)
	}
	e.json(0, "", "rebase", tx)
	e.json(0, "", "apply", tx)
	if data, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(data) != "ONE\ntwo\nthree changed\n" {
		t.Fatalf("after the offered rebase and apply: %q", data)
	}

	// The same lines changed on both sides: re-running the edit fails, so
	// a plain rebase is not offered; the merge is, saying that it leaves
	// conflict markers, and it does.
	t2 := str(e.json(0, "", "begin")["tx"])
	e.json(0, "", "edit", "a.txt", "--old", "ONE", "--new", "uno", "--tx", t2)
	e.write("a.txt", "eins\ntwo\nthree changed\n")
	refusal := e.json(2, "", "apply", t2)
	merge := false
	for _, r := range list(refusal["error"].(map[string]any)["repairs"]) {
		switch a := str(r.(map[string]any)["action"]); a {
		case "rebase":
			t.Fatalf("a rebase that fails was offered: %s", a)
		case "merge":
			merge = strings.Contains(str(r.(map[string]any)["detail"]), "conflict markers")
		}
	}
	if !merge {
		t.Fatalf("the merge that leaves conflict markers is not offered as such: %v", refusal)
	}
	r := runWtx(t, e.ws, e.state, "rebase", t2, "--merge")
	if r.code != 0 || !strings.Contains(r.stdout, "CONFLICT a.txt") {
		t.Fatalf("rebase --merge of overlapping changes: %d %s %s", r.code, r.stdout, r.stderr)
	}
	e.json(2, "", "apply", t2) // refused while the markers stand
	if data, _ := os.ReadFile(filepath.Join(e.ws, "a.txt")); string(data) != "eins\ntwo\nthree changed\n" {
		t.Fatalf("an apply with conflict markers wrote the workspace: %q", data)
	}
}

// TestContractDriftDiff: diff --drift shows the workspace's change since
// the stage's base where the base content is kept, and says where not.
func TestContractDriftDiff(t *testing.T) {
	t.Parallel()
	e := newContractEnv(t, map[string]string{"a.txt": "alpha\nbeta\n", "r.txt": "read me\n", "bin.dat": "\x00\x01\x02"})
	tx := str(e.json(0, "", "begin")["tx"])
	e.json(0, "", "edit", "a.txt", "--old", "alpha", "--new", "ALPHA", "--tx", tx)
	e.json(0, "", "read", "r.txt", "--tx", tx)
	e.json(0, "\x00staged", "write", "bin.dat", "--tx", tx)
	e.write("a.txt", "alpha\nBETA outside\n")
	e.write("r.txt", "read me, changed\n")
	e.write("bin.dat", "\x00outside")

	out := runWtx(t, e.ws, e.state, "diff", "--drift", tx)
	if out.code != 0 {
		t.Fatalf("diff --drift: %d %s", out.code, out.stderr)
	}
	for _, want := range []string{"--- a/a.txt\n+++ b/a.txt\n", "-beta\n+BETA outside\n", "-read me\n+read me, changed\n"} {
		if !strings.Contains(out.stdout, want) {
			t.Errorf("diff --drift lacks %q:\n%s", want, out.stdout)
		}
	}
	if strings.Contains(out.stdout, "ALPHA") || strings.Contains(out.stdout, "bin.dat") {
		t.Errorf("diff --drift shows the stage's own change, or binary content:\n%s", out.stdout)
	}
	if !strings.Contains(out.stderr, "bin.dat") || !strings.Contains(out.stderr, "not shown") {
		t.Errorf("diff --drift does not say bin.dat is not shown: %q", out.stderr)
	}
	ans := e.json(0, "", "diff", "--drift", tx)
	shown := map[string]bool{}
	for _, p := range list(ans["paths"]) {
		m := p.(map[string]any)
		shown[str(m["path"])] = m["shown"] == true
		if m["shown"] != true && str(m["note"]) == "" {
			t.Errorf("%v: not shown and no note saying why", m)
		}
		if m["base"] == "absent" {
			t.Errorf("%v: the base of a path that existed is not absent", m)
		}
	}
	if !shown["a.txt"] || !shown["r.txt"] || shown["bin.dat"] || len(shown) != 3 {
		t.Fatalf("drift entries: %v", ans["paths"])
	}
	// Nothing moved under a fresh stage: nothing to show.
	t2 := str(e.json(0, "", "begin")["tx"])
	if got := list(e.json(0, "", "diff", "--drift", t2)["paths"]); len(got) != 0 {
		t.Fatalf("a fresh stage has drift: %v", got)
	}
}

// TestContractAcrossWorkspaces: list --all and gc --all see every
// workspace of a shared state root.
func TestContractAcrossWorkspaces(t *testing.T) {
	t.Parallel()
	state := t.TempDir()
	one := &contractEnv{t: t, ws: t.TempDir(), state: state}
	two := &contractEnv{t: t, ws: t.TempDir(), state: state}
	one.write("a.txt", "a\n")
	two.write("b.txt", "b\n")
	t1 := str(one.json(0, "", "begin")["tx"])
	one.json(0, "x\n", "write", "x.txt", "--tx", t1)
	t2 := str(two.json(0, "", "begin")["tx"])
	two.json(0, "y\n", "write", "y.txt", "--tx", t2)
	two.json(0, "", "apply", t2)

	all := one.json(0, "", "list", "--all")
	golden(t, "list-all", all)
	ws := map[string]map[string]any{}
	for _, w := range list(all["workspaces"]) {
		m := w.(map[string]any)
		ws[str(m["path"])] = m
	}
	canon := func(p string) string { q, _ := filepath.EvalSymlinks(p); return q }
	a, b := ws[canon(one.ws)], ws[canon(two.ws)]
	if a == nil || b == nil || len(ws) != 2 {
		t.Fatalf("list --all: %v", all["workspaces"])
	}
	if a["open"] != float64(1) || fmt.Sprint(a["open_txs"]) != "["+t1+"]" || b["open"] != float64(0) || b["ops"] != float64(1) {
		t.Fatalf("list --all counts: one %v, two %v", a, b)
	}
	if a["size"].(float64) <= 0 {
		t.Fatalf("list --all: open stage takes no disk: %v", a)
	}

	// gc --all from the first workspace removes the second's settled stage.
	stageDir := filepath.Join(state, "stages", t2)
	if _, err := os.Stat(stageDir); err != nil {
		t.Fatalf("control: the applied stage's state is not there: %v", err)
	}
	plain := one.json(0, "", "gc", "--older-than", "0")
	if len(list(plain["stages"])) != 0 {
		t.Fatalf("control: gc of one workspace removed another's stages: %v", plain)
	}
	g := one.json(0, "", "gc", "--all", "--older-than", "0")
	golden(t, "gc-all", g)
	if _, err := os.Stat(stageDir); err == nil {
		t.Fatalf("gc --all left the other workspace's settled stage: %v", g)
	}
	if _, err := os.Stat(filepath.Join(state, "stages", t1)); err != nil {
		t.Fatalf("gc --all touched an open stage: %v", err)
	}
	// A workspace whose directory is gone is left alone, and said so.
	if err := os.RemoveAll(two.ws); err != nil {
		t.Fatal(err)
	}
	g = one.json(0, "", "gc", "--all", "--older-than", "0")
	skipped := 0
	for _, w := range list(g["workspaces"]) {
		if str(w.(map[string]any)["skipped"]) != "" && w.(map[string]any)["skipped"] != nil {
			skipped++
		}
	}
	if skipped != 1 {
		t.Fatalf("gc --all with a workspace gone: %v", g["workspaces"])
	}
	if ans := one.json(0, "", "list", "--all"); !strings.Contains(fmt.Sprint(ans["workspaces"]), "missing:true") {
		t.Fatalf("list --all does not mark the gone workspace: %v", ans["workspaces"])
	}
}
