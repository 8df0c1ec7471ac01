package semantic

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// rootModeAnswer is the part of a run's or status's JSON answer this
// test reads.
type rootModeAnswer struct {
	Tx             string `json:"tx"`
	State          string `json:"state"`
	Settled        bool   `json:"settled"`
	RootModeChange *struct {
		Was    string `json:"was"`
		Now    string `json:"now"`
		Notice string `json:"notice"`
	} `json:"root_mode_change"`
}

const rootModeNotice = "the command changed the mode of the workspace root (0755 → 0700); wtx does not apply changes to the root itself"

// TestS_STAGE_003_RootModeChangeReported checks that a chmod of the
// workspace root inside a stage is not lost silently: wtx does not apply a
// change to the root itself, so the run summary, 'status' and their JSON
// say so, and the run keeps its stage open instead of settling it as
// empty. A run that leaves the root alone says nothing of it and settles
// empty. The workspace root keeps its mode.
func TestS_STAGE_003_RootModeChangeReported(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			e := newLCEnv(t, false)
			if err := os.Chmod(e.ws, 0o755); err != nil {
				t.Fatal(err)
			}
			if r := e.run("--json", "run", "--backend", backend, "--", "true"); r.code != 0 {
				t.Skipf("the %s backend cannot stage here: %s", backend, strings.TrimSpace(r.stdout+r.stderr))
			}
			// Control: no chmod, no notice, and the empty run settles.
			var quiet rootModeAnswer
			r := e.must("--json", "run", "--backend", backend, "--", "sh", "-c", "chmod 755 .")
			decodeAnswer(t, r, &quiet)
			if quiet.RootModeChange != nil || !quiet.Settled {
				t.Errorf("a run that leaves the root's mode alone: root_mode_change %+v, settled %v; want none, settled", quiet.RootModeChange, quiet.Settled)
			}
			// The human summary.
			r = e.must("run", "--backend", backend, "--name", "human", "--", "sh", "-c", "chmod 700 .")
			if !strings.Contains(r.stderr, "wtx: "+rootModeNotice) || strings.Contains(r.stderr, "changed nothing") {
				t.Errorf("run summary lacks the notice (or says it changed nothing):\n%s", r.stderr)
			}
			if st := e.must("status", "human"); !strings.Contains(st.stdout, rootModeNotice) {
				t.Errorf("status lacks the notice:\n%s", st.stdout)
			}
			// The JSON of run and status.
			var run, st rootModeAnswer
			decodeAnswer(t, e.must("--json", "run", "--backend", backend, "--", "sh", "-c", "chmod 700 ."), &run)
			decodeAnswer(t, e.must("--json", "status", run.Tx), &st)
			for what, a := range map[string]rootModeAnswer{"run": run, "status": st} {
				if a.RootModeChange == nil || a.RootModeChange.Was != "0755" || a.RootModeChange.Now != "0700" || a.RootModeChange.Notice != rootModeNotice {
					t.Errorf("%s JSON: root_mode_change %+v; want 0755 → 0700 with the notice", what, a.RootModeChange)
				}
				if a.State != "open" || a.Settled {
					t.Errorf("%s JSON: state %q, settled %v; want open, not settled", what, a.State, a.Settled)
				}
			}
			if fi, err := os.Stat(e.ws); err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("workspace root after the runs: %v, %v; want 0755 (wtx does not apply it)", fi.Mode(), err)
			}
		})
	}
}

// TestS_STAGE_003_RootModeNegativeControl switches the check off
// (WTX_DISABLE=root-mode, failpoint build): the chmod is lost silently —
// the run says it changed nothing and settles the stage as empty — which
// the test above would see.
func TestS_STAGE_003_RootModeNegativeControl(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, true, "WTX_DISABLE=root-mode")
	if err := os.Chmod(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var a rootModeAnswer
	decodeAnswer(t, e.must("--json", "run", "--backend", "copy", "--", "sh", "-c", "chmod 700 ."), &a)
	if a.RootModeChange != nil || !a.Settled {
		t.Errorf("with the check off: root_mode_change %+v, settled %v; want none and settled (the loss the check reports)", a.RootModeChange, a.Settled)
	}
}

func decodeAnswer(t *testing.T, r wtxResult, out any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		t.Fatalf("not one JSON answer (exit %d): %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
}
