package stage

import (
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/wtx-dev/wtx/internal/binenc"
)

// HelperArg is the first argument with which wtx re-executes itself as the
// supervisor of a command run in a view (see [NamespaceMain]); for the
// overlay backend the supervisor also builds the view, in new namespaces.
const HelperArg = "__stage-exec"

// execArg is the first argument with which the supervisor re-executes the
// binary once more to execute the command itself: that last process drops
// what the command must not have (descriptors, capabilities) and executes
// the command in its place.
const execArg = "__stage-cmd"

// helperEnv marks the environment of a helper process; the helper removes
// it before it executes the command.
const helperEnv = "WTX_STAGE_HELPER"

// nsSpec is what the helper is told to set up, passed as one argument:
// base64 of a binary record, so that every path and argument keeps its
// exact bytes.
type nsSpec struct {
	// View asks the helper to build the overlay view (it runs in a new
	// mount namespace); the fields up to HideFiles describe it.
	View      bool
	Workspace string
	Lower     string
	Upper     string
	Work      string
	Merged    string
	Hidden    string // where excluded directories are backed
	UserXattr bool
	Share     []string
	HideDirs  []string
	HideFiles []string
	ReadOnly  bool
	NoNetwork bool
	// PIDNS says the helper is the first process of a new PID namespace.
	PIDNS bool
	// Wait asks the supervisor to wait for the processes the command
	// leaves running instead of stopping them.
	Wait bool
	// GraceMillis is how long leftovers get between SIGTERM and SIGKILL.
	GraceMillis int64
	// ReportFD, ControlFD and HoldFD are the descriptors (0: none) of the
	// pipe the supervisor reports on, the pipe its caller controls it with
	// (closed when the caller dies), and the stage's busy lock.
	ReportFD, ControlFD, HoldFD int
	// CmdPgid, when set, is the process group the command joins (its
	// caller's, the terminal's foreground group) while the supervisor keeps
	// a group of its own, out of reach of a kill of the caller's group.
	CmdPgid int
	Cwd     string
	Path    string
	Args    []string
	// Probe asks for a self-test instead of a command: see probeOverlay.
	Probe bool
	// volatile is set by the helper when it mounted the view volatile: it
	// then syncs the upper directory itself when the command has ended
	// (not encoded: the helper's own).
	volatile      bool
	volatileMarks int // the directory of the volatile mark, open
	// Isolate asks the supervisor of a view that needs no mount (copy,
	// clone) to run in new user, PID and mount namespaces all the same,
	// with Keep, the view's directory under the state root, the one part
	// of the state root that stays writable.
	Isolate bool
	Keep    string
	// Confine says the run must be confined (see RunOptions.Confine):
	// where the supervisor cannot nest the command's namespaces, it
	// refuses the command instead of running it unconfined.
	Confine bool
	// nested is set by the supervisor when the last step was started in
	// namespaces nested under its own (not encoded: the supervisor's own).
	nested bool
}

// specVersion is the first byte of an encoded nsSpec.
const specVersion = 1

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

func appendStrings(b []byte, ss []string) []byte {
	b = appendUvarint(b, uint64(len(ss)))
	for _, s := range ss {
		b = binenc.AppendString(b, s)
	}
	return b
}

func appendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// encode returns s as one argument.
func (s *nsSpec) encode() string {
	b := []byte{specVersion}
	b = appendBool(b, s.View)
	for _, str := range []string{s.Workspace, s.Lower, s.Upper, s.Work, s.Merged, s.Hidden} {
		b = binenc.AppendString(b, str)
	}
	b = appendBool(b, s.UserXattr)
	b = appendStrings(b, s.Share)
	b = appendStrings(b, s.HideDirs)
	b = appendStrings(b, s.HideFiles)
	for _, v := range []bool{s.ReadOnly, s.NoNetwork, s.PIDNS, s.Wait, s.Probe} {
		b = appendBool(b, v)
	}
	for _, v := range []int64{s.GraceMillis, int64(s.ReportFD), int64(s.ControlFD), int64(s.HoldFD), int64(s.CmdPgid)} {
		b = appendUvarint(b, uint64(v))
	}
	b = binenc.AppendString(b, s.Cwd)
	b = binenc.AppendString(b, s.Path)
	b = appendStrings(b, s.Args)
	b = appendBool(b, s.Isolate)
	b = binenc.AppendString(b, s.Keep)
	b = appendBool(b, s.Confine)
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeSpec reads what encode wrote.
func decodeSpec(arg string) (*nsSpec, error) {
	raw, err := base64.RawURLEncoding.DecodeString(arg)
	if err != nil {
		return nil, fmt.Errorf("helper argument: %w", err)
	}
	d := binenc.NewDecoder(raw)
	if v := d.Byte(); d.Err() == nil && v != specVersion {
		return nil, fmt.Errorf("helper argument: version %d, this wtx reads %d", v, specVersion)
	}
	b := func() bool { return d.Byte() != 0 }
	strs := func() []string {
		n := d.Uvarint()
		if n > uint64(d.Len()) {
			d.Fail(errors.New("list exceeds data"))
			return nil
		}
		var out []string
		for i := uint64(0); i < n && d.Err() == nil; i++ {
			out = append(out, d.String())
		}
		return out
	}
	s := &nsSpec{}
	s.View = b()
	for _, p := range []*string{&s.Workspace, &s.Lower, &s.Upper, &s.Work, &s.Merged, &s.Hidden} {
		*p = d.String()
	}
	s.UserXattr = b()
	s.Share, s.HideDirs, s.HideFiles = strs(), strs(), strs()
	for _, p := range []*bool{&s.ReadOnly, &s.NoNetwork, &s.PIDNS, &s.Wait, &s.Probe} {
		*p = b()
	}
	s.GraceMillis = int64(d.Uvarint())
	s.ReportFD, s.ControlFD, s.HoldFD = int(d.Uvarint()), int(d.Uvarint()), int(d.Uvarint())
	s.CmdPgid = int(d.Uvarint())
	s.Cwd, s.Path = d.String(), d.String()
	s.Args = strs()
	s.Isolate = b()
	s.Keep = d.String()
	s.Confine = b()
	if d.Err() == nil && d.Len() != 0 {
		d.Fail(errors.New("trailing bytes"))
	}
	if err := d.Err(); err != nil {
		return nil, fmt.Errorf("helper argument: %w", err)
	}
	return s, nil
}
