package stage

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// helperView is a view whose commands run where the helper builds it.
type helperView interface {
	helperSpec(cmd *exec.Cmd, opts RunOptions) (*nsSpec, error)
}

// Container is a command started in a view under wtx's supervisor, with
// every process it starts.
type Container struct {
	cmd      *exec.Cmd
	control  *os.File
	ctlMu    sync.Mutex
	done     chan struct{}
	waitErr  error
	reportCh chan []byte
	stopOnce sync.Once
	grace    time.Duration
	want     Containment
}

// Start starts cmd (its Path resolved, its Dir relative to the view's
// root) in view v under a supervisor: a re-execution of this binary that
// holds every process the command starts (in a PID namespace for the
// overlay backend, as their child subreaper otherwise), keeps opts.Hold
// open until the last of them is gone, and, when the command ends, stops
// the rest (SIGTERM, then SIGKILL after opts.Grace) unless opts.Wait.
// If the caller dies, the container is killed.
func Start(v View, cmd *exec.Cmd, opts RunOptions) (*Container, error) {
	var spec *nsSpec
	if hv, ok := v.(helperView); ok {
		s, err := hv.helperSpec(cmd, opts)
		if err != nil {
			return nil, err
		}
		spec = s
	} else {
		if err := v.Prepare(cmd, opts); err != nil {
			return nil, err
		}
		spec = &nsSpec{Cwd: cmd.Dir, Path: cmd.Path, Args: cmd.Args}
		if len(spec.Args) == 0 {
			spec.Args = []string{cmd.Path}
		}
		env := cmd.Env
		if env == nil {
			env = os.Environ()
		}
		cmd.Env = append(env[:len(env):len(env)], helperEnv+"=1")
		cmd.Dir = ""
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	spec.Wait, spec.GraceMillis = opts.Wait, grace.Milliseconds()
	reportR, reportW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	controlR, controlW, err := os.Pipe()
	if err != nil {
		reportR.Close()
		reportW.Close()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{reportW, controlR}
	spec.ReportFD, spec.ControlFD = 3, 4
	if opts.Hold != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, opts.Hold)
		spec.HoldFD = 5
	}
	c := &Container{cmd: cmd, control: controlW, done: make(chan struct{}), reportCh: make(chan []byte, 1), grace: grace}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	switch {
	case containmentDisabled():
		c.want = ContainNone
	case spec.PIDNS:
		c.want = ContainPIDNamespace
		// Killing the helper kills every process of its namespace.
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	default:
		// A subreaper killed would leave its adopted processes to init:
		// it notices its caller's death on the control pipe instead, and
		// kills them first. It keeps a process group of its own, so that
		// a kill of the caller's whole group (a closed terminal, a
		// timeout) does not reach it; the command joins the caller's
		// group, the terminal's foreground one.
		c.want = ContainSubreaper
		cmd.SysProcAttr.Setpgid = true
		spec.CmdPgid = syscall.Getpgrp()
	}
	if err := helperCommand(cmd, spec); err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		// The parent-death signal follows the thread that forked the
		// helper (golang/go#27505): that thread stays until the helper
		// is gone.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := startHelper(cmd); err != nil {
			started <- err
			return
		}
		started <- nil
		c.waitErr = cmd.Wait()
		close(c.done)
	}()
	err = <-started
	reportW.Close()
	controlR.Close()
	if err != nil {
		reportR.Close()
		controlW.Close()
		return nil, fmt.Errorf("start the stage's supervisor: %w", err)
	}
	go func() {
		raw, _ := io.ReadAll(reportR) // a short report is caught by decodeReport
		reportR.Close()
		c.reportCh <- raw
	}()
	return c, nil
}

// Signal forwards sig to the command (not to the processes it started).
func (c *Container) Signal(sig os.Signal) {
	s, ok := sig.(syscall.Signal)
	if !ok || s <= 0 || s > 255 {
		return
	}
	c.send([]byte{ctlSignal, byte(s)})
}

// Stop stops the whole container: every process gets SIGTERM, and SIGKILL
// after the grace period. Wait then returns promptly.
func (c *Container) Stop() {
	c.stopOnce.Do(func() {
		c.send([]byte{ctlStop})
		go func() {
			// A supervisor that does not answer is killed (with its
			// namespace, for the overlay backend).
			t := time.NewTimer(c.grace + 3*time.Second)
			defer t.Stop()
			select {
			case <-t.C:
				_ = c.cmd.Process.Kill() // it may have exited just now
			case <-c.done:
			}
		}()
	})
}

func (c *Container) send(msg []byte) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	if c.control != nil {
		_, _ = c.control.Write(msg) // a supervisor that is gone needs nothing
	}
}

// Wait waits until the container is empty and returns how the command
// ended.
func (c *Container) Wait() (*Outcome, error) {
	<-c.done
	raw := <-c.reportCh
	c.ctlMu.Lock()
	c.control.Close()
	c.control = nil
	c.ctlMu.Unlock()
	if len(raw) > 0 {
		r, err := decodeReport(raw)
		if err != nil {
			return nil, err
		}
		return &Outcome{ExitCode: r.exitCode, Signal: r.signal, Stopped: r.stopped, Containment: r.containment, ExecErr: r.execErr}, nil
	}
	// No report: the supervisor failed to set up (it said why on stderr)
	// or was killed.
	ps := c.cmd.ProcessState
	if ps == nil {
		return nil, c.waitErr
	}
	out := &Outcome{ExitCode: ps.ExitCode(), Containment: c.want}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		out.Signal = int(ws.Signal())
		out.ExitCode = 128 + out.Signal
	}
	return out, nil
}
