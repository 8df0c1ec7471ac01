package stage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// Fork copies the stage directory src, which any backend made, to dst (which
// must not exist), so that dst holds an independent stage with the same
// base and the same staged state. Files are copied with the kernel's copy
// offload where the filesystem has one (a clone on btrfs and XFS);
// directories keep their permission bits, symlinks their targets, and an
// overlay's upper directory its whiteouts and opaque marks. The overlay's
// work directory is made afresh, empty.
func Fork(ctx context.Context, src, dst string) error {
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("fork %s: %w", dst, fs.ErrExist)
	}
	// A view in doubt is never carried into a stage that looks whole.
	if err := InDoubt(src); err != nil {
		return fmt.Errorf("fork %s: %w", src, err)
	}
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
			if err := copyXattrs(p, to); err != nil {
				return err
			}
			if rel == scratchDir {
				return fs.SkipDir // the overlay's scratch space
			}
		case fi.Mode().IsRegular():
			if err := forkFile(p, to, fi.Mode().Perm()); err != nil {
				return err
			}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, to); err != nil {
				return err
			}
		default:
			if err := forkSpecial(p, to, fi); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fork %s: %w", src, err)
	}
	// Directory bits last: a read-only directory of the view must not keep
	// its own copy from being filled.
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if err := os.Chmod(filepath.Join(dst, rel), fi.Mode().Perm()); err != nil {
			return err
		}
		if rel == scratchDir {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fork %s: %w", src, err)
	}
	return nil
}

// forkFile copies the regular file src to a new file dst with perm.
func forkFile(src, dst string, perm fs.FileMode) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	// Data regions with the kernel's copy offload, holes left as holes.
	if _, err := fsx.CopySparse(context.Background(), out, in, nil); err != nil {
		return err
	}
	if err := copyXattrs(src, dst); err != nil && !errors.Is(err, ErrUnsupported) {
		return err
	}
	return out.Chmod(perm)
}

// scratchDir is the overlay's work directory, which a fork leaves empty.
const scratchDir = "work"
