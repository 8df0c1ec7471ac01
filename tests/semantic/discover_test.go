package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// discoverCase runs wtx without -C from a git repository below a parent
// workspace (open stages when parentOpen, else only a dropped one), stages
// a write to the repository's project-protected secrets/key and applies it
// without --approve. It returns whether the write landed and the workspace
// status named.
func discoverCase(t *testing.T, parentOpen, failpoints bool, env ...string) (landed bool, workspace string) {
	t.Helper()
	bin := wtxtest.Binary(t, failpoints)
	root := t.TempDir()
	parent, repo, state := filepath.Join(root, "parent"), filepath.Join(root, "parent", "repo"), filepath.Join(root, "state")
	for _, d := range []string{filepath.Join(repo, ".git"), filepath.Join(repo, "secrets")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		filepath.Join(parent, "h.txt"):        "h\n",
		filepath.Join(repo, "secrets", "key"): "k\n",
		filepath.Join(repo, ".wtx.toml"):      "protect = [\"secrets/**\"]\n",
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	wtx := func(dir string, args ...string) wtxResult {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Dir = dir
		cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state, "HOME="+root), env...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if _, ok := err.(*exec.ExitError); err != nil && !ok {
			t.Fatalf("wtx %v: %v", args, err)
		}
		return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	}
	if r := wtx(parent, "run", "-q", "--backend", "copy", "--", "sh", "-c", "echo h2 > h.txt"); r.code != 0 {
		t.Fatalf("parent run: %d %s", r.code, r.stderr)
	}
	if !parentOpen {
		if r := wtx(parent, "drop", "-q"); r.code != 0 {
			t.Fatalf("parent drop: %d %s", r.code, r.stderr)
		}
	}
	if r := wtx(repo, "run", "-q", "--name", "pwn", "--backend", "copy", "--", "sh", "-c", "echo pwn > secrets/key"); r.code != 0 {
		t.Fatalf("repo run: %d %s", r.code, r.stderr)
	}
	st := wtx(repo, "status", "pwn")
	workspace, _, _ = strings.Cut(strings.TrimPrefix(st.stdout, "workspace "), "\n")
	_ = wtx(repo, "apply", "pwn") // refused or not: the key says which
	b, err := os.ReadFile(filepath.Join(repo, "secrets", "key"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b) == "pwn\n", workspace
}

// TestDiscoverNearestBoundary: a git repository below a workspace is its
// own workspace when wtx runs in it without -C, so its project file's
// protects hold, whether the parent has open stages or only a dropped one.
// Negative control: WTX_DISABLE=discover-nearest lets a parent with open
// stages capture the repository, and the protected write lands.
func TestDiscoverNearestBoundary(t *testing.T) {
	t.Parallel()
	for _, open := range []bool{true, false} {
		landed, ws := discoverCase(t, open, false)
		if landed || !strings.HasSuffix(strings.Fields(ws + " x")[0], "/repo") {
			t.Errorf("parent open=%v: workspace %q, protected write landed=%v", open, ws, landed)
		}
	}
	t.Run("negative-control", func(t *testing.T) {
		landed, ws := discoverCase(t, true, true, "WTX_DISABLE=discover-nearest")
		if !landed || !strings.HasSuffix(strings.Fields(ws + " x")[0], "/parent") {
			t.Errorf("with discover-nearest off: workspace %q, protected write landed=%v; want the parent and the write landed", ws, landed)
		}
	})
}
