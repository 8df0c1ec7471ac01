package stage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Probe starts the namespace helper on a tiny overlay in a temporary
// directory of stateDir, whose lower layer holds a file and a directory:
// the helper deletes the file and replaces the directory, and Probe checks
// that the upper directory holds a whiteout and an opaque directory as Scan
// reads them. The helper also mounts an overlay with the workspace as lower
// layer. Any failure (user namespaces switched off, no overlayfs, a state
// root that cannot hold an upper layer) is reported as ErrUnsupported.
func (Overlay) Probe(ctx context.Context, workspace, stateDir string) error {
	if _, err := os.Stat("/proc/self/exe"); err != nil {
		return fmt.Errorf("overlay: cannot re-execute wtx: %v: %w", err, ErrUnsupported)
	}
	dir, err := os.MkdirTemp(stateDir, ".probe-overlay-")
	if err != nil {
		return err
	}
	defer removeProbeDir(dir)
	for _, d := range []string{"l", "l/d", "u", "w", "m", "ws", "ws/u", "ws/w", "ws/m"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	for _, f := range []string{"l/f", "l/d/g"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("probe\n"), 0o644); err != nil {
			return err
		}
	}
	spec := &nsSpec{Probe: true, Workspace: workspace, Lower: filepath.Join(dir, "l"), Upper: filepath.Join(dir, "u"),
		Work: filepath.Join(dir, "w"), Merged: filepath.Join(dir, "m"), Hidden: filepath.Join(dir, "ws"),
		UserXattr: os.Geteuid() != 0, PIDNS: true}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/proc/self/exe")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	cmd.Dir = "/"
	if err := helperCommand(cmd, spec); err != nil {
		return err
	}
	err = startHelper(cmd)
	if err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EINVAL) {
			msg = "cannot create a user namespace (unprivileged user namespaces may be switched off): " + msg
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("overlay: %s: %w", msg, ErrUnsupported)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(dir, "u", "f"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		return fmt.Errorf("overlay: a deletion did not leave a whiteout in the upper directory: %w", ErrUnsupported)
	}
	v := &overlayView{cfg: overlayConfig{UserXattr: spec.UserXattr}}
	root, err := os.Open(filepath.Join(dir, "u"))
	if err != nil {
		return err
	}
	defer root.Close()
	fd, err := unix.Openat(int(root.Fd()), "d", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("overlay: a replaced directory is not in the upper directory: %v: %w", err, ErrUnsupported)
	}
	unix.Close(fd)
	if ok, err := v.isOpaqueAt(int(root.Fd()), "d"); err != nil || !ok {
		return fmt.Errorf("overlay: a replaced directory is not marked opaque (%v): %w", err, ErrUnsupported)
	}
	return nil
}

// probeInNamespace is the helper's side of Probe.
func probeInNamespace(s *nsSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := mountOverlay(s.Lower, s.Upper, s.Work, s.Merged, s.UserXattr, false); err != nil {
		return err
	}
	m := s.Merged
	steps := []func() error{
		func() error { return os.Remove(filepath.Join(m, "f")) },
		func() error { return os.Remove(filepath.Join(m, "d", "g")) },
		func() error { return os.Remove(filepath.Join(m, "d")) },
		func() error { return os.Mkdir(filepath.Join(m, "d"), 0o755) },
		func() error { return os.WriteFile(filepath.Join(m, "d", "n"), []byte("new\n"), 0o644) },
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return fmt.Errorf("write in a probe overlay: %w", err)
		}
	}
	ws := s.Hidden
	if err := mountOverlay(s.Workspace, filepath.Join(ws, "u"), filepath.Join(ws, "w"), filepath.Join(ws, "m"), s.UserXattr, false); err != nil {
		return fmt.Errorf("with the workspace as lower layer: %w", err)
	}
	if _, err := os.ReadDir(filepath.Join(ws, "m")); err != nil {
		return fmt.Errorf("read the workspace through an overlay: %w", err)
	}
	// Every command runs confined: a system where that cannot be done
	// cannot use this backend. (The supervisor of a run mounts a fresh
	// /proc for its PID namespace too.)
	if os.Getpid() == 1 {
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount /proc for the PID namespace: %w", err)
		}
	}
	return probeConfinement()
}

// removeProbeDir removes a probe directory, whose work directories the
// overlay leaves unreadable.
func removeProbeDir(dir string) {
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
	os.RemoveAll(dir)
}
