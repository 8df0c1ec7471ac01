package stage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// workspaceView is a view that knows the workspace it stages, whose path
// it is shown at to a confined command.
type workspaceView interface {
	workspacePath() string
}

// helperView is a view whose commands run where the helper builds it.
type helperView interface {
	helperSpec(cmd *exec.Cmd, opts RunOptions) (*nsSpec, error)
}

// Container is a command started in a view under wtx's supervisor, with
// every process it starts.
type Container struct {
	marker   string // the command's WTX_TX, which its orphans carry
	cmd      *exec.Cmd
	control  *os.File
	ctlMu    sync.Mutex
	done     chan struct{}
	waitErr  error
	reportCh chan []byte
	stopOnce sync.Once
	grace    time.Duration
	want     Containment
	viewLock *os.File // see lockView; released when Wait returns
}

// start starts cmd (its Path resolved, its Dir relative to the view's
// root) in view v under a supervisor: a re-execution of this binary that
// holds every process the command starts (in a PID namespace for the
// overlay backend, as their child subreaper otherwise), keeps opts.Hold
// open until the last of them is gone, and, when the command ends, stops
// the rest (SIGTERM, then SIGKILL after opts.Grace) unless opts.Wait.
// If the caller dies, the container is killed.
func start(v View, cmd *exec.Cmd, opts RunOptions) (*Container, error) {
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
		if isolating() && v.Root() != "" {
			spec.Isolate, spec.PIDNS, spec.Keep = true, true, v.Root()
			spec.ReadOnly, spec.NoNetwork, spec.Confine = opts.ReadOnly, opts.NoNetwork, opts.mustConfine()
			if wv, ok := v.(workspaceView); ok {
				spec.Workspace = wv.workspacePath()
			}
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
	c.marker = envValue(cmd.Env, "WTX_TX")
	if c.want == ContainSubreaper {
		adoptOrphans()
	}
	var fallback *exec.Cmd
	if spec.Isolate && !spec.Confine {
		// Where the namespaces cannot be made, the same command under
		// a subreaper, unconfined (a run that must be confined is
		// refused instead).
		plain := *spec
		plain.Isolate, plain.PIDNS, plain.Keep = false, false, ""
		plain.CmdPgid = syscall.Getpgrp()
		fallback = &exec.Cmd{Env: cmd.Env, Stdin: cmd.Stdin, Stdout: cmd.Stdout, Stderr: cmd.Stderr,
			ExtraFiles: cmd.ExtraFiles, SysProcAttr: &syscall.SysProcAttr{Setpgid: true}}
		if cmd.SysProcAttr != nil {
			sys := *cmd.SysProcAttr
			sys.Setpgid, sys.Pdeathsig = true, 0
			fallback.SysProcAttr = &sys
		}
		if err := helperCommand(fallback, &plain); err != nil {
			return nil, err
		}
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
		err := startHelper(cmd)
		if err != nil && spec.Isolate && fallback == nil {
			err = confinementErrorf("cannot confine the command to its view: its namespaces cannot be made here (%v)", err)
		}
		if err != nil && fallback != nil {
			cmd, c.cmd, c.want = fallback, fallback, ContainSubreaper
			adoptOrphans()
			err = startHelper(cmd)
		}
		if err != nil {
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
		if errors.Is(err, ErrConfinement) {
			return nil, err
		}
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
	defer c.releaseView()
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
		return &Outcome{ExitCode: r.exitCode, Signal: r.signal, Stopped: r.stopped, Containment: r.containment,
			ExecErr: r.execErr, Confined: r.confined}, nil
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
	if c.want == ContainSubreaper {
		// The subreaper is gone: whatever it held is wtx's child now.
		out.Containment = ContainBroken
		if !failpoint.Disabled(disableOrphans) {
			out.Stopped = killOrphans(c.marker)
		}
	}
	return out, nil
}

// disableOrphans is the negative control's switch: wtx neither adopts nor
// stops what a killed subreaper leaves.
const disableOrphans = "contain-orphans"

// adoptOrphans makes wtx a child subreaper: should a subreaper supervisor
// be killed, what it held is reparented to wtx, which stops it (see Wait),
// rather than to init.
func adoptOrphans() {
	if failpoint.Disabled(disableOrphans) {
		return
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) // without it, Wait reports containment broken all the same
}

// envValue is the value of key in env, or "".
func envValue(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// killOrphans stops the processes a killed subreaper left to wtx: each
// child of this process whose environment names the stage (marker, the
// command's WTX_TX), and everything below it. It repeats until none is
// left (or a few seconds have passed), reaping them.
func killOrphans(marker string) []Proc {
	if marker == "" {
		return nil
	}
	me := os.Getpid()
	want := []byte("WTX_TX=" + marker + "\x00")
	var stopped []Proc
	seen := map[int]bool{}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		var roots []int
		for _, p := range childrenOf(me) {
			env, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/environ")
			if err == nil && bytes.Contains(append([]byte{0}, env...), append([]byte{0}, want...)) {
				roots = append(roots, p)
			}
		}
		var all []int
		for _, r := range roots {
			all = append(all, r)
			all = append(all, treeBelow(r)...)
		}
		for _, p := range all {
			_ = unix.Kill(p, unix.SIGSTOP) // it may have ended since: no fork while the tree is killed
		}
		for _, p := range all {
			if !seen[p] {
				seen[p] = true
				stopped = append(stopped, Proc{PID: p, Comm: commOf(p)})
			}
			_ = unix.Kill(p, unix.SIGKILL) // it may have ended since
		}
		for p := range seen {
			var ws unix.WaitStatus
			_, _ = unix.Wait4(p, &ws, unix.WNOHANG, nil) // not (yet) wtx's child: next round
		}
		alive := false
		for p := range seen {
			if _, err := os.Stat("/proc/" + strconv.Itoa(p)); err == nil {
				alive = true
			}
		}
		if len(all) == 0 && !alive {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return stopped
}

// childrenOf lists the processes whose parent is pid.
func childrenOf(pid int) []int {
	var out []int
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err == nil {
		for _, f := range strings.Fields(string(raw)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		// Children of other threads are children of the process too.
	}
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task") // a partial list is the best there is
	for _, t := range tasks {
		if t.Name() == strconv.Itoa(pid) {
			continue
		}
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// treeBelow lists every process below pid.
func treeBelow(pid int) []int {
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range childrenOf(p) {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// commOf is the command name of pid, or "".
func commOf(pid int) string {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(raw), "\n")
}
