package semantic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// T-003: authority follows the table of SPEC §6, enforced in one place;
// the protected check is computed from the paths an op writes, for every
// op kind, with the default protections; receipts record it truthfully.
// Each attack below runs against the real binary and again with the gate
// switched off (a failpoint build with WTX_DISABLE=…), where it must land.

// t3Env is a workspace and its state root, driven by the command line (a
// person) and by 'wtx mcp' (an agent).
type t3Env struct {
	t         *testing.T
	ws, state string
}

func newT3(t *testing.T, files map[string]string) *t3Env {
	t.Helper()
	ws, state := mcpWorkspace(t, files)
	return &t3Env{t: t, ws: ws, state: state}
}

// wtx runs the ordinary binary as a person; stdin feeds it when not empty.
func (e *t3Env) wtx(stdin string, args ...string) wtxResult {
	e.t.Helper()
	cmd := exec.Command(wtxtest.Binary(e.t, false), append([]string{"-C", e.ws}, args...)...)
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+e.state)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run() // the exit status is in ProcessState
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// must runs wtx --json and returns the named string member of its answer.
func (e *t3Env) must(stdin, member string, args ...string) string {
	e.t.Helper()
	r := e.wtx(stdin, append([]string{"--json"}, args...)...)
	if r.code != 0 {
		e.t.Fatalf("wtx %v: exit %d\n%s%s", args, r.code, r.stdout, r.stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		e.t.Fatalf("wtx %v: %v\n%s", args, err, r.stdout)
	}
	s, _ := m[member].(string)
	if s == "" {
		e.t.Fatalf("wtx %v: no %s in %s", args, member, r.stdout)
	}
	return s
}

// personApply runs script in a new stage protecting protect, and applies
// it approved, as a person; it returns the op.
func (e *t3Env) personApply(protect []string, script string) string {
	e.t.Helper()
	args := []string{"run", "--backend", "copy"}
	for _, p := range protect {
		args = append(args, "--protect", p)
	}
	tx := e.must("", "tx", append(args, "--", "sh", "-c", script)...)
	return e.must("", "op_id", "apply", tx, "--approve")
}

func (e *t3Env) read(p string) string {
	data, err := os.ReadFile(filepath.Join(e.ws, p))
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(data)
}

// agent starts 'wtx mcp' with flags; off switches the gate off in a
// failpoint build (the negative control).
func (e *t3Env) agent(off bool, flags ...string) *mcpServer {
	e.t.Helper()
	if off {
		return startMCP(e.t, wtxtest.Binary(e.t, true), e.ws, e.state, []string{"WTX_DISABLE=authority"}, flags...)
	}
	return startMCP(e.t, wtxtest.Binary(e.t, false), e.ws, e.state, nil, flags...)
}

// t3UndoOfUndo: a person applies a change to a protected file, approved,
// and then takes it back; an agent on a server that may not approve asks
// to undo the person's undo, which would write the change again.
func t3UndoOfUndo(t *testing.T, off bool) (secret string, r toolResult) {
	e := newT3(t, map[string]string{"conf/secret.env": "KEY=1\n"})
	op := e.personApply([]string{"conf"}, "echo KEY=agent > conf/secret.env")
	undo := e.must("", "op_id", "undo", op, "--approve")
	if got := e.read("conf/secret.env"); got != "KEY=1\n" {
		t.Fatalf("after the person's undo the file holds %q", got)
	}
	s := e.agent(off)
	r = s.call("undo", map[string]any{"op": undo})
	return e.read("conf/secret.env"), r
}

func TestT_003_MCPUndoOfAPersonsUndo(t *testing.T) {
	t.Parallel()
	got, r := t3UndoOfUndo(t, false)
	if r.errorCode() != "refusal.protected" || got != "KEY=1\n" {
		t.Fatalf("an agent's undo of a person's undo of a protected change: %s; the file holds %q, want refusal.protected and KEY=1", r.text(), got)
	}
	if strings.Contains(r.text(), "--path") || !strings.Contains(r.text(), "person") {
		t.Errorf("the refusal should say a person undoes it, in the tools' terms: %s", r.text())
	}
	// Negative control: with the gate off the same call re-applies the
	// change the person took back.
	got, r = t3UndoOfUndo(t, true)
	if r.IsError || got != "KEY=agent\n" {
		t.Fatalf("control: with the gate off the undo should land (file %q): %s", got, r.text())
	}
}

const (
	t3HookOld = "#!/bin/sh\nexit 0\n"
	t3HookNew = "#!/bin/sh\necho checked\n"
)

// t3GitUndo: a person applies, approved, a change to a git hook; an agent
// asks to undo that op (by id, and as "the newest apply").
func t3GitUndo(t *testing.T, off bool) (*t3Env, string, []toolResult) {
	e := newT3(t, map[string]string{".git/hooks/pre-commit": t3HookOld, "README": "r\n"})
	op := e.personApply(nil, "printf '#!/bin/sh\\necho checked\\n' > .git/hooks/pre-commit")
	if got := e.read(".git/hooks/pre-commit"); got != t3HookNew {
		t.Fatalf("the approved apply left the hook %q", got)
	}
	s := e.agent(off)
	return e, op, []toolResult{s.call("undo", map[string]any{"op": op}), s.call("undo", map[string]any{})}
}

func TestT_003_MCPUndoOfApprovedGitChange(t *testing.T) {
	t.Parallel()
	e, op, rs := t3GitUndo(t, false)
	for i, r := range rs {
		if r.errorCode() != "refusal.protected" {
			t.Errorf("undo call %d of an approved .git change: %s, want refusal.protected", i+1, r.text())
		}
	}
	if got := e.read(".git/hooks/pre-commit"); got != t3HookNew {
		t.Fatalf("an agent without approval rewrote .git/hooks/pre-commit: %q", got)
	}
	// A server that approves: the undo needs approve, then lands; the
	// refusal offers that call.
	a := e.agent(false, "--allow-approve")
	r := a.call("undo", map[string]any{"op": op})
	if r.errorCode() != "refusal.protected" || !strings.Contains(r.text(), `"tool":"undo"`) || !strings.Contains(r.text(), `"approve":true`) {
		t.Fatalf("undo without approve on an approving server: %s", r.text())
	}
	if r := a.call("undo", map[string]any{"op": op, "approve": true}); r.IsError {
		t.Fatalf("undo with approve on an approving server: %s", r.text())
	}
	if got := e.read(".git/hooks/pre-commit"); got != t3HookOld {
		t.Fatalf("after the approved undo the hook holds %q", got)
	}
	// Negative control.
	e, _, rs = t3GitUndo(t, true)
	if rs[0].IsError || e.read(".git/hooks/pre-commit") != t3HookOld {
		t.Fatalf("control: with the gate off the agent's undo should rewrite the hook: %s", rs[0].text())
	}
}

// t3EditAll runs a flow whose agent step proposes one edit with all = true
// that multiplies a 1000-byte file by 1000, under max_bytes = 2000; it
// returns the size of the file after the run and the run's answer.
func t3EditAll(t *testing.T, env ...string) (int, flowJSON) {
	e := newFlowEnv(t, true, env...)
	mustWrite(t, filepath.Join(e.ws, "docs", "a.md"), strings.Repeat("a", 1000))
	line := fmt.Sprintf(`{"command":"edit","path":"docs/a.md","old":"a","new":%q,"all":true}`, strings.Repeat("x", 1000))
	agent := e.script("agent.sh", "cat <<'EOF'\n"+line+"\nEOF\n")
	f := e.file("t3.toml", fmt.Sprintf(`version = 1
[[steps]]
name = "agent"
kind = "agent"
command = [%q]
[steps.allow]
paths = ["docs/**"]
ops = ["edit"]
max_bytes = 2000
`, agent))
	out, _ := e.flowJSON(nil, "flow", "run", f)
	fi, err := os.Stat(filepath.Join(e.ws, "docs", "a.md"))
	if err != nil {
		t.Fatal(err)
	}
	return int(fi.Size()), out
}

func TestT_003_AgentEditAllMaxBytes(t *testing.T) {
	t.Parallel()
	size, out := t3EditAll(t)
	if size != 1000 || out.Run.Status != "failed" {
		t.Fatalf("an edit with all = true under max_bytes = 2000 left docs/a.md %d bytes (run %s), want 1000 and a failed run", size, out.Run.Status)
	}
	a := out.Run.Steps[0].Attempts
	if res := a[len(a)-1].Result; res == nil || res.Error == nil || res.Error.Code != "refusal.proposal" {
		t.Fatalf("the step's result should record refusal.proposal: %+v", res)
	}
	// Negative control: with what lands unmeasured, the megabyte lands.
	if size, out = t3EditAll(t, "WTX_DISABLE=proposal-landed"); size != 1000*1000 {
		t.Fatalf("control: with the measure of what lands off, docs/a.md is %d bytes (run %s), want 1000000", size, out.Run.Status)
	}
}

// t3AgentProtected runs a flow whose agent step, allowed every path,
// proposes a git hook.
func t3AgentProtected(t *testing.T, env ...string) (*flowEnv, flowJSON) {
	e := newFlowEnv(t, true, env...)
	mustWrite(t, filepath.Join(e.ws, ".git", "hooks", "pre-commit"), t3HookOld)
	agent := e.script("agent.sh", `printf '%s\n' '{"command":"write","path":".git/hooks/pre-commit","content":"#!/bin/sh\necho checked\n"}'`+"\n")
	f := e.file("t3.toml", fmt.Sprintf(`version = 1
[[steps]]
name = "agent"
kind = "agent"
command = [%q]
[steps.allow]
paths = ["**"]
`, agent))
	out, _ := e.flowJSON(nil, "flow", "run", f)
	return e, out
}

func TestT_003_AgentStepNeverWritesProtected(t *testing.T) {
	t.Parallel()
	e, out := t3AgentProtected(t)
	if data, _ := os.ReadFile(filepath.Join(e.ws, ".git", "hooks", "pre-commit")); string(data) != t3HookOld || out.Run.Status != "failed" {
		t.Fatalf("an agent step wrote a git hook (run %s): %q", out.Run.Status, data)
	}
	a := out.Run.Steps[0].Attempts
	if res := a[len(a)-1].Result; res == nil || res.Error == nil || res.Error.Code != "refusal.protected" {
		t.Fatalf("the step's result should record refusal.protected: %+v", res)
	}
	// A flow file cannot give an agent step approve, nor share.
	for _, extra := range []string{"approve = true", `share = ["cache"]`} {
		f := e.file("bad.toml", fmt.Sprintf("version = 1\n[[steps]]\nname = \"agent\"\nkind = \"agent\"\ncommand = [\"true\"]\n%s\n[steps.allow]\npaths = [\"**\"]\n", extra))
		if r := e.run(nil, "--json", "flow", "run", f); r.code != 1 || !strings.Contains(r.stdout, "usage.invalid") {
			t.Errorf("a flow file giving an agent step %s: exit %d %s", extra, r.code, r.stdout)
		}
	}
	// Negative control.
	e, _ = t3AgentProtected(t, "WTX_DISABLE=authority")
	if data, _ := os.ReadFile(filepath.Join(e.ws, ".git", "hooks", "pre-commit")); string(data) != t3HookNew {
		t.Fatalf("control: with the gate off the agent's hook should land, is %q", data)
	}
}

// receiptOf returns the receipt of op (or stage) as 'wtx receipt --json'
// answers it, after checking that 'wtx receipt verify' accepts that answer.
func (e *t3Env) receiptOf(ref string) map[string]any {
	e.t.Helper()
	r := e.wtx("", "--json", "receipt", ref)
	if r.code != 0 {
		e.t.Fatalf("receipt %s: exit %d %s%s", ref, r.code, r.stdout, r.stderr)
	}
	f := filepath.Join(e.t.TempDir(), "receipt.json")
	if err := os.WriteFile(f, []byte(r.stdout), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if v := e.wtx("", "receipt", "verify", f); v.code != 0 {
		e.t.Fatalf("receipt verify of %s: exit %d %s%s", ref, v.code, v.stdout, v.stderr)
	}
	var a struct{ Receipt map[string]any }
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || a.Receipt == nil {
		e.t.Fatalf("receipt %s: %v %s", ref, err, r.stdout)
	}
	return a.Receipt
}

// t3Receipts makes an op of every kind, each writing protected paths, and
// returns, per kind, what its receipt says against what it should.
func t3Receipts(t *testing.T, bin string, env []string) []string {
	e := newT3(t, map[string]string{".git/hooks/pre-commit": t3HookOld, "conf/k": "k\n", "plain.txt": "p\n"})
	var bad []string
	check := func(kind, ref string, protected int, actor string) {
		rc := e.receiptOf(ref)
		if n, _ := rc["protected_paths"].(float64); int(n) != protected || rc["approved"] != true || rc["actor"] != actor {
			bad = append(bad, fmt.Sprintf("%s: receipt says protected_paths %v approved %v actor %v; want %d, true, %s", kind, rc["protected_paths"], rc["approved"], rc["actor"], protected, actor))
		}
	}
	// The ops under test run on bin (the failpoint build for the control);
	// run returns the answer's op_id, else its tx, else "".
	run := func(stdin string, args ...string) string {
		cmd := exec.Command(bin, append([]string{"-C", e.ws, "--json"}, args...)...)
		cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.state), env...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		var m map[string]any
		if jerr := json.Unmarshal(out, &m); err != nil || jerr != nil {
			t.Fatalf("wtx %v: %v %s", args, err, out)
		}
		for _, k := range []string{"op_id", "tx"} {
			if s, ok := m[k].(string); ok && s != "" {
				return s
			}
		}
		return ""
	}
	tx := run("", "run", "--backend", "copy", "--protect", "conf", "--", "sh", "-c",
		"echo x >> .git/hooks/pre-commit; echo k2 > conf/k; echo p2 > plain.txt")
	op := run("", "apply", tx, "--approve")
	check("apply", op, 2, "person")
	undo := run("", "undo", op, "--approve")
	check("undo", undo, 2, "person")
	check("undo of an undo", run("", "undo", undo, "--approve"), 2, "person")
	check("batch", run(`{"command":"write","path":".git/hooks/post-checkout","content":"#!/bin/sh\n"}`+"\n"+`{"command":"write","path":"b.txt","content":"b\n"}`+"\n",
		"batch", "--atomic", "--approve"), 1, "person")

	// A flow's run step, approved by its flow file.
	flow := filepath.Join(t.TempDir(), "f.toml")
	mustWrite(t, flow, "version = 1\n[[steps]]\nname = \"hook\"\nkind = \"run\"\ncommand = [\"sh\", \"-c\", \"echo y >> .git/hooks/pre-commit\"]\napprove = true\nbackend = \"copy\"\n")
	run("", "flow", "run", flow)
	check("flow step", e.lastOp(), 1, "person")

	// An imported change set, applied approved by the importer.
	tx = run("", "run", "--backend", "copy", "--", "sh", "-c", "echo k3 > conf/k")
	bundle := filepath.Join(t.TempDir(), "b.wtx")
	run("", "export", tx, "-o", bundle)
	run("", "drop", tx)
	in := run("", "import", bundle, "--protect", "conf")
	check("import", run("", "apply", in, "--approve"), 1, "person")

	// An agent on an approving server.
	s := startMCP(t, bin, e.ws, e.state, env, "--allow-approve")
	mtx := s.beginStage(map[string]any{})
	s.call("write", map[string]any{"tx": mtx, "path": ".git/hooks/post-merge", "content": "x\n"})
	var ap struct {
		OpID string `json:"op_id"`
	}
	s.call("apply", map[string]any{"tx": mtx, "approve": true}).decode(t, &ap)
	check("mcp apply", ap.OpID, 1, "mcp-agent-approving")
	return bad
}

// lastOp is the workspace's newest op.
func (e *t3Env) lastOp() string {
	e.t.Helper()
	var l struct {
		Ops []struct {
			ID string `json:"op_id"`
		}
	}
	r := e.wtx("", "--json", "log")
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Ops) == 0 {
		e.t.Fatalf("log: %v %s", err, r.stdout)
	}
	return l.Ops[len(l.Ops)-1].ID
}

func TestT_003_ReceiptsCountProtectedWrites(t *testing.T) {
	t.Parallel()
	for _, b := range t3Receipts(t, wtxtest.Binary(t, false), nil) {
		t.Error(b)
	}
	// Negative control: counted as receipts once counted, a .git write is
	// not protected and the receipts under-report.
	if bad := t3Receipts(t, wtxtest.Binary(t, true), []string{"WTX_DISABLE=receipt-protected"}); len(bad) == 0 {
		t.Fatal("control: with the old count every receipt still matched: the check cannot fail")
	}
}

func TestT_003_BatchTouchingProtected(t *testing.T) {
	t.Parallel()
	e := newT3(t, map[string]string{"a.txt": "a\n"})
	lines := `{"command":"write","path":".git/hooks/post-checkout","content":"#!/bin/sh\n"}` + "\n" + `{"command":"write","path":"a.txt","content":"b\n"}` + "\n"
	r := e.wtx(lines, "--json", "batch", "--atomic")
	if r.code != 2 || !strings.Contains(r.stdout, "refusal.protected") {
		t.Fatalf("a batch writing .git without --approve: exit %d %s", r.code, r.stdout)
	}
	if e.read("a.txt") != "a\n" || e.read(".git/hooks/post-checkout") == "#!/bin/sh\n" {
		t.Fatal("a refused batch wrote the workspace")
	}
	op := e.must(lines, "op_id", "batch", "--atomic", "--approve")
	if e.read(".git/hooks/post-checkout") != "#!/bin/sh\n" {
		t.Fatal("an approved batch did not land")
	}
	// Its undo writes the hook away again: a protected write too.
	if r := e.wtx("", "--json", "undo", op); r.code != 2 || !strings.Contains(r.stdout, "refusal.protected") || !strings.Contains(r.stdout, "--approve") {
		t.Fatalf("an undo of the batch without --approve: exit %d %s", r.code, r.stdout)
	}
	if e.read(".git/hooks/post-checkout") != "#!/bin/sh\n" || e.read("a.txt") != "b\n" {
		t.Fatal("a refused undo wrote the workspace")
	}
}

// t3Settings asks an agent on a default server for what only a person
// chooses; it returns what went wrong.
func t3Settings(t *testing.T, off bool) []string {
	e := newT3(t, map[string]string{"spec.md": "limit is 10\n", "impl.go": "const limit = 10\n", "cache/c": "c\n"})
	var bad []string
	s := e.agent(off)
	// share is not an argument an agent may give.
	if r := s.call("begin", map[string]any{"share": []string{"cache"}}); !r.IsError {
		bad = append(bad, "begin with share: "+r.text())
	}
	// ignore_stale_reads is an override, as approve is.
	tx := s.beginStage(map[string]any{})
	s.call("read", map[string]any{"tx": tx, "path": "spec.md"})
	s.call("edit", map[string]any{"tx": tx, "path": "impl.go", "old": "10", "new": "20"})
	mustWrite(t, filepath.Join(e.ws, "spec.md"), "limit is 30\n")
	if r := s.call("apply", map[string]any{"tx": tx, "ignore_stale_reads": true}); r.errorCode() != "refusal.not-permitted" {
		bad = append(bad, "apply with ignore_stale_reads on a default server: "+r.text())
	}
	if r := s.call("apply", map[string]any{"tx": tx}); !strings.Contains(r.text(), `"person":true`) || strings.Contains(r.text(), `"ignore_stale_reads":true`) {
		bad = append(bad, "the stale read's ignore repair should be a person's on a default server: "+r.text())
	}
	if e.read("impl.go") != "const limit = 10\n" {
		bad = append(bad, "the agent's change landed over a stale read")
	}
	// A person's stage that shares a path: a command run in it writes the
	// workspace there, which the agent may not.
	if r := e.wtx("", "--json", "begin", "--backend", "overlay", "--share", "cache"); r.code == 0 {
		var b struct{ Tx string }
		_ = json.Unmarshal([]byte(r.stdout), &b)
		if r := s.call("run", map[string]any{"tx": b.Tx, "argv": []string{"sh", "-c", "echo agent > cache/c"}}); r.errorCode() != "refusal.not-permitted" {
			bad = append(bad, "run in a person's shared stage: "+r.text())
		}
		if e.read("cache/c") != "c\n" {
			bad = append(bad, "the agent's command wrote a shared path of the workspace")
		}
	} else {
		t.Logf("no overlay with --share here (%s): the shared stage is not tried", strings.TrimSpace(r.stdout))
	}
	// What only narrows stays the agent's: excludes, protects, a backend.
	if r := s.call("begin", map[string]any{"exclude": []string{"cache"}, "protect": []string{"spec.md"}, "backend": "copy"}); r.IsError {
		bad = append(bad, "begin with exclude, protect and backend: "+r.text())
	}
	return bad
}

func TestT_003_MCPSettingsBeyondServer(t *testing.T) {
	t.Parallel()
	for _, b := range t3Settings(t, false) {
		t.Error(b)
	}
	// Negative control: with the gate off the agent ignores the stale read
	// and its change lands.
	if bad := t3Settings(t, true); len(bad) == 0 {
		t.Fatal("control: with the gate off the agent still could not override: the check cannot fail")
	}
}

// t3OtherWays tries the other ways an agent on a default server reaches a
// protected path: one hunk of .git/config, the project file in another
// letter case, a hook whose name is not UTF-8, an undo that names only
// the protected part of an op. It returns what landed.
func t3OtherWays(t *testing.T, off bool) []string {
	e := newT3(t, map[string]string{".git/config": "[core]\n\tbare = false\n", "a.txt": "a\n", "conf/k": "k\n"})
	s := e.agent(off)
	tx := s.beginStage(map[string]any{})
	s.call("edit", map[string]any{"tx": tx, "path": ".git/config", "old": "bare = false", "new": "bare = false\n\tfsmonitor = /tmp/x"})
	s.call("apply_hunks", map[string]any{"tx": tx, "path": ".git/config", "hunks": []int{1}})
	tx = s.beginStage(map[string]any{})
	s.call("write", map[string]any{"tx": tx, "path": ".WTX.toml", "content": "protect = []\n"})
	s.call("write", map[string]any{"tx": tx, "path_b64": "LmdpdC9ob29rcy//", "content": "x\n"}) // .git/hooks/\xff
	s.call("apply", map[string]any{"tx": tx, "approve": true})
	op := e.personApply([]string{"conf"}, "echo k2 > conf/k; echo a2 > a.txt")
	s.call("undo", map[string]any{"op": op, "paths": []string{"conf"}})
	var landed []string
	if strings.Contains(e.read(".git/config"), "fsmonitor") {
		landed = append(landed, "a hunk of .git/config")
	}
	for _, p := range []string{".WTX.toml", ".git/hooks/\xff"} {
		if _, err := os.Lstat(filepath.Join(e.ws, p)); err == nil {
			landed = append(landed, fmt.Sprintf("%q", p))
		}
	}
	if e.read("conf/k") != "k2\n" {
		landed = append(landed, "an undo of conf/k")
	}
	// Taking back only what is not protected stays the agent's.
	if r := s.call("undo", map[string]any{"op": op, "exclude": []string{"conf"}}); r.IsError || e.read("a.txt") != "a\n" {
		t.Errorf("an agent's undo of only the unprotected part of an op: %s (a.txt %q)", r.text(), e.read("a.txt"))
	}
	return landed
}

func TestT_003_MCPOtherWaysToAProtectedPath(t *testing.T) {
	t.Parallel()
	if landed := t3OtherWays(t, false); len(landed) > 0 {
		t.Fatalf("an agent on a default server wrote protected paths: %v", landed)
	}
	if landed := t3OtherWays(t, true); len(landed) < 4 {
		t.Fatalf("control: with the gate off only %v landed, want all four", landed)
	}
}
