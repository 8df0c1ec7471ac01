package semantic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// T-008: no flow action drops a stage that holds a person's review or
// edits; on drift it stops for a decision.

// reviewFlow is a flow whose one step changes a.txt's last line and adds
// b.txt, and stops for review.
const reviewFlow = `version = 1
[[steps]]
name = "gen"
kind = "run"
command = ["sh", "-c", "sed -i '$s/z/Z/' a.txt && echo new > b.txt"]
on_success = "review"
`

// reviewed starts a run of reviewFlow named name, then has a person add
// their own file to the step's stage; it returns the stage.
func reviewed(t *testing.T, e *flowEnv, name string) string {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("a\n\n\n\n\nz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, r := e.flowJSON(nil, "flow", "run", e.file(name+".toml", reviewFlow), "--name", name)
	if out.Run.Status != "review" || r.code != 0 {
		t.Fatalf("flow run: %s (exit %d)\n%s", out.Run.Status, r.code, r.stderr)
	}
	tx := out.Run.Steps[0].Attempts[0].Result.StageID
	c := e.cmd(nil, "write", "--tx", tx, "mine.txt")
	c.Stdin = strings.NewReader("the reviewer's own\n")
	if msg, err := c.CombinedOutput(); err != nil {
		t.Fatalf("the reviewer's write: %v\n%s", err, msg)
	}
	return tx
}

// stageHolds returns the stage's state and the paths of its change set.
func stageHolds(t *testing.T, e *flowEnv, tx string) (string, []string) {
	t.Helper()
	r := e.run(nil, "--json", "status", tx)
	var s struct {
		State   string `json:"state"`
		Changes []struct {
			Path string `json:"path"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &s); err != nil {
		t.Fatalf("status %s: %v\n%s%s", tx, err, r.stdout, r.stderr)
	}
	var paths []string
	for _, c := range s.Changes {
		paths = append(paths, c.Path)
	}
	slices.Sort(paths)
	return s.State, paths
}

// driftA changes a.txt's first line in the workspace: drift for the step's
// stage, which a three-way merge carries.
func driftA(t *testing.T, e *flowEnv) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("A\n\n\n\n\nz\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestT_008_ResumeOnDriftKeepsReviewedStage: a resume that meets drift
// while it applies a stage kept for review keeps the stage (the step's
// change and the reviewer's file) and stops the run as refused, with the
// refusal and its repairs (merge, drop: "restage") in flow show; after the person
// merges, a resume lands both. Negative control: WTX_DISABLE=
// flow-keep-reviewed, and the resume drops the stage with the reviewer's
// file in it.
func TestT_008_ResumeOnDriftKeepsReviewedStage(t *testing.T) {
	t.Parallel()
	e := newFlowEnv(t, false)
	tx := reviewed(t, e, "rv")
	driftA(t, e)
	out, r := e.flowJSON(nil, "flow", "resume", "rv")
	if out.Run.Status != "refused" || r.code != 1 {
		t.Fatalf("resume on drift: %s (exit %d); want refused, exit 1\n%s", out.Run.Status, r.code, r.stderr)
	}
	if state, paths := stageHolds(t, e, tx); state != "open" || !slices.Equal(paths, []string{"a.txt", "b.txt", "mine.txt"}) {
		t.Fatalf("after the refused resume the stage is %s holding %v; want open with a.txt, b.txt, mine.txt", state, paths)
	}
	show, _ := e.flowJSON(nil, "flow", "show", "rv")
	a := show.Run.Steps[0].Attempts
	if show.Run.Status != "refused" || len(a) != 1 || a[0].Status != "review" || a[0].Result.Error == nil || a[0].Result.Error.Code != "refusal.target-changed" {
		t.Fatalf("flow show after the refused resume: %+v", show.Run)
	}
	var actions []string
	for _, rp := range show.Run.Repairs {
		actions = append(actions, rp.Action)
	}
	for _, want := range []string{"merge", "restage", "resume", "abandon"} {
		if !slices.Contains(actions, want) {
			t.Errorf("flow show's repairs %v lack %s", actions, want)
		}
	}
	if r := e.run(nil, "rebase", tx, "--merge"); r.code != 0 {
		t.Fatalf("rebase --merge: %+v", r)
	}
	out, r = e.flowJSON(nil, "flow", "resume", "rv")
	if out.Run.Status != "done" || r.code != 0 {
		t.Fatalf("resume after the merge: %s (exit %d)\n%s", out.Run.Status, r.code, r.stderr)
	}
	for p, want := range map[string]string{"a.txt": "A\n\n\n\n\nZ\n", "b.txt": "new\n", "mine.txt": "the reviewer's own\n"} {
		if b, err := os.ReadFile(filepath.Join(e.ws, p)); err != nil || string(b) != want {
			t.Errorf("%s after the run: %q (%v), want %q", p, b, err, want)
		}
	}
	t.Run("negative-control", func(t *testing.T) {
		e := newFlowEnv(t, true, "WTX_DISABLE=flow-keep-reviewed")
		tx := reviewed(t, e, "nc")
		driftA(t, e)
		out, _ := e.flowJSON(nil, "flow", "resume", "nc")
		if state, _ := stageHolds(t, e, tx); out.Run.Status != "failed" || state != "dropped" {
			t.Errorf("with the protection off the resume left the run %s and the stage %s; want failed and dropped (the reviewer's file lost)", out.Run.Status, state)
		}
	})
}

// TestT_008_SkipAndAbandonKeepEdits: resume --skip and abandon refuse to
// drop a stage kept for review that holds the reviewer's edits
// (refusal.changed-since-review, nothing done); one holding only what its
// step left is dropped as before. Negative control: WTX_DISABLE=
// flow-keep-reviewed, and abandon drops the reviewer's edits.
func TestT_008_SkipAndAbandonKeepEdits(t *testing.T) {
	t.Parallel()
	e := newFlowEnv(t, false)
	tx := reviewed(t, e, "rv")
	for _, args := range [][]string{{"flow", "resume", "rv", "--skip"}, {"flow", "abandon", "rv"}} {
		out, r := e.flowJSON(nil, args...)
		if r.code != 2 || out.Error == nil || out.Error.Code != "refusal.changed-since-review" {
			t.Errorf("%v on a reviewed stage with edits: exit %d, %+v", args, r.code, out.Error)
		}
		if state, paths := stageHolds(t, e, tx); state != "open" || !slices.Contains(paths, "mine.txt") {
			t.Errorf("after %v the stage is %s holding %v", args, state, paths)
		}
	}
	if show, _ := e.flowJSON(nil, "flow", "show", "rv"); show.Run.Status != "review" {
		t.Errorf("the refused skip and abandon changed the run: %s", show.Run.Status)
	}
	t.Run("untouched", func(t *testing.T) {
		out, r := e.flowJSON(nil, "flow", "run", e.file("u.toml", reviewFlow), "--name", "u")
		tx := out.Run.Steps[0].Attempts[0].Result.StageID
		if out, r = e.flowJSON(nil, "flow", "abandon", "u"); r.code != 0 || out.Run.Status != "abandoned" {
			t.Fatalf("abandon of an untouched review: exit %d %+v", r.code, out)
		}
		if state, _ := stageHolds(t, e, tx); state != "dropped" {
			t.Errorf("abandon left the untouched review stage %s", state)
		}
	})
	t.Run("negative-control", func(t *testing.T) {
		e := newFlowEnv(t, true, "WTX_DISABLE=flow-keep-reviewed")
		tx := reviewed(t, e, "nc")
		if _, r := e.flowJSON(nil, "flow", "abandon", "nc"); r.code != 0 {
			t.Fatalf("abandon with the protection off: %+v", r)
		}
		if state, _ := stageHolds(t, e, tx); state != "dropped" {
			t.Errorf("with the protection off abandon left the stage %s; want it dropped, the reviewer's file with it", state)
		}
	})
}

// TestT_008_ProtectedEditKept: a reviewer's edit of a protected path in
// the stage makes the resume's apply refused as protected (the step does
// not approve): the stage is kept and the run stops with the approve
// repair; once the person applies it with approval, a resume records the
// step done.
func TestT_008_ProtectedEditKept(t *testing.T) {
	t.Parallel()
	e := newFlowEnv(t, false)
	tx := reviewed(t, e, "rv")
	c := e.cmd(nil, "write", "--tx", tx, ".wtx.toml")
	c.Stdin = strings.NewReader("protect = [\"b.txt\"]\n")
	if msg, err := c.CombinedOutput(); err != nil {
		t.Fatalf("the reviewer's write: %v\n%s", err, msg)
	}
	out, r := e.flowJSON(nil, "flow", "resume", "rv")
	if out.Run.Status != "refused" || r.code != 1 {
		t.Fatalf("resume with a protected edit: %s (exit %d)", out.Run.Status, r.code)
	}
	if state, paths := stageHolds(t, e, tx); state != "open" || !slices.Contains(paths, ".wtx.toml") {
		t.Fatalf("the stage is %s holding %v", state, paths)
	}
	approve := false
	for _, rp := range out.Run.Repairs {
		approve = approve || rp.Action == "approve"
	}
	if !approve {
		t.Errorf("no approve repair: %+v", out.Run.Repairs)
	}
	if r := e.run(nil, "apply", tx, "--approve"); r.code != 0 {
		t.Fatalf("apply --approve: %+v", r)
	}
	if out, r = e.flowJSON(nil, "flow", "resume", "rv"); out.Run.Status != "done" || r.code != 0 {
		t.Errorf("resume after the person applied: %s (exit %d)", out.Run.Status, r.code)
	}
}
