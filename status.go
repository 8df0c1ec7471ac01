package wtx

import (
	"context"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"time"
)

// Status describes one stage.
type Status struct {
	Tx    string `json:"tx"`
	Name  string `json:"name,omitempty"`
	State string `json:"state"`
	// Running is set while a command run in the stage holds it (L-001);
	// Run says which wtx process started it and when, where recorded.
	Running bool          `json:"running"`
	Run     *RunInfo      `json:"run,omitempty"`
	Backend string        `json:"backend"`
	Skipped []BackendSkip `json:"backend_skipped"`
	View    string        `json:"view"` // "frozen" (copy, clone) or "live" (overlay)
	Created time.Time     `json:"created"`
	// At is the op the stage was opened at (begin --at): its base is the
	// workspace right after that op, not as it was when it opened.
	At              string     `json:"at,omitempty"`
	Exclude         []string   `json:"exclude" jsonname:"b64"`
	Share           []string   `json:"share" jsonname:"b64"`
	Protect         []string   `json:"protect" jsonname:"b64"`
	Counts          Counts     `json:"counts"`
	ChangesetDigest string     `json:"changeset_digest"`
	Changes         []Change   `json:"changes"`
	Drift           []Conflict `json:"drift"`
	StaleReads      []Conflict `json:"stale_reads"`
	// Conflicted are paths a rebase left with conflict markers still in
	// the staged file: apply refuses them until they are resolved.
	Conflicted       []string        `json:"conflicted" jsonname:"b64"`
	Special          []string        `json:"special" jsonname:"b64"`
	LeftOut          []LeftOut       `json:"left_out"` // a command's writes under --exclude: never applied (I-008)
	RootMode         *RootModeChange `json:"root_mode_change,omitempty"`
	Ops              []string        `json:"ops"`
	TxOps            []TxOp          `json:"tx_ops"`
	NotTransactional []string        `json:"not_transactional"`
}

// MarshalJSON writes the status with byte-safe selectors and names.
func (s Status) MarshalJSON() ([]byte, error) { return jsonname.Marshal(s) }

// Status reports the stage: its change set (restricted to paths when
// given), and drift: changed paths whose workspace copy moved since the
// stage opened, which an apply would refuse.
func (s *Stage) Status(ctx context.Context, paths []string) (*Status, error) {
	st := &Status{
		Tx: s.ID(), Name: s.Name(), State: s.State(), Backend: s.Backend(), Skipped: nonNil(s.cfg.Skipped),
		View: viewKind(s.Backend()), Created: s.Created(), At: s.At(), Exclude: nonNil(s.cfg.Exclude), Share: nonNil(s.cfg.Share),
		Protect: nonNil(s.cfg.Protect), Drift: []Conflict{}, StaleReads: []Conflict{}, Conflicted: []string{}, Special: []string{}, LeftOut: []LeftOut{},
		NotTransactional: s.notTransactional(),
	}
	if st.State == StateOpen {
		run, err := s.Running(ctx)
		if err != nil {
			return nil, err
		}
		st.Running, st.Run = run != nil, run
	}
	links, err := s.ws.db.ListOpLinks(ctx, s.ws.id)
	if err != nil {
		return nil, AsError(err)
	}
	st.Ops = []string{}
	for _, l := range links {
		if l.StageID == s.ID() {
			st.Ops = append(st.Ops, l.ID)
		}
	}
	if s.State() == StateDropped {
		st.Changes = []Change{}
		return st, nil
	}
	cs, err := s.Changes(ctx, paths)
	if err != nil {
		return nil, err
	}
	st.Changes, st.Counts, st.ChangesetDigest, st.Special = cs.Changes, cs.Counts, cs.Digest, nonNil(cs.Special)
	if cs.LeftOut != nil {
		st.LeftOut = cs.LeftOut
	}
	st.RootMode = cs.RootMode
	root, err := s.ws.openRoot()
	if err != nil {
		return nil, AsError(err)
	}
	defer root.Close()
	stale, err := s.staleReads(ctx, root, cs.all)
	if err != nil {
		return nil, err
	}
	st.StaleReads = append(st.StaleReads, stale...)
	txops, err := s.TxOps(ctx)
	if err != nil {
		return nil, err
	}
	st.TxOps = nonNil(txops)
	conflicted, err := s.Conflicted(ctx)
	if err != nil {
		return nil, err
	}
	st.Conflicted = nonNil(conflicted)
	if len(cs.changes) == 0 {
		return st, nil
	}
	_, _, conflicts, err := newCASReader(root, cs.base).check(ctx, cs.changes)
	if err != nil {
		return nil, err
	}
	st.Drift = append(st.Drift, conflicts...)
	return st, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// viewKind says whether a backend's view follows the workspace for paths the
// stage has not touched ("live": overlay) or keeps them as they were at open
// ("frozen": copy, clone).
func viewKind(backend string) string {
	if backend == "overlay" {
		return "live"
	}
	return "frozen"
}
