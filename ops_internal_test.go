package wtx

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestOpAgreesWithOps: Op reads only the op asked for and the chain of its
// undos, yet reports exactly what Ops (which reads every op) reports of it:
// which undos took its paths back, whether it is undone. Random histories
// of applies, whole and partial undos, and undos of undos: three of them,
// six with WTX_SOAK=1.
func TestOpAgreesWithOps(t *testing.T) {
	ctx := context.Background()
	// The comparison means something only if the histories hold undone
	// ops, partly undone ones, and undos that were undone.
	var undone, partly, undoneUndos, unnamed int
	defer func() {
		if !t.Failed() && (undone == 0 || partly == 0 || undoneUndos == 0 || unnamed == 0) {
			t.Errorf("histories too plain: %d undone, %d partly undone, %d undone undos, %d undos of no named op", undone, partly, undoneUndos, unnamed)
		}
	}()
	seeds := uint64(3)
	if os.Getenv("WTX_SOAK") == "1" {
		seeds = 6
	}
	for seed := uint64(1); seed <= seeds; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 9))
			ws, work := openFresh(t, ctx)
			checkLatestOp(t, ctx, ws) // no op at all
			for i := 0; i < 16; i++ {
				ops, err := ws.Ops(ctx)
				if err != nil {
					t.Fatal(err)
				}
				var live []*Op
				for _, op := range ops {
					if op.UndoneBy == "" {
						live = append(live, op)
					}
				}
				if len(live) == 0 || rng.IntN(3) == 0 {
					applyFiles(t, ctx, ws, work, i, 1+rng.IntN(3))
					continue
				}
				if rng.IntN(4) == 0 {
					// No op named: the newest apply not undone yet.
					want, lerr := ws.LatestOp(ctx, true)
					res, err := ws.UndoWith(ctx, "", UndoOptions{Newest: true})
					switch {
					case lerr != nil && !errors.Is(err, ErrNotFound):
						t.Fatalf("UndoWith(Newest) with no apply to undo (%v): %v, %v", lerr, res, err)
					case lerr == nil && err == nil && res.Undoes != want.ID:
						t.Fatalf("UndoWith(Newest) undid %s; the newest apply not undone is %s", res.Undoes, want.ID)
					case lerr == nil && err == nil:
						unnamed++
					}
					checkLatestOp(t, ctx, ws)
					continue
				}
				op := live[rng.IntN(len(live))]
				var opts UndoOptions
				if len(op.Written) > 1 && rng.IntN(2) == 0 {
					opts.Paths = []string{LiteralSelector(op.Written[rng.IntN(len(op.Written))])}
				}
				// A refusal (a later op wrote the path since) is part of
				// the history too.
				_, _ = ws.UndoWith(ctx, op.ID, opts)
				checkLatestOp(t, ctx, ws)
			}
			ops, err := ws.Ops(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ops) < 6 {
				t.Fatalf("only %d ops in the history", len(ops))
			}
			for _, want := range ops {
				switch {
				case want.UndoneBy != "" && want.Undoes != "":
					undoneUndos++
				case want.UndoneBy != "":
					undone++
				case len(want.PartlyUndoneBy) > 0:
					partly++
				}
				got, err := ws.Op(ctx, want.ID)
				if err != nil {
					t.Fatalf("Op(%s): %v", want.ID, err)
				}
				if got.UndoneBy != want.UndoneBy || !slices.Equal(got.PartlyUndoneBy, want.PartlyUndoneBy) {
					t.Errorf("Op(%s) says undone by %q, partly by %v; Ops says %q, %v",
						want.ID, got.UndoneBy, got.PartlyUndoneBy, want.UndoneBy, want.PartlyUndoneBy)
				}
				if got, err := ws.Op(ctx, want.ID[:len(want.ID)-3]); err == nil && got.ID != want.ID {
					t.Errorf("prefix of %s found %s", want.ID, got.ID)
				}
			}
		})
	}
}

// openFresh opens a new workspace with a state root of its own; it is
// closed when the test ends.
func openFresh(t *testing.T, ctx context.Context) (*Workspace, string) {
	t.Helper()
	work := t.TempDir()
	ws, err := Open(ctx, work, Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() }) // a close error says nothing of the test
	return ws, work
}

// checkLatestOp compares LatestOp, which reads the candidates only, with
// the newest op and the newest apply not wholly undone as Ops reports them.
func checkLatestOp(t *testing.T, ctx context.Context, ws *Workspace) {
	t.Helper()
	ops, err := ws.Ops(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, undoable := range []bool{false, true} {
		want := ""
		for i := len(ops) - 1; i >= 0 && want == ""; i-- {
			if !undoable || ops[i].Kind == "apply" && ops[i].UndoneBy == "" {
				want = ops[i].ID
			}
		}
		got, err := ws.LatestOp(ctx, undoable)
		switch {
		case want == "" && !errors.Is(err, ErrNotFound):
			t.Errorf("LatestOp(%v) = %v, %v; want not found", undoable, got, err)
		case want != "" && err != nil:
			t.Errorf("LatestOp(%v): %v; want %s", undoable, err, want)
		case want != "" && got.ID != want:
			t.Errorf("LatestOp(%v) = %s; want %s", undoable, got.ID, want)
		}
	}
}

// applyFiles stages and applies n changes (new files and rewrites of the
// files earlier rounds wrote) in round i.
func applyFiles(t *testing.T, ctx context.Context, ws *Workspace, work string, i, n int) {
	t.Helper()
	st, err := ws.Begin(ctx, BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	script := ""
	for k := 0; k < n; k++ {
		script += fmt.Sprintf("echo round %d >> f%d; ", i, (i+k)%5)
	}
	if res, err := st.Run(ctx, []string{"sh", "-c", script}, RunOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, %v", err, res)
	}
	if _, err := st.Apply(ctx, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(work, fmt.Sprintf("f%d", i%5))); err != nil {
		t.Fatal(err)
	}
}

// TestStatusListsItsStageOps: a stage's status names the ops that applied
// it, oldest first, and no op of another stage or an undo of no stage.
func TestStatusListsItsStageOps(t *testing.T) {
	ctx := context.Background()
	ws, work := openFresh(t, ctx)
	a, err := ws.Begin(ctx, BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Run(ctx, []string{"sh", "-c", "echo x > a1; echo y > a2"}, RunOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, %v", err, res)
	}
	var want []string
	for i, sel := range []string{"a1", "a2"} {
		res, err := a.Apply(ctx, ApplyOptions{Paths: []string{LiteralSelector(sel)}})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, res.OpID)
		if i == 0 {
			applyFiles(t, ctx, ws, work, 1, 2) // another stage's op between
			last, err := ws.LatestOp(ctx, true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := ws.Undo(ctx, last.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	st, err := a.Status(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.Ops, want) {
		t.Fatalf("status ops = %v, want %v", st.Ops, want)
	}
}

// TestUndoNamesItsOp: an empty op name is no name. Only Newest takes back
// the newest apply, and it takes no name besides.
func TestUndoNamesItsOp(t *testing.T) {
	ctx := context.Background()
	ws, work := openFresh(t, ctx)
	if _, err := ws.UndoWith(ctx, "", UndoOptions{Newest: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("newest undo with no op at all: %v; want not found", err)
	}
	applyFiles(t, ctx, ws, work, 0, 1)
	op, err := ws.LatestOp(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ws.UndoWith(ctx, "", UndoOptions{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("undo of op \"\": %v, %v; want not found", res, err)
	}
	if res, err := ws.UndoWith(ctx, op.ID, UndoOptions{Newest: true}); err == nil || AsError(err).Code != CodeUsage {
		t.Fatalf("newest undo naming %s: %v, %v; want %s", op.ID, res, err, CodeUsage)
	}
	if got, err := ws.LatestOp(ctx, true); err != nil || got.ID != op.ID {
		t.Fatalf("after the refusals the newest apply is %v, %v; want %s untouched", got, err, op.ID)
	}
	res, err := ws.UndoWith(ctx, "", UndoOptions{Newest: true})
	if err != nil || res.Undoes != op.ID {
		t.Fatalf("newest undo: %v, %v; want it to undo %s", res, err, op.ID)
	}
	if _, err := ws.UndoWith(ctx, "", UndoOptions{Newest: true}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("newest undo with every apply undone: %v; want not found", err)
	}
}
