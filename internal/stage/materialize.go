package stage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Put is one path that Materialize makes hold exactly New (nil: absent).
type Put struct {
	Path    string
	New     *tree.Entry
	Content []byte // New's content when New is a file
}

// ErrNotEmpty is returned (wrapped) when a put removes a directory of the
// view that holds something no put removes.
var ErrNotEmpty = errors.New("directory is not empty")

// ErrNoParent is returned (wrapped) when a put's parent directory is not in
// the view and no put makes it.
var ErrNoParent = errors.New("parent directory missing")

// Materialize makes each put's path in the view hold exactly its entry:
// removals deepest first, then creations shallowest first, directories
// given their final permission bits last. It never creates a parent that
// no put names, never removes a directory that still holds anything, and
// never follows a symlink of the view. puts must be sorted by path.
func Materialize(ctx context.Context, v View, puts []Put) error {
	if root := v.Root(); root != "" {
		return materializeIn(root, puts)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("materialize: find this program: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, fileOpArg, "materialize")
	cmd.Env = append(os.Environ(), fileOpEnv+"=1")
	cmd.Stdin = bytes.NewReader(encodePuts(puts))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := v.Prepare(cmd, RunOptions{}); err != nil {
		return err
	}
	untie := tieToCaller(cmd)
	if err = startHelper(cmd); err == nil {
		err = cmd.Wait()
	}
	untie()
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(stderr.String())
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		switch ee.ExitCode() {
		case fileOpNotEmpty:
			return fmt.Errorf("%s: %w", msg, ErrNotEmpty)
		case fileOpNoParent:
			return fmt.Errorf("%s: %w", msg, ErrNoParent)
		case fileOpSymlink:
			return fmt.Errorf("%s: %w", msg, fsx.ErrSymlink)
		}
	}
	return fmt.Errorf("materialize in the view: %v: %s", err, msg)
}

func encodePuts(puts []Put) []byte {
	var b []byte
	b = binary.AppendUvarint(b, uint64(len(puts)))
	for _, p := range puts {
		b = binenc.AppendString(b, p.Path)
		if p.New == nil {
			b = append(b, byte(tree.Absent))
			continue
		}
		b = append(b, byte(p.New.Type))
		b = binary.AppendUvarint(b, uint64(p.New.Perm))
		b = binenc.AppendString(b, p.New.Target)
		b = binenc.AppendString(b, string(p.Content))
	}
	return b
}

func decodePuts(data []byte) ([]Put, error) {
	d := binenc.NewDecoder(data)
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(d.Len()) {
		return nil, errors.New("put count exceeds data")
	}
	var puts []Put
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		p := Put{Path: d.String()}
		if t := tree.Type(d.Byte()); t != tree.Absent {
			p.New = &tree.Entry{Path: p.Path, Type: t, Perm: uint32(d.Uvarint() & tree.PermMask)}
			p.New.Target = d.String()
			if c := d.String(); c != "" {
				p.Content = []byte(c)
			}
		}
		puts = append(puts, p)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail(errors.New("trailing bytes"))
	}
	return puts, d.Err()
}

// materializeMain is the helper's side: puts on stdin, the view's root as
// the current directory.
func materializeMain() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	data, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	puts, err := decodePuts(data)
	if err != nil {
		return err
	}
	return materializeIn(dir, puts)
}

func materializeIn(root string, puts []Put) error {
	r, err := fsx.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, p := range puts {
		if err := fsx.ValidRel(p.Path); err != nil || p.Path == "." {
			return fmt.Errorf("materialize: bad path %q", p.Path)
		}
	}
	parent := func(p string) (*fsx.Dir, error) {
		d, err := r.OpenDir(tree.Parent(p))
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fsx.ErrNotDir) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("%q: %w", tree.Parent(p), ErrNoParent)
		}
		return d, err
	}
	// Removals, deepest first: whatever is at a path that must end absent
	// or of another kind goes.
	for i := len(puts) - 1; i >= 0; i-- {
		p := puts[i]
		d, err := parent(p.Path)
		if errors.Is(err, ErrNoParent) {
			continue // nothing there to remove; a creation below will say so
		}
		if err != nil {
			return err
		}
		name := tree.Base(p.Path)
		st, err := d.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			d.Close()
			return err
		case st.Mode.IsDir() && (p.New == nil || p.New.Type != tree.Dir):
			if err := d.Rmdir(name); err != nil {
				d.Close()
				if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
					return fmt.Errorf("%q: %w", p.Path, ErrNotEmpty)
				}
				return err
			}
		case !st.Mode.IsDir() && (p.New == nil || p.New.Type == tree.Dir):
			if err := d.Unlink(name); err != nil {
				d.Close()
				return err
			}
		}
		d.Close()
	}
	// Creations, shallowest first. Directories are made with owner access
	// so their puts can go in, and get their own bits at the end.
	var dirs []Put
	for _, p := range puts {
		if p.New == nil {
			continue
		}
		d, err := parent(p.Path)
		if err != nil {
			return err
		}
		err = create(d, p)
		d.Close()
		if err != nil {
			return err
		}
		if p.New.Type == tree.Dir {
			dirs = append(dirs, p)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		p := dirs[i]
		d, err := parent(p.Path)
		if err != nil {
			return err
		}
		err = d.Chmod(tree.Base(p.Path), fs.FileMode(p.New.Perm))
		d.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func create(d *fsx.Dir, p Put) error {
	name := tree.Base(p.Path)
	switch p.New.Type {
	case tree.Dir:
		st, err := d.Lstat(name)
		if err == nil && st.Mode.IsDir() {
			return d.Chmod(name, fs.FileMode(p.New.Perm|0o700))
		}
		return d.Mkdir(name, fs.FileMode(p.New.Perm|0o700))
	case tree.File:
		f, tmp, err := d.CreateTemp(opTempPrefix)
		if err != nil {
			return err
		}
		_, err = f.Write(p.Content)
		if err == nil {
			err = f.Chmod(fs.FileMode(p.New.Perm))
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = d.Rename(tmp, d, name)
		}
		if err != nil {
			_ = d.Unlink(tmp) // the rename failed: the temporary is ours to remove
		}
		return err
	case tree.Symlink:
		// A name that the removal pass left must not be there any more, but
		// a symlink is replaced atomically all the same.
		for range 100 {
			tmp := fmt.Sprintf("%sl%x", opTempPrefix, rand.Uint64())
			if err := d.Symlink(p.New.Target, tmp); err != nil {
				if errors.Is(err, fs.ErrExist) {
					continue
				}
				return err
			}
			if err := d.Rename(tmp, d, name); err != nil {
				_ = d.Unlink(tmp) // as above
				return err
			}
			return nil
		}
		return fmt.Errorf("symlink %q: no free temporary name", p.Path)
	}
	return fmt.Errorf("materialize %q: cannot create a %s", p.Path, p.New.Type)
}
