package stage_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/stage/stagetest"
)

// TestCloneConformance runs the suite where the temporary directory is (it
// skips, saying why, on a filesystem without reflinks) and, as root with
// mkfs.xfs, again on a loop-mounted XFS.
func TestCloneConformance(t *testing.T) {
	t.Run("tmp", func(t *testing.T) { stagetest.Run(t, stage.Clone{}) })
	t.Run("xfs", func(t *testing.T) {
		dir := loopXFS(t)
		t.Setenv("TMPDIR", dir)
		stagetest.Run(t, stage.Clone{})
	})
}

func TestCloneProbeRefusesExt4AndTmpfs(t *testing.T) {
	dir := t.TempDir()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.EXT4_SUPER_MAGIC && st.Type != unix.TMPFS_MAGIC {
		t.Skipf("the temporary directory is on filesystem %#x, not ext4 or tmpfs", st.Type)
	}
	err := stage.Clone{}.Probe(context.Background(), dir, dir)
	if !errors.Is(err, stage.ErrUnsupported) {
		t.Fatalf("Probe = %v, want ErrUnsupported", err)
	}
	if !strings.Contains(err.Error(), "ext4") && !strings.Contains(err.Error(), "tmpfs") {
		t.Errorf("Probe error %q does not name the filesystem", err)
	}
}

// loopXFS mounts a fresh XFS image and returns a world-writable directory
// on it, or skips.
func loopXFS(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a loop filesystem needs root")
	}
	mkfs, err := exec.LookPath("mkfs.xfs")
	if err != nil {
		t.Skip("mkfs.xfs is not installed")
	}
	base := t.TempDir()
	img, mnt := filepath.Join(base, "xfs.img"), filepath.Join(base, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 320<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-m", "reflink=1", img).CombinedOutput(); err != nil {
		t.Skipf("mkfs.xfs: %v: %s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Skipf("mount -o loop: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v: %s", err, out)
		}
	})
	if err := os.Chmod(mnt, 0o1777); err != nil {
		t.Fatal(err)
	}
	return mnt
}
