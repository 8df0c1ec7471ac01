package semantic

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// newCheckpointEnv makes a workspace for the per-step checkpoint tests:
// a text file of eight lines, a file and a directory for a command to
// remove, and a text file whose name is not UTF-8.
func newCheckpointEnv(t *testing.T, failpoints bool, env ...string) *lcEnv {
	t.Helper()
	base := t.TempDir()
	e := &lcEnv{t: t, bin: wtxtest.Binary(t, failpoints), ws: filepath.Join(base, "ws"), st: filepath.Join(base, "state"),
		marks: filepath.Join(base, "marks"), env: env}
	for _, d := range []string{e.ws, e.marks, filepath.Join(e.ws, "sub")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\n8\n", "k.txt": "k\n", "sub/s.txt": "s\n",
		"n\xff.txt": "n1\nn2\nn3\nn4\nn5\n"} {
		if err := os.WriteFile(filepath.Join(e.ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// beginStage opens an empty stage with backend; ok is false when the
// backend cannot stage here.
func beginStage(e *lcEnv, backend string) (string, bool) {
	e.t.Helper()
	r := e.run("--json", "begin", "--backend", backend)
	a := e.answer(r)
	if r.code != 0 {
		if a.Error.Code == "precondition.unsupported" || a.Error.Code == "precondition.confinement" {
			return "", false
		}
		e.t.Fatalf("begin --backend %s: exit %d: %s", backend, r.code, r.stdout)
	}
	return a.Tx, true
}

// checkCommandSteps returns what broke the per-step checkpoints of one
// stage on backend: drop-op of a command step must put back exactly what
// the view held before it (every kind of change, names not UTF-8), and
// rebase --merge must merge what a command changed with drift in the
// workspace.
func checkCommandSteps(e *lcEnv, backend string) (bad []string, ok bool) {
	e.t.Helper()
	before := wtxtest.MustSnapshot(e.t, e.ws)
	tx, ok := beginStage(e, backend)
	if !ok {
		return nil, false
	}
	// Step 1 writes a file and copies the view out as it leaves it.
	e.must("run", "--tx", tx, "--", "sh", "-c", `echo w > "$(printf 'w\377')"; cp -a . "$MARKS/step1"`)
	// Step 2 changes everything a command can.
	e.must("run", "--tx", tx, "--", "sh", "-c", `printf '1\ntwo\n3\n4\n5\n6\n7\n8\n' > a.txt; rm k.txt; rm -r sub
		mkdir nd; ln -s x nd/l; echo W2 > "$(printf 'w\377')"; printf 'N1\nn2\nn3\nn4\nn5\n' > "$(printf 'n\377.txt')"; chmod 600 a.txt`)
	r := e.run("--json", "drop-op", tx, "2")
	if r.code != 0 {
		bad = append(bad, fmt.Sprintf("drop-op of a command step: exit %d: %s %s", r.code, r.stdout, r.stderr))
	}
	e.must("run", "--tx", tx, "--", "sh", "-c", `cp -a . "$MARKS/after-drop"`)
	got := wtxtest.MustSnapshot(e.t, filepath.Join(e.marks, "after-drop"))
	want := wtxtest.MustSnapshot(e.t, filepath.Join(e.marks, "step1"))
	if withoutRoot(got) != withoutRoot(want) {
		bad = append(bad, fmt.Sprintf("after drop-op 2 the view is not what step 1 left:\n got: %q\nwant: %q", withoutRoot(got), withoutRoot(want)))
	}
	if wtxtest.MustSnapshot(e.t, e.ws) != before {
		bad = append(bad, "drop-op changed the workspace")
	}
	// Step 3 (now op 3: the copy above is op 2) edits two text files;
	// the workspace then changes other lines of both.
	e.must("run", "--tx", tx, "--", "sh", "-c", `printf '1\ntwo\n3\n4\n5\n6\n7\n8\n' > a.txt; printf 'N1\nn2\nn3\nn4\nn5\n' > "$(printf 'n\377.txt')"`)
	for name, content := range map[string]string{"a.txt": "1\n2\n3\n4\n5\n6\n7\neight\n", "n\xff.txt": "n1\nn2\nn3\nn4\nN5\n"} {
		if err := os.WriteFile(filepath.Join(e.ws, name), []byte(content), 0o644); err != nil {
			e.t.Fatal(err)
		}
	}
	if r := e.run("apply", tx); r.code != 2 {
		bad = append(bad, fmt.Sprintf("apply over drift: want a refusal, got exit %d: %s", r.code, r.stderr))
	}
	m := e.run("--json", "rebase", tx, "--merge")
	if m.code != 0 || !strings.Contains(m.stdout, `"a.txt"`) {
		bad = append(bad, fmt.Sprintf("rebase --merge of a command step's change: exit %d: %s %s", m.code, m.stdout, m.stderr))
		return bad, true
	}
	e.must("apply", tx)
	for name, content := range map[string]string{"a.txt": "1\ntwo\n3\n4\n5\n6\n7\neight\n", "n\xff.txt": "N1\nn2\nn3\nn4\nN5\n", "w\xff": "w\n", "k.txt": "k\n", "sub/s.txt": "s\n"} {
		if got, err := os.ReadFile(filepath.Join(e.ws, name)); err != nil || string(got) != content {
			bad = append(bad, fmt.Sprintf("%q after merge and apply: %q (%v), want %q", name, got, err, content))
		}
	}
	return bad, true
}

// TestW004_CommandStepsAreCheckpoints: every run in a stage keeps what its
// command changed and the original content, so drop-op drops a command
// step and rebase --merge merges what a command changed, on every backend
// that stages here.
func TestW004_CommandStepsAreCheckpoints(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"overlay", "copy"} {
		t.Run(backend, func(t *testing.T) {
			e := newCheckpointEnv(t, false)
			bad, ok := checkCommandSteps(e, backend)
			if !ok {
				t.Skipf("backend %s cannot stage here", backend)
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}

// TestW004_NegativeControlNoCheckpoint runs the same steps with the
// checkpoint switched off (runs record nothing path by path): drop-op and
// the merge must fail.
func TestW004_NegativeControlNoCheckpoint(t *testing.T) {
	t.Parallel()
	e := newCheckpointEnv(t, true, "WTX_DISABLE=run-checkpoint")
	bad, ok := checkCommandSteps(e, "copy")
	if !ok {
		t.Skip("backend copy cannot stage here")
	}
	t.Logf("negative control (checkpoints off): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with checkpoints switched off nothing broke: the check cannot fail")
	}
}
