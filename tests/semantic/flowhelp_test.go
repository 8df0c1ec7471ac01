package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// flowEnv is a workspace, its state root, and a directory outside both
// for flow files, step scripts and the counter file steps append to.
type flowEnv struct {
	t       *testing.T
	bin     string
	ws      string
	state   string
	outside string
	env     []string
}

func newFlowEnv(t *testing.T, failpoints bool, env ...string) *flowEnv {
	t.Helper()
	root := t.TempDir()
	// A wtx killed while it probed for overlay support leaves the probe's
	// overlay work directory, which the kernel makes mode 0: open it up so
	// that the temporary directory can be removed (this runs before
	// TempDir's own cleanup).
	t.Cleanup(func() {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700) // best effort: RemoveAll reports what stays
			}
			return nil
		})
	})
	e := &flowEnv{t: t, bin: wtxtest.Binary(t, failpoints), ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state"),
		outside: filepath.Join(root, "outside")}
	for _, d := range []string{e.ws, e.state, e.outside} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.env = append(append(os.Environ(), "WTX_STATE_DIR="+e.state, "FLOW_COUNTER="+e.counterPath()), env...)
	return e
}

func (e *flowEnv) counterPath() string { return filepath.Join(e.outside, "counter") }

// counter returns the lines steps appended to the counter file.
func (e *flowEnv) counter() []string {
	data, err := os.ReadFile(e.counterPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.Fields(string(data))
}

// script writes an executable shell script outside the workspace and
// returns its path.
func (e *flowEnv) script(name, body string) string {
	p := filepath.Join(e.outside, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nset -e\n"+body), 0o755); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// file writes a flow file outside the workspace and returns its path.
func (e *flowEnv) file(name, body string) string {
	p := filepath.Join(e.outside, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// cmd makes a wtx command on the workspace with extra environment.
func (e *flowEnv) cmd(extra []string, args ...string) *exec.Cmd {
	c := exec.Command(e.bin, append([]string{"-C", e.ws}, args...)...)
	c.Env = append(append([]string(nil), e.env...), extra...)
	return c
}

func (e *flowEnv) run(extra []string, args ...string) wtxResult {
	e.t.Helper()
	c := e.cmd(extra, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	err := c.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: c.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// flowJSON is the --json answer of the flow commands, as a client reads it.
type flowJSON struct {
	Status  string `json:"status"`
	Command string `json:"command"`
	Run     struct {
		ID               string `json:"id"`
		Status           string `json:"status"`
		DefinitionDigest string `json:"definition_digest"`
		BaseDigest       string `json:"base_digest"`
		ForkedFrom       string `json:"forked_from"`
		Next             string `json:"next"`
		Repairs          []struct {
			Action string `json:"action"`
		} `json:"repairs"`
		Steps []struct {
			Name     string `json:"name"`
			Status   string `json:"status"`
			Attempts []struct {
				Attempt int    `json:"attempt"`
				Status  string `json:"status"`
				Result  *struct {
					ExitCode        *int   `json:"exit_code"`
					StdoutDigest    string `json:"stdout_digest"`
					Stdout          string `json:"stdout"`
					BaseDigest      string `json:"base_digest"`
					ChangesetDigest string `json:"changeset_digest"`
					ResultDigest    string `json:"result_digest"`
					OpID            string `json:"op_id"`
					StageID         string `json:"stage_id"`
					Error           *struct {
						Code string `json:"code"`
					} `json:"error"`
					NotTransactional []string `json:"not_transactional"`
				} `json:"result"`
			} `json:"attempts"`
		} `json:"steps"`
	} `json:"run"`
	Error *struct {
		Code string `json:"code"`
	} `json:"error"`
}

func (e *flowEnv) flowJSON(extra []string, args ...string) (flowJSON, wtxResult) {
	e.t.Helper()
	r := e.run(extra, append([]string{"--json"}, args...)...)
	var f flowJSON
	if err := json.Unmarshal([]byte(r.stdout), &f); err != nil {
		e.t.Fatalf("wtx %v: not JSON (%v): exit %d\n%s\n%s", args, err, r.code, r.stdout, r.stderr)
	}
	return f, r
}

// results renders what a run recorded that must not depend on when or how
// often it was interrupted: per step, its final status, exit status,
// output digest, change-set digest and whether it made an op. The result
// digest is left out: on a backend with lazy base digests (overlay) a base
// entry the view never had to hash carries no digest, so a receipt's
// result digest depends on which files were hashed, not only on the tree
// (the final tree itself is compared byte for byte).
func (f flowJSON) results() string {
	var b strings.Builder
	for _, s := range f.Run.Steps {
		fmt.Fprintf(&b, "%s %s", s.Name, s.Status)
		if n := len(s.Attempts); n > 0 {
			if r := s.Attempts[n-1].Result; r != nil {
				code := "-"
				if r.ExitCode != nil {
					code = fmt.Sprint(*r.ExitCode)
				}
				fmt.Fprintf(&b, " exit=%s out=%s cs=%s op=%v", code, r.StdoutDigest, r.ChangesetDigest, r.OpID != "")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// opsOf returns the ids of the workspace's ops, from wtx log --json.
func (e *flowEnv) ops() map[string]bool {
	e.t.Helper()
	r := e.run(nil, "--json", "log")
	var out struct {
		Ops []struct {
			ID string `json:"op_id"`
		} `json:"ops"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		e.t.Fatalf("log --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	m := map[string]bool{}
	for _, o := range out.Ops {
		m[o.ID] = true
	}
	return m
}
