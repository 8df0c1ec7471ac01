package wtx

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Stage states.
const (
	StateOpen    = "open"    // commands may run in it and it may be applied
	StateApplied = "applied" // its whole change set landed; it is settled
	StateDropped = "dropped" // discarded; it can never be applied
	// StateEmpty: a run or an apply found its change set empty; it is
	// settled with nothing to apply.
	StateEmpty = "empty"
)

// Settled reports whether state is final: applied, dropped or empty.
func Settled(state string) bool { return state != StateOpen }

// BackendSkip says why a faster backend was not used for a stage.
type BackendSkip struct {
	Backend string `json:"backend"`
	Reason  string `json:"reason"`
	// Fresh is set when the backend was probed for this stage rather than
	// known from the probe cache: the reason is news to say once.
	Fresh bool `json:"-"`
}

// stageConfig is what a stage keeps about how it was opened.
type stageConfig struct {
	Exclude []string      `json:"exclude,omitempty" jsonname:"b64"`
	Share   []string      `json:"share,omitempty" jsonname:"b64"`
	Protect []string      `json:"protect,omitempty" jsonname:"b64"`
	Skipped []BackendSkip `json:"skipped,omitempty"`
	Ops     []string      `json:"ops,omitempty"`
	// RootMode is the workspace root's permission bits when the stage
	// opened; nil for stages opened before it was recorded.
	RootMode *uint32 `json:"root_mode,omitempty"`
	// At is the op a stage was opened at (BeginOptions.At): its view and
	// base are the workspace right after that op.
	At string `json:"at,omitempty"`
	// Import is where the change set of a stage made by wtx import came
	// from; nil for a stage made here.
	Import *ImportOrigin `json:"import,omitempty"`
	// Rebased names the paths a rebase moved the base of, each with the
	// last op recorded before it.
	Rebased []RebaseMark `json:"rebased,omitempty"`
	// NoProject: the stage was opened without the project file
	// (BeginOptions.NoProject), by a person's choice.
	NoProject bool `json:"no_project,omitempty"`
	// Conflicted are the paths a rebase with merge left with conflict
	// markers (conflictmarks.go).
	Conflicted []ConflictMark `json:"conflicted,omitempty"`
}

// MarshalJSON writes the configuration with byte-safe selectors.
func (c stageConfig) MarshalJSON() ([]byte, error) { return jsonname.Marshal(c) }

// UnmarshalJSON reads what MarshalJSON writes.
func (c *stageConfig) UnmarshalJSON(data []byte) error { return jsonname.Unmarshal(data, c) }

// RebaseMark says that a rebase moved Path's base onto the workspace's
// content after op AfterOp: the states the ops up to AfterOp recorded
// for Path were made on the old base. Restoring one of them (drop-op of
// one of those ops) would take back the workspace's own change, which the
// new base no longer shows as drift; drop-op refuses it.
type RebaseMark struct {
	Path    []byte `json:"path"` // bytes: a path need not be UTF-8
	AfterOp int    `json:"after_op"`
}

// saveConfig writes the stage's configuration to its record.
func (s *Stage) saveConfig(ctx context.Context) error {
	raw, err := json.Marshal(s.cfg)
	if err != nil {
		return AsError(err)
	}
	s.row.Config = raw
	s.row.UpdatedAt = s.ws.now().UTC()
	return AsErrorOrNil(s.ws.db.UpdateStage(ctx, s.row))
}

// Stage is one transaction over a workspace.
type Stage struct {
	ws      *Workspace
	row     state.Stage
	cfg     stageConfig
	exclude tree.Selectors
	protect tree.Selectors
	// flowAttempt names the flow step attempt this Stage value stages for
	// (its stage's name); every op it records carries it (TxOp.Flow).
	flowAttempt string
	// live are the project file's protects as the gate last read them
	// (liveProtection), besides those the stage opened with.
	live tree.Selectors
	// opened is the base manifest Begin wrote, handed once to the first
	// read of it (see manifest): a large tree's manifest costs more to
	// decode again than the command it stages. A Stage from Begin holds it
	// until then; one from the database never has it.
	opened atomic.Pointer[openedManifest]
}

// openedManifest is a base manifest as it was written, with the identity of
// the file it was written to.
type openedManifest struct {
	m  *tree.Manifest
	id fileID
}

// fileID names one version of a file that is only ever replaced by a
// rename: a new version is a new inode, or one reused with another ctime.
type fileID struct {
	ino                uint64
	size, mtime, ctime int64
}

func fileIDOf(st fsx.Stat) fileID {
	return fileID{ino: st.Ino, size: st.Size, mtime: st.Mtime, ctime: st.Ctime}
}

func (w *Workspace) stageFromRow(r state.Stage) (*Stage, error) {
	s := &Stage{ws: w, row: r}
	if len(r.Config) > 0 {
		if err := json.Unmarshal(r.Config, &s.cfg); err != nil {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("stage %s: damaged configuration: %v", r.ID, err)}
		}
	}
	var err error
	if s.exclude, err = tree.ParseSelectors(s.cfg.Exclude); err != nil {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("stage %s: %v", r.ID, err)}
	}
	if s.protect, err = tree.ParseSelectors(s.cfg.Protect); err != nil {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("stage %s: %v", r.ID, err)}
	}
	return s, nil
}

// ID is the stage id, tx-YYYYMMDDTHHMMSSZ-xxxxxxxx.
func (s *Stage) ID() string { return s.row.ID }

// Name is the stage's name, or "".
func (s *Stage) Name() string { return s.row.Name }

// State is StateOpen, StateApplied, StateDropped or StateEmpty. Whether a
// run holds the stage is not a state: see Running.
func (s *Stage) State() string { return s.row.State }

// Backend names the staging backend.
func (s *Stage) Backend() string { return s.row.Backend }

// Created is when the stage opened.
func (s *Stage) Created() time.Time { return s.row.CreatedAt }

// BaseDigest is the digest of the surface as it was when the stage opened.
func (s *Stage) BaseDigest() string { return s.row.BaseDigest }

// Exclude returns the stage's exclude selectors (Share and Protect the
// others).
func (s *Stage) Exclude() []string { return s.cfg.Exclude }

// Share returns the stage's shared selectors.
func (s *Stage) Share() []string { return s.cfg.Share }

// Protect returns the stage's protected selectors.
func (s *Stage) Protect() []string { return s.cfg.Protect }

// Skipped says why faster backends were not used.
func (s *Stage) Skipped() []BackendSkip { return s.cfg.Skipped }

// Workspace returns the stage's workspace.
func (s *Stage) Workspace() *Workspace { return s.ws }

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Begin opens a new stage: it stages the workspace's surface with the chosen
// backend and records the base manifest. What opts chooses (share, excludes,
// a backend, leaving the project file out) must be the workspace's actor's
// to choose (T-003), else it is refused as refusal.not-permitted.
func (w *Workspace) Begin(ctx context.Context, opts BeginOptions) (*Stage, error) {
	if err := w.authorizeBegin(opts); err != nil {
		return nil, err
	}
	return w.begin(ctx, opts)
}

// begin is Begin with opts already authorized.
func (w *Workspace) begin(ctx context.Context, opts BeginOptions) (*Stage, error) {
	opts, err := w.withProject(opts)
	if err != nil {
		return nil, err
	}
	if opts.Name != "" {
		if !nameRE.MatchString(opts.Name) || (len(opts.Name) > 3 && opts.Name[:3] == "tx-") {
			return nil, errorf(CodeUsage, "stage name %q: use 1-64 letters, digits, '.', '_' or '-', not starting with 'tx-'", opts.Name)
		}
	}
	exclude, err := tree.ParseSelectors(opts.Exclude)
	if err != nil {
		return nil, &Error{Code: CodeUsage, Message: "--exclude: " + err.Error()}
	}
	share, err := tree.ParseSelectors(opts.Share)
	if err != nil {
		return nil, &Error{Code: CodeUsage, Message: "--share: " + err.Error()}
	}
	if _, err := tree.ParseSelectors(opts.Protect); err != nil {
		return nil, &Error{Code: CodeUsage, Message: "--protect: " + err.Error()}
	}
	if opts.At != "" {
		// Known before anything is staged; looked up again under the lock.
		if _, err := w.Op(ctx, opts.At); err != nil {
			return nil, err
		}
	}
	backend, skipped, err := chooseBackend(ctx, opts.Backend, w.path, w.stateDir, nil)
	if err != nil {
		return nil, err
	}
	now := w.now().UTC()
	id := newID("tx", now)
	dir := w.stageDir(id)
	if err := w.makeStageDir(id); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			_ = w.removeStageDir(id) // said in the log; the staging error is what counts
		}
	}()
	// Staging holds the workspace lock, so the base is never taken from the
	// middle of another process's apply. It writes no blob, so it leaves
	// the blob store lock to others (a long copy would hold up gc).
	unlock, err := w.lockWorkspace(ctx)
	if err != nil {
		return nil, err
	}
	staged := func(n int) {
		if opts.Progress != nil {
			opts.Progress(n)
		}
		w.progress(PhaseStage, n, 0)
	}
	hintKey := sizeHintKey(exclude, share)
	hint := w.sizeHint(hintKey)
	view, m, err := backend.Open(ctx, stage.OpenRequest{
		Workspace: w.path, Dir: dir, Exclude: exclude, Share: share, Progress: staged, SizeHint: hint,
	})
	// A backend that cannot stage this workspace's content (an overlay
	// without root, and files of a group it cannot map) makes "auto" take
	// the next one that works, saying why.
	for tried := map[string]bool{}; err != nil && errors.Is(err, stage.ErrUnfit) && (opts.Backend == "" || opts.Backend == "auto"); {
		skipped = append(skipped, BackendSkip{Backend: backend.Name(), Reason: err.Error(), Fresh: true})
		tried[backend.Name()] = true
		var more []BackendSkip
		if backend, more, err = chooseBackend(ctx, opts.Backend, w.path, w.stateDir, tried); err != nil {
			break
		}
		for _, sk := range more {
			if !slices.ContainsFunc(skipped, func(s BackendSkip) bool { return s.Backend == sk.Backend }) {
				skipped = append(skipped, sk)
			}
		}
		_ = w.removeStageDir(id) // said in the log; it is made again at once
		if err = w.makeStageDir(id); err != nil {
			break
		}
		view, m, err = backend.Open(ctx, stage.OpenRequest{
			Workspace: w.path, Dir: dir, Exclude: exclude, Share: share, Progress: staged, SizeHint: hint,
		})
	}
	var rootMode *uint32
	if err == nil {
		// The root's mode is not in the base manifest (it has no entry for
		// the root): the stage records it to see a command change it.
		if m, merr := stage.DirMode(w.path); merr == nil {
			rootMode = &m
		}
	}
	var at string
	var setBack []string
	if err == nil && opts.At != "" {
		var r *reversal
		if r, err = w.stateAfter(ctx, opts.At); err == nil {
			at = r.op.ID
			setBack, err = w.setBack(ctx, view, m, r, append(append(tree.Selectors(nil), exclude...), share...))
		}
		if err != nil {
			view.Close()
			unlock()
			return nil, err
		}
	}
	unlock()
	if err != nil {
		return nil, stagingError(err)
	}
	view.Close()
	if at != "" {
		if err := w.writeReversed(id, setBack); err != nil {
			return nil, stateIOError(w.stateDir, "record the paths set back", err)
		}
	}
	if err := w.writeManifest(id, m); err != nil {
		return nil, err
	}
	w.noteSize(hintKey, hint, len(m.Entries))
	// The file's identity is taken before the stage is in the database:
	// until then no other process can replace it.
	var kept *openedManifest
	if st, err := w.state.Lstat(manifestRel(id)); err == nil && st.IsRegular() {
		kept = &openedManifest{m: m, id: fileIDOf(st)}
	}
	cfg := stageConfig{Exclude: exclude.Strings(), Share: share.Strings(), Protect: opts.Protect, Skipped: skipped, RootMode: rootMode, At: at, NoProject: opts.NoProject && !opts.projectMerged}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, AsError(err)
	}
	row := state.Stage{ID: id, WorkspaceID: w.id, Name: opts.Name, Backend: backend.Name(), State: StateOpen,
		BaseDigest: tree.Digest(m.Entries), Config: raw, CreatedAt: now, UpdatedAt: now}
	if err := w.db.InsertStage(ctx, row); err != nil {
		if errors.Is(err, state.ErrNameTaken) {
			return nil, errorf(CodeNameTaken, "an open stage of this workspace is already named %q", opts.Name)
		}
		return nil, AsError(err)
	}
	ok = true
	s, err := w.stageFromRow(row)
	if err != nil {
		return nil, err
	}
	s.cfg.Skipped = skipped // with Fresh, which is not stored
	s.opened.Store(kept)
	return s, nil
}

func stagingError(err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, stage.ErrSpecial):
		return &Error{Code: CodeSpecialFile, Message: err.Error(), Err: err}
	case errors.Is(err, stage.ErrUnstable):
		return &Error{Code: CodeUnstable, Message: err.Error() + "; try again when it is quiet", Err: err}
	case errors.Is(err, stage.ErrViewInDoubt):
		return &Error{Code: CodeStateLost, Message: err.Error(), Err: err}
	case errors.Is(err, stage.ErrConfinement):
		return &Error{Code: CodeConfinement, Message: err.Error(), Err: err}
	case errors.Is(err, stage.ErrLinkedSelector):
		return &Error{Code: CodeBoundary, Message: err.Error(), Err: err}
	case errors.Is(err, stage.ErrUnsupported):
		return &Error{Code: CodeUnsupported, Message: err.Error(), Err: err}
	case errors.Is(err, fsx.ErrCrossDevice):
		return &Error{Code: CodeMountPoint, Message: err.Error() + "; leave it out with --exclude", Err: err}
	}
	return AsError(fmt.Errorf("stage the workspace: %w", err))
}

// chooseBackend picks the backend for name ("auto" or "" for the first that
// works here) and says why faster ones were skipped. Probe results are
// cached per device in the state root. Backends in tried are passed over.
func chooseBackend(ctx context.Context, name, workspace, stateDir string, tried map[string]bool) (stage.Backend, []BackendSkip, error) {
	all := stage.Backends()
	if name == "" || name == "auto" {
		var skipped []BackendSkip
		for _, b := range all {
			if tried[b.Name()] {
				continue
			}
			if fresh, err := stage.ProbeCached(ctx, b, workspace, stateDir); err != nil {
				skipped = append(skipped, BackendSkip{Backend: b.Name(), Reason: err.Error(), Fresh: fresh})
				continue
			}
			return b, skipped, nil
		}
		return nil, skipped, errorf(CodeUnsupported, "no staging backend works here")
	}
	for _, b := range all {
		if b.Name() == name {
			if _, err := stage.ProbeCached(ctx, b, workspace, stateDir); err != nil {
				return nil, nil, &Error{Code: CodeUnsupported, Message: fmt.Sprintf("backend %s cannot stage %s: %v", name, workspace, err), Err: err}
			}
			return b, nil, nil
		}
	}
	for _, known := range []string{"overlay", "clone", "copy"} {
		if name == known {
			return nil, nil, errorf(CodeUnsupported, "backend %s is not available in this build of wtx on this platform", name)
		}
	}
	return nil, nil, errorf(CodeUsage, "unknown backend %q: use auto, overlay, clone or copy", name)
}

// sizeHintName is the file in the workspace's state directory that holds
// the number of entries its last stage's base manifest had, and the key of
// the selectors it was staged with (see sizeHintKey): a hint for the next
// walk's buffers (stage.OpenRequest.SizeHint), nothing more. A missing,
// damaged or foreign one is no hint.
const sizeHintName = "size-hint"

// sizeHintKey names a set of exclude and share selectors: a stage that
// leaves out much of the tree walks far fewer entries than one that does
// not, so a hint is taken only by a stage with the same selectors.
func sizeHintKey(exclude, share tree.Selectors) string {
	h := sha256.New()
	for _, sel := range exclude.Strings() {
		h.Write([]byte(sel + "\x00"))
	}
	h.Write([]byte{1})
	for _, sel := range share.Strings() {
		h.Write([]byte(sel + "\x00"))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// sizeHint reads the workspace's size hint for the selectors of key; 0
// when there is none. It reads only a small regular file, never through a
// symlink and never waiting on a FIFO: the lock is held.
func (w *Workspace) sizeHint(key string) int {
	var buf [64]byte
	d, err := w.state.OpenDir(w.workspaceRel())
	if err != nil {
		return 0
	}
	defer d.Close()
	data, large, err := d.ReadSmallFile(sizeHintName, buf[:])
	if large != nil {
		_ = large.Close() // read-only; too long to be a hint
		return 0
	}
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data))
	if len(f) != 2 || f[1] != key {
		return 0
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// noteSize records n entries as the size hint for key when it is more than
// an eighth away from the hint the walk had (0 when it had none).
func (w *Workspace) noteSize(key string, hint, n int) {
	if hint > 0 && n >= hint-hint/8 && n <= hint+hint/8 {
		return
	}
	_ = w.state.WriteFileAtomic(w.workspaceRel()+"/"+sizeHintName, []byte(strconv.Itoa(n)+" "+key+"\n"), 0o600) // a hint: without it the next walk only copies more
}

// manifestName is the base manifest's name in a stage's directory.
const manifestName = "base.manifest"

func manifestPath(dir string) string { return filepath.Join(dir, manifestName) }

// manifestRel is the base manifest of stage id beneath the state root.
func manifestRel(id string) string { return stageRel(id) + "/" + manifestName }

// writeManifest writes the base manifest of stage id, atomically.
func (w *Workspace) writeManifest(id string, m *tree.Manifest) error {
	err := w.state.WriteAtomic(manifestRel(id), 0o600, func(wr io.Writer) error { return tree.Encode(wr, m) })
	if err != nil {
		return stateIOError(w.stateDir, "write the base manifest of stage "+id, err)
	}
	return nil
}

// readManifest reads the base manifest of stage id; a symlink in its
// place, or on the way to it, is an error, never followed.
func (w *Workspace) readManifest(id string) ([]byte, error) {
	return w.state.ReadFile(manifestRel(id))
}

func (s *Stage) manifest() (*tree.Manifest, error) {
	rel := manifestRel(s.ID())
	if o := s.opened.Swap(nil); o != nil {
		// The one Begin wrote, unless the file was replaced since.
		if st, err := s.ws.state.Lstat(rel); err == nil && st.IsRegular() && fileIDOf(st) == o.id {
			return o.m, nil
		}
	}
	data, err := s.ws.readManifest(s.ID())
	if err != nil {
		return nil, stateIOError(s.ws.stateDir, "read the base manifest of stage "+s.ID(), err)
	}
	m, err := tree.DecodeTaking(data) // data is not used again
	if err != nil {
		return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("stage %s: %v", s.ID(), err), Err: err}
	}
	return m, nil
}

func (s *Stage) backend() (stage.Backend, error) {
	for _, b := range stage.Backends() {
		if b.Name() == s.row.Backend {
			return b, nil
		}
	}
	return nil, errorf(CodeUnsupported, "stage %s uses backend %s, which this build of wtx lacks", s.ID(), s.row.Backend)
}

func (s *Stage) view(ctx context.Context) (stage.View, error) {
	b, err := s.backend()
	if err != nil {
		return nil, err
	}
	v, err := b.Attach(ctx, s.ws.path, s.ws.stageDir(s.ID()))
	if err != nil {
		return nil, AsError(fmt.Errorf("stage %s: open view: %w", s.ID(), err))
	}
	return v, nil
}

// checkUsable refuses work on a stage that was dropped or settled.
func (s *Stage) checkUsable() error {
	switch s.row.State {
	case StateDropped:
		return &Error{Code: CodeDropped, Message: fmt.Sprintf("stage %s was dropped; nothing of it can be applied", s.ID()),
			Repairs: []Repair{{Action: "begin", Detail: "start a new stage", Command: "wtx run -- CMD"}}}
	case StateApplied:
		return errorf(CodeStageSettled, "stage %s is settled: its whole change set was applied", s.ID())
	case StateEmpty:
		return &Error{Code: CodeStageSettled, Message: fmt.Sprintf("stage %s is settled: its change set was empty", s.ID()),
			Repairs: []Repair{{Action: "begin", Detail: "start a new stage", Command: "wtx run -- CMD"}}}
	}
	return nil
}

// reload reads the stage's row again: another process may have settled or
// dropped it since it was loaded.
func (s *Stage) reload(ctx context.Context) error {
	row, err := s.ws.db.GetStage(ctx, s.ID())
	if err != nil {
		return AsError(err)
	}
	s.row = row
	return nil
}

// settle records a final state for an open stage; the caller holds the
// workspace lock.
func (s *Stage) settle(ctx context.Context, state string) error {
	s.row.State = state
	s.row.UpdatedAt = s.ws.now().UTC()
	return AsErrorOrNil(s.ws.db.UpdateStage(ctx, s.row))
}

// Drop discards the stage: its view is removed and it can never be
// applied. The workspace is not touched. Dropping a dropped or empty stage
// changes nothing; a stage whose change set was applied stays applied
// (precondition.stage-settled), and one that a run holds is refused
// (refusal.stage-busy).
func (s *Stage) Drop(ctx context.Context) error {
	if err := s.ws.authorize(ActionDrop, false); err != nil {
		return err
	}
	return s.drop(ctx)
}

// drop is Drop without asking the gate: the library dropping a stage it
// made for a call that failed.
func (s *Stage) drop(ctx context.Context) error {
	return s.dropChecked(ctx, nil)
}

// dropChecked is drop, refused when check, asked under the stage's locks
// (no command runs in it, no per-file op changes it meanwhile), fails.
func (s *Stage) dropChecked(ctx context.Context, check func() error) error {
	if s.row.State == StateDropped || s.row.State == StateEmpty {
		return nil
	}
	release, err := s.holdShared(discarding(ctx, 0), "drop")
	if err != nil {
		return err
	}
	defer release()
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.reload(ctx); err != nil {
		return err
	}
	switch s.row.State {
	case StateDropped, StateEmpty:
		return nil
	case StateApplied:
		if failpoint.Disabled("settled") {
			break
		}
		return &Error{Code: CodeStageSettled,
			Message: fmt.Sprintf("stage %s is settled: its change set was applied, and dropping it now would change nothing in the workspace", s.ID()),
			Repairs: []Repair{{Action: "undo", Detail: "to take the applied change back out of the workspace, undo its op", Command: "wtx log"}}}
	}
	if check != nil {
		if err := check(); err != nil {
			return err
		}
	}
	if err := s.settle(ctx, StateDropped); err != nil {
		return err
	}
	return s.ws.removeStageDir(s.ID())
}

// makeStageDir makes the directory of the new stage id (0700) in the
// state root.
func (w *Workspace) makeStageDir(id string) error {
	d, err := w.state.OpenDir(stagesName)
	if err != nil {
		return stateIOError(w.stateDir, "open the stages directory", err)
	}
	defer d.Close()
	if err := d.Mkdir(id, 0o700); err != nil {
		return stateIOError(w.stateDir, "make the directory of stage "+id, err)
	}
	return nil
}

// stageDirExists reports whether stage id has a directory (or anything of
// its name) in the state root.
func (w *Workspace) stageDirExists(id string) bool {
	_, err := w.state.Lstat(stageRel(id))
	return err == nil
}

// stageDiskUsage is the disk the directory of stage id takes (0 when it
// has none).
func (w *Workspace) stageDiskUsage(id string) int64 {
	return diskUsage(w.state, stageRel(id))
}

// removeStageDir deletes the directory of stage id even where the view
// holds read-only directories. A symlink in it is removed, never followed;
// a mount point in it is left in place. A failure is said in the log, and
// returned as damage (io.corrupt) when the state root holds something wtx
// did not put there; the caller decides whether it matters.
func (w *Workspace) removeStageDir(id string) error {
	err := w.state.RemoveAll(stageRel(id))
	if err == nil {
		return nil
	}
	w.log.Warn("remove the directory of a stage", "tx", id, "err", err)
	if isStateDamage(err) {
		return stateIOError(w.stateDir, "remove the directory of stage "+id, err)
	}
	return nil
}
