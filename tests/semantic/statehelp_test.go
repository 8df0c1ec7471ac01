package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// stateEnv is one workspace and its state root, for the promises about the
// state root (I-004, I-005, I-006).
type stateEnv struct {
	t      *testing.T
	ws, st string
	bin    string
	env    []string
}

func newStateEnv(t *testing.T) *stateEnv {
	t.Helper()
	base := t.TempDir()
	e := &stateEnv{t: t, ws: filepath.Join(base, "ws"), st: filepath.Join(base, "state"), bin: wtxtest.Binary(t, false)}
	if err := os.Mkdir(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

// wtxJSON is the envelope of a --json answer.
type wtxJSON struct {
	Status string `json:"status"`
	Error  struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Repairs []struct {
			Action  string `json:"action"`
			Command string `json:"command"`
		} `json:"repairs"`
	} `json:"error"`
}

// run runs wtx -C ws with args and the state root st; prefix, if given, is
// a command line wtx runs under (sh -c 'umask 0; exec "$@"', unshare, …).
func (e *stateEnv) runIn(ws string, prefix []string, args ...string) wtxResult {
	e.t.Helper()
	argv := append(append(append([]string{}, prefix...), e.bin, "-C", ws), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st), e.env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

func (e *stateEnv) run(args ...string) wtxResult {
	e.t.Helper()
	return e.runIn(e.ws, nil, args...)
}

// must runs wtx and fails the test unless it exits 0.
func (e *stateEnv) must(args ...string) wtxResult {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("wtx %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

// stageID runs a change through wtx run --json and returns the stage id.
func (e *stateEnv) stage(script string) string {
	e.t.Helper()
	r := e.must("--json", "run", "--backend", "copy", "--", "sh", "-c", script)
	var out struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Tx == "" {
		e.t.Fatalf("wtx run --json: no stage id in %q: %v", r.stdout, err)
	}
	return out.Tx
}

// wantCode checks that r is a --json error answer with code, and returns
// it.
func wantCode(t *testing.T, r wtxResult, exit int, code string) wtxJSON {
	t.Helper()
	var got wtxJSON
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil {
		t.Fatalf("not one JSON object (exit %d): %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	if r.code != exit || got.Error.Code != code {
		t.Fatalf("exit %d, code %q (%s); want exit %d, code %q\nstdout: %s\nstderr: %s", r.code, got.Error.Code, got.Error.Message, exit, code, r.stdout, r.stderr)
	}
	return got
}

// notPrivate lists the entries of the state root st that are readable,
// writable or searchable by group or others, or owned by someone other than
// the caller. A stage's own directory is checked but not what it holds (a
// view keeps the workspace's modes, behind the stage directory's 0700).
func notPrivate(t *testing.T, st string) []string {
	t.Helper()
	var bad []string
	err := filepath.WalkDir(st, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o077 != 0 || int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() {
			bad = append(bad, p+" "+fi.Mode().String())
		}
		if rel, _ := filepath.Rel(st, p); d.IsDir() && strings.Count(rel, "/") == 1 && strings.HasPrefix(rel, "stages/") {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return bad
}
