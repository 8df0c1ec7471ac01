package stage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// NamespaceMain is the entry point of the helper that supervises a command
// run in a view: wtx re-executes itself with HelperArg and one encoded
// nsSpec. For the overlay backend the helper starts in new namespaces (mount
// and PID; and, when not root, a user namespace that maps the caller to its
// own ids, the helper holding the capabilities it needs to mount as ambient
// capabilities of that namespace): it mounts the overlay, binds the merged
// view over the workspace's own path, applies --share, --read-only and
// --no-network and mounts a fresh /proc. For the other backends it becomes
// a child subreaper. Then it starts the command (through one more
// re-execution, which closes inherited descriptors and drops the
// capabilities, see execMain), reaps every process that ends up its child,
// and when the command ends stops the processes it left running (see
// supervise). It returns the command's exit status (128+N for signal N),
// 125 for a setup failure, 126 or 127 when the command cannot be executed.
//
// When wtx is not run as root, the command runs with the caller's own ids
// and no capabilities: it meets the permission checks it would meet run
// directly, and files it creates belong to the caller.
func NamespaceMain(args []string) int {
	if len(args) != 1 || os.Getenv(helperEnv) == "" {
		fmt.Fprintf(os.Stderr, "wtx: %s is internal to wtx\n", HelperArg)
		return 125
	}
	spec, err := decodeSpec(args[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "wtx: stage helper: %v\n", err)
		return 125
	}
	// A user namespace whose supplementary groups newgidmap maps is
	// started without a group map: the caller writes it now.
	if err := waitGroupMap(); err != nil {
		fmt.Fprintf(os.Stderr, "wtx: stage helper: %v\n", err)
		return 125
	}
	// Nothing this process inherited beyond 0, 1 and 2 reaches the
	// command; the descriptors it was given stay open here.
	if err := markInheritedCloexec(); err != nil {
		fmt.Fprintf(os.Stderr, "wtx: stage helper: %v\n", err)
		return 125
	}
	if spec.Probe {
		if err := probeInNamespace(spec); err != nil {
			fmt.Fprintf(os.Stderr, "%v\n", err)
			return 125
		}
		return 0
	}
	return supervise(spec)
}

// enterView builds the view in this (new) mount namespace and changes into
// the command's directory.
func enterView(s *nsSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := coverWorkspaceAliases(s); err != nil {
		return err
	}
	if err := lockUpper(s.Upper); err != nil {
		return err
	}
	volatile, err := prepareVolatile(filepath.Dir(s.Upper), s.Work, s.Upper)
	if err != nil {
		return err
	}
	if err := mountOverlay(s.Lower, s.Upper, s.Work, s.Merged, s.UserXattr, volatile); err != nil {
		if !volatile || !errors.Is(err, unix.EINVAL) {
			return err
		}
		// A kernel without the option (before 5.10): a mount that syncs.
		if err := mountOverlay(s.Lower, s.Upper, s.Work, s.Merged, s.UserXattr, false); err != nil {
			return err
		}
		volatile = false
	}
	if volatile {
		marks, err := openMarkDir(s.Work)
		if err != nil {
			return err
		}
		s.volatileMarks = marks // close-on-exec; the helper's until it exits
		openMarks(s.Work, marks)
	}
	s.volatile = volatile
	// Shared and excluded paths, never through a link (viewsetup_linux.go).
	if err := finishView(s); err != nil {
		return err
	}
	if err := unix.Mount(s.Merged, s.Workspace, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("mount the view on %s: %w", s.Workspace, err)
	}
	if s.ReadOnly {
		// Every mount of the view, the shared paths and hidden backings
		// (bound read-only already) among them.
		if err := readOnlyView(s); err != nil {
			return err
		}
	}
	if s.NoNetwork {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if err := os.Chdir(s.Cwd); err != nil {
		return fmt.Errorf("enter %s: %w", s.Cwd, err)
	}
	return nil
}

// upperLock is the upper directory, locked while this helper (and so its
// overlay mount) lives; close-on-exec, it never reaches the command.
var upperLock int = -1

// lockUpper takes an exclusive lock on the upper directory, so that two
// overlay mounts never share it (overlayfs leaves that undefined): a second
// helper for the same stage fails instead of mounting.
func lockUpper(upper string) error {
	fd, err := unix.Open(upper, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open the upper directory: %w", err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB); err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.EWOULDBLOCK) {
			return fmt.Errorf("the stage's view is in use by another command (its upper directory is mounted)")
		}
		return fmt.Errorf("lock the upper directory: %w", err)
	}
	upperLock = fd
	return nil
}

// mountOverlay mounts an overlay of lower and upper at merged. Its options
// keep the upper directory readable by Scan: full copy-ups (metacopy=off),
// no index, and no directory redirects (redirect_dir=nofollow: a renamed
// lower directory fails with EXDEV and tools fall back to copying; "off"
// would still follow redirects and conflicts with userxattr).
func mountOverlay(lower, upper, work, merged string, userXattr, volatile bool) error {
	opts := "lowerdir=" + escapeOverlayPath(lower) + ",upperdir=" + escapeOverlayPath(upper) +
		",workdir=" + escapeOverlayPath(work) + ",index=off,metacopy=off,redirect_dir=nofollow"
	if userXattr {
		opts += ",userxattr"
	}
	if volatile {
		opts += ",volatile" // see volatile_linux.go
	}
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay on %s: %w", merged, err)
	}
	return nil
}

// escapeOverlayPath escapes the characters that separate overlay options
// and layers.
func escapeOverlayPath(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `,`, `\,`, `:`, `\:`)
	return r.Replace(p)
}

// remountReadOnly makes the mount at path read-only, keeping the flags that
// a user namespace may not clear.
func remountReadOnly(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("read-only %s: %w", path, err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY)
	for _, f := range []struct{ st, ms uintptr }{
		{unix.ST_NOSUID, unix.MS_NOSUID}, {unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_NODIRATIME, unix.MS_NODIRATIME}, {unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if uintptr(st.Flags)&f.st != 0 {
			flags |= f.ms
		}
	}
	if err := unix.Mount("", path, "", flags, ""); err != nil {
		return fmt.Errorf("read-only %s: %w", path, err)
	}
	return nil
}

// loopbackUp brings up lo in this (new) network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("loopback up: %w", err)
	}
	return nil
}
