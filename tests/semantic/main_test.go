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

// runWtx runs the wtx binary with args on workspace ws and state root state.
// A failure to start the binary fails the test; a non-zero exit does not.
func runWtx(t *testing.T, ws, state string, args ...string) wtxResult {
	t.Helper()
	cmd := exec.Command(wtxtest.Binary(t, false), append([]string{"-C", ws}, args...)...)
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
