package stage

import (
	"errors"
	"fmt"
	"os/exec"
	"time"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Containment names how the processes a command starts are held, so that
// they can be stopped with it.
type Containment string

const (
	// ContainPIDNamespace: the command runs in a PID namespace whose first
	// process is wtx's supervisor; every process it starts is in it.
	ContainPIDNamespace Containment = "pid-namespace"
	// ContainSubreaper: wtx's supervisor is a child subreaper, so every
	// process the command starts that loses its parent becomes the
	// supervisor's child, however it detached itself.
	ContainSubreaper Containment = "subreaper"
	// ContainProcessGroup: the command runs in a process group of its own;
	// a process that leaves the group (setsid, setpgid) is not held.
	ContainProcessGroup Containment = "process-group"
	// ContainNone: nothing holds the command's processes.
	ContainNone Containment = "none"
	// ContainBroken: the supervisor (a subreaper) was killed, by the
	// command or from outside, before the container was empty. The
	// processes wtx found left over were stopped, but one may have
	// escaped before (reparented to init).
	ContainBroken Containment = "broken"
)

// Complete reports whether every process the command starts is stopped
// with it, however it detaches itself.
func (c Containment) Complete() bool {
	return c == ContainPIDNamespace || c == ContainSubreaper
}

// DefaultGrace is how long processes a command left running get between
// SIGTERM and SIGKILL.
const DefaultGrace = 2 * time.Second

// Proc is a process of a container: its pid (as the container sees it)
// and its command name.
type Proc struct {
	PID  int
	Comm string
}

// Outcome is how a contained command ended.
type Outcome struct {
	// ExitCode is the command's exit status, 128+N when signal N killed it.
	ExitCode int
	// Signal is the signal that killed the command, or 0.
	Signal int
	// Stopped lists the processes the command left running that were
	// stopped after it (or by a stop request), in the order found.
	Stopped []Proc
	// Containment is what held the command's processes.
	Containment Containment
	// ExecErr is set when the command could not be executed at all.
	ExecErr *ExecError
	// Confined is set when the command ran confined: in namespaces nested
	// under its supervisor's, where it saw the view at the workspace's own
	// path and could not undo that (see RunOptions.Confine).
	Confined bool
}

// ExecError says why a command could not be executed.
type ExecError struct {
	// NotFound is set when the program does not exist (exit status 127);
	// otherwise it exists but cannot be executed (126).
	NotFound bool
	// Confinement is set when the command was not executed because its
	// confinement could not be given or checked (exit status 125).
	Confinement bool
	Message     string
}

func (e *ExecError) Error() string { return e.Message }

// report is what the supervisor tells its caller when the container is
// empty: one binary record.
type report struct {
	exitCode, signal int
	stopped          []Proc
	containment      Containment
	execErr          *ExecError
	confined         bool
}

const reportVersion = 2

func (r *report) encode() []byte {
	b := []byte{reportVersion}
	b = appendUvarint(b, uint64(r.exitCode))
	b = appendUvarint(b, uint64(r.signal))
	b = binenc.AppendString(b, string(r.containment))
	b = appendBool(b, r.confined)
	b = appendUvarint(b, uint64(len(r.stopped)))
	for _, p := range r.stopped {
		b = appendUvarint(b, uint64(p.PID))
		b = binenc.AppendString(b, p.Comm)
	}
	if r.execErr == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	kind := byte(0) // cannot be executed
	switch {
	case r.execErr.NotFound:
		kind = 1
	case r.execErr.Confinement:
		kind = 2
	}
	b = append(b, kind)
	return binenc.AppendString(b, r.execErr.Message)
}

func decodeReport(raw []byte) (*report, error) {
	d := binenc.NewDecoder(raw)
	if v := d.Byte(); d.Err() == nil && v != reportVersion {
		return nil, fmt.Errorf("supervisor report: version %d, this wtx reads %d", v, reportVersion)
	}
	r := &report{}
	r.exitCode, r.signal = int(d.Uvarint()), int(d.Uvarint())
	r.containment = Containment(d.String())
	r.confined = d.Byte() == 1
	n := d.Uvarint()
	if n > uint64(d.Len()) {
		d.Fail(errors.New("list exceeds data"))
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		pid := int(d.Uvarint())
		r.stopped = append(r.stopped, Proc{PID: pid, Comm: d.String()})
	}
	if d.Byte() == 1 {
		kind := d.Byte()
		r.execErr = &ExecError{NotFound: kind == 1, Confinement: kind == 2}
		r.execErr.Message = d.String()
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("supervisor report: %w", err)
	}
	return r, nil
}

// Start starts cmd (its Path resolved, its Dir relative to the view's
// root) in view v, contained as this system can (see start), with the
// view locked for as long as the command may write in it (lockView).
func Start(v View, cmd *exec.Cmd, opts RunOptions) (*Container, error) {
	lk := lockView(v.Root())
	c, err := start(v, cmd, opts)
	if err != nil {
		if lk != nil {
			lk.Close()
		}
		return nil, err
	}
	c.viewLock = lk
	return c, nil
}

// releaseView lets scans keep the view's digests again.
func (c *Container) releaseView() {
	if c.viewLock != nil {
		c.viewLock.Close()
		c.viewLock = nil
	}
}

// containmentDisabled reports whether a negative control of the tests
// switched containment off (never in an ordinary build).
func containmentDisabled() bool { return failpoint.Disabled("contain") }
