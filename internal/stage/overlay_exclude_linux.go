package stage

import (
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

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
	for i, rel := range v.cfg.HideDirs {
		names, err := readDirNames(filepath.Join(v.dir, hiddenName, hiddenBacking(i)))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return err
		}
		if len(names) > 0 {
			v.leftOutSet.paths = append(v.leftOutSet.paths, LeftOut{Path: rel, Dir: true})
		}
	}
	return nil
}

// hiddenBacking names the backing directory of the i-th hidden directory.
func hiddenBacking(i int) string { return strconv.Itoa(i) }

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	if err == io.EOF {
		err = nil
	}
	return names, err
}
