package stage

import (
	"io/fs"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// TestGroupCheckerUnmappedIDs checks which entries of ids an overlay's
// user namespace cannot map make the overlay unfit: those the caller could
// change, itself or beneath it, and only those.
func TestGroupCheckerUnmappedIDs(t *testing.T) {
	const me = 1000
	file := func(uid, gid uint32, perm fs.FileMode) fsx.Stat { return fsx.Stat{UID: uid, GID: gid, Mode: perm} }
	dir := func(uid, gid uint32, perm fs.FileMode) fsx.Stat {
		return fsx.Stat{UID: uid, GID: gid, Mode: fs.ModeDir | perm}
	}
	for _, c := range []struct {
		name    string
		entries []string
		stats   []fsx.Stat
		want    string // the entry named, "" for none
	}{
		{"owner-not-member", []string{"f"}, []fsx.Stat{file(me, 0, 0o644)}, "f"},
		{"owner-not-member-read-only", []string{"f"}, []fsx.Stat{file(me, 0, 0o444)}, "f"},
		{"other-writable", []string{"w"}, []fsx.Stat{file(0, 0, 0o666)}, "w"},
		{"root-tree-read-only", []string{"ro", "ro/x"}, []fsx.Stat{dir(0, 0, 0o755), file(0, 0, 0o644)}, ""},
		{"root-dir-over-own-file", []string{"rdir", "rdir/sub", "rdir/sub/mine"},
			[]fsx.Stat{dir(0, 0, 0o755), dir(me, me, 0o755), file(me, me, 0o644)}, "rdir"},
		{"own-everything", []string{"d", "d/f"}, []fsx.Stat{dir(me, me, 0o755), file(me, me, 0o600)}, ""},
		{"link-of-another", []string{"l"}, []fsx.Stat{{UID: 0, GID: 0, Mode: fs.ModeSymlink | 0o777}}, ""},
		{"root-of-view", []string{"."}, []fsx.Stat{dir(me, 0, 0o755)}, ""},
	} {
		g := &groupChecker{uid: me, mapped: map[uint32]bool{me: true}, member: map[uint32]bool{me: true},
			unmappable: map[uint32]bool{}, found: map[uint32]string{}, frozen: map[string]fsx.Stat{}}
		for i, rel := range c.entries {
			g.see(rel, c.stats[i])
		}
		err := g.err()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v; want no refusal", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), "holds "+c.want+",")):
			t.Errorf("%s: %v; want a refusal naming %s", c.name, err, c.want)
		}
	}
}
