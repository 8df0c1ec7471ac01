package concurrency

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"testing"
)

// soak reports whether WTX_SOAK asks for the long counts.
func soak() bool { return os.Getenv("WTX_SOAK") != "" }

// env is where one workspace's wtx commands run.
type env struct {
	bin, ws, state string
	extra          []string
}

// result is one wtx invocation's outcome.
type result struct {
	code           int
	stdout, stderr string
}

// wtx runs the binary with args (and any extra environment); it fails t
// only when the binary cannot be started.
func (e env) wtx(t testing.TB, extra []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(e.bin, append([]string{"-C", e.ws}, args...)...)
	cmd.Env = append(append(append(os.Environ(), "WTX_STATE_DIR="+e.state), e.extra...), extra...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Errorf("wtx %v: %v", args, err)
		return result{code: -1}
	}
	return result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// reply is the part of wtx's --json output the tests read.
type reply struct {
	Tx      string   `json:"tx"`
	Written []string `json:"written"`
	Error   *struct {
		Code      string `json:"code"`
		Message   string `json:"message"`
		Conflicts []struct {
			Path string `json:"path"`
			Kind string `json:"kind"`
		} `json:"conflicts"`
		Repairs []struct {
			Action  string `json:"action"`
			Command string `json:"command"`
		} `json:"repairs"`
	} `json:"error"`
}

func parse(t testing.TB, r result) reply {
	t.Helper()
	var rep reply
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Errorf("wtx --json printed no JSON (exit %d): %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	return rep
}

// stage opens a stage running script and returns its id.
func (e env) stage(t testing.TB, script string) (string, result) {
	t.Helper()
	r := e.wtx(t, nil, "--json", "run", "--", "sh", "-c", script)
	if r.code != 0 {
		return "", r
	}
	return parse(t, r).Tx, r
}
