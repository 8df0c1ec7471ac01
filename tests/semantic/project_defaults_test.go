package semantic

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// projectEnv is a workspace whose project file protects secrets/**, a
// second workspace that makes a change set to import, and the binary.
type projectEnv struct {
	t                *testing.T
	bin              string
	env              []string
	root, ws, other  string
	state, stateMore string
}

func newProjectEnv(t *testing.T, failpoints bool, env ...string) *projectEnv {
	t.Helper()
	root := t.TempDir()
	e := &projectEnv{t: t, bin: wtxtest.Binary(t, failpoints), env: env, root: root,
		ws: filepath.Join(root, "ws"), other: filepath.Join(root, "other"),
		state: filepath.Join(root, "state"), stateMore: filepath.Join(root, "state2")}
	for _, d := range []string{e.ws, e.other} {
		if err := os.MkdirAll(filepath.Join(d, "secrets"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "secrets", "key"), []byte("k\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(e.ws, ".wtx.toml"), []byte("protect = [\"secrets/**\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// wtx runs the binary on dir with the given state root.
func (e *projectEnv) wtxIn(dir, state string, args ...string) wtxResult {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"-C", dir}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), e.env...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

func (e *projectEnv) wtx(args ...string) wtxResult {
	e.t.Helper()
	return e.wtxIn(e.ws, e.state, args...)
}

// key is what the protected file holds now.
func (e *projectEnv) key() string {
	b, err := os.ReadFile(filepath.Join(e.ws, "secrets", "key"))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// reset puts the protected file back and drops every open stage.
func (e *projectEnv) reset() {
	e.t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, "secrets", "key"), []byte("k\n"), 0o644); err != nil {
		e.t.Fatal(err)
	}
	for {
		r := e.wtx("drop")
		if r.code != 0 {
			return
		}
	}
}

func txOf(t *testing.T, r wtxResult) string {
	t.Helper()
	var a struct{ Tx string }
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil || !strings.HasPrefix(a.Tx, "tx-") {
		t.Fatalf("no tx in %q (%v); stderr %s", r.stdout, err, r.stderr)
	}
	return a.Tx
}

// projectDefaultsCase writes secrets/key through every way a stage opens
// and applies it without approval. It returns the entry points where the
// protected file was written: the project file's protect did not reach
// the stage.
func projectDefaultsCase(t *testing.T, failpoints bool, env ...string) []string {
	e := newProjectEnv(t, failpoints, env...)
	var bad []string
	check := func(entry, want string) {
		t.Helper()
		if got := e.key(); got != "k" {
			if got != want {
				t.Fatalf("%s: secrets/key = %q, neither k nor %q", entry, got, want)
			}
			bad = append(bad, entry)
		}
		e.reset()
	}

	// The command line (control: it always applied the project file).
	e.wtx("run", "--", "sh", "-c", "echo cli > secrets/key")
	if r := e.wtx("--json", "apply"); r.code != 0 && errCode(t, r) != "refusal.protected" {
		t.Fatalf("run: apply answered %s, want refusal.protected", errCode(t, r))
	}
	check("run", "cli")
	// --no-project opts out, as documented.
	e.wtx("run", "--no-project", "--", "sh", "-c", "echo opt > secrets/key")
	if r := e.wtx("apply"); r.code != 0 || e.key() != "opt" {
		t.Fatalf("run --no-project: apply rc %d, key %q; stderr %s", r.code, e.key(), r.stderr)
	}
	e.reset()

	// import: a change set made in a workspace without the project file.
	src := txOf(t, e.wtxIn(e.other, e.stateMore, "--json", "run", "--", "sh", "-c", "echo imported > secrets/key"))
	bundle := filepath.Join(e.root, "p.wtxb")
	if r := e.wtxIn(e.other, e.stateMore, "export", src, "-o", bundle); r.code != 0 {
		t.Fatalf("export: %d %s", r.code, r.stderr)
	}
	if r := e.wtx("import", bundle); r.code != 0 {
		t.Fatalf("import: %d %s", r.code, r.stderr)
	}
	e.wtx("apply")
	check("import", "imported")

	// import --git: a change set exported as a git commit from a stage
	// opened without the project file, imported into the same workspace.
	if _, err := exec.LookPath("git"); err == nil {
		gitCmd(t, e.ws, "init", "-q", "-b", "main")
		gitCmd(t, e.ws, "add", "-A")
		gitCmd(t, e.ws, "commit", "-q", "-m", "base")
		src := txOf(t, e.wtx("--json", "run", "--no-project", "--", "sh", "-c", "echo git > secrets/key"))
		if r := e.wtx("export", src, "--git", "--ref", "refs/wtx/p"); r.code != 0 {
			t.Fatalf("export --git: %d %s", r.code, r.stderr)
		}
		e.wtx("drop", src)
		if r := e.wtx("import", "--git", "refs/wtx/p"); r.code != 0 {
			t.Fatalf("import --git: %d %s", r.code, r.stderr)
		}
		e.wtx("apply")
		check("import --git", "git")
	}

	// A flow's run step (applied by default on success).
	flow := filepath.Join(e.root, "p.toml")
	if err := os.WriteFile(flow, []byte("version = 1\nname = \"p\"\n\n[[steps]]\nname = \"s\"\nkind = \"run\"\ncommand = [\"sh\", \"-c\", \"echo flow > secrets/key\"]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.wtx("flow", "run", flow)
	check("flow run step", "flow")

	// The MCP server: run, then begin + write, each applied without approve.
	s := startMCP(t, e.bin, e.ws, e.state, e.env)
	var run struct{ Tx string }
	s.call("run", map[string]any{"argv": []string{"sh", "-c", "echo mcp > secrets/key"}}).decode(t, &run)
	r := s.call("apply", map[string]any{"tx": run.Tx})
	if r.IsError && r.errorCode() != "refusal.protected" {
		t.Fatalf("mcp run: apply answered %s", r.text())
	}
	check("mcp run", "mcp")
	tx := s.beginStage(map[string]any{})
	if w := s.call("write", map[string]any{"tx": tx, "path": "secrets/key", "content": "mcp2\n"}); w.IsError {
		t.Fatalf("mcp write: %s", w.text())
	}
	r = s.call("apply", map[string]any{"tx": tx, "approve": true})
	if r.IsError && r.errorCode() != "refusal.protected" {
		t.Fatalf("mcp begin: apply answered %s", r.text())
	}
	check("mcp begin+write", "mcp2")
	return bad
}

// TestProjectFileDefaultsReachEveryStage: the project file's protects hold
// for a stage however it opens (command line, import, a flow step, the MCP
// server's run and begin). Negative control: with the library's reading of
// the project file switched off, every entry point writes the protected file.
func TestProjectFileDefaultsReachEveryStage(t *testing.T) {
	t.Parallel()
	if bad := projectDefaultsCase(t, false); len(bad) > 0 {
		t.Errorf("a protected path was applied without approval through: %s", strings.Join(bad, ", "))
	}
	t.Run("negative-control", func(t *testing.T) {
		bad := projectDefaultsCase(t, true, "WTX_DISABLE=project-defaults")
		want := "run, import, import --git, flow run step, mcp run, mcp begin+write"
		if _, err := exec.LookPath("git"); err != nil {
			want = strings.Replace(want, " import --git,", "", 1)
		}
		if strings.Join(bad, ", ") != want {
			t.Errorf("with project-defaults off, protected path written through %q, want %q", strings.Join(bad, ", "), want)
		}
	})
}

// projectFileCase rewrites .wtx.toml to protect nothing and applies it:
// from the command line without --approve, and over MCP with approve (a
// server started without --allow-approve). It returns where it landed.
func projectFileCase(t *testing.T, failpoints bool, env ...string) []string {
	e := newProjectEnv(t, failpoints, env...)
	proj := filepath.Join(e.ws, ".wtx.toml")
	orig := "protect = [\"secrets/**\"]\n"
	var bad []string
	check := func(entry string) {
		t.Helper()
		b, err := os.ReadFile(proj)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != orig {
			bad = append(bad, entry)
			if err := os.WriteFile(proj, []byte(orig), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		e.reset()
	}
	run := e.wtx("run", "--", "sh", "-c", "echo 'protect = []' > .wtx.toml")
	r := e.wtx("--json", "apply")
	if r.code != 0 {
		if code := errCode(t, r); code != "refusal.protected" {
			t.Fatalf("apply of .wtx.toml answered %s", code)
		}
		if !strings.Contains(run.stderr, "warning") || !strings.Contains(run.stderr, ".wtx.toml") {
			t.Errorf("run's summary does not warn about .wtx.toml:\n%s", run.stderr)
		}
		if !strings.Contains(r.stdout, ".wtx.toml") {
			t.Errorf("the refusal does not name .wtx.toml: %s", r.stdout)
		}
		// A person approves it.
		if a := e.wtx("apply", "--approve"); a.code != 0 {
			t.Fatalf("apply --approve: %d %s", a.code, a.stderr)
		}
		if b, _ := os.ReadFile(proj); !strings.Contains(string(b), "protect = []") {
			t.Fatalf("apply --approve did not write .wtx.toml: %q", b)
		}
		if err := os.WriteFile(proj, []byte(orig), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check("cli apply")

	s := startMCP(t, e.bin, e.ws, e.state, e.env)
	tx := s.beginStage(map[string]any{})
	if w := s.call("write", map[string]any{"tx": tx, "path": ".wtx.toml", "content": "protect = []\n"}); w.IsError {
		t.Fatalf("mcp write: %s", w.text())
	}
	m := s.call("apply", map[string]any{"tx": tx, "approve": true})
	if m.IsError && m.errorCode() != "refusal.protected" {
		t.Fatalf("mcp apply of .wtx.toml answered %s", m.text())
	}
	check("mcp apply approve")
	return bad
}

// TestProjectFileIsProtected: .wtx.toml is protected by default, as .git
// is: a stage that changes it is applied only with a person's --approve,
// never by an MCP agent's approve (server without --allow-approve).
// Negative control: WTX_DISABLE=project-protect lets both land.
func TestProjectFileIsProtected(t *testing.T) {
	t.Parallel()
	if bad := projectFileCase(t, false); len(bad) > 0 {
		t.Errorf(".wtx.toml rewritten without a person's approval through: %s", strings.Join(bad, ", "))
	}
	t.Run("negative-control", func(t *testing.T) {
		bad := projectFileCase(t, true, "WTX_DISABLE=project-protect")
		if want := "cli apply, mcp apply approve"; strings.Join(bad, ", ") != want {
			t.Errorf("with project-protect off, .wtx.toml landed through %q, want %q", strings.Join(bad, ", "), want)
		}
	})
}
