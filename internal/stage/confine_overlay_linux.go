package stage

import (
	"path/filepath"
	"strings"
)

// overlayUpper returns the upper directory of the mount a mountinfo line
// (split at its spaces) describes, when it is an overlay that has one: its
// super options, after the " - " separator and the source, hold
// upperdir=PATH with the kernel's octal escapes.
func overlayUpper(f []string) string {
	for i := 6; i+3 < len(f); i++ {
		if f[i] != "-" {
			continue
		}
		if f[i+1] != "overlay" {
			return ""
		}
		for _, o := range strings.Split(f[i+3], ",") {
			if v, ok := strings.CutPrefix(o, "upperdir="); ok {
				return unescapeMountinfo(v)
			}
		}
		return ""
	}
	return ""
}

// coverOverlayAliases makes read-only every overlay mount whose upper
// directory lies on the filesystem dev and holds the tree (a path of that
// filesystem), or, for the workspace, lies within it: what is written
// through such an overlay lands in its upper directory, so in the tree,
// though the overlay is a filesystem of its own (another device, which the
// search for other mounts of the tree by device does not find). An upper
// directory within the state root is a stage's view, wtx's own: that of
// the command's stage is the view itself. An upper directory this process
// cannot resolve (given in another mount namespace, gone) shows nothing of
// the tree here.
func coverOverlayAliases(mounts []mountEntry, dev, tree string, workspace bool) error {
	for _, m := range mounts {
		if m.upper == "" || !filepath.IsAbs(m.upper) {
			continue
		}
		udev, utree, err := treeIn(mounts, filepath.Clean(m.upper))
		if err != nil || udev != dev {
			continue // not resolved here, or on another filesystem: not the tree
		}
		if !inTree(tree, utree) && !(workspace && inTree(utree, tree)) {
			continue
		}
		if err := readOnlyMountAt(m); err != nil {
			return err
		}
	}
	return nil
}
