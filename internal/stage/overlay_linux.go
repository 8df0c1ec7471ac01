package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Overlay is the backend that stages nothing at open: a command runs in a
// private mount namespace where an overlay mount, with the workspace as its
// lower layer and the stage's upper directory on top, covers the
// workspace's own path. Open records the base manifest with a stat walk;
// Scan reads the change set from the upper directory alone. A path the
// stage never wrote shows the workspace's current content.
//
// Without root, the namespace comes with a user namespace in which the
// caller keeps its own user and group ids, so the command meets the same
// permission checks as when run directly; the overlay then keeps its
// metadata in user.overlay.* extended attributes.
type Overlay struct{}

// Name returns "overlay".
func (Overlay) Name() string { return "overlay" }

// Files and directories of an overlay stage, in its stage directory.
const (
	overlayConfigName = "overlay.json"
	upperName         = "upper"
	workName          = "work"
	mergedName        = "merged"
	hiddenName        = "excluded"
)

// overlayConfig is what an overlay stage keeps about itself.
type overlayConfig struct {
	Workspace string   `json:"workspace"`
	UserXattr bool     `json:"userxattr"`
	Exclude   []string `json:"exclude,omitempty"`
	Share     []string `json:"share,omitempty"`
	// ShareAt, HideDirs and HideFiles are the paths of the workspace that
	// the selectors matched at open.
	ShareAt   []string `json:"share_at,omitempty"`
	HideDirs  []string `json:"hide_dirs,omitempty"`
	HideFiles []string `json:"hide_files,omitempty"`
}

// Open records the base manifest of the workspace and makes the stage's
// upper and work directories.
func (Overlay) Open(ctx context.Context, req OpenRequest) (View, *tree.Manifest, error) {
	cfg := overlayConfig{Workspace: req.Workspace, UserXattr: os.Geteuid() != 0,
		Exclude: req.Exclude.Strings(), Share: req.Share.Strings()}
	for _, name := range []string{upperName, workName, mergedName, hiddenName} {
		if err := os.Mkdir(filepath.Join(req.Dir, name), 0o700); err != nil {
			return nil, nil, err
		}
	}
	ws, err := fsx.OpenRoot(req.Workspace)
	if err != nil {
		return nil, nil, err
	}
	defer ws.Close()
	if err := checkShareSelectors(ws, req.Share); err != nil {
		return nil, nil, err
	}
	// The upper directory is the view's root, whose mode and owner the
	// view shows: they are the workspace root's (the stage directory
	// around it stays private).
	if err := likeWorkspaceRoot(ws, filepath.Join(req.Dir, upperName)); err != nil {
		return nil, nil, err
	}
	var mu sync.Mutex
	entries := newEntryChunks(req.SizeHint)
	checkRead := os.Geteuid() != 0
	groups := newGroupChecker()
	var linked sharedLink
	if rootSt, err := ws.Lstat("."); err == nil {
		groups.see(".", rootSt)
	}
	skip := func(rel string, st fsx.Stat) bool {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case req.Share.Match(rel):
			cfg.ShareAt = append(cfg.ShareAt, rel)
			linked.see(rel, st)
		case req.Exclude.Match(rel):
			if st.Mode.IsDir() {
				cfg.HideDirs = append(cfg.HideDirs, rel)
			} else {
				cfg.HideFiles = append(cfg.HideFiles, rel)
			}
		default:
			return false
		}
		return true
	}
	werr := parallelWalk(ctx, ws, runtime.GOMAXPROCS(0)*2, skip, func(rel string, d *fsx.Dir, name string, st fsx.Stat) error {
		groups.see(rel, st)
		e := entryFromStat(rel, st)
		e.WS = statTuple(st)
		switch e.Type {
		case tree.Symlink:
			target, err := d.Readlink(name)
			if err != nil {
				return retyped(d, name, rel, st, err)
			}
			e.Target, e.Size = target, int64(len(target))
		case tree.File:
			// A file wtx cannot read could not be hashed or applied.
			if checkRead && st.Mode.Perm()&0o444 != 0o444 {
				if err := unix.Faccessat(d.Fd(), name, unix.R_OK, unix.AT_EACCESS); err != nil {
					return vanished(fmt.Errorf("stage %s: %w", rel, &fs.PathError{Op: "open", Path: rel, Err: err}))
				}
			}
		}
		n := entries.add(e)
		if req.Progress != nil && n%1024 == 0 {
			req.Progress(n)
		}
		return nil
	})
	if werr != nil {
		return nil, nil, werr
	}
	if err := linked.err(req.Share); err != nil {
		return nil, nil, err
	}
	if err := groups.err(); err != nil {
		return nil, nil, err
	}
	all := entries.flatten()
	tree.SortEntries(all)
	sort.Strings(cfg.ShareAt)
	sort.Strings(cfg.HideDirs)
	sort.Strings(cfg.HideFiles)
	m := &tree.Manifest{Entries: all}
	fence, err := fenceAfter(req.Dir, 0)
	if err != nil {
		return nil, nil, err
	}
	m.Fence, m.ViewFence = fence, fence
	if err := hashRacy(ctx, m, func(e *tree.Entry) (*os.File, error) {
		f, err := openWorkspaceFile(ws, e.Path)
		if err != nil {
			return nil, vanished(err) // a name of the workspace: see errGone
		}
		if !sameWSTuple(f, e) {
			f.Close()
			return nil, fmt.Errorf("%s: file changed while it was being staged: %w", e.Path, ErrUnstable)
		}
		return f, nil
	}); err != nil {
		return nil, nil, err
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, nil, err
	}
	if err := fsx.WriteFileAtomic(filepath.Join(req.Dir, overlayConfigName), raw, 0o600); err != nil {
		return nil, nil, err
	}
	v, err := attachOverlay(req.Workspace, req.Dir)
	if err != nil {
		return nil, nil, err
	}
	return v, m, nil
}

// likeWorkspaceRoot gives dir the mode (with the set-group-id and sticky
// bits) and, as far as the caller may, the owner and group of the
// workspace's root.
func likeWorkspaceRoot(ws *fsx.Root, dir string) error {
	st, err := ws.Lstat(".")
	if err != nil {
		return fmt.Errorf("stat the workspace root: %w", err)
	}
	uid, gid := int(st.UID), int(st.GID)
	switch {
	case os.Geteuid() == 0:
	case uid != os.Geteuid():
		uid, gid = -1, -1 // another user's workspace: the view root stays the caller's
	default:
		uid = -1
	}
	if uid != -1 || gid != -1 {
		if err := unix.Lchown(dir, uid, gid); err != nil && !(os.Geteuid() != 0 && errors.Is(err, unix.EPERM)) {
			return fmt.Errorf("give the view's root the workspace root's owner: %w", err)
		}
	}
	mode := uint32(st.Mode.Perm())
	for _, b := range []struct {
		fm  fs.FileMode
		bit uint32
	}{{fs.ModeSetuid, unix.S_ISUID}, {fs.ModeSetgid, unix.S_ISGID}, {fs.ModeSticky, unix.S_ISVTX}} {
		if st.Mode&b.fm != 0 {
			mode |= b.bit
		}
	}
	if err := unix.Chmod(dir, mode); err != nil {
		return fmt.Errorf("give the view's root the workspace root's mode: %w", err)
	}
	return nil
}

// Attach returns the view that Open made in dir.
func (Overlay) Attach(ctx context.Context, workspace, dir string) (View, error) {
	return attachOverlay(workspace, dir)
}

func attachOverlay(workspace, dir string) (*overlayView, error) {
	raw, err := os.ReadFile(filepath.Join(dir, overlayConfigName))
	if err != nil {
		return nil, err
	}
	v := &overlayView{dir: dir}
	if err := json.Unmarshal(raw, &v.cfg); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, overlayConfigName), err)
	}
	if v.cfg.Workspace != workspace && !sameDir(v.cfg.Workspace, workspace) {
		return nil, fmt.Errorf("overlay stage %s belongs to %s, not %s", dir, v.cfg.Workspace, workspace)
	}
	sels, err := tree.ParseSelectors(append(append([]string(nil), v.cfg.Exclude...), v.cfg.Share...))
	if err != nil {
		return nil, err
	}
	v.hidden = sels
	return v, nil
}

var (
	_ Backend = Overlay{}
	_ View    = (*overlayView)(nil)
	_ Remover = (*overlayView)(nil)

	_ RawOpener       = (*overlayView)(nil)
	_ RootModer       = (*overlayView)(nil)
	_ LeftOutReporter = (*overlayView)(nil)
)

type overlayView struct {
	dir    string
	cfg    overlayConfig
	hidden tree.Selectors // excluded and shared: never part of the view's surface
	leftOutSet
	// upperRoot is the upper directory, opened by the first OpenFile and
	// kept until Close: reading many files resolves it once.
	mu        sync.Mutex
	upperRoot *fsx.Root
	// raw opens the upper directory's files for OpenRaw.
	raw rawOpener
	// doubt is what inDoubtOnce found, once doubtChecked.
	doubt        error
	doubtChecked bool
}

func (v *overlayView) upper() string { return filepath.Join(v.dir, upperName) }

// inDoubt refuses every read of a view whose command was writing when the
// system stopped (see volatile_linux.go).
func (v *overlayView) inDoubt() error { return inDoubt(v.dir, filepath.Join(v.dir, workName)) }

// inDoubtOnce is inDoubt, looked at once for the view's many file reads.
func (v *overlayView) inDoubtOnce() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.doubtChecked {
		v.doubt, v.doubtChecked = v.inDoubt(), true
	}
	return v.doubt
}

// Root returns "": the view exists only inside the namespace of a command.
func (v *overlayView) Root() string { return "" }

// Close leaves the stage's directories removable by their owner: overlayfs
// makes its work directory's inner "work" directory with no permission bits,
// which an unprivileged owner could not remove once the namespace is gone.
func (v *overlayView) Close() error {
	v.raw.close()
	v.mu.Lock()
	if v.upperRoot != nil {
		_ = v.upperRoot.Close() // a directory opened read-only: nothing to lose
		v.upperRoot = nil
	}
	v.mu.Unlock()
	work, err := fsx.OpenRoot(filepath.Join(v.dir, workName))
	if err != nil {
		return nil // no work directory: nothing to make removable
	}
	defer work.Close()
	if st, err := work.Lstat("work"); err == nil && st.IsDir() && st.Mode.Perm()&0o700 != 0o700 {
		if d, err := work.OpenDir("."); err == nil {
			_ = d.Chmod("work", 0o700) // best effort: Remove gives it access again
			_ = d.Close()              // opened to change a child: nothing to lose
		}
	}
	return nil
}

// Prepare rewrites cmd to start the helper, which mounts the view over the
// workspace's path in new namespaces and then runs cmd's program there
// (see NamespaceMain). A relative cmd.Dir is taken relative to the
// workspace (the view's root there).
func (v *overlayView) Prepare(cmd *exec.Cmd, opts RunOptions) error {
	if err := v.inDoubt(); err != nil {
		return err
	}
	spec, err := v.helperSpec(cmd, opts)
	if err != nil {
		return err
	}
	return helperCommand(cmd, spec)
}

// helperSpec says what the helper must set up to run cmd in the view.
func (v *overlayView) helperSpec(cmd *exec.Cmd, opts RunOptions) (*nsSpec, error) {
	if !v.cfg.UserXattr && os.Geteuid() != 0 {
		return nil, fmt.Errorf("overlay stage %s was opened by root; only root can run in it: %w", v.dir, ErrUnsupported)
	}
	cwd := cmd.Dir
	switch {
	case cwd == "":
		cwd = v.cfg.Workspace
	case !filepath.IsAbs(cwd):
		cwd = filepath.Join(v.cfg.Workspace, cwd)
	}
	spec := v.spec()
	if err := checkSharedPaths(v.cfg.Workspace, spec.Share); err != nil {
		return nil, err
	}
	if err := v.refreshHidden(context.Background(), &spec); err != nil {
		return nil, err
	}
	spec.View, spec.PIDNS = true, !containmentDisabled()
	spec.ReadOnly, spec.NoNetwork = opts.ReadOnly, opts.NoNetwork
	spec.Cwd, spec.Path, spec.Args = cwd, cmd.Path, cmd.Args
	if len(spec.Args) == 0 {
		spec.Args = []string{cmd.Path}
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(env[:len(env):len(env)], helperEnv+"=1")
	cmd.Dir = ""
	return &spec, nil
}

func (v *overlayView) spec() nsSpec {
	return nsSpec{
		Workspace: v.cfg.Workspace, Lower: v.cfg.Workspace, Upper: v.upper(),
		Work: filepath.Join(v.dir, workName), Merged: filepath.Join(v.dir, mergedName),
		Hidden: filepath.Join(v.dir, hiddenName), UserXattr: v.cfg.UserXattr,
		Share: v.cfg.ShareAt, HideDirs: v.cfg.HideDirs, HideFiles: v.cfg.HideFiles,
	}
}

// mountCaps are the capabilities (in the new user namespace only) the
// helper holds while it mounts: overlayfs keeps the mounter's credentials
// for its own work (copy-up, whiteouts), which needs more than the mount;
// --no-network needs to bring up the loopback interface; the id maps of
// the command's nested user namespace need CAP_SETUID and CAP_SETGID.
var mountCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_DAC_OVERRIDE, unix.CAP_DAC_READ_SEARCH,
	unix.CAP_FOWNER, unix.CAP_CHOWN, unix.CAP_MKNOD, unix.CAP_FSETID, unix.CAP_NET_ADMIN,
	unix.CAP_SETUID, unix.CAP_SETGID}

// helperCommand makes cmd start this executable as the helper for spec:
// in new namespaces when the helper builds a view or probes (mount, PID
// when spec asks, network for --no-network, and user without root).
func helperCommand(cmd *exec.Cmd, spec *nsSpec) error {
	cmd.Path = "/proc/self/exe"
	cmd.Args = []string{"wtx", HelperArg, spec.encode()}
	cmd.Err = nil
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	if spec.Isolate {
		isolateAttr(cmd.SysProcAttr, spec)
		return nil
	}
	if !spec.View && !spec.Probe {
		return nil
	}
	a := cmd.SysProcAttr
	a.Cloneflags |= syscall.CLONE_NEWNS
	if spec.PIDNS {
		a.Cloneflags |= syscall.CLONE_NEWPID
	}
	if spec.NoNetwork {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	if uid := os.Geteuid(); uid != 0 {
		// The caller keeps its own ids inside the user namespace, so the
		// command meets the same permission checks as when run directly
		// (a read-only file stays read-only to it). The helper gets the
		// capabilities it needs to mount as ambient capabilities; the
		// command runs without them.
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		groupMapAttr(a) // the caller's group, and the others that can be mapped
		a.AmbientCaps = mountCaps
	}
	return nil
}

// upperNode is what the upper directory holds at one path.
type upperNode struct {
	entry    *tree.Entry // nil for a whiteout
	opaque   bool        // a directory that hides the lower one
	whiteout bool
}

// Scan derives the view from the base manifest and the upper directory:
// untouched paths keep their base entry (marked Unchanged), whiteouts and
// opaque directories delete, files in the upper directory are hashed.
func (v *overlayView) Scan(ctx context.Context, base *tree.Manifest, exclude tree.Selectors) ([]tree.Entry, error) {
	if err := v.inDoubt(); err != nil {
		return nil, err
	}
	hide := append(append(tree.Selectors(nil), exclude...), v.hidden...)
	v.leftOutSet.reset()
	cache := openDigestCache(v.dir, v.upper())
	nodes, err := v.readUpper(ctx, hide, v.excludedWrite(exclude), cache)
	if err != nil {
		return nil, err
	}
	if err := v.excludedDirWrites(); err != nil {
		return nil, err
	}
	if err := v.dropCopiedUp(nodes, base); err != nil {
		return nil, err
	}
	// Base paths beneath a whiteout, an opaque directory or a path that is
	// no longer a directory are gone unless the upper directory has them.
	gone := make([]bool, len(base.Entries))
	for p, n := range nodes {
		if !n.whiteout && !n.opaque && (n.entry == nil || n.entry.Type == tree.Dir) {
			continue
		}
		prefix := p + "/"
		i := sort.Search(len(base.Entries), func(i int) bool { return base.Entries[i].Path >= prefix })
		for ; i < len(base.Entries) && len(base.Entries[i].Path) > len(prefix) && base.Entries[i].Path[:len(prefix)] == prefix; i++ {
			gone[i] = true
		}
	}
	// A base entry without a workspace stat tuple was never seen in the
	// lower layer: it was put into the upper directory (a stage opened at
	// a past op sets paths back there). If the lower layer lacks it, its
	// removal from the upper directory leaves no whiteout, so it is gone
	// exactly when the lower layer does not have it either.
	var lower *fsx.Root
	defer func() {
		if lower != nil {
			lower.Close()
		}
	}()
	inLower := func(rel string) bool {
		if lower == nil {
			r, err := fsx.OpenRoot(v.cfg.Workspace)
			if err != nil {
				return true // unknown: keep the entry as before
			}
			lower = r
		}
		_, err := lower.Lstat(rel)
		return err == nil || !(errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrNotDir))
	}
	out := make([]tree.Entry, 0, len(base.Entries)+len(nodes))
	for i := range base.Entries {
		b := &base.Entries[i]
		if hide.Match(b.Path) {
			continue
		}
		if n, ok := nodes[b.Path]; ok {
			if n.entry != nil {
				out = append(out, *n.entry)
			}
			continue
		}
		if gone[i] {
			continue
		}
		if b.WS == (tree.Stat{}) && !inLower(b.Path) {
			continue
		}
		e := *b
		e.Unchanged = true
		out = append(out, e)
	}
	for p, n := range nodes {
		if n.entry != nil && base.Lookup(p) == nil {
			out = append(out, *n.entry)
		}
	}
	tree.SortEntries(out)
	if err := fillBaseDigests(ctx, v.cfg.Workspace, base, out, cache); err != nil {
		return nil, err
	}
	cache.save()
	return out, nil
}

// dropCopiedUp forgets the upper directories that hold nothing of the
// command. Overlayfs copies a directory of the workspace up when something
// below it changes in the view; the helper does so itself when it hides an
// excluded path that appeared in the workspace after the stage opened (its
// whiteout needs the directory). Such a directory is no addition of the
// command when it is not in the base, is not opaque, has nothing of its own
// below it in the upper directory (hidden paths are not walked) and is a
// directory with the same mode in the workspace now. The deepest go first,
// so a chain of them goes whole. WTX_DISABLE=copy-up (failpoint build)
// keeps them: the negative control of the exclude tests.
func (v *overlayView) dropCopiedUp(nodes map[string]*upperNode, base *tree.Manifest) error {
	if failpoint.Disabled("copy-up") {
		return nil
	}
	children := map[string]int{}
	var cands []string
	for p, n := range nodes {
		children[tree.Parent(p)]++
		if n.entry != nil && n.entry.Type == tree.Dir && !n.opaque && base.Lookup(p) == nil {
			cands = append(cands, p)
		}
	}
	if len(cands) == 0 {
		return nil
	}
	sort.Slice(cands, func(i, j int) bool {
		if a, b := strings.Count(cands[i], "/"), strings.Count(cands[j], "/"); a != b {
			return a > b
		}
		return cands[i] < cands[j]
	})
	ws, err := fsx.OpenRoot(v.cfg.Workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	for _, p := range cands {
		if children[p] > 0 {
			continue
		}
		st, err := ws.Lstat(p)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrSymlink) || errors.Is(err, fsx.ErrNotDir) || errors.Is(err, fsx.ErrCrossDevice) {
				continue // not (or not reachable as) a directory of the workspace: the command's
			}
			return fmt.Errorf("scan %s: %w", p, err)
		}
		if lower := entryFromStat(p, st); lower.Type != tree.Dir || lower.Perm != nodes[p].entry.Perm {
			continue
		}
		delete(nodes, p)
		children[tree.Parent(p)]--
	}
	return nil
}

// readUpper walks the upper directory and hashes the files in it whose
// digest cache does not know them at their stat tuple. Paths hide covers
// are skipped; excluded, if set, is given each of them.
func (v *overlayView) readUpper(ctx context.Context, hide tree.Selectors, excluded visitFunc, cache *digestCache) (map[string]*upperNode, error) {
	root, err := fsx.OpenRoot(v.upper())
	if err != nil {
		return nil, err
	}
	defer root.Close()
	// The walk reads directories on several goroutines (the upper
	// directory of a large change holds thousands); mu guards nodes and
	// hashed.
	var mu sync.Mutex
	nodes := map[string]*upperNode{}
	var hashed []*tree.Entry
	pool := newDigestPool("scan")
	// A directory's opaque mark is read from the handle the walk opens to
	// read it, not from a handle of its own.
	enter := func(rel string, d *fsx.Dir) error {
		opaque, err := v.opaqueFd(d.Fd())
		if err != nil {
			return fmt.Errorf("scan %s: %w", rel, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if n := nodes[rel]; n != nil {
			n.opaque = opaque
		}
		return nil
	}
	keep := !failpoint.Disabled("reserved") // as a view walk
	opts := &walkOpts{exclude: hide, keepReserved: keep, excluded: excluded, enter: enter, workers: runtime.GOMAXPROCS(0)}
	werr := walkTree(ctx, root, opts, func(rel string, d *fsx.Dir, name string, st fsx.Stat) error {
		if pool.failed() {
			return errStopWalk
		}
		if st.Mode&fs.ModeCharDevice != 0 {
			var ust unix.Stat_t
			if err := unix.Fstatat(d.Fd(), name, &ust, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return fmt.Errorf("scan %s: %w", rel, err)
			}
			if ust.Rdev == 0 {
				mu.Lock()
				nodes[rel] = &upperNode{whiteout: true}
				mu.Unlock()
				return nil
			}
		}
		e := entryFromStat(rel, st)
		n := &upperNode{entry: &e}
		mu.Lock()
		nodes[rel] = n
		mu.Unlock()
		switch e.Type {
		case tree.Symlink:
			target, err := d.Readlink(name)
			if err != nil {
				return err
			}
			e.Target, e.Size = target, int64(len(target))
		case tree.File:
			e.View = statTuple(st)
			e.View.Dev = 0
			if dg, ok := cache.lookup(sideView, rel, e.View); ok {
				e.Digest = dg
				return nil
			}
			cache.takeFence()
			f, err := d.OpenFile(name)
			if err != nil {
				return fmt.Errorf("scan %s: %w", rel, err)
			}
			pool.jobs <- hashJob{e: &e, f: f}
			mu.Lock()
			hashed = append(hashed, &e)
			mu.Unlock()
		}
		return nil
	})
	perr := pool.wait()
	if werr == errStopWalk {
		werr = nil
	}
	if err := errors.Join(werr, perr); err != nil {
		return nil, err
	}
	for _, e := range hashed {
		cache.learn(sideView, e.Path, e.View, e.Digest)
	}
	return nodes, nil
}

// isOpaqueAt reads the overlay's opaque mark of the upper directory name in
// dirfd: the xattr of the namespace the overlay was mounted with, and only
// on a directory, where it is the overlay's own metadata.
func (v *overlayView) isOpaqueAt(dirfd int, name string) (bool, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(fd)
	return v.opaqueFd(fd)
}

// opaqueFd reads the opaque mark of the upper directory open at fd.
func (v *overlayView) opaqueFd(fd int) (bool, error) {
	attr := "trusted.overlay.opaque"
	if v.cfg.UserXattr {
		attr = "user.overlay.opaque"
	}
	var buf [8]byte
	n, err := unix.Fgetxattr(fd, attr, buf[:])
	switch {
	case errors.Is(err, unix.ENODATA), errors.Is(err, unix.ENOTSUP):
		return false, nil
	case err != nil:
		return false, err
	}
	return n == 1 && buf[0] == 'y', nil
}

// locate says where rel is read from: the upper directory, the workspace,
// or nowhere (fs.ErrNotExist). The upper directory holds what the stage's
// commands left: it is walked through directory handles, never following
// a link.
func (v *overlayView) locate(rel string) (string, error) {
	if err := fsx.ValidRel(rel); err != nil || rel == "." || v.hidden.Match(rel) {
		return "", &fs.PathError{Op: "open", Path: rel, Err: fs.ErrNotExist}
	}
	root, err := v.openUpperRoot()
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	d, err := root.OpenDir(".")
	if err != nil {
		return "", &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	defer func() { _ = d.Close() }() // opened to read: nothing to lose
	lower := true
	parts := splitRel(rel)
	for i, name := range parts {
		var st unix.Stat_t
		if err := unix.Fstatat(d.Fd(), name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if !errors.Is(err, unix.ENOENT) {
				return "", &fs.PathError{Op: "open", Path: rel, Err: err}
			}
			if !lower {
				return "", &fs.PathError{Op: "open", Path: rel, Err: fs.ErrNotExist}
			}
			return v.cfg.Workspace, nil
		}
		if st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == 0 {
			return "", &fs.PathError{Op: "open", Path: rel, Err: fs.ErrNotExist}
		}
		if i == len(parts)-1 || st.Mode&unix.S_IFMT != unix.S_IFDIR {
			return v.upper(), nil // past a non-directory, fsx refuses to go on
		}
		next, err := d.OpenDir(name)
		if err != nil {
			return v.upper(), nil // as above: the open that follows says why
		}
		_ = d.Close() // as above
		d = next
		if lower {
			if opaque, err := v.opaqueFd(d.Fd()); err == nil && opaque {
				lower = false
			}
		}
	}
	return v.upper(), nil
}

// openUpperRoot returns the upper directory, opened by the first caller
// and kept until Close.
func (v *overlayView) openUpperRoot() (*fsx.Root, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.upperRoot == nil {
		r, err := fsx.OpenRoot(v.upper())
		if err != nil {
			return nil, err
		}
		v.upperRoot = r
	}
	return v.upperRoot, nil
}

func splitRel(rel string) []string {
	var parts []string
	for rel != "" {
		i := 0
		for i < len(rel) && rel[i] != '/' {
			i++
		}
		parts = append(parts, rel[:i])
		if i == len(rel) {
			break
		}
		rel = rel[i+1:]
	}
	return parts
}

func (v *overlayView) OpenFile(rel string) (*os.File, error) {
	if err := v.inDoubtOnce(); err != nil {
		return nil, err
	}
	if f, ok := v.openUpper(rel); ok {
		return f, nil
	}
	root, err := v.locate(rel)
	if err != nil {
		return nil, err
	}
	return openInRoot(root, rel)
}

// openUpper opens rel from the upper directory when a regular file is
// there: the topmost layer's entry is what the view shows, whatever the
// layers below hold, so nothing else need be looked at. ok is false when
// the upper directory has no regular file at rel (absent, a whiteout,
// something else, a directory above it missing or a symlink): locate
// then decides.
func (v *overlayView) openUpper(rel string) (*os.File, bool) {
	if err := fsx.ValidRel(rel); err != nil || rel == "." || v.hidden.Match(rel) {
		return nil, false
	}
	root, err := v.openUpperRoot()
	if err != nil {
		return nil, false
	}
	d, err := root.OpenDir(tree.Parent(rel))
	if err != nil {
		return nil, false
	}
	defer d.Close()
	if st, err := d.Lstat(tree.Base(rel)); err != nil || !st.IsRegular() {
		return nil, false
	}
	f, err := d.OpenFile(tree.Base(rel))
	if err != nil {
		return nil, false
	}
	return f, true
}

// OpenRaw opens rel as an fsx.File when the upper directory holds it as a
// regular file (see openUpper and RawOpener); ok is false otherwise.
func (v *overlayView) OpenRaw(rel string) (*fsx.File, bool, error) {
	if err := v.inDoubtOnce(); err != nil {
		return nil, false, err
	}
	if v.hidden.Match(rel) {
		return nil, false, nil
	}
	return v.raw.open(v.upper(), rel)
}

func (v *overlayView) Readlink(rel string) (string, error) {
	if err := v.inDoubtOnce(); err != nil {
		return "", err
	}
	root, err := v.locate(rel)
	if err != nil {
		return "", err
	}
	return readlinkInRoot(root, rel)
}

// Remove clears the work directory, which the overlay leaves unreadable.
func (v *overlayView) Remove(ctx context.Context) error {
	return RemoveTree(filepath.Join(v.dir, workName))
}

// sameDir reports whether a and b are one directory reached two ways (a
// bind mount, a symbolic link): a stage opened through one of them is the
// workspace's stage through the other too. Its view is still mounted over
// the path the stage was opened through.
func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && fa.IsDir() && os.SameFile(fa, fb)
}
