package stage

import (
	"fmt"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// A command run in a copy or clone view needs no mount to see its view,
// but it is held the way an overlay view's is: its supervisor starts in
// new user, PID and mount namespaces (the user namespace maps the caller
// to itself: every id for root, the caller's user and groups otherwise),
// as pid 1, which nothing inside can kill, with a parent-death signal. In
// its mount namespace the state root is read-only but for the view, and
// the kernel's settings are read-only (protectKernel); the last step nests
// one more user and mount namespace, which locks all of it, as for an
// overlay view (confineAttr). Where the namespaces cannot be made, the
// supervisor is a child subreaper instead (see Start).

// disableIsolate is the negative control's switch: copy and clone run
// under a subreaper, as where namespaces cannot be made.
const disableIsolate = "contain-ns"

// confined reports whether the command of s runs in namespaces of its
// supervisor's making, where the last step is confined.
func (s *nsSpec) confined() bool { return s.View || s.Isolate }

// isolateCaps are what an ordinary user's supervisor holds in its user
// namespace: mounts (the read-only binds, /proc) and the id maps of the
// last step's nested namespace.
var isolateCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETUID, unix.CAP_SETGID}

// isolateAttr makes the supervisor start in new user, PID and mount
// namespaces, identity-mapped.
func isolateAttr(a *syscall.SysProcAttr) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	if os.Geteuid() == 0 {
		all := []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1<<32 - 1}}
		a.UidMappings, a.GidMappings = all, all
		a.GidMappingsEnableSetgroups = true
		return
	}
	uid := os.Geteuid()
	a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
	groupMapAttr(a)
	a.AmbientCaps = isolateCaps
}

// isolating reports whether a copy or clone view's supervisor is to be
// started in namespaces of its own.
func isolating() bool { return !containmentDisabled() && !failpoint.Disabled(disableIsolate) }

// enterIsolated makes this (new) mount namespace's mounts private, so
// that nothing mounted here reaches the host.
func enterIsolated() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	return nil
}
