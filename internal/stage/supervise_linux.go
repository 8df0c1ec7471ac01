package stage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Hooks of the last step, for confinement: cmdHooks may change how the
// supervisor starts that step (its SysProcAttr: namespaces of its own);
// execHooks run in it, in the view's directory, just before the command is
// executed. An error stops the run with status 125.
// The filter against terminal injection goes on before confineExec drops
// the capabilities.
var (
	cmdHooks  = []func(s *nsSpec, attr *syscall.SysProcAttr) error{confineAttr}
	execHooks = []func(s *nsSpec) error{ttyInjectExec, confineExec}
)

// Control messages from the caller to the supervisor, on the control pipe.
// End of file on it means the caller is gone: every process is killed.
const (
	ctlSignal = 'k' // followed by one byte, a signal number to forward
	ctlStop   = 's' // stop the whole container now (SIGTERM, then SIGKILL)
)

// markInheritedCloexec makes every descriptor above 2 close on exec, so
// that nothing the caller's caller passed reaches the command. It fails
// closed: when neither close_range nor /proc/self/fd works, it fails.
func markInheritedCloexec() error {
	if failpoint.Disabled(disableConfineFDs) {
		return nil
	}
	if err := unix.CloseRange(3, uint(^uint32(0)), unix.CLOSE_RANGE_CLOEXEC); err == nil {
		return nil
	}
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("close inherited descriptors: %w", err)
	}
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < 3 || fd == int(d.Fd()) {
			continue
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			return fmt.Errorf("close inherited descriptor %d: %w", fd, err)
		}
	}
	return nil
}

// supervisor holds a command's container: it starts the command, reaps
// every process that ends up its child, forwards signals, and when the
// command ends stops (or waits for) what the command left running.
type supervisor struct {
	spec        *nsSpec
	containment Containment
	cmdPid      int
	cmdDone     bool
	cmdStatus   unix.WaitStatus
	noChildren  bool
	stopped     []Proc
	seen        map[int]bool
	report      *os.File
	listErr     bool // a failure to list the container was said
}

// supervise runs the command of s under a supervisor and returns the exit
// status the helper ends with.
func supervise(s *nsSpec) int {
	sv := &supervisor{spec: s, seen: map[int]bool{}, containment: ContainNone}
	if s.ReportFD > 0 {
		sv.report = os.NewFile(uintptr(s.ReportFD), "report")
	}
	// The descriptor of the busy lock stays open, close-on-exec, until
	// this process exits: after every process of the container.
	switch {
	case contained() && s.PIDNS && os.Getpid() == 1:
		sv.containment = ContainPIDNamespace
	case contained():
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			return sv.fail("become the command's subreaper: %v", err)
		}
		sv.containment = ContainSubreaper
	}
	var ctl chan [2]byte
	if s.ControlFD > 0 {
		ctl = make(chan [2]byte, 8)
		go readControl(os.NewFile(uintptr(s.ControlFD), "control"), ctl)
	}
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, unix.SIGCHLD)
	fwd := make(chan os.Signal, 8)
	signal.Notify(fwd, unix.SIGINT, unix.SIGTERM, unix.SIGHUP, unix.SIGQUIT, unix.SIGWINCH, unix.SIGUSR1, unix.SIGUSR2)
	var stdio []stdioFile
	if s.View || s.Isolate {
		var err error
		if stdio, err = stdioInWorkspace(s); err != nil {
			return sv.fail("%v", err)
		}
	}
	switch {
	case s.View:
		if err := enterView(s); err != nil {
			return sv.fail("%v", err)
		}
	case s.Isolate:
		if err := enterIsolated(s); err != nil {
			return sv.fail("%v", err)
		}
	}
	if err := viewStdio(s, stdio); err != nil {
		return sv.fail("%v", err)
	}
	if sv.containment == ContainPIDNamespace {
		// Tools that read /proc see the namespace's processes. Where a
		// fresh /proc cannot be mounted (a /proc with locked mounts over
		// parts of it), the host's stays: containment does not need it.
		_ = unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	}
	if err := sv.start(); err != nil {
		var ee *ExecError
		if errors.As(err, &ee) {
			sv.reap()
			sv.writeReport(&report{exitCode: 127, containment: sv.containment, execErr: ee})
			switch {
			case ee.Confinement:
				return 125
			case !ee.NotFound:
				return 126
			}
			return 127
		}
		return sv.fail("%v", err)
	}
	var (
		grace   *time.Timer
		graceC  <-chan time.Time
		tick    *time.Ticker
		tickC   <-chan time.Time
		stopped bool
		gone    bool // the caller is gone
	)
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		sv.signalAll(unix.SIGTERM)
		grace = time.NewTimer(time.Duration(s.GraceMillis) * time.Millisecond)
		graceC = grace.C
	}
	killAll := func() {
		if tick == nil {
			stopped = true
			tick = time.NewTicker(20 * time.Millisecond)
			tickC = tick.C
		}
		sv.signalAll(unix.SIGKILL)
	}
	sv.reap()
	for !(sv.cmdDone && (sv.noChildren || !contained())) {
		if sv.cmdDone && !stopped && !s.Wait {
			stopAll()
			if sv.noChildren {
				break
			}
		}
		select {
		case <-sigchld:
			sv.reap()
		case sig := <-fwd:
			// With a control pipe, signals come through it; what arrives
			// here came from the terminal, which signals the command too.
			if ctl == nil && !sv.cmdDone {
				_ = unix.Kill(sv.cmdPid, sig.(syscall.Signal)) // it may have just exited
			}
		case m := <-ctl:
			switch m[0] {
			case ctlSignal:
				if !sv.cmdDone {
					_ = unix.Kill(sv.cmdPid, syscall.Signal(m[1])) // it may have just exited
				} else if s.Wait && m[1] != byte(unix.SIGWINCH) {
					// Waiting for the leftovers, the caller was told to
					// end (Ctrl-C, SIGTERM): it stops waiting.
					stopAll()
				}
			case ctlStop:
				stopAll()
			default: // the caller is gone
				gone = true
				ctl = nil
				killAll()
			}
		case <-graceC:
			killAll()
		case <-tickC:
			sv.reap()
			if !sv.noChildren {
				killAll()
			}
		}
	}
	if tick != nil {
		tick.Stop()
	}
	if grace != nil {
		grace.Stop()
	}
	if s.volatile {
		// Every process of the view has ended: what they wrote is made
		// durable before wtx reads it. A failure leaves the volatile mark,
		// and the next helper or scan settles or refuses the view.
		if err := settleVolatileAt(upperLock, s.volatileMarks); err != nil {
			fmt.Fprintf(os.Stderr, "wtx: stage: %v\n", err)
		}
	}
	r := &report{containment: sv.containment, stopped: sv.stopped, confined: s.nested}
	st := sv.cmdStatus
	switch {
	case st.Signaled():
		r.signal = int(st.Signal())
		r.exitCode = 128 + r.signal
	default:
		r.exitCode = st.ExitStatus()
	}
	if !gone {
		sv.writeReport(r)
	}
	return r.exitCode
}

// contained reports whether containment is switched on (a negative
// control of the tests switches it off).
func contained() bool { return !containmentDisabled() }

func (sv *supervisor) fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "wtx: stage: "+format+"\n", args...)
	return 125
}

func (sv *supervisor) writeReport(r *report) {
	if sv.report == nil {
		return
	}
	_, _ = sv.report.Write(r.encode()) // a caller that is gone reads nothing
	sv.report.Close()
	sv.report = nil
}

// readControl passes control messages on; end of file (or an error) is
// passed as a zero message.
func readControl(f *os.File, out chan<- [2]byte) {
	buf := make([]byte, 2)
	for {
		if _, err := io.ReadFull(f, buf[:1]); err != nil {
			out <- [2]byte{}
			return
		}
		if buf[0] == ctlSignal {
			if _, err := io.ReadFull(f, buf[1:2]); err != nil {
				out <- [2]byte{}
				return
			}
		}
		out <- [2]byte{buf[0], buf[1]}
	}
}

// start starts the last step, which executes the command, and waits until
// it has (or could not).
func (sv *supervisor) start() error {
	// This very binary, even if its file was replaced or removed since.
	const self = "/proc/self/exe"
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if sv.spec.CmdPgid > 0 {
		attr.Setpgid, attr.Pgid = true, sv.spec.CmdPgid
	}
	for _, h := range cmdHooks {
		if err := h(sv.spec, attr); err != nil {
			w.Close()
			return err
		}
	}
	env := os.Environ()
	pid, err := syscall.ForkExec(self, []string{"wtx", execArg, sv.spec.encode()}, &syscall.ProcAttr{
		Env:   env,
		Files: []uintptr{0, 1, 2, w.Fd()},
		Sys:   attr,
	})
	w.Close()
	if err != nil {
		if attr.Cloneflags&syscall.CLONE_NEWUSER != 0 {
			// The nested user namespace that confines the command
			// cannot be made (see confineAttr).
			return &ExecError{Confinement: true, Message: "stage: confinement: start the command in a nested user namespace: " + err.Error()}
		}
		return fmt.Errorf("start the command: %w", err)
	}
	sv.cmdPid = pid
	msg, _ := io.ReadAll(r) // closed on exec: empty when the command runs
	if len(msg) > 0 {
		code, text, _ := strings.Cut(string(msg), " ")
		return &ExecError{NotFound: code == "127", Message: text,
			Confinement: code == "125" && strings.HasPrefix(text, "stage: confinement: ")}
	}
	return nil
}

// reap collects every child that ended, notes the command's status, and
// whether any child is left.
func (sv *supervisor) reap() {
	sv.renameLeftovers()
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.ECHILD:
			sv.noChildren = true
			if sv.cmdPid == 0 {
				sv.cmdDone = true
			}
			return
		case err != nil || pid == 0:
			sv.noChildren = false
			return
		}
		if pid == sv.cmdPid {
			sv.cmdDone, sv.cmdStatus = true, ws
		}
	}
}

// signalAll sends sig to every process of the container but this one, and
// notes each it finds.
//
// A list read from /proc is stale as soon as it is read: a process seen
// in it may fork before it is signalled, and its child is then signalled
// (in a PID namespace) or left (elsewhere) without being named. So the
// container is frozen first (see freeze), listed, signalled, and thawed:
// a stopped process cannot fork, so the list holds every process the
// signal reaches. A process that catches sig handles it once thawed.
//
// A container that cannot be listed is signalled all the same; what it
// held goes unnamed, and the supervisor says why, once.
func (sv *supervisor) signalAll(sig unix.Signal) {
	procs, err := sv.freeze()
	if err != nil && !sv.listErr {
		sv.listErr = true
		fmt.Fprintf(os.Stderr, "wtx: stage: the processes the command left cannot all be named: %v\n", err)
	}
	for _, p := range procs {
		if !sv.seen[p.PID] {
			sv.seen[p.PID] = true
			sv.stopped = append(sv.stopped, p)
		}
	}
	if sv.containment == ContainPIDNamespace {
		// The first process of a PID namespace signals every other
		// process in it (and in namespaces below it) at once.
		_ = unix.Kill(-1, sig)          // ESRCH: nothing is left
		_ = unix.Kill(-1, unix.SIGCONT) // as above
		return
	}
	for _, p := range procs {
		_ = unix.Kill(p.PID, sig)          // it may have ended since
		_ = unix.Kill(p.PID, unix.SIGCONT) // as above
	}
}

// disableFreeze is the negative control's switch: the container is listed
// while it runs, and a process forked meanwhile is stopped unnamed.
const disableFreeze = "contain-freeze"

// freezeRounds bounds how often freeze lists the container: each round
// stops what the last one found, so only a process forked while its
// parent was being stopped is new in the next.
const freezeRounds = 64

// freeze stops every process of the container but this one (SIGSTOP) and
// returns them. In a PID namespace one kill(-1) reaches every process,
// and the kernel lets no fork in flight finish once its parent has the
// signal pending. Elsewhere each process is stopped by pid, and the list
// is read again until a round finds nothing new.
func (sv *supervisor) freeze() ([]Proc, error) {
	if failpoint.Disabled(disableFreeze) {
		return descendants()
	}
	if sv.containment == ContainPIDNamespace {
		_ = unix.Kill(-1, unix.SIGSTOP) // ESRCH: nothing is left
		return descendants()
	}
	stoppedPID := map[int]bool{}
	var procs []Proc
	var first error
	for range freezeRounds {
		var err error
		procs, err = descendants()
		if first == nil {
			first = err
		}
		fresh := false
		for _, p := range procs {
			if !stoppedPID[p.PID] {
				stoppedPID[p.PID], fresh = true, true
				_ = unix.Kill(p.PID, unix.SIGSTOP) // it may have ended since
			}
		}
		if !fresh {
			break
		}
	}
	return procs, first
}

// descendants lists the live processes below this one, from /proc,
// ordered by pid. A process that ends while it is read, or that this one
// may not read, is left out; any other failure to read /proc is returned
// with what could be listed.
func descendants() ([]Proc, error) {
	self, err := os.Readlink("/proc/self")
	if err != nil {
		return nil, err
	}
	me, err := strconv.Atoi(self)
	if err != nil {
		return nil, fmt.Errorf("/proc/self is %q", self)
	}
	d, err := os.Open("/proc")
	if err != nil {
		return nil, err
	}
	names, first := d.Readdirnames(-1) // what it read before an error is listed
	_ = d.Close()                      // read-only: nothing to lose
	children := map[int][]int{}
	comm := map[int]string{}
	zombie := map[int]bool{} // ended, not reaped yet: nothing to stop
	for _, n := range names {
		pid, err := strconv.Atoi(n)
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			// Ended since (not found), or another user's where /proc
			// hides those (hidepid): neither is the command's to name.
			if first == nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ESRCH) && !errors.Is(err, fs.ErrPermission) {
				first = err
			}
			continue
		}
		if !st.ok {
			continue
		}
		children[st.ppid] = append(children[st.ppid], pid)
		comm[pid] = st.comm
		if st.state == "Z" {
			zombie[pid] = true
		}
	}
	var out []Proc
	queue := []int{me}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !zombie[c] {
				out = append(out, Proc{PID: c, Comm: comm[c]})
			}
			queue = append(queue, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, first
}

// procStat is what descendants reads of a process in /proc/PID/stat; ok
// is false when the line cannot be parsed.
type procStat struct {
	comm, state string
	ppid        int
	ok          bool
}

// readProcStat reads /proc/PID/stat: "pid (comm) state ppid ...", where
// comm may hold any byte but NUL.
func readProcStat(pid int) (procStat, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	open, close := bytes.IndexByte(raw, '('), bytes.LastIndexByte(raw, ')')
	if open < 0 || close < open {
		return procStat{}, nil
	}
	fields := strings.Fields(string(raw[close+1:]))
	if len(fields) < 2 {
		return procStat{}, nil
	}
	ppid, err := strconv.Atoi(fields[1])
	if err != nil {
		return procStat{}, nil
	}
	return procStat{comm: string(raw[open+1 : close]), state: fields[0], ppid: ppid, ok: true}, nil
}

// disableLeftoverNames is the negative control's switch: each leftover
// keeps the name it had when it was first listed.
const disableLeftoverNames = "contain-names"

// renameLeftovers names each leftover by what it runs now, while it is
// this process's child, alive or ended but not yet reaped: a process
// listed between its fork and its exec had its parent's name then, and
// one may execute another program once signalled. Only a child is read
// again: its pid cannot name another process before this one reaps it.
func (sv *supervisor) renameLeftovers() {
	if len(sv.stopped) == 0 || failpoint.Disabled(disableLeftoverNames) {
		return
	}
	me, err := os.Readlink("/proc/self")
	if err != nil {
		return // the names first read stand
	}
	for i, p := range sv.stopped {
		if st, err := readProcStat(p.PID); err == nil && st.ok && strconv.Itoa(st.ppid) == me {
			sv.stopped[i].Comm = st.comm
		}
	}
}

// execMain is the last step: in the command's directory, with every
// inherited descriptor but 0, 1 and 2 closed on exec, it executes the
// command. A failure before the exec is written to descriptor 3 (closed
// on exec) as "STATUS MESSAGE".
func execMain(args []string) int {
	status := os.NewFile(3, "status")
	fail := func(code int, format string, a ...any) int {
		msg := fmt.Sprintf(format, a...)
		fmt.Fprintf(os.Stderr, "wtx: %s\n", msg)
		if status != nil {
			_, _ = fmt.Fprintf(status, "%d %s", code, msg) // the supervisor may be gone
		}
		return code
	}
	if len(args) != 1 {
		return fail(125, "%s is internal to wtx", execArg)
	}
	s, err := decodeSpec(args[0])
	if err != nil {
		return fail(125, "stage: %v", err)
	}
	if err := markInheritedCloexec(); err != nil {
		return fail(125, "stage: %v", err)
	}
	if err := os.Chdir(s.Cwd); err != nil {
		return fail(125, "stage: enter %s: %v", s.Cwd, err)
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, helperEnv+"=") {
			env = append(env, kv)
		}
	}
	path := s.Path
	if !strings.Contains(path, "/") {
		p, err := exec.LookPath(path)
		if err != nil {
			return fail(127, "%s: %v", path, err)
		}
		path = p
	}
	for _, h := range execHooks {
		if err := h(s); err != nil {
			return fail(125, "stage: %v", err)
		}
	}
	// The command runs without the capabilities the helper mounted with.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fail(125, "drop capabilities: %v", err)
	}
	args = s.Args
	if len(args) == 0 {
		args = []string{s.Path}
	}
	err = syscall.Exec(path, args, env)
	if errors.Is(err, unix.ENOENT) {
		return fail(127, "%s: %v", s.Path, err)
	}
	return fail(126, "%s: %v", s.Path, err)
}
