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
// namespaces, identity-mapped, and a network namespace for --no-network.
func isolateAttr(a *syscall.SysProcAttr, s *nsSpec) {
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWPID | syscall.CLONE_NEWNS
	if s.NoNetwork {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
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
	if s.NoNetwork {
		a.AmbientCaps = append(isolateCaps[:len(isolateCaps):len(isolateCaps)], unix.CAP_NET_ADMIN)
	}
}

// isolating reports whether a copy or clone view's supervisor is to be
// started in namespaces of its own.
func isolating() bool { return !containmentDisabled() && !failpoint.Disabled(disableIsolate) }

// CanConfineViews reports whether a copy or clone view's command can be
// confined here (see RunOptions.Confine): where the namespaces cannot be
// made after all, a run that must be confined is refused then.
func CanConfineViews() bool { return isolating() }

// enterIsolated makes this (new) mount namespace's mounts private, so
// that nothing mounted here reaches the host, and confines the workspace
// as for an overlay view: its other mounts and the state root's read-only,
// the view at its own path (read-only for --read-only), the loopback
// interface up for --no-network.
func enterIsolated(s *nsSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := coverWorkspaceAliases(s); err != nil {
		return err
	}
	if s.Workspace != "" && !confineDisabled(s, disableConfineView) {
		if err := bindCopyView(s); err != nil {
			return err
		}
		if s.ReadOnly {
			if err := readOnlyView(s); err != nil {
				return err
			}
		}
	}
	if s.NoNetwork {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	return nil
}
