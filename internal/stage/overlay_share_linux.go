package stage

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// A shared path is bound from the workspace into the view, so the
// workspace's entry at it must be what the selector names: a share
// selector that is or passes through a symlink of the workspace is refused
// when the stage opens (checkShareSelectors, and Open for what a wildcard
// matched), and a shared path that has become one since is refused when a
// command is about to run (checkSharedPaths). The helper checks again by
// descriptor as it binds (viewsetup_linux.go).

// linkedShare is the refusal of a share selector sel because the
// workspace's entry link, on the way to what sel names or at it, is a
// symlink.
func linkedShare(sel, link string) error {
	return fmt.Errorf("share %s: %w: %s is a symlink of the workspace, which wtx never follows",
		quote.Path(sel), ErrLinkedSelector, quote.Path(link))
}

// checkShareSelectors refuses a share selector whose leading components
// without wildcards reach a symlink of the workspace.
func checkShareSelectors(ws *fsx.Root, sels tree.Selectors) error {
	if failpoint.Disabled(disableViewLinks) {
		return nil
	}
	for _, sel := range sels {
		prefix, _ := sel.LiteralPrefix()
		if prefix == "" {
			continue
		}
		if err := firstLink(ws, prefix, func(link string) error { return linkedShare(sel.String(), link) }); err != nil {
			return err
		}
	}
	return nil
}

// checkSharedPaths refuses a shared path of the workspace that is or
// passes through a symlink; one that is gone is not shared, as before.
func checkSharedPaths(workspace string, rels []string) error {
	if len(rels) == 0 || failpoint.Disabled(disableViewLinks) {
		return nil
	}
	ws, err := fsx.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer ws.Close()
	for _, rel := range rels {
		if err := firstLink(ws, rel, func(link string) error { return linkedShare(rel, link) }); err != nil {
			return err
		}
	}
	return nil
}

// firstLink looks at each leading run of rel's components in ws, shortest
// first, and returns refuse of the first that is a symlink. It stops
// without error where the path ends in the workspace.
func firstLink(ws *fsx.Root, rel string, refuse func(link string) error) error {
	for i := 0; i <= len(rel); i++ {
		if i < len(rel) && rel[i] != '/' {
			continue
		}
		p := rel[:i]
		st, err := ws.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, fsx.ErrNotDir):
			return nil
		case errors.Is(err, fsx.ErrSymlink):
			return refuse(tree.Parent(p)) // replaced under the look: the nearest name said
		case err != nil:
			return fmt.Errorf("share %s: %w", quote.Path(rel), err)
		case st.IsSymlink():
			return refuse(p)
		}
	}
	return nil
}

// sharedLink is Open's note of a shared path that is a symlink; the first
// one by path is said.
type sharedLink struct{ path string }

func (l *sharedLink) see(rel string, st fsx.Stat) {
	if st.IsSymlink() && !failpoint.Disabled(disableViewLinks) && (l.path == "" || rel < l.path) {
		l.path = rel
	}
}

func (l *sharedLink) err(sels tree.Selectors) error {
	if l.path == "" {
		return nil
	}
	for _, sel := range sels {
		if sel.Match(l.path) {
			return linkedShare(sel.String(), l.path)
		}
	}
	return linkedShare(l.path, l.path)
}
