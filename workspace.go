package wtx

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/state"
)

// Workspace is an opened workspace: the real directory plus wtx's state
// about it. Methods are safe to call from one goroutine at a time; separate
// processes coordinate through the state database and the workspace lock.
type Workspace struct {
	path     string
	id       string
	stateDir string
	// state is the state root, open: every path of it wtx touches is
	// resolved beneath this handle, never through a symlink or a mount.
	state *fsx.Root
	db    *state.DB
	blobs *blob.Store
	log   *slog.Logger
	now   func() time.Time
	// onProgress is Options.Progress.
	onProgress func(Progress)
	// recovered reports what Open's recovery did, if it ran.
	recovered *RecoverResult
	// from is the directory Open was given; found says how path was found
	// from it.
	from  string
	found Found
	// trust is whom the caller trusts with its configuration (T-004).
	trust trustPolicy
	// actor is who the workspace acts for (Options.Actor).
	actor Actor
	// ident is the workspace directory's device and inode when Open found
	// it: what openRoot checks each later opening against.
	ident state.Ident
}

// Recovered returns what Open's recovery of interrupted applies did, or nil
// when there was nothing to recover.
func (w *Workspace) Recovered() *RecoverResult { return w.recovered }

// Open checks the preconditions of SPEC §2 and opens the state root for the
// workspace at dir. Nothing is written anywhere before the checks pass, and
// nothing is ever written inside the workspace by Open.
func Open(ctx context.Context, dir string, opts Options) (*Workspace, error) {
	path, err := canonicalWorkspace(dir, opts.Home)
	if err != nil {
		return nil, err
	}
	trust, err := newTrustPolicy(opts)
	if err != nil {
		return nil, err
	}
	if opts.StateDir == "" || !filepath.IsAbs(opts.StateDir) {
		return nil, errorf(CodeUsage, "state root %q must be an absolute path", opts.StateDir)
	}
	stateDir, err := canonicalMaybeMissing(opts.StateDir)
	if err != nil {
		return nil, AsError(err)
	}
	if err := checkInsideStage(path, stateDir, opts.InStage); err != nil {
		return nil, err
	}
	if err := checkStateApart(path, stateDir); err != nil {
		return nil, err
	}
	root, err := openStateRoot(stateDir)
	if err != nil {
		return nil, err
	}
	w, err := openIn(ctx, path, stateDir, root, opts, trust)
	if err != nil {
		_ = root.Close() // read-only handle; the error is what counts
		return nil, err
	}
	return w, nil
}

// openIn is Open once the state root is open and private.
func openIn(ctx context.Context, path, stateDir string, root *fsx.Root, opts Options, trust trustPolicy) (*Workspace, error) {
	if err := checkDatabasePresent(stateDir, root); err != nil {
		return nil, err
	}
	// A fresh state root gets its receipt key before its database: from
	// then on a missing key is a lost one.
	if err := makeFirstKey(stateDir); err != nil {
		return nil, err
	}
	if err := createPrivateFileAt(stateDir, root, dbName); err != nil {
		return nil, err
	}
	db, err := state.Open(ctx, filepath.Join(stateDir, dbName))
	if err != nil {
		return nil, stateDBError(stateDir, err)
	}
	blobs, err := blob.OpenIn(root)
	if err != nil {
		db.Close()
		return nil, stateIOError(stateDir, "open the blob store", err)
	}
	from, found := path, FoundGiven
	if opts.Discover {
		if path, found, err = discover(ctx, db, path, stateDir, opts, trust); err != nil {
			blobs.Close()
			db.Close()
			return nil, err
		}
	}
	w := &Workspace{
		from:     from,
		found:    found,
		trust:    trust,
		path:     path,
		id:       workspaceID(path),
		stateDir: stateDir,
		state:    root,
		db:       db,
		blobs:    blobs,
		log:      opts.Logger,
		now:      opts.Now,
		actor:    opts.Actor,

		onProgress: opts.Progress,
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.now == nil {
		w.now = time.Now
	}
	if err := w.resolve(ctx, opts); err != nil {
		blobs.Close()
		db.Close()
		return nil, err
	}
	return w, nil
}

// resolve finds the workspace's record, makes its directory in the state
// root and runs the recovery Open asks for.
func (w *Workspace) resolve(ctx context.Context, opts Options) error {
	// One directory is one workspace however it is reached (I-006): the
	// record is found by device and inode first, so a bind mount or
	// another path shares the lock and the journal.
	ident := identOf(w.path)
	w.ident = ident
	rec, err := w.db.ResolveWorkspace(ctx, w.id, w.path, ident, w.now().UTC(), ident == state.Ident{} || failpoint.Disabled("identity"),
		func(p string) bool { return identOf(p) == ident })
	if err != nil {
		return stateDBError(w.stateDir, err)
	}
	w.id = rec.ID
	if err := ensurePrivateDirAt(w.stateDir, w.state, w.workspaceRel()); err != nil {
		return err
	}
	pending, err := w.pendingRecovery()
	if err != nil {
		return err
	}
	if !opts.NoRecover && pending {
		res, err := w.Recover(ctx, false)
		if err != nil {
			return err
		}
		w.recovered = res
	}
	return nil
}

// Close releases the state database and the state root.
func (w *Workspace) Close() error {
	err := w.db.Close()
	if w.blobs != nil {
		err = errors.Join(err, w.blobs.Close())
	}
	if w.state != nil {
		err = errors.Join(err, w.state.Close())
	}
	return err
}

// Path is the workspace's canonical absolute path.
func (w *Workspace) Path() string { return w.path }

// StateDir is the canonical state root.
func (w *Workspace) StateDir() string { return w.stateDir }

func (w *Workspace) workspaceStateDir() string {
	return filepath.Join(w.stateDir, workspaceDirs, w.id)
}

// workspaceRel is workspaceStateDir beneath the state root.
func (w *Workspace) workspaceRel() string { return workspaceDirs + "/" + w.id }

func (w *Workspace) stageDir(id string) string {
	return filepath.Join(w.stateDir, stagesName, id)
}

// stageRel is stageDir beneath the state root.
func stageRel(id string) string { return stagesName + "/" + id }

// workspaceID is the id a new workspace record gets: a hash of the path it
// is first opened through. A workspace keeps its id when it is reached
// through another path later.
func workspaceID(path string) string {
	sum := sha256.Sum256([]byte(path))
	return hex.EncodeToString(sum[:8])
}

// checkStateApart refuses a workspace that holds the state root or lies
// inside it.
func checkStateApart(path, stateDir string) error {
	if within(stateDir, path) || sameDirAbove(stateDir, path) || treeWithin(stateDir, path) {
		return &Error{Code: CodeStateInWorkspace,
			Message: fmt.Sprintf("state root %s is inside the workspace %s: wtx never writes into the workspace; set WTX_STATE_DIR to a directory outside it", stateDir, path)}
	}
	if within(path, stateDir) || sameDirAbove(path, stateDir) || treeWithin(path, stateDir) {
		return &Error{Code: CodeStateInWorkspace,
			Message: fmt.Sprintf("workspace %s is inside the state root %s", path, stateDir)}
	}
	return nil
}

// canonicalWorkspace makes dir absolute with symlinks resolved and checks
// it may be a workspace.
func canonicalWorkspace(dir, home string) (string, error) {
	if dir == "" {
		return "", errorf(CodeUsage, "no workspace directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", AsError(err)
	}
	path, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", &Error{Code: CodeWorkspaceMissing, Message: fmt.Sprintf("workspace %s does not exist", abs), Err: err}
		}
		return "", &Error{Code: CodeNotDir, Message: fmt.Sprintf("workspace %s: %v", abs, err), Err: err}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", AsError(err)
	}
	if !fi.IsDir() {
		return "", errorf(CodeNotDir, "workspace %s is not a directory", path)
	}
	if path == "/" {
		return "", errorf(CodeWorkspaceForbidden, "refusing / as a workspace: pick the project directory")
	}
	if home != "" {
		if h, err := filepath.EvalSymlinks(home); err == nil && h == path {
			return "", errorf(CodeWorkspaceForbidden, "refusing the home directory %s as a workspace: pick the project directory", path)
		}
	}
	return path, nil
}

// canonicalMaybeMissing resolves symlinks in the longest existing prefix of
// an absolute path and appends the rest.
func canonicalMaybeMissing(p string) (string, error) {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{r}, rest...)...), nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// within reports whether p is dir or beneath it.
func within(p, dir string) bool {
	if p == dir {
		return true
	}
	if dir == "/" {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// sameDirAbove reports whether p, or a directory above it, is the directory
// dir by device and inode: dir reached through another path (a bind mount,
// a symbolic link above it) still holds p. Paths that do not exist yet are
// skipped; their existing ancestors are checked.
func sameDirAbove(p, dir string) bool {
	if failpoint.Disabled("identity") {
		return false
	}
	d, err := os.Stat(dir)
	if err != nil {
		return false
	}
	for q := p; ; q = filepath.Dir(q) {
		if fi, err := os.Stat(q); err == nil && os.SameFile(fi, d) {
			return true
		}
		if q == filepath.Dir(q) {
			return false
		}
	}
}

// newID returns prefix-YYYYMMDDTHHMMSSZ-xxxxxxxx.
func newID(prefix string, now time.Time) string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return fmt.Sprintf("%s-%s-%s", prefix, now.UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:]))
}

// Stages lists the workspace's stages, oldest first.
func (w *Workspace) Stages(ctx context.Context) ([]*Stage, error) {
	rows, err := w.db.ListStages(ctx, w.id)
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]*Stage, 0, len(rows))
	for _, r := range rows {
		s, err := w.stageFromRow(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Stage finds a stage by id, unique id prefix or name. An empty ref means
// the workspace's only open stage.
func (w *Workspace) Stage(ctx context.Context, ref string) (*Stage, error) {
	all, err := w.Stages(ctx)
	if err != nil {
		return nil, err
	}
	if ref == "" {
		var open []*Stage
		for _, s := range all {
			if s.State() == StateOpen {
				open = append(open, s)
			}
		}
		switch len(open) {
		case 0:
			return nil, errorf(CodeNoStage, "workspace %s has no open stage; start one with 'wtx run -- CMD' or 'wtx begin'", w.path)
		case 1:
			return open[0], nil
		}
		return nil, ambiguous("", open)
	}
	for _, s := range all {
		if s.ID() == ref {
			return s, nil
		}
	}
	var named []*Stage
	for _, s := range all {
		if s.Name() == ref {
			named = append(named, s)
		}
	}
	if len(named) > 0 {
		// A name may be reused once the stage that had it settled; the open
		// one, else the newest, is meant.
		for _, s := range named {
			if s.State() == StateOpen {
				return s, nil
			}
		}
		return named[len(named)-1], nil
	}
	var prefixed []*Stage
	for _, s := range all {
		if strings.HasPrefix(s.ID(), ref) {
			prefixed = append(prefixed, s)
		}
	}
	switch len(prefixed) {
	case 0:
		return nil, errorf(CodeStageNotFound, "no stage %q in workspace %s (see 'wtx list')", ref, w.path)
	case 1:
		return prefixed[0], nil
	}
	return nil, ambiguous(ref, prefixed)
}

func ambiguous(ref string, ss []*Stage) *Error {
	ids := make([]string, len(ss))
	for i, s := range ss {
		// The id, its name, and when it was made: what tells stages apart
		// at a glance (the id's own time is UTC and terse).
		ids[i] = s.ID() + " ("
		if s.Name() != "" {
			ids[i] += s.Name() + ", "
		}
		ids[i] += "created " + s.Created().Local().Format(time.DateTime) + ")"
	}
	what := "the workspace has several open stages"
	if ref != "" {
		what = fmt.Sprintf("%q matches several stages", ref)
	}
	e := &Error{Code: CodeAmbiguousStage,
		Message: fmt.Sprintf("%s; name one of: %s", what, strings.Join(ids, ", "))}
	if ref == "" {
		e.Repairs = []Repair{
			{Action: "name", Detail: "name the stage meant", Command: "wtx list"},
			{Action: "drop-empty", Detail: "drop the open stages whose change sets are empty", Command: "wtx drop --empty"},
		}
	}
	return e
}
