package wtxtest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// goingDown is the filesystem shutdown ioctl, _IOR('X', 125, __u32), shared
// by XFS (XFS_IOC_GOINGDOWN) and ext4 (EXT4_IOC_SHUTDOWN); noLogFlush is its
// flag that stops the filesystem without writing its log out.
const (
	goingDown  = 0x8004587d
	noLogFlush = 2
)

// Shutdown shuts down the filesystem holding dir without flushing its log,
// as a power cut would: every later call on it fails with EIO until it is
// mounted again, and what was not durable is then gone.
func Shutdown(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("shutdown %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.IoctlSetPointerInt(fd, goingDown, noLogFlush); err != nil {
		return fmt.Errorf("shutdown %s: %w", dir, err)
	}
	return nil
}

// SyncFS makes everything written on the filesystem holding dir durable.
func SyncFS(dir string) error {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		return fmt.Errorf("syncfs %s: %w", dir, err)
	}
	return nil
}

// LoopFS is a small filesystem in an image file, attached to a loop device
// and mounted at Dir. It needs root, losetup and the filesystem's mkfs.
type LoopFS struct {
	// Type is the filesystem type ("xfs", "ext4").
	Type string
	// Options are the mount options.
	Options string
	// Dir is the mount point.
	Dir string
	dev string
}

// NewLoopFS makes a filesystem of type fstype and size MiB (XFS needs 300)
// in a sparse temporary image, passing mkfsArgs to mkfs, mounts it with
// options (may be empty) and unmounts and detaches it when t ends. It skips
// t, saying why, when it does not run as root or a tool is missing.
func NewLoopFS(t testing.TB, fstype string, sizeMiB int64, mkfsArgs []string, options string) *LoopFS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("loop filesystem %s: needs root to mount", fstype)
	}
	for _, tool := range []string{"losetup", "mount", "umount", "mkfs." + fstype} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("loop filesystem %s: %s is not installed", fstype, tool)
		}
	}
	dir := t.TempDir()
	img := filepath.Join(dir, fstype+".img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, sizeMiB<<20); err != nil {
		t.Fatal(err)
	}
	mkfs := append(append([]string{"-q"}, mkfsArgs...), img)
	if out, err := exec.Command("mkfs."+fstype, mkfs...).CombinedOutput(); err != nil {
		t.Fatalf("loop filesystem %s: mkfs: %v: %s", fstype, err, out)
	}
	out, err := exec.Command("losetup", "--find", "--show", img).CombinedOutput()
	if err != nil {
		t.Skipf("loop filesystem %s: no loop device: %v: %s", fstype, err, out)
	}
	l := &LoopFS{Type: fstype, Options: options, Dir: filepath.Join(dir, "mnt"), dev: strings.TrimSpace(string(out))}
	t.Logf("loop filesystem %s on %s", fstype, l.dev)
	t.Cleanup(func() {
		exec.Command("umount", l.Dir).Run()
		exec.Command("losetup", "-d", l.dev).Run()
	})
	if err := os.Mkdir(l.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := l.Mount(); err != nil {
		t.Skipf("loop filesystem %s: %v", fstype, err)
	}
	return l
}

// Mount mounts the filesystem at Dir; mounting after a Shutdown replays
// its journal.
func (l *LoopFS) Mount() error {
	args := []string{"-t", l.Type}
	if l.Options != "" {
		args = append(args, "-o", l.Options)
	}
	if out, err := exec.Command("mount", append(args, l.dev, l.Dir)...).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %s: %v: %s", l.Dir, err, out)
	}
	return nil
}

// Unmount unmounts the filesystem and waits until it is gone: a process
// that entered a new mount namespace while it was mounted keeps it alive
// (and shut down), and mounting the device again would only reattach it.
func (l *LoopFS) Unmount() error {
	if out, err := exec.Command("umount", l.Dir).CombinedOutput(); err != nil {
		return fmt.Errorf("umount %s: %v: %s", l.Dir, err, out)
	}
	// The namespaces that hold it are other tests' commands (this
	// package's or another package's run at the same time), which end on
	// their own; the bound only keeps a leak from hanging the suite.
	alive := filepath.Join("/sys/fs", l.Type, filepath.Base(l.dev))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(alive); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("umount %s: %s is still mounted in another mount namespace (held by %s)", l.Dir, l.dev, holdersOf(l.dev))
		}
	}
}

// holdersOf names the processes whose mount namespace still holds dev.
func holdersOf(dev string) string {
	var who []string
	procs, _ := os.ReadDir("/proc") // no /proc: no names
	for _, p := range procs {
		raw, err := os.ReadFile(filepath.Join("/proc", p.Name(), "mountinfo"))
		if err != nil || !strings.Contains(string(raw), " "+dev+" ") {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "comm")) // gone since: the pid alone
		who = append(who, p.Name()+" "+strings.TrimSpace(string(comm)))
		if len(who) == 8 {
			break
		}
	}
	if len(who) == 0 {
		return "no process found"
	}
	return strings.Join(who, ", ")
}

// Shutdown stops the filesystem as a power cut would (see Shutdown).
func (l *LoopFS) Shutdown() error { return Shutdown(l.Dir) }

// Remount unmounts and mounts the filesystem again.
func (l *LoopFS) Remount() error {
	if err := l.Unmount(); err != nil {
		return err
	}
	return l.Mount()
}
