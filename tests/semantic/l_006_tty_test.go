//go:build linux

package semantic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// The terminal injection tool: this test binary, started with
// L006_TTY_TOOL set, pushes a line into its terminal's input queue with
// TIOCSTI (what the caller's shell would read and run once wtx exits). It
// exits 0 when the ioctl got through, 1 when it was refused.
func init() {
	if os.Getenv("L006_TTY_TOOL") == "" {
		return
	}
	for _, c := range []byte("echo injected\n") {
		if err := unix.IoctlSetPointerInt(0, unix.TIOCSTI, int(c)); err != nil {
			fmt.Fprintf(os.Stderr, "tiocsti: %v\n", err)
			os.Exit(1)
		}
	}
	os.Exit(0)
}

// ttyRun runs wtx with args on a new pseudo-terminal that is its
// controlling terminal, as in an interactive shell, and returns its exit
// status and everything the terminal showed.
func ttyRun(t *testing.T, bin, ws, state string, env []string, args ...string) (int, string) {
	t.Helper()
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
	cmd := exec.Command(bin, append([]string{"-C", ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), env...)
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
	err = cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestL006_TerminalInjection checks L-006 for the terminal: a command run
// in a stage (confined with --read-only --no-network, or a plain run in a
// view) that shares the caller's terminal cannot push input into it with
// TIOCSTI, which the caller's shell would run outside the stage once wtx
// exits. Root's runs on the copy backend are covered too (root may install
// the filter there); an ordinary user's are not (nothing is confined there).
// The negative control (WTX_DISABLE=tty-inject, failpoint build) must let
// the injection through.
func TestL006_TerminalInjection(t *testing.T) {
	tool, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ws, state := t.TempDir(), t.TempDir()
	if err := os.Chmod(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if r := runWtx(t, ws, state, "run", "--backend", "overlay", "--read-only", "--no-network", "--", "true"); r.code != 0 {
		t.Skipf("no confined overlay run here: %v", r)
	}
	cases := [][]string{
		{"--backend", "overlay", "--read-only", "--no-network"},
		{"--backend", "overlay"},
	}
	if os.Geteuid() == 0 {
		cases = append(cases, []string{"--backend", "copy"})
	}
	for _, c := range cases {
		args := append(append([]string{"run"}, c...), "--", tool)
		name := strings.Join(c, " ")
		code, out := ttyRun(t, wtxtest.Binary(t, false), ws, state, []string{"L006_TTY_TOOL=1"}, args...)
		if code != 1 || !strings.Contains(out, "operation not permitted") {
			t.Errorf("%s: the command pushed input into the caller's terminal (exit %d, want 1 with EPERM):\n%s", name, code, out)
		}
	}
	code, out := ttyRun(t, wtxtest.Binary(t, true), ws, state, []string{"L006_TTY_TOOL=1", "WTX_DISABLE=tty-inject"},
		"run", "--backend", "overlay", "--read-only", "--no-network", "--", tool)
	if code != 0 {
		t.Fatalf("negative control: with the filter switched off the injection still failed (exit %d): the test cannot fail:\n%s", code, out)
	}
}
