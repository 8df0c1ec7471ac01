package wtx

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// TestAuthorityTableIsComplete: every actor has a verdict for every
// action, an unknown actor or action is refused, and the table keeps the
// shape T-003 gives it: a person may do anything (protected writes when
// approving); an actor that may not apply may not write protected paths
// either; a received change set does nothing by itself.
func TestAuthorityTableIsComplete(t *testing.T) {
	for a := range actorNames {
		row, ok := authorityTable[Actor(a)]
		if !ok {
			t.Fatalf("actor %s has no row", Actor(a))
		}
		for act := ActionStage; act <= ActionLand; act++ {
			v, ok := row[act]
			if !ok || v < Refused || v > WithApproval {
				t.Errorf("%s × %s: no verdict (%v)", Actor(a), act, v)
			}
		}
		if VerdictOf(Actor(a), ActionApply) == Refused && VerdictOf(Actor(a), ActionWriteProtected) != Refused {
			t.Errorf("%s may not apply, yet may write protected paths", Actor(a))
		}
	}
	for act := ActionStage; act <= ActionLand; act++ {
		want := Allowed
		if act == ActionWriteProtected {
			want = WithApproval
		}
		if v := VerdictOf(ActorPerson, act); v != want {
			t.Errorf("person × %s = %v, want %v", act, v, want)
		}
		if v := VerdictOf(ActorReceived, act); v != Refused {
			t.Errorf("received × %s = %v, want refused", act, v)
		}
	}
	if VerdictOf(Actor(200), ActionApply) != Refused || VerdictOf(ActorPerson, Action(200)) != Refused {
		t.Error("an unknown actor or action is not refused")
	}
}

// TestAuthorityTableInDocs: the table docs/design.md shows is the one the
// code enforces, cell by cell.
func TestAuthorityTableInDocs(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := authorityMarkdown(); !strings.Contains(string(data), want) {
		t.Fatalf("docs/design.md does not hold the authority table the code enforces; it should hold:\n%s", want)
	}
}

// gateModel is what T-003 says, written apart from the table: who may
// write a protected path, given whether the call approves; and who may
// apply at all.
func gateModel(a Actor, approve bool) (mayApply, mayProtected bool) {
	switch a {
	case ActorPerson, ActorApprovingAgent:
		return true, approve
	case ActorAgent:
		return true, false
	}
	return false, false
}

// modelOp is an op as the model knows it: what it wrote (before, after),
// and the protect selectors of its stage.
type modelOp struct {
	id, undoes string
	old, new   map[string]string
	protect    []string
}

// TestT_003_GateAgainstModel drives random histories of applies, undos and
// undos of undos by a person, an agent, an approving agent and a
// propose-only agent, each approving or not, with random protect selectors,
// and checks every outcome, the workspace and every receipt against a
// plain model of the gate: a call is refused as protected exactly when a
// path it would write is protected (by its stage's selectors, .git or the
// project file) and its actor may not write it. Its negative control runs
// the same histories against a model in which an agent may approve: they
// must disagree somewhere. (In a failpoint build, WTX_DISABLE=authority
// or receipt-protected makes the real gate disagree with the true model.)
func TestT_003_GateAgainstModel(t *testing.T) {
	var mu sync.Mutex
	stats := map[string]int{}
	t.Run("model", func(t *testing.T) {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				own := map[string]int{}
				if bad := gateHistory(t, seed, gateModel, own); bad != "" {
					t.Fatalf("seed %d: %s", seed, bad)
				}
				mu.Lock()
				defer mu.Unlock()
				for k, n := range own {
					stats[k] += n
				}
			})
		}
	})
	if t.Failed() {
		return
	}
	if stats[CodeProtected] == 0 || stats["undo of undo"] == 0 || stats["ok"] == 0 {
		t.Errorf("histories too plain: %v", stats)
	}
	lax := func(a Actor, approve bool) (bool, bool) {
		mayApply, mayProt := gateModel(a, approve)
		return mayApply, mayProt || a == ActorAgent && approve
	}
	for seed := uint64(1); seed <= 4; seed++ {
		if gateHistory(t, seed, lax, map[string]int{}) != "" {
			return
		}
	}
	t.Fatal("control: a model in which agents approve agreed with the gate on every history: the check cannot fail")
}

// gateHistory runs one random history and returns the first disagreement
// with model, or "".
func gateHistory(t *testing.T, seed uint64, model func(Actor, bool) (bool, bool), stats map[string]int) string {
	t.Helper()
	ctx := context.Background()
	paths := []string{"a.txt", "conf/k", "src/x", ".git/hooks/h", ProjectFileName}
	selectors := []string{"conf", "src/x", "a.txt"}
	actors := []Actor{ActorPerson, ActorAgent, ActorApprovingAgent, ActorProposingAgent}
	rng := rand.New(rand.NewPCG(seed, 3))
	work, state := t.TempDir(), t.TempDir()
	cur := map[string]string{}
	for _, p := range paths {
		cur[p] = "# init\n"
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(cur[p]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	handles := map[Actor]*Workspace{}
	for _, a := range actors {
		ws, err := Open(ctx, work, Options{StateDir: state, Actor: a})
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		handles[a] = ws
	}
	var ops []*modelOp
	undoneBy := map[string]string{}
	for i := 0; i < 24; i++ {
		a, approve := actors[rng.IntN(len(actors))], rng.IntN(2) == 0
		var got, want string
		var op *modelOp
		var rc *Receipt
		if len(ops) == 0 || rng.IntN(2) == 0 {
			op = &modelOp{old: map[string]string{}, new: map[string]string{}}
			for _, s := range selectors {
				if rng.IntN(3) == 0 {
					op.protect = append(op.protect, s)
				}
			}
			for _, p := range paths {
				if rng.IntN(2) == 0 || p == paths[len(paths)-1] && len(op.new) == 0 {
					op.old[p], op.new[p] = cur[p], fmt.Sprintf("# %d %d\n", seed, i)
				}
			}
			want = modelApply(model, a, approve, op)
			got, op.id, rc = realApply(t, ctx, handles[a], op, approve)
		} else {
			x := ops[rng.IntN(len(ops))]
			op, want = modelUndo(model, a, approve, x, cur, undoneBy)
			res, err := handles[a].UndoWith(ctx, x.id, UndoOptions{Approve: approve})
			switch got = codeOf(err); {
			case err == nil && res.OpID == "":
				got = "nothing"
			case err == nil:
				op.id, rc = res.OpID, res.Receipt
				if x.undoes != "" {
					stats["undo of undo"]++
				}
			}
		}
		stats[got]++
		if got != want {
			return fmt.Sprintf("step %d: %s (approve %v): got %s, the model says %s", i, a, approve, got, want)
		}
		if got != "ok" {
			continue
		}
		for p, v := range op.new {
			cur[p] = v
		}
		ops = append(ops, op)
		undoneBy = modelUndone(ops)
		_, mayProt := model(a, true)
		if bad := checkReceipt(rc, a, approve && mayProt, op); bad != "" {
			return fmt.Sprintf("step %d: %s", i, bad)
		}
		checkTree(t, i, work, cur)
	}
	return ""
}

// modelUndone says which ops are undone, and by which undo: newest first,
// an undo that is not itself undone takes back its target (an undo of an
// undo makes the op it took back live again).
func modelUndone(ops []*modelOp) map[string]string {
	by := map[string]string{}
	for i := len(ops) - 1; i >= 0; i-- {
		u := ops[i]
		if u.undoes != "" && by[u.id] == "" && by[u.undoes] == "" {
			by[u.undoes] = u.id
		}
	}
	return by
}

// modelProtected is whether p is protected under a stage's selectors.
func modelProtected(p string, protect []string) bool {
	for _, s := range protect {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return strings.HasPrefix(p, ".git/") || p == ProjectFileName
}

func modelApply(model func(Actor, bool) (bool, bool), a Actor, approve bool, op *modelOp) string {
	mayApply, mayProt := model(a, approve)
	if !mayApply {
		return CodeNotPermitted
	}
	for p := range op.new {
		if modelProtected(p, op.protect) && !mayProt {
			return CodeProtected
		}
	}
	return "ok"
}

// modelUndo is what an undo of x should do; on success, the op it makes.
func modelUndo(model func(Actor, bool) (bool, bool), a Actor, approve bool, x *modelOp, cur map[string]string, undoneBy map[string]string) (*modelOp, string) {
	mayApply, mayProt := model(a, approve)
	u := &modelOp{undoes: x.id, old: map[string]string{}, new: map[string]string{}, protect: x.protect}
	switch {
	case !mayApply:
		return u, CodeNotPermitted
	case undoneBy[x.id] != "":
		return u, CodeAlreadyUndone
	}
	changed := false
	for p := range x.new {
		if cur[p] != x.old[p] {
			u.old[p], u.new[p] = cur[p], x.old[p]
			if modelProtected(p, x.protect) && !mayProt {
				return u, CodeProtected
			}
		}
		changed = changed || cur[p] != x.new[p] && cur[p] != x.old[p]
	}
	switch {
	case changed:
		return u, CodeTargetChanged
	case len(u.new) == 0:
		return u, "nothing"
	}
	return u, "ok"
}

// realApply stages op's writes in a new stage of ws and applies it.
func realApply(t *testing.T, ctx context.Context, ws *Workspace, op *modelOp, approve bool) (string, string, *Receipt) {
	t.Helper()
	st, err := ws.Begin(ctx, BeginOptions{Backend: "copy", Protect: op.protect})
	if err != nil {
		t.Fatalf("begin as %s: %v", ws.Actor(), err)
	}
	for p, v := range op.new {
		if _, err := st.Write(ctx, p, []byte(v), WriteOptions{}); err != nil {
			t.Fatalf("write %s: %v", p, err)
		}
	}
	res, err := st.Apply(ctx, ApplyOptions{Approve: approve})
	if err != nil {
		return codeOf(err), "", nil
	}
	return "ok", res.OpID, res.Receipt
}

func codeOf(err error) string {
	if err == nil {
		return "ok"
	}
	return AsError(err).Code
}

// checkReceipt compares an op's receipt with what the model says it
// records; "" when it agrees.
func checkReceipt(rc *Receipt, a Actor, approved bool, op *modelOp) string {
	n := 0
	for p := range op.new {
		if modelProtected(p, op.protect) {
			n++
		}
	}
	if rc == nil || rc.ProtectedPaths != n || rc.Approved != approved || rc.Actor != a.String() {
		return fmt.Sprintf("receipt %+v; want protected_paths %d, approved %v, actor %s", rc, n, approved, a)
	}
	return ""
}

func checkTree(t *testing.T, step int, work string, cur map[string]string) {
	t.Helper()
	keys := make([]string, 0, len(cur))
	for p := range cur {
		keys = append(keys, p)
	}
	slices.Sort(keys)
	for _, p := range keys {
		data, err := os.ReadFile(filepath.Join(work, p))
		if err != nil || string(data) != cur[p] {
			t.Fatalf("step %d: %s holds %q (%v), the model says %q", step, p, data, err, cur[p])
		}
	}
}

// TestT_003_UndoOfAnOpWhoseStageIsGone: an undo judges protected paths by
// the protect selectors of the op's stage; when that stage's record is gone
// (only damage removes one) nothing says what was protected, so every path
// the undo writes needs approval: an agent's undo is refused, a person's
// needs --approve. (With the record gone, the undo's own op cannot be
// recorded either; fsck reports that damage.)
func TestT_003_UndoOfAnOpWhoseStageIsGone(t *testing.T) {
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	person, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer person.Close()
	st, err := person.Begin(ctx, BeginOptions{Backend: "copy", Protect: []string{"conf"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(ctx, "conf/k", []byte("k\n"), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	ar, err := st.Apply(ctx, ApplyOptions{Approve: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite", filepath.Join(state, "wtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"PRAGMA foreign_keys=OFF", "DELETE FROM stages WHERE id = '" + st.ID() + "'"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close()
	raw.Close()
	agent, err := Open(ctx, work, Options{StateDir: state, Actor: ActorAgent})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	for _, c := range []struct {
		ws      *Workspace
		approve bool
		want    string
	}{{agent, true, CodeProtected}, {agent, false, CodeProtected}, {person, false, CodeProtected}} {
		_, err := c.ws.UndoWith(ctx, ar.OpID, UndoOptions{Approve: c.approve})
		if got := codeOf(err); got != c.want {
			t.Fatalf("undo by %s (approve %v) of an op whose stage is gone: %v, want %s", c.ws.Actor(), c.approve, err, c.want)
		}
		if e := AsError(err); err != nil && (len(e.Conflicts) == 0 || !strings.Contains(e.Conflicts[0].Detail, "gone")) {
			t.Fatalf("the refusal should say the stage's record is gone: %+v", e.Conflicts)
		}
	}
}
