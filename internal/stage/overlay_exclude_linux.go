package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// excludedWrite returns the callback with which Scan records what a command
// wrote to excluded paths of the upper directory: anything but a whiteout
// there (the helper whites out the excluded files it hides, and a deleted
// path is not a write). Shared paths are written through, never to the
// upper directory, and are not reported.
func (v *overlayView) excludedWrite(exclude tree.Selectors) visitFunc {
	own, _ := tree.ParseSelectors(v.cfg.Exclude) // parsed by attachOverlay already
	return func(rel string, d *fsx.Dir, name string, st fsx.Stat) error {
		if !exclude.Match(rel) && !own.Match(rel) {
			return nil
		}
		if st.Mode&os.ModeCharDevice != 0 {
			var ust unix.Stat_t
			if err := unix.Fstatat(d.Fd(), name, &ust, unix.AT_SYMLINK_NOFOLLOW); err == nil && ust.Rdev == 0 {
				return nil
			}
		}
		v.leftOutSet.add(rel, st)
		return nil
	}
}

// excludedDirWrites records the excluded directories whose backing (the
// empty directory the helper mounts over them) a command wrote into.
func (v *overlayView) excludedDirWrites() error {
	if len(v.cfg.HideDirs) == 0 {
		return nil
	}
	root, err := fsx.OpenRoot(filepath.Join(v.dir, hiddenName))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer root.Close()
	for i, rel := range v.cfg.HideDirs {
		d, err := root.OpenDir(hiddenBacking(i))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		some, err := hasEntries(d)
		_ = d.Close() // opened to read: nothing to lose
		if err != nil {
			return err
		}
		if some {
			v.leftOutSet.paths = append(v.leftOutSet.paths, LeftOut{Path: rel, Dir: true})
		}
	}
	return nil
}

// hiddenBacking names the backing directory of the i-th hidden directory.
func hiddenBacking(i int) string { return strconv.Itoa(i) }

// hasEntries reports whether the directory d holds anything, reading no
// more of it than one entry.
func hasEntries(d *fsx.Dir) (bool, error) {
	fd, err := unix.Openat(d.Fd(), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), d.Rel())
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err == io.EOF {
		err = nil
	}
	return len(names) > 0, err
}

// refreshHidden brings the paths the helper hides up to date before a
// command runs: the lower layer is the live workspace, so a path created
// there under an exclude selector after the stage opened would otherwise
// show in the view (I-008). Newly found directories are appended to the
// stage's list, never reordered, since a hidden directory's backing is
// named by its index; the list is saved for later runs and scans.
func (v *overlayView) refreshHidden(ctx context.Context, spec *nsSpec) error {
	if len(v.cfg.Exclude) == 0 || failpoint.Disabled("exclude") {
		return nil
	}
	sels, err := tree.ParseSelectors(v.cfg.Exclude)
	if err != nil {
		return err
	}
	dirs, files, err := excludedPaths(ctx, v.cfg.Workspace, sels)
	if err != nil {
		return fmt.Errorf("find excluded paths: %w", err)
	}
	// A path inside a shared one is the workspace's own, bound into the
	// view: hiding it would remove it from the workspace. Open never lists
	// one (a shared path's subtree is not walked); neither does this.
	if shared, _ := tree.ParseSelectors(v.cfg.Share); len(shared) > 0 && !failpoint.Disabled("hide-in-share") {
		dirs = slices.DeleteFunc(dirs, shared.Match)
		files = slices.DeleteFunc(files, shared.Match)
	}
	changed := false
	have := map[string]bool{}
	for _, d := range v.cfg.HideDirs {
		have[d] = true
	}
	for _, d := range dirs {
		if !have[d] {
			v.cfg.HideDirs = append(v.cfg.HideDirs, d)
			have[d] = true
			changed = true
		}
	}
	haveFile := map[string]bool{}
	for _, f := range v.cfg.HideFiles {
		haveFile[f] = true
	}
	for _, f := range files {
		if !haveFile[f] {
			v.cfg.HideFiles = append(v.cfg.HideFiles, f)
			haveFile[f] = true
			changed = true
		}
	}
	if changed {
		sort.Strings(v.cfg.HideFiles)
		raw, err := json.Marshal(v.cfg)
		if err != nil {
			return err
		}
		if err := fsx.WriteFileAtomic(filepath.Join(v.dir, overlayConfigName), raw, 0o600); err != nil {
			return err
		}
	}
	spec.HideDirs, spec.HideFiles = v.cfg.HideDirs, v.cfg.HideFiles
	return nil
}

// excludedPaths lists the topmost paths of the workspace that sels cover,
// directories and everything else apart, never following a symlink. A
// literal selector costs one lstat; one with wildcards, a walk of the
// subtree below its literal prefix.
func excludedPaths(ctx context.Context, workspace string, sels tree.Selectors) (dirs, files []string, err error) {
	root, err := fsx.OpenRoot(workspace)
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	found := map[string]bool{}
	add := func(rel string, st fsx.Stat) {
		if found[rel] {
			return
		}
		found[rel] = true
		if st.Mode.IsDir() {
			dirs = append(dirs, rel)
		} else {
			files = append(files, rel)
		}
	}
	var prefixes []string
	for _, s := range sels {
		p, whole := s.LiteralPrefix()
		if !whole {
			prefixes = append(prefixes, p)
			continue
		}
		st, err := root.Lstat(p)
		switch {
		case err == nil:
			add(p, st)
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, fsx.ErrSymlink), errors.Is(err, fsx.ErrNotDir), errors.Is(err, fsx.ErrCrossDevice):
			// absent, or behind a link or mount the view does not follow
		default:
			return nil, nil, err
		}
	}
	sort.Strings(prefixes)
	var walked []string
	for _, p := range prefixes {
		covered := false
		for _, w := range walked {
			if w == "" || p == w || strings.HasPrefix(p, w+"/") {
				covered = true
			}
		}
		if covered {
			continue
		}
		walked = append(walked, p)
		rel, prefix := ".", ""
		if p != "" {
			rel, prefix = p, p+"/"
		}
		d, err := root.OpenDir(rel)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrSymlink) || errors.Is(err, fsx.ErrNotDir) || errors.Is(err, fsx.ErrCrossDevice) {
				continue
			}
			return nil, nil, err
		}
		o := &walkOpts{exclude: sels, excluded: func(rel string, _ *fsx.Dir, _ string, st fsx.Stat) error {
			add(rel, st)
			return nil
		}}
		err = walkFrom(ctx, d, prefix, o, func(string, *fsx.Dir, string, fsx.Stat) error { return nil })
		if err != nil {
			return nil, nil, err
		}
	}
	return dirs, files, nil
}
