package wtx

import (
	"context"
	"errors"
	"fmt"

	"github.com/wtx-dev/wtx/internal/quote"
)

// RebaseTrial says whether a rebase of the stage would carry every drifted
// path, found by doing it: the edits are re-run and the merges made on the
// workspace's current content, in memory, and nothing is written.
type RebaseTrial struct {
	// Drifted is set when some changed path of the stage drifted at all.
	Drifted bool
	// Rebase is set when a plain rebase succeeds; Merge when a rebase with
	// merge does (three-way merges where edits cannot be re-run).
	Rebase, Merge bool
	// Result is what the successful rebase would do.
	Result *RebaseResult
	// Refusal is why the rebase with merge fails, when neither succeeds.
	Refusal *Error
	// Conflicted are the paths the rebase with merge would leave with
	// conflict markers.
	Conflicted []string
}

// TryRebase tries a rebase, then a rebase with merge, without changing
// anything.
func (s *Stage) TryRebase(ctx context.Context) (*RebaseTrial, error) {
	st, err := s.Status(ctx, nil)
	if err != nil {
		return nil, err
	}
	t := &RebaseTrial{Drifted: len(st.Drift) > 0}
	if !t.Drifted {
		return t, nil
	}
	for _, merge := range []bool{false, true} {
		res, err := s.rebase(ctx, merge, true)
		var e *Error
		switch {
		case err == nil && !merge:
			t.Rebase, t.Result = true, res
		case err == nil:
			t.Merge, t.Conflicted = true, res.Conflicted
			if t.Result == nil {
				t.Result = res
			}
		case errors.As(err, &e) && e.Code == CodeTargetChanged:
			t.Refusal = e
		default:
			return nil, err
		}
	}
	return t, nil
}

// OfferRebase adds to a refusal (refusal.target-changed, or
// refusal.stale-read) of an apply of
// the stage the rebase that repairs its drift, when trying it succeeds:
// "rebase" and "merge" (rebase --merge), each offered only if its trial
// succeeds. A rebase repair the refusal offered without
// trying is taken out (it would have been a guess). Any other error is
// returned as it is. The trial runs after the refusal, outside the apply:
// the workspace can move in between, and the rebase itself checks again.
func (s *Stage) OfferRebase(ctx context.Context, err error) error {
	var e *Error
	if !errors.As(err, &e) || (e.Code != CodeTargetChanged && e.Code != CodeStaleRead) {
		return err
	}
	out := *e
	out.Repairs = nil
	for _, r := range e.Repairs {
		if r.Action != "rebase" && r.Action != "merge" {
			out.Repairs = append(out.Repairs, r)
		}
	}
	t, terr := s.TryRebase(ctx)
	if terr != nil || !t.Drifted || (!t.Rebase && !t.Merge) {
		return &out
	}
	var tried []Repair
	if t.Rebase {
		tried = append(tried, Repair{Action: "rebase", Detail: "carry the stage's edits onto the workspace's current content (tried: it succeeds), then apply again",
			Command: "wtx rebase " + s.ID()})
	}
	if t.Merge {
		detail := "merge the workspace's changes and the stage's three-way where edits cannot be re-run (tried: it succeeds), then apply again"
		if n := len(t.Conflicted); n > 0 {
			detail = fmt.Sprintf("merge the workspace's changes and the stage's three-way (tried: %d path(s) get conflict markers where both changed the same lines, first %s; resolve them, then apply again)", n, quote.Path(t.Conflicted[0]))
		}
		tried = append(tried, Repair{Action: "merge", Detail: detail, Command: "wtx rebase " + s.ID() + " --merge"})
	}
	out.Repairs = append(tried, out.Repairs...)
	return &out
}
