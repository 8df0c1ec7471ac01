package stage

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"strings"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// RestoreStep sets one path of a view to a given entry; a list of them is
// what tree.Plan orders: removals deepest first, then creations parents
// first, then directory permission bits children first.
type RestoreStep struct {
	Kind tree.StepKind
	Path string
	// Perm is a written file's, a made directory's or a chmod's bits.
	Perm uint32
	// Target is a symlink's.
	Target string
	// Size and Content give a written file's bytes: Content opens a reader
	// of exactly Size bytes (one that checks them against their digest).
	Size    int64
	Content func() (io.ReadCloser, error)
}

// Restore performs steps in the view, in order. A view with a tree outside
// any namespace is changed directly; one that exists only inside a
// namespace gets a re-execution of this binary in it, which reads the steps
// and the files' contents from a pipe. A step that fails stops the rest;
// the caller discards the view.
func Restore(ctx context.Context, v View, steps []RestoreStep) error {
	if len(steps) == 0 {
		return nil
	}
	if root := v.Root(); root != "" {
		return restoreTree(root, steps)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("restore in the view: find this program: %w", err)
	}
	cmd := exec.CommandContext(ctx, self, fileOpArg, "restore")
	cmd.Env = append(os.Environ(), fileOpEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := v.Prepare(cmd, RunOptions{}); err != nil {
		in.Close()
		return err
	}
	untie := tieToCaller(cmd)
	defer untie()
	if err := startHelper(cmd); err != nil {
		in.Close()
		return err
	}
	werr := encodeRestore(in, steps)
	if cerr := in.Close(); werr == nil {
		werr = cerr
	}
	err = cmd.Wait()
	if err != nil {
		return fmt.Errorf("restore in the view: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if werr != nil {
		return fmt.Errorf("restore in the view: %w", werr)
	}
	return nil
}

// encodeRestore writes steps as the helper reads them: per step its kind,
// path, bits, target and size, then as many bytes of content.
func encodeRestore(w io.Writer, steps []RestoreStep) error {
	bw := bufio.NewWriter(w)
	var hdr []byte
	for _, st := range steps {
		hdr = hdr[:0]
		hdr = binary.AppendUvarint(hdr, uint64(st.Kind))
		hdr = binary.AppendUvarint(hdr, uint64(len(st.Path)))
		hdr = append(hdr, st.Path...)
		hdr = binary.AppendUvarint(hdr, uint64(st.Perm))
		hdr = binary.AppendUvarint(hdr, uint64(len(st.Target)))
		hdr = append(hdr, st.Target...)
		size := int64(0)
		if st.Kind == tree.StepWrite {
			size = st.Size
		}
		hdr = binary.AppendUvarint(hdr, uint64(size))
		if _, err := bw.Write(hdr); err != nil {
			return err
		}
		if size == 0 {
			continue
		}
		r, err := st.Content()
		if err != nil {
			return err
		}
		n, err := io.Copy(bw, io.LimitReader(r, size))
		if err == nil {
			// Read to the end, so a checking reader compares the digest.
			var extra int64
			extra, err = io.Copy(io.Discard, r)
			if err == nil && (n != size || extra != 0) {
				err = fmt.Errorf("content of %q is not %d bytes long", st.Path, size)
			}
		}
		r.Close()
		if err != nil {
			return err
		}
	}
	return bw.Flush()
}

// restoreMain is the helper's side: it reads steps from stdin and performs
// them in the current directory, which Prepare made the view's root.
func restoreMain() error {
	dir, err := os.Getwd()
	if err != nil {
		return err
	}
	r, err := fsx.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer r.Close()
	br := bufio.NewReader(os.Stdin)
	for {
		k, err := binary.ReadUvarint(br)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		st := RestoreStep{Kind: tree.StepKind(k)}
		if st.Path, err = readString(br); err != nil {
			return err
		}
		perm, err := binary.ReadUvarint(br)
		if err != nil {
			return err
		}
		st.Perm = uint32(perm)
		if st.Target, err = readString(br); err != nil {
			return err
		}
		size, err := binary.ReadUvarint(br)
		if err != nil {
			return err
		}
		st.Size = int64(size)
		// The content is read straight from the pipe as the file is written.
		body := &countingReader{r: io.LimitReader(br, st.Size)}
		st.Content = func() (io.ReadCloser, error) { return io.NopCloser(body), nil }
		if err := restoreStep(r, dir, st); err != nil {
			return fmt.Errorf("%s %q: %w", st.Kind, st.Path, err)
		}
		if body.n != st.Size {
			if _, err := io.Copy(io.Discard, body); err != nil {
				return err
			}
			if body.n != st.Size {
				return fmt.Errorf("%s %q: content cut short", st.Kind, st.Path)
			}
		}
	}
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func readString(r *bufio.Reader) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", err
	}
	if n > 1<<20 {
		return "", fmt.Errorf("restore: a name of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// restoreTree performs steps beneath the tree at root, never following a
// symlink.
func restoreTree(root string, steps []RestoreStep) error {
	r, err := fsx.OpenRoot(root)
	if err != nil {
		return err
	}
	defer r.Close()
	for _, st := range steps {
		if err := restoreStep(r, root, st); err != nil {
			return fmt.Errorf("%s %q: %w", st.Kind, st.Path, err)
		}
	}
	return nil
}

func restoreStep(r *fsx.Root, root string, st RestoreStep) error {
	if err := fsx.ValidRel(st.Path); err != nil || st.Path == "." {
		return fmt.Errorf("not a clean relative path")
	}
	if st.Kind == tree.StepWrite {
		rc, err := st.Content()
		if err != nil {
			return err
		}
		defer rc.Close()
		return writeReaderInTree(root, st.Path, opTempPrefix, rc, fs.FileMode(st.Perm), 0)
	}
	var d *fsx.Dir
	var err error
	if st.Kind == tree.StepMkdir || st.Kind == tree.StepSymlink {
		d, err = mkdirAll(r, tree.Parent(st.Path), 0)
	} else {
		d, err = r.OpenDir(tree.Parent(st.Path))
	}
	if err != nil {
		return err
	}
	defer d.Close()
	name := tree.Base(st.Path)
	switch st.Kind {
	case tree.StepRemove:
		if err := d.Unlink(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case tree.StepRmdir:
		if err := d.Rmdir(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	case tree.StepMkdir:
		// Owner access until its permission step, so its contents can go in.
		if err := d.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
	case tree.StepSymlink:
		if st, err := d.Lstat(name); err == nil {
			if st.Mode.IsDir() {
				return ErrIsDir
			}
			if err := d.Unlink(name); err != nil {
				return err
			}
		}
		return d.Symlink(st.Target, name)
	case tree.StepChmod, tree.StepDirPerm:
		return d.Chmod(name, fs.FileMode(st.Perm))
	default:
		return fmt.Errorf("unknown step kind %d", st.Kind)
	}
	return nil
}
