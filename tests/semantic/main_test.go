package semantic

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// wtxBinary is the path of the wtx binary under test, set by TestMain.
var wtxBinary string

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	if bin := os.Getenv("WTX_BINARY"); bin != "" {
		wtxBinary = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "wtx-semantic-bin-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "semantic: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	bin, err := buildWtx(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "semantic: %v\n", err)
		return 1
	}
	wtxBinary = bin
	return m.Run()
}

// buildWtx builds cmd/wtx of the enclosing module into dir.
func buildWtx(dir string) (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "wtx")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/wtx")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build wtx in %s: %w\n%s", root, err, out)
	}
	return bin, nil
}

// moduleRoot finds the directory holding go.mod, from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// wtxResult is the outcome of one wtx invocation.
type wtxResult struct {
	code           int
	stdout, stderr string
}

// runWtx runs the wtx binary with args on workspace ws and state root state.
// A failure to start the binary fails the test; a non-zero exit does not.
func runWtx(t *testing.T, ws, state string, args ...string) wtxResult {
	t.Helper()
	cmd := exec.Command(wtxBinary, append([]string{"-C", ws}, args...)...)
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}
