package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// Fork copies the stage directory src, which any backend made, to dst (which
// must not exist), so that dst holds an independent stage with the same
// base and the same staged state. Files are copied with the kernel's copy
// offload where the filesystem has one (a clone on btrfs and XFS);
// directories keep their permission bits, symlinks their targets, and an
// overlay's upper directory its whiteouts and opaque marks. The overlay's
// work directory is made afresh, empty.
//
// The stage's view and upper directory hold what its commands left there,
// links included: both trees are walked and written through directory
// handles (fsx), one name at a time, and nothing is followed.
func Fork(ctx context.Context, src, dst string) error {
	// A view in doubt is never carried into a stage that looks whole.
	if err := InDoubt(src); err != nil {
		return fmt.Errorf("fork %s: %w", src, err)
	}
	if err := forkTree(ctx, src, dst); err != nil {
		return fmt.Errorf("fork %s: %w", src, err)
	}
	return nil
}

func forkTree(ctx context.Context, src, dst string) error {
	from, err := fsx.OpenRoot(src)
	if err != nil {
		return err
	}
	defer from.Close()
	parent, err := fsx.OpenRoot(filepath.Dir(dst))
	if err != nil {
		return err
	}
	defer parent.Close()
	top, err := parent.OpenDir(".")
	if err != nil {
		return err
	}
	defer top.Close()
	name := filepath.Base(dst)
	if err := top.Mkdir(name, 0o700); err != nil {
		return err
	}
	s, err := from.OpenDir(".")
	if err != nil {
		return err
	}
	defer s.Close()
	d, err := top.OpenDir(name)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := copyXattrsFd(s.Fd(), d.Fd()); err != nil {
		return err
	}
	if err := forkDir(ctx, s, d, true); err != nil {
		return err
	}
	perm, err := s.Perm()
	if err != nil {
		return err
	}
	return d.SetPerm(perm)
}

// forkDir copies what s holds into d; top says s is the stage directory
// itself, whose scratch directory is left empty. A directory gets its bits
// once it is filled: a read-only one must not keep its copy from being
// filled.
func forkDir(ctx context.Context, s, d *fsx.Dir, top bool) error {
	names, err := s.ReadDir()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		st, err := s.Lstat(name)
		if err != nil {
			return err
		}
		switch {
		case st.IsDir():
			err = forkSubdir(ctx, s, d, name, st, top && name == scratchDir)
		case st.IsRegular():
			err = forkFile(s, d, name, st.Mode.Perm())
		case st.IsSymlink():
			var target string
			if target, err = s.Readlink(name); err == nil {
				err = d.Symlink(target, name)
			}
		default:
			err = forkSpecial(s, d, name, st)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// forkSubdir copies the directory name of s into d (empty when scratch).
func forkSubdir(ctx context.Context, s, d *fsx.Dir, name string, st fsx.Stat, scratch bool) error {
	if err := d.Mkdir(name, 0o700); err != nil {
		return err
	}
	sub, err := s.OpenDir(name)
	if err != nil {
		return err
	}
	defer sub.Close()
	out, err := d.OpenDir(name)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := copyXattrsFd(sub.Fd(), out.Fd()); err != nil {
		return err
	}
	if !scratch {
		if err := forkDir(ctx, sub, out, false); err != nil {
			return err
		}
	}
	return out.SetPerm(st.Mode.Perm())
}

// forkFile copies the regular file name of s to a new file of d with perm.
func forkFile(s, d *fsx.Dir, name string, perm fs.FileMode) (err error) {
	in, err := s.OpenFile(name)
	if err != nil {
		return err
	}
	defer in.Close()
	fd, err := unix.Openat(d.Fd(), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return &fs.PathError{Op: "create", Path: d.Rel() + "/" + name, Err: err}
	}
	out := os.NewFile(uintptr(fd), name)
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	// Data regions with the kernel's copy offload, holes left as holes.
	if _, err := fsx.CopySparse(context.Background(), out, in, nil); err != nil {
		return err
	}
	if err := copyXattrsFd(int(in.Fd()), int(out.Fd())); err != nil && !errors.Is(err, ErrUnsupported) {
		return err
	}
	return out.Chmod(perm)
}

// scratchDir is the overlay's work directory, which a fork leaves empty.
const scratchDir = "work"
