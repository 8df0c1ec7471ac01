package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// machine is one workspace with a state root of its own: two of them stand
// in for two machines that share a git history and nothing else.
type machine struct {
	t     *testing.T
	bin   string
	ws    string
	state string
	env   []string // extra environment (WTX_DISABLE=...)
}

// oddName is a name that is not UTF-8 and holds a newline: it must cross
// machines byte for byte.
const oddName = "n\xff\xfe\nname"

func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	return gitEnv(t, dir, nil, args...)
}

// gitEnv runs git in dir with env added to a fixed identity.
func gitEnv(t *testing.T, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(append(os.Environ(), env...), "GIT_CONFIG_NOSYSTEM=1", "GIT_AUTHOR_NAME=base", "GIT_AUTHOR_EMAIL=base@example.com",
		"GIT_COMMITTER_NAME=base", "GIT_COMMITTER_EMAIL=base@example.com", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, out)
	}
	return string(out)
}

// twoMachines makes a git repository with a base tree, pushed to a bare
// repository that a second workspace clones: A and B hold the same
// commit, each with its own state root.
func twoMachines(t *testing.T, failpoints bool) (a, b *machine, hub string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	bin := wtxtest.Binary(t, failpoints)
	root := t.TempDir()
	hub = filepath.Join(root, "hub.git")
	a = &machine{t: t, bin: bin, ws: filepath.Join(root, "a"), state: filepath.Join(root, "state-a")}
	b = &machine{t: t, bin: bin, ws: filepath.Join(root, "b"), state: filepath.Join(root, "state-b")}
	gitCmd(t, root, "init", "-q", "--bare", "-b", "main", hub)
	gitCmd(t, root, "init", "-q", "-b", "main", a.ws)
	files := map[string]string{
		"README":       "hello\n",
		"src/main.go":  "package main\n\nfunc main() {}\n",
		"src/util.go":  "package main\n",
		"old/gone.txt": "to be removed\n",
		"old/also.txt": "also removed\n",
		"run.sh":       "#!/bin/sh\necho run\n",
		"lines.txt":    "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
		oddName:        "odd\n",
	}
	for p, c := range files {
		full := filepath.Join(a.ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("README", filepath.Join(a.ws, "link")); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, a.ws, "add", "-A")
	gitCmd(t, a.ws, "commit", "-q", "-m", "base")
	gitCmd(t, a.ws, "remote", "add", "origin", hub)
	gitCmd(t, a.ws, "push", "-q", "origin", "main")
	gitCmd(t, root, "clone", "-q", hub, b.ws)
	return a, b, hub
}

// agentScript is what "the agent" does on machine A: a modification, an
// addition under a new directory, a deletion of a whole directory, an exec
// bit, a symlink retargeted, a new non-UTF-8 name, a binary file.
const agentScript = `set -e
printf 'package main\n\nfunc main() { println("fixed") }\n' > src/main.go
mkdir -p src/new && printf 'package new\n' > src/new/a.go
rm -r old
chmod +x run.sh
ln -sfn src/main.go link
printf 'fresh\n' > "$(printf 'f\377\tresh')"
printf '\000\001\002binary' > blob.bin
printf 'odd, changed\n' > "$(printf 'n\377\376\nname')"
`

func (m *machine) wtx(stdin []byte, args ...string) wtxResult {
	m.t.Helper()
	cmd := exec.Command(m.bin, append([]string{"-C", m.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+m.state, "GIT_CONFIG_NOSYSTEM=1"), m.env...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		m.t.Fatalf("wtx %q: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

func (m *machine) ok(stdin []byte, args ...string) wtxResult {
	m.t.Helper()
	r := m.wtx(stdin, args...)
	if r.code != 0 {
		m.t.Fatalf("wtx %q on %s: exit %d\nstdout: %s\nstderr: %s", args, filepath.Base(m.ws), r.code, r.stdout, r.stderr)
	}
	return r
}

// answer decodes a --json answer.
func (m *machine) answer(r wtxResult, v any) {
	m.t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		m.t.Fatalf("no JSON answer (exit %d): %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
}

// digest is the change-set digest status reports for stage tx.
func (m *machine) digest(tx string) string {
	m.t.Helper()
	var st struct {
		ChangesetDigest string `json:"changeset_digest"`
	}
	m.answer(m.ok(nil, "--json", "status", tx), &st)
	if st.ChangesetDigest == "" {
		m.t.Fatalf("status %s: no changeset_digest", tx)
	}
	return st.ChangesetDigest
}

// stages lists the ids of the workspace's stages, settled or not.
func (m *machine) stages() []string {
	m.t.Helper()
	var l struct {
		Stages []struct {
			Tx string `json:"tx"`
		} `json:"stages"`
	}
	m.answer(m.ok(nil, "--json", "list", "--settled"), &l)
	var ids []string
	for _, s := range l.Stages {
		ids = append(ids, s.Tx)
	}
	return ids
}

// tree is the workspace's snapshot without .git.
func (m *machine) tree() map[string]node {
	m.t.Helper()
	s, err := snapshot(m.ws)
	if err != nil {
		m.t.Fatal(err)
	}
	for p := range s {
		if p == ".git" || strings.HasPrefix(p, ".git/") {
			delete(s, p)
		}
	}
	return s
}

// runAgent runs the agent script in a new stage on m and returns its id.
func (m *machine) runAgent(name string) string {
	m.t.Helper()
	var run struct {
		Tx string `json:"tx"`
	}
	m.answer(m.ok(nil, "--json", "run", "--name", name, "--", "sh", "-c", agentScript), &run)
	return run.Tx
}

func errCode(t *testing.T, r wtxResult) string {
	t.Helper()
	var out struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Error == nil {
		return ""
	}
	return out.Error.Code
}
