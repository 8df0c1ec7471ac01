package stage

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// The kernel's settings and the machine's devices are reached through
// /proc and /sys. A command run as root in a view stays root over files
// (its user namespace maps every id to itself), and the kernel lets the
// initial root write /proc/sys whatever capabilities it holds: without
// more, it could set kernel.core_pattern to a program of its own, which
// the kernel then runs as full root outside every namespace. As container
// runtimes do, the supervisor makes these read-only in its mount namespace
// before the last step nests its own, which locks them (protectKernel).
// Writes a root command makes elsewhere on the host are outside the
// workspace, and not transactional (SPEC section 7).

// Read-only trees: the kernel's settings, its trigger and its buses.
var kernelReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/sys"}

// Masked files: each shows as an empty one (/dev/null bound over it).
var kernelMasked = []string{"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug", "/proc/latency_stats"}

// userSysctls is the one directory of /proc/sys that stays writable: the
// limits it holds are those of the user namespace that writes them (the
// last step limits its own user namespaces there) and can only narrow its
// parent's.
const userSysctls = "/proc/sys/user"

// disableConfineKernel is the negative control's switch: /proc/sys, /sys
// and the rest stay as they are.
const disableConfineKernel = "confine-kernel"

// protectKernel makes kernelReadOnly read-only and masks kernelMasked in
// this mount namespace, which must be private. A path this system does
// not have is skipped; any other failure is returned, and the run is
// refused.
func protectKernel() error {
	user := false
	if err := unix.Mount(userSysctls, userSysctls, "", unix.MS_BIND, ""); err == nil {
		user = true
	} else if !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("bind %s: %w", userSysctls, err)
	}
	for _, p := range kernelReadOnly {
		if err := readOnlyTree(p); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue
			}
			return fmt.Errorf("make %s read-only: %w", p, err)
		}
	}
	if user {
		if err := remountFlags(userSysctls, false); err != nil {
			return fmt.Errorf("keep %s writable: %w", userSysctls, err)
		}
	}
	for _, p := range kernelMasked {
		// Masking only hides what the command could read; where it
		// cannot be done the file stays as the kernel shows it.
		_ = unix.Mount("/dev/null", p, "", unix.MS_BIND, "")
	}
	return nil
}

// readOnlyTree binds the tree at path over itself, with every mount
// beneath it, and makes each of them read-only.
func readOnlyTree(path string) error {
	if err := unix.Mount(path, path, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	err := unix.MountSetattr(-1, path, unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY})
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.ENOSYS) {
		return err
	}
	// Before mount_setattr (Linux 5.12): each mount by its path, the top
	// one first.
	if err := remountFlags(path, true); err != nil {
		return err
	}
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasPrefix(f[4], path+"/") {
			continue
		}
		mp := unescapeMountinfo(f[4])
		if err := remountFlags(mp, true); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.EACCES) {
			return fmt.Errorf("%s: %w", mp, err)
		}
	}
	return nil
}

// unescapeMountinfo undoes the octal escapes of a mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v byte
			ok := true
			for _, c := range []byte(s[i+1 : i+4]) {
				if c < '0' || c > '7' {
					ok = false
					break
				}
				v = v*8 + (c - '0')
			}
			if ok {
				b.WriteByte(v)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// remountFlags makes the mount at path read-only or writable, keeping the
// flags that a user namespace may not clear.
func remountFlags(path string, readOnly bool) error {
	if readOnly {
		return remountReadOnly(path)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return err
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	return unix.Mount("", path, "", flags, "")
}
