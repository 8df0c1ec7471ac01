package semantic

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// wtxResult is the outcome of one wtx invocation.
type wtxResult struct {
	code           int
	stdout, stderr string
}

// wtxWith runs the wtx binary (the failpoint build when failpoint is set)
// with extra environment.
func wtxWith(t *testing.T, failpoint bool, env []string, ws, state string, args ...string) wtxResult {
	t.Helper()
	cmd := exec.Command(wtxtest.Binary(t, failpoint), append([]string{"-C", ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// runWtx runs the wtx binary with args on workspace ws and state root state.
// A failure to start the binary fails the test; a non-zero exit does not.
func runWtx(t *testing.T, ws, state string, args ...string) wtxResult {
	t.Helper()
	return wtxWith(t, false, nil, ws, state, args...)
}
