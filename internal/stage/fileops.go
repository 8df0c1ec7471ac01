package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// FileOps is implemented by views that per-file operations (wtx write,
// edit, rm) can change directly, without running a command in them.
type FileOps interface {
	// WriteFile replaces (or creates) the regular file at rel with data and
	// permission bits perm, creating missing parent directories (0755). A
	// symlink at rel or above it is refused (fsx.ErrSymlink).
	WriteFile(ctx context.Context, rel string, data []byte, perm fs.FileMode) error
	// WriteFileTemp is WriteFile through a temporary file whose name in
	// rel's directory starts with tmpPrefix (which must start with
	// journal.TempPrefix): whoever finishes or rolls back a write that was stopped
	// halfway knows which names in that directory are its debris. Missing
	// parent directories get permission bits dirPerm (0755 when zero).
	WriteFileTemp(ctx context.Context, rel, tmpPrefix string, data []byte, perm, dirPerm fs.FileMode) error
	// Remove deletes the file or symlink at rel (fs.ErrNotExist if absent).
	Remove(ctx context.Context, rel string) error
}

// ErrIsDir is returned by per-file operations aimed at a directory.
var ErrIsDir = errors.New("is a directory")

func (v *copyView) WriteFile(ctx context.Context, rel string, data []byte, perm fs.FileMode) error {
	return writeInTree(v.root, rel, opTempPrefix, data, perm, 0)
}

func (v *copyView) WriteFileTemp(ctx context.Context, rel, tmpPrefix string, data []byte, perm, dirPerm fs.FileMode) error {
	if err := checkTempPrefix(tmpPrefix); err != nil {
		return err
	}
	return writeInTree(v.root, rel, tmpPrefix, data, perm, dirPerm)
}

// opTempPrefix starts the temporary names of per-file writes that name
// none of their own.
const opTempPrefix = journal.TempPrefix + "op-"

// checkTempPrefix refuses a temporary-name prefix outside wtx's reserved
// names, or one that is not a single name.
func checkTempPrefix(p string) error {
	if !strings.HasPrefix(p, journal.TempPrefix) || strings.ContainsAny(p, "/\x00") || len(p) > 64 {
		return fmt.Errorf("temporary name prefix %q: %w", p, fsx.ErrInvalidPath)
	}
	return nil
}

func (v *copyView) Remove(ctx context.Context, rel string) error {
	return removeInTree(v.root, rel)
}

// writeInTree writes rel beneath the tree at root through directory
// handles, via a temporary file (its name starting with tmpPrefix) renamed
// over the name; missing parents get dirPerm (0755 when zero).
func writeInTree(root, rel, tmpPrefix string, data []byte, perm, dirPerm fs.FileMode) error {
	return writeReaderInTree(root, rel, tmpPrefix, bytes.NewReader(data), perm, dirPerm)
}

// writeReaderInTree is writeInTree with the content read from data.
func writeReaderInTree(root, rel, tmpPrefix string, data io.Reader, perm, dirPerm fs.FileMode) error {
	r, err := fsx.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	d, err := mkdirAll(r, tree.Parent(rel), dirPerm)
	if err != nil {
		return err
	}
	defer d.Close()
	name := tree.Base(rel)
	if st, err := d.Lstat(name); err == nil {
		switch {
		case st.Mode.IsDir():
			return fmt.Errorf("write %s: %w", rel, ErrIsDir)
		case st.Mode&fs.ModeSymlink != 0:
			return fmt.Errorf("write %s: %w", rel, fsx.ErrSymlink)
		case !st.Mode.IsRegular():
			return fmt.Errorf("write %s: %w", rel, fsx.ErrNotRegular)
		}
	}
	f, tmp, err := d.CreateTemp(tmpPrefix)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, data)
	if err == nil {
		err = f.Chmod(perm & fs.ModePerm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = d.Rename(tmp, d, name)
	}
	if err != nil {
		d.Unlink(tmp)
		return err
	}
	return nil
}

// mkdirAll opens directory rel beneath r, creating what is missing with
// permission bits perm (0755 when zero).
func mkdirAll(r *fsx.Root, rel string, perm fs.FileMode) (*fsx.Dir, error) {
	if perm == 0 {
		perm = 0o755
	}
	d, err := r.OpenDir(".")
	if err != nil || rel == "." {
		return d, err
	}
	for _, comp := range strings.Split(rel, "/") {
		next, err := d.OpenDir(comp)
		if errors.Is(err, fs.ErrNotExist) {
			if err = d.Mkdir(comp, perm); err == nil || errors.Is(err, fs.ErrExist) {
				next, err = d.OpenDir(comp)
			}
		}
		d.Close()
		if err != nil {
			return nil, err
		}
		d = next
	}
	return d, nil
}

func removeInTree(root, rel string) error {
	r, err := fsx.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	d, err := r.OpenDir(tree.Parent(rel))
	if err != nil {
		return err
	}
	defer d.Close()
	st, err := d.Lstat(tree.Base(rel))
	if err != nil {
		return err
	}
	if st.Mode.IsDir() {
		return fmt.Errorf("rm %s: %w", rel, ErrIsDir)
	}
	return d.Unlink(tree.Base(rel))
}
