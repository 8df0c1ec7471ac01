//go:build !linux

package stage

import (
	"errors"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Container is a command started in a view, in a process group of its own
// when it does not read a terminal. Without a subreaper or a PID namespace,
// a process that leaves the group (setsid, setpgid) is not held.
type Container struct {
	cmd      *exec.Cmd
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
	stop     chan struct{}
	grace    time.Duration
	viewLock *os.File // see lockView; released when Wait returns
	wait     bool
	want     Containment
}

// start starts cmd in view v. When the command's standard input is not a
// terminal, it gets a process group of its own, which is stopped with it
// (SIGTERM, then SIGKILL after opts.Grace) unless opts.Wait. A command that
// reads a terminal stays in the terminal's foreground group.
func start(v View, cmd *exec.Cmd, opts RunOptions) (*Container, error) {
	if err := v.Prepare(cmd, opts); err != nil {
		return nil, err
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	c := &Container{cmd: cmd, done: make(chan struct{}), stop: make(chan struct{}), grace: grace, wait: opts.Wait, want: ContainNone}
	if !readsTerminal(cmd) && !containmentDisabled() {
		if cmd.SysProcAttr == nil {
			cmd.SysProcAttr = &syscall.SysProcAttr{}
		}
		cmd.SysProcAttr.Setpgid = true
		c.want = ContainProcessGroup
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func readsTerminal(cmd *exec.Cmd) bool {
	f, ok := cmd.Stdin.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TIOCGETA)
	return err == nil
}

// Signal forwards sig to the command.
func (c *Container) Signal(sig os.Signal) {
	_ = c.cmd.Process.Signal(sig) // it may have exited
}

// Stop stops the command and its process group.
func (c *Container) Stop() {
	c.stopOnce.Do(func() {
		close(c.stop)
		_ = c.cmd.Process.Signal(syscall.SIGTERM) // it may have exited
	})
}

// Wait waits for the command, then stops (or waits for) what is left of
// its process group.
func (c *Container) Wait() (*Outcome, error) {
	defer c.releaseView()
	stopped := false
	select {
	case <-c.done:
	case <-c.stop:
		stopped = true
	}
	pgid := 0
	if c.want == ContainProcessGroup {
		pgid = c.cmd.Process.Pid
	}
	if stopped {
		c.endGroup(pgid)
		<-c.done
	}
	ps := c.cmd.ProcessState
	if ps == nil {
		return nil, c.waitErr
	}
	out := &Outcome{ExitCode: ps.ExitCode(), Containment: c.want}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.Signal = int(ws.Signal())
		out.ExitCode = 128 + out.Signal
	}
	if pgid != 0 && !stopped {
		if c.wait {
			for unix.Kill(-pgid, 0) == nil {
				time.Sleep(50 * time.Millisecond)
			}
		} else {
			// Without /proc the group's members are not named.
			c.endGroup(pgid)
		}
	}
	return out, nil
}

// endGroup sends SIGTERM to the group, then SIGKILL after the grace
// period; it reports whether any process was left.
func (c *Container) endGroup(pgid int) bool {
	if pgid == 0 || unix.Kill(-pgid, 0) != nil {
		return false
	}
	_ = unix.Kill(-pgid, unix.SIGTERM) // ESRCH: it ended meanwhile
	deadline := time.Now().Add(c.grace)
	for time.Now().Before(deadline) {
		if err := unix.Kill(-pgid, 0); errors.Is(err, unix.ESRCH) {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = unix.Kill(-pgid, unix.SIGKILL) // ESRCH: it ended meanwhile
	return true
}

// CanConfineViews reports whether a copy or clone view's command can be
// confined here: never without Linux's namespaces, so a run that must be
// confined is refused (see RunOptions.Confine).
func CanConfineViews() bool { return false }
