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
	"syscall"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// An overlay run without root happens in a user namespace where the caller
// keeps its own user and group ids. A file of one of the caller's other
// (supplementary) groups stays readable and writable to it there, but no
// inode can be created with an id the namespace does not map: creating a
// file in a set-group-id directory of such a group, or copying one of its
// files up into the stage, fails with EOVERFLOW. Such groups are mapped to
// themselves when newgidmap may do it (/etc/subgid grants the gid to the
// caller); otherwise Open refuses a workspace holding files of them with
// ErrUnfit, and "auto" takes the next backend.

// groupChecker finds the workspace entries whose group is one of the
// caller's groups that the overlay's user namespace cannot map.
type groupChecker struct {
	unmappable map[uint32]bool
	mu         sync.Mutex
	found      map[uint32]string // gid → first path seen
}

// newGroupChecker returns nil when there is nothing to check (root, or
// every group of the caller can be mapped).
func newGroupChecker() *groupChecker {
	if os.Geteuid() == 0 || failpoint.Disabled("overlay-groups") {
		return nil
	}
	groups, err := os.Getgroups()
	if err != nil {
		return nil
	}
	mappable := map[uint32]bool{uint32(os.Getegid()): true}
	for _, g := range extraGroups() {
		mappable[g] = true
	}
	c := &groupChecker{unmappable: map[uint32]bool{}, found: map[uint32]string{}}
	for _, g := range groups {
		if !mappable[uint32(g)] {
			c.unmappable[uint32(g)] = true
		}
	}
	if len(c.unmappable) == 0 {
		return nil
	}
	return c
}

func (c *groupChecker) see(rel string, st fsx.Stat) {
	if c == nil || !c.unmappable[st.Gid] {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.found[st.Gid]; !ok || rel < prev {
		c.found[st.Gid] = rel
	}
}

// err says which groups the workspace holds files of that cannot be mapped.
func (c *groupChecker) err() error {
	if c == nil || len(c.found) == 0 {
		return nil
	}
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
