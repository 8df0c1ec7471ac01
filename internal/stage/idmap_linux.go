package stage

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// An overlay run without root happens in a user namespace where the caller
// keeps its own user and group ids, and no others: an inode owned by any
// other user or group shows as 65534 there. Such an inode can be read, but
// overlayfs cannot copy it up into the stage (the copy must keep its owner
// and group, which the namespace cannot name), so any change to it, or
// beneath it for a directory, fails with EOVERFLOW. Two cases are common:
//
//   - a file of one of the caller's other (supplementary) groups: creating
//     a file in a set-group-id directory of such a group, or changing one
//     of its files. Such groups are mapped to themselves when newgidmap may
//     do it (/etc/subgid grants the gid to the caller);
//   - a file the caller owns whose group it is not in, as root's
//     "chown user file" leaves it: the caller may change it, the overlay
//     cannot.
//
// Open refuses a workspace holding an entry of an id the namespace cannot
// map that the caller could change, itself or beneath it, with ErrUnfit
// naming it, and "auto" takes the next backend. Entries the caller cannot
// change (another user's read-only tree) stay readable and are no reason.

// groupChecker finds the workspace entries an overlay stage run without
// root could not change, as above.
type groupChecker struct {
	uid        uint32
	mapped     map[uint32]bool // gids the namespace maps
	member     map[uint32]bool // the caller's groups
	unmappable map[uint32]bool // the caller's groups the namespace cannot map
	mu         sync.RWMutex
	found      map[uint32]string // gid → first path seen
	// frozen holds the directories (but the root) of ids the namespace
	// cannot map; blocked is the first entry (by path) such that the
	// caller could change it or something beneath it, and blockedSt its
	// ids.
	frozen    map[string]fsx.Stat
	anyFrozen atomic.Bool
	blocked   string
	blockedSt fsx.Stat
}

// newGroupChecker returns nil when there is nothing to check (root).
func newGroupChecker() *groupChecker {
	if os.Geteuid() == 0 || failpoint.Disabled("overlay-groups") {
		return nil
	}
	groups, err := os.Getgroups()
	if err != nil {
		return nil
	}
	c := &groupChecker{uid: uint32(os.Geteuid()), mapped: map[uint32]bool{uint32(os.Getegid()): true},
		member: map[uint32]bool{uint32(os.Getegid()): true}, unmappable: map[uint32]bool{},
		found: map[uint32]string{}, frozen: map[string]fsx.Stat{}}
	for _, g := range extraGroups() {
		c.mapped[g] = true
	}
	for _, g := range groups {
		c.member[uint32(g)] = true
		if !c.mapped[uint32(g)] {
			c.unmappable[uint32(g)] = true
		}
	}
	return c
}

func (c *groupChecker) see(rel string, st fsx.Stat) {
	if c == nil {
		return
	}
	if c.unmappable[st.GID] {
		c.mu.Lock()
		if prev, ok := c.found[st.GID]; !ok || rel < prev {
			c.found[st.GID] = rel
		}
		c.mu.Unlock()
		return // said as a group of the caller's (err)
	}
	if rel == "." || st.IsSymlink() || !st.IsDir() && !st.IsRegular() {
		return // the view's root is the stage's own; a link is changed in its directory
	}
	unmapped := st.UID != c.uid || !c.mapped[st.GID]
	if unmapped && st.IsDir() {
		c.mu.Lock()
		c.frozen[rel] = st
		c.mu.Unlock()
		c.anyFrozen.Store(true)
	}
	if !c.mayChange(st) {
		return
	}
	if unmapped {
		c.block(rel, st)
		return
	}
	if !c.anyFrozen.Load() {
		return
	}
	// Parents are seen before their children: every frozen directory
	// above rel is known.
	for p := tree.Parent(rel); p != "."; p = tree.Parent(p) {
		c.mu.RLock()
		fst, f := c.frozen[p]
		c.mu.RUnlock()
		if f {
			c.block(p, fst) // what it holds can be changed: it cannot
		}
	}
}

// mayChange reports whether the caller could change the entry st
// describes (for a directory, what it holds): it owns it, or its bits let
// the caller write it.
func (c *groupChecker) mayChange(st fsx.Stat) bool {
	switch {
	case st.UID == c.uid:
		return true
	case c.member[st.GID]:
		return st.Mode&0o020 != 0
	}
	return st.Mode&0o002 != 0
}

// block notes rel, of ids the namespace cannot map, as an entry the
// command could not change (itself or beneath it); the first by path is said.
func (c *groupChecker) block(rel string, st fsx.Stat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocked == "" || rel < c.blocked {
		c.blocked, c.blockedSt = rel, st
	}
}

// err says which groups the workspace holds files of that cannot be
// mapped, or which entry the overlay could not let the caller change.
func (c *groupChecker) err() error {
	if c == nil {
		return nil
	}
	if len(c.found) > 0 {
		return c.groupsErr()
	}
	if c.blocked == "" {
		return nil
	}
	st := c.blockedSt
	who := "you"
	if st.UID != c.uid {
		who = userName(st.UID)
	}
	return &unfitError{msg: fmt.Sprintf("the workspace holds %s, owned by %s and %s, and the overlay's user namespace "+
		"maps only your own user and groups: a command could not change it or what it holds in the view (EOVERFLOW)",
		quote.Path(c.blocked), who, groupName(st.GID, c.member[st.GID]))}
}

func (c *groupChecker) groupsErr() error {
	gids := make([]uint32, 0, len(c.found))
	for g := range c.found {
		gids = append(gids, g)
	}
	sort.Slice(gids, func(i, j int) bool { return gids[i] < gids[j] })
	var parts []string
	for _, g := range gids {
		name := strconv.FormatUint(uint64(g), 10)
		if gr, err := user.LookupGroupId(name); err == nil {
			name = gr.Name + " (gid " + name + ")"
		} else {
			name = "gid " + name
		}
		parts = append(parts, fmt.Sprintf("%s, such as %s", name, quote.Path(c.found[g])))
	}
	return &unfitError{msg: fmt.Sprintf("the workspace holds files of your supplementary group %s, which the overlay's "+
		"user namespace cannot map (newgidmap and an /etc/subgid entry granting the gid would): a command could not "+
		"create or change files of that group in the view (EOVERFLOW)", strings.Join(parts, "; "))}
}

// userName names uid for a message.
func userName(uid uint32) string {
	id := strconv.FormatUint(uint64(uid), 10)
	if u, err := user.LookupId(id); err == nil {
		return "user " + u.Username + " (uid " + id + ")"
	}
	return "uid " + id
}

// groupName names gid for a message, saying whether the caller is in it.
func groupName(gid uint32, member bool) string {
	id := strconv.FormatUint(uint64(gid), 10)
	name := "gid " + id
	if g, err := user.LookupGroupId(id); err == nil {
		name = g.Name + " (gid " + id + ")"
	}
	if member {
		return "group " + name
	}
	return "group " + name + ", which you are not in"
}

// extraGroups are the caller's supplementary groups that newgidmap may map
// to themselves: those /etc/subgid grants to the caller, when newgidmap is
// installed.
func extraGroups() []uint32 {
	extraOnce.Do(func() { extra = findExtraGroups() })
	return extra
}

var (
	extraOnce sync.Once
	extra     []uint32
)

func findExtraGroups() []uint32 {
	if os.Geteuid() == 0 {
		return nil
	}
	if _, err := exec.LookPath("newgidmap"); err != nil {
		return nil
	}
	u, err := user.Current()
	if err != nil {
		return nil
	}
	raw, err := os.ReadFile("/etc/subgid")
	if err != nil {
		return nil
	}
	type span struct{ start, count uint64 }
	var grants []span
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 || (f[0] != u.Username && f[0] != u.Uid) {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		count, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 == nil && err2 == nil {
			grants = append(grants, span{start, count})
		}
	}
	groups, err := os.Getgroups()
	if err != nil {
		return nil
	}
	egid := os.Getegid()
	var out []uint32
	for _, g := range groups {
		if g == egid {
			continue
		}
		for _, sp := range grants {
			if uint64(g) >= sp.start && uint64(g) < sp.start+sp.count {
				out = append(out, uint32(g))
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// groupMapAttr sets up the group map of the helper's new user namespace:
// the caller's own group, written by Go as the process starts, or, when
// some supplementary groups can be mapped too, none yet: startHelper then
// has newgidmap write them all, and the helper waits for it (waitGroupMap).
func groupMapAttr(a *syscall.SysProcAttr) {
	if len(extraGroups()) > 0 {
		a.GidMappings = nil
		return
	}
	gid := os.Getegid()
	a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
	a.GidMappingsEnableSetgroups = false
}

// startHelper starts a helper command and, when its user namespace waits
// for its group map, writes it with newgidmap.
func startHelper(cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	a := cmd.SysProcAttr
	if a == nil || a.Cloneflags&syscall.CLONE_NEWUSER == 0 || a.GidMappings != nil {
		return nil
	}
	gid := strconv.Itoa(os.Getegid())
	args := []string{strconv.Itoa(cmd.Process.Pid), gid, gid, "1"}
	for _, g := range extraGroups() {
		n := strconv.FormatUint(uint64(g), 10)
		args = append(args, n, n, "1")
	}
	if out, err := exec.Command("newgidmap", args...).CombinedOutput(); err != nil {
		_ = cmd.Process.Kill() // it waits for the map and would never run
		_ = cmd.Wait()         // its status says nothing more
		return fmt.Errorf("map your supplementary groups into the stage's user namespace: newgidmap: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// waitGroupMap waits, in a helper, until its user namespace has a group
// map (see groupMapAttr): at once unless newgidmap is writing it.
func waitGroupMap() error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw, err := os.ReadFile("/proc/self/gid_map")
		if err != nil {
			return fmt.Errorf("read the group map: %w", err)
		}
		if len(strings.TrimSpace(string(raw))) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the group map of the user namespace was never written")
		}
		time.Sleep(time.Millisecond)
	}
}
