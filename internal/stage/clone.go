//go:build linux || darwin

package stage

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/wtx-dev/wtx/internal/tree"
)

// Clone is the backend that stages each file as a copy-on-write clone of
// the workspace file (FICLONE on btrfs and XFS, clonefile(2) on APFS): no
// data is copied and nothing is hashed at open. Base digests are computed
// lazily, for the paths of the change set. The view is frozen at open.
type Clone struct{}

// Name returns "clone".
func (Clone) Name() string { return "clone" }

// Probe clones a small file in stateDir, and refuses a workspace on another
// filesystem than the state root (clones do not cross filesystems).
func (Clone) Probe(ctx context.Context, workspace, stateDir string) error {
	ws, err := os.Stat(workspace)
	if err != nil {
		return err
	}
	st, err := os.Stat(stateDir)
	if err != nil {
		return err
	}
	if devOf(ws) != devOf(st) {
		return fmt.Errorf("the workspace and the state root are on different filesystems, and clones cannot cross them: %w", ErrUnsupported)
	}
	dir, err := os.MkdirTemp(stateDir, ".probe-clone-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, "a")
	if err := os.WriteFile(src, []byte("wtx clone probe\n"), 0o600); err != nil {
		return err
	}
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	out, err := cloneInto(f, filepath.Join(dir, "b"))
	if err != nil {
		return fmt.Errorf("%s does not clone files: %w", fsName(stateDir), err)
	}
	return out.Close()
}

// Open clones the workspace's surface into req.Dir/view.
func (Clone) Open(ctx context.Context, req OpenRequest) (View, *tree.Manifest, error) {
	m, err := openTree(ctx, req, "clone", cloneFile)
	if err != nil {
		return nil, nil, err
	}
	v, err := attachClone(req.Workspace, req.Dir)
	if err != nil {
		return nil, nil, err
	}
	return v, m, nil
}

// Attach returns the view that Open made in dir.
func (Clone) Attach(ctx context.Context, workspace, dir string) (View, error) {
	return attachClone(workspace, dir)
}

func attachClone(workspace, dir string) (*cloneView, error) {
	cv, err := attachCopy(workspace, dir)
	if err != nil {
		return nil, err
	}
	return &cloneView{copyView: cv, workspace: workspace}, nil
}

var (
	_ Backend = Clone{}
	_ View    = (*cloneView)(nil)
)

type cloneView struct {
	*copyView
	workspace string
}

func (v *cloneView) Prepare(cmd *exec.Cmd, opts RunOptions) error {
	if err := refuseConfinement("clone", opts); err != nil {
		return err
	}
	return v.copyView.Prepare(cmd, RunOptions{})
}

// Scan walks the view, hashes the files whose stat tuple moved, and fills
// the base digests the change set needs from the workspace.
func (v *cloneView) Scan(ctx context.Context, base *tree.Manifest, exclude tree.Selectors) ([]tree.Entry, error) {
	cache := v.digestCache()
	es, err := scanTree(ctx, v.root, base, exclude, true, &v.leftOutSet, cache)
	if err != nil {
		return nil, err
	}
	if err := fillBaseDigests(ctx, v.workspace, base, es, cache); err != nil {
		return nil, err
	}
	cache.save()
	return es, nil
}

// cloneFile clones src (closed on return) to a new file at dst and records
// the new file's stat tuple; the digest stays unknown.
func cloneFile(src *os.File, dst string, e *tree.Entry) (err error) {
	defer src.Close()
	out, err := cloneInto(src, dst)
	if err != nil {
		return fmt.Errorf("stage %s: %w", e.Path, err)
	}
	defer func() {
		if cerr := out.Close(); err == nil {
			err = cerr
		}
	}()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	fi, err := out.Stat()
	if err != nil {
		return err
	}
	if fi.Size() != st.Size() || st.Size() != e.WS.Size || st.ModTime().UnixNano() != e.WS.Mtime || viewTuple(st).Ino != e.WS.Ino {
		return fmt.Errorf("stage %s: file changed while it was being cloned: %w", e.Path, ErrUnstable)
	}
	if err := out.Chmod(fs.FileMode(e.Perm)); err != nil {
		return err
	}
	t := time.Unix(0, e.WS.Mtime)
	if err := os.Chtimes(dst, t, t); err != nil {
		return err
	}
	if fi, err = out.Stat(); err != nil {
		return err
	}
	e.View = viewTuple(fi)
	return nil
}
