package semantic

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// bindAlias returns a command prefix under which alias is a bind mount of
// ws (in a private mount namespace, through a user namespace so that an
// ordinary user can do it), or skips the test where that cannot be done.
func bindAlias(t *testing.T, ws, alias string) []string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare: cannot make a bind mount here")
	}
	if out, err := exec.Command(unshare, "-rm", "--propagation", "slave", "sh", "-c", `mount --bind "$0" "$1"`, ws, alias).CombinedOutput(); err != nil {
		t.Skipf("no user and mount namespace for a bind mount here (%v: %s)", err, out)
	}
	return []string{unshare, "-rm", "--propagation", "slave", "sh", "-c", `mount --bind "$0" "$1" && shift && exec "$@"`, ws, alias}
}

// listStages returns the ids of the stages wtx list --json shows.
func listStages(t *testing.T, r wtxResult) []string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("wtx list: %v", r)
	}
	var out struct {
		Stages []struct {
			ID string `json:"tx"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("wtx list --json: %v\n%s", err, r.stdout)
	}
	var ids []string
	for _, s := range out.Stages {
		ids = append(ids, s.ID)
	}
	return ids
}

// checkOneWorkspace checks I-006 for a second way into e.ws (alias, run
// under prefix): it shows the same stages, and an apply killed through it
// is found and rolled back through the workspace's own path, which then
// applies the stage.
func checkOneWorkspace(t *testing.T, e *stateEnv, alias string, prefix []string, disable bool) (sameStages, recovered bool) {
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	if disable {
		fp.env = []string{"WTX_DISABLE=identity"}
	}
	tx := fp.stageVia(e.ws)
	ids := listStages(t, fp.runIn(alias, prefix, "--json", "list"))
	sameStages = len(ids) == 1 && ids[0] == tx
	killed := fp
	killed.env = append(append([]string{}, fp.env...), "WTX_FAILPOINT=apply:exchanged")
	r := killed.runIn(alias, prefix, "apply", tx)
	if r.code == 0 {
		return sameStages, false // through the alias there was nothing of it to apply
	}
	r = fp.runIn(e.ws, nil, "--json", "recover")
	var out struct {
		Recover struct {
			RolledBack []string `json:"rolled_back"`
		} `json:"recover"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil {
		t.Fatalf("recover through the workspace's path: %v", r)
	}
	if b, err := os.ReadFile(filepath.Join(e.ws, "a.txt")); err != nil || string(b) != "a\n" {
		return sameStages, false
	}
	if temps, _ := filepath.Glob(filepath.Join(e.ws, ".wtx-tmp-*")); len(temps) > 0 {
		return sameStages, false
	}
	if r := fp.runIn(e.ws, nil, "apply", tx); r.code != 0 {
		t.Fatalf("apply after recovery: %v", r)
	}
	return sameStages, len(out.Recover.RolledBack) == 1
}

// stageVia stages a change in the workspace at ws and returns the stage id.
func (e *stateEnv) stageVia(ws string) string {
	e.t.Helper()
	r := e.runIn(ws, nil, "--json", "run", "--backend", "copy", "--", "sh", "-c", "echo new > a.txt; echo b > b.txt")
	var out struct {
		Tx string `json:"tx"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Tx == "" {
		e.t.Fatalf("wtx run: %v", r)
	}
	return out.Tx
}

// TestI006_BindMount checks I-006: the workspace reached through a bind
// mount is the same workspace: same stages, one lock, one journal (an
// apply interrupted through the mount is recovered through the original
// path). The negative control (identity by path only) must fail it.
func TestI006_BindMount(t *testing.T) {
	t.Parallel()
	for _, disable := range []bool{false, true} {
		name := "identity"
		if disable {
			name = "negative-control"
		}
		t.Run(name, func(t *testing.T) {
			e := newStateEnv(t)
			alias := filepath.Join(filepath.Dir(e.ws), "alias")
			if err := os.Mkdir(alias, 0o755); err != nil {
				t.Fatal(err)
			}
			prefix := bindAlias(t, e.ws, alias)
			same, recovered := checkOneWorkspace(t, e, alias, prefix, disable)
			if disable {
				if same || recovered {
					t.Fatalf("negative control: with identity by path only the bind mount still shared the workspace (stages %v, recovered %v): the test cannot fail", same, recovered)
				}
				return
			}
			if !same {
				t.Error("the bind mount does not show the workspace's stage")
			}
			if !recovered {
				t.Error("an apply interrupted through the bind mount was not recovered through the workspace's path")
			}
		})
	}
}

// TestI006_Symlink checks I-006 through a symbolic link to the workspace.
func TestI006_Symlink(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	link := filepath.Join(filepath.Dir(e.ws), "link")
	if err := os.Symlink(e.ws, link); err != nil {
		t.Fatal(err)
	}
	same, recovered := checkOneWorkspace(t, e, link, nil, false)
	if !same || !recovered {
		t.Errorf("through a symlink: same stages %v, recovered %v", same, recovered)
	}
}

// TestI006_BindMountOverlay checks I-006 for a stage on the overlay
// backend: opened through the workspace's own path, it is shown, diffed
// and applied through a bind mount of the workspace as through the path it
// was opened by. The negative control (identity by path only) must fail it.
func TestI006_BindMountOverlay(t *testing.T) {
	t.Parallel()
	for _, disable := range []bool{false, true} {
		name := "identity"
		if disable {
			name = "negative-control"
		}
		t.Run(name, func(t *testing.T) {
			e := newStateEnv(t)
			fp := *e
			fp.bin = wtxtest.Binary(t, true)
			if disable {
				fp.env = []string{"WTX_DISABLE=identity"}
			}
			r := fp.runIn(e.ws, nil, "--json", "run", "--backend", "overlay", "--", "sh", "-c", "echo new > a.txt; echo b > b.txt")
			var out struct {
				Tx string `json:"tx"`
			}
			if r.code != 0 || json.Unmarshal([]byte(r.stdout), &out) != nil || out.Tx == "" {
				t.Skipf("no overlay stage here: %v", r)
			}
			alias := filepath.Join(filepath.Dir(e.ws), "alias")
			if err := os.Mkdir(alias, 0o755); err != nil {
				t.Fatal(err)
			}
			prefix := bindAlias(t, e.ws, alias)
			var failed []string
			if r := fp.runIn(alias, prefix, "status", out.Tx); r.code != 0 {
				failed = append(failed, "status: "+r.stderr)
			}
			if r := fp.runIn(alias, prefix, "diff", out.Tx); r.code != 0 {
				failed = append(failed, "diff: "+r.stderr)
			}
			if r := fp.runIn(alias, prefix, "apply", out.Tx); r.code != 0 {
				failed = append(failed, "apply: "+r.stderr)
			}
			b, _ := os.ReadFile(filepath.Join(e.ws, "a.txt"))
			applied := string(b) == "new\n"
			if disable {
				if len(failed) == 0 || applied {
					t.Fatal("negative control: with identity by path only the overlay stage was still the bind mount's: the test cannot fail")
				}
				return
			}
			for _, f := range failed {
				t.Errorf("through a bind mount of the workspace, %s", f)
			}
			if !applied {
				t.Errorf("a.txt after an apply through the bind mount: %q, want %q", b, "new\n")
			}
		})
	}
}
