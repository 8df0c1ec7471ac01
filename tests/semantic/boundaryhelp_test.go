package semantic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// boundaryEnv is a stateEnv whose wtx is also on the PATH of the commands
// it runs, as "wtx" (for wtx called inside a stage), with a directory out
// beside the workspace where those commands leave their answers.
type boundaryEnv struct {
	*stateEnv
	out     string
	backend string
}

// newBoundaryEnv makes the environment for backend; failpoints selects the
// build whose protections a negative control can switch off. It skips when
// the backend cannot stage here.
func newBoundaryEnv(t *testing.T, backend string, failpoints bool) *boundaryEnv {
	t.Helper()
	return newBoundaryEnvIn(t, "", backend, failpoints)
}

// newBoundaryEnvIn is newBoundaryEnv with the workspace, the state root and
// the rest in base (a new temporary directory when "").
func newBoundaryEnvIn(t *testing.T, base, backend string, failpoints bool) *boundaryEnv {
	t.Helper()
	st := newStateEnv(t)
	if base != "" {
		st.ws, st.st = filepath.Join(base, "ws"), filepath.Join(base, "state")
		mustWrite(t, filepath.Join(st.ws, "a.txt"), "a\n")
	}
	e := &boundaryEnv{stateEnv: st, backend: backend}
	e.bin = wtxtest.Binary(t, failpoints)
	base = filepath.Dir(e.ws)
	bin := filepath.Join(base, "bin")
	e.out = filepath.Join(base, "out")
	for _, d := range []string{bin, e.out} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(e.bin, filepath.Join(bin, "wtx")); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "OUT="+e.out)
	if r := e.run("--json", "begin", "--backend", backend, "--name", "probe"); r.code != 0 {
		t.Skipf("the %s backend cannot stage here: %s", backend, strings.TrimSpace(r.stdout+r.stderr))
	}
	e.must("drop", "probe")
	return e
}

// answer reads the --json answer a command inside a stage left in out.
func (e *boundaryEnv) answer(name string) (code string, exit string) {
	e.t.Helper()
	raw, err := os.ReadFile(filepath.Join(e.out, name+".json"))
	if err != nil {
		e.t.Fatalf("no answer %s: %v", name, err)
	}
	var got wtxJSON
	if err := json.Unmarshal(raw, &got); err != nil {
		e.t.Fatalf("answer %s is not one JSON object: %v\n%s", name, err, raw)
	}
	rc, _ := os.ReadFile(filepath.Join(e.out, name+".rc"))
	return got.Error.Code, strings.TrimSpace(string(rc))
}

// runJSON runs wtx --json ARGS, wants exit 0, and decodes the answer.
func (e *boundaryEnv) runJSON(v any, args ...string) {
	e.t.Helper()
	r := e.must(append([]string{"--json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		e.t.Fatalf("wtx %v: %v\n%s", args, err, r.stdout)
	}
}

// stageState returns the state of stage tx.
func (e *boundaryEnv) stageState(tx string) string {
	e.t.Helper()
	var st struct {
		State string `json:"state"`
	}
	e.runJSON(&st, "status", tx)
	return st.State
}

// changedPaths returns the paths of stage tx's change set.
func (e *boundaryEnv) changedPaths(tx string) []string {
	e.t.Helper()
	var st struct {
		Changes []struct {
			Path string `json:"path"`
		} `json:"changes"`
	}
	e.runJSON(&st, "diff", tx, "--name-status")
	var out []string
	for _, c := range st.Changes {
		out = append(out, c.Path)
	}
	return out
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// inner is a shell line that runs wtx --json ARGS inside a stage and
// leaves its answer and exit status in $OUT/name.json and $OUT/name.rc.
func inner(name, args string) string {
	return `wtx --json ` + args + ` >"$OUT/` + name + `.json"; echo $? >"$OUT/` + name + `.rc"; `
}
