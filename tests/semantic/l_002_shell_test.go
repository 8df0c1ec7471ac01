//go:build linux

package semantic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestL002_ShellOnTerminalCopy checks that a copy view's shell, now under
// a pid-1 supervisor in namespaces of its own, behaves as before on a
// terminal: an interactive bash has job control (a background job is
// listed and killed by its job number, without "no job control" or
// "cannot set terminal process group"), sees the caller's uid and the
// view, at the workspace's own path (T-002), as its directory, and what it
// creates is the caller's and staged.
func TestL002_ShellOnTerminalCopy(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skipf("no bash: %v", err)
	}
	bin := wtxtest.Binary(t, false)
	ws, state := l002Env(t, bin, "copy")
	r := runWtx(t, ws, state, "begin", "--backend", "copy", "--name", "sh")
	if r.code != 0 {
		t.Fatalf("begin: %s", r.stderr)
	}
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptm.Close()
	if err := unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("no pseudo-terminal here: unlock: %v", err)
	}
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	cmd := exec.Command(bin, "-C", ws, "shell", "sh")
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state, "SHELL="+bash, "HOME="+t.TempDir(), "PS1=$ ")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&out, ptm) // ends with EIO once the terminal's last user is gone
		close(done)
	}()
	if err := cmd.Start(); err != nil {
		pts.Close()
		t.Fatal(err)
	}
	pts.Close()
	time.Sleep(500 * time.Millisecond)
	_, _ = io.WriteString(ptm, "echo UID=$(id -u) DIR=$PWD; sleep 30 & jobs; kill %1; wait %1; echo JOBRC=$?; touch shellfile; exit\n") // a failed write shows below
	werr := make(chan error, 1)
	go func() { werr <- cmd.Wait() }()
	select {
	case err = <-werr:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill() // it hung: the output below says where
		err = <-werr
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	text := out.String()
	if cmd.ProcessState.ExitCode() != 0 {
		t.Fatalf("wtx shell exited %d:\n%s", cmd.ProcessState.ExitCode(), text)
	}
	for _, bad := range []string{"no job control", "cannot set terminal process group"} {
		if strings.Contains(text, bad) {
			t.Errorf("the shell says %q:\n%s", bad, text)
		}
	}
	if !strings.Contains(text, "UID="+strconv.Itoa(os.Geteuid())+" DIR="+ws+"\r") {
		t.Errorf("the shell does not see the caller's uid and the view as its directory:\n%s", text)
	}
	// The job's end is read from `wait %1`'s status, 128+SIGTERM: whether
	// bash also prints "Terminated" depends on whether the job ended
	// before or during the wait, which is a race of bash's own.
	if !strings.Contains(text, "[1]+  Running") || !strings.Contains(text, "JOBRC=143") {
		t.Errorf("job control did not list and stop the background job:\n%s", text)
	}
	if !strings.Contains(text, "A shellfile") {
		t.Errorf("the shell's file was not staged:\n%s", text)
	}
	view := filepath.Join(state, "stages")
	var owner int = -1
	_ = filepath.Walk(view, func(p string, fi os.FileInfo, err error) error { // unreadable parts are skipped
		if err == nil && fi.Name() == "shellfile" {
			owner = int(fi.Sys().(*syscall.Stat_t).Uid)
		}
		return nil
	})
	if owner != os.Geteuid() {
		t.Errorf("the shell's file belongs to uid %d, want the caller's %d", owner, os.Geteuid())
	}
}
