package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// The busy lock says a stage has an owner (L-001). It is a kernel flock on
// a file in the stage's directory that is never deleted while the stage
// lives, so a killed holder never leaves it stale. A command run in the
// stage (run, run --tx, shell) holds it exclusively for its whole life,
// through the scan and the receipt: the stage is then "running". Commands
// that change a stage without running anything in it (apply, drop, fork,
// rebase, drop-op, per-file reads and writes) hold it shared for their own
// duration: a run cannot start while one of them works, and none of them
// starts while a run holds the stage. Whoever inherits the open file keeps
// the lock: a process supervisor that holds it keeps the stage running
// until every process of the stage is gone.

// busyName is the busy lock's file in the stage directory.
const busyName = "busy"

// busyWait bounds how long a run waits for short commands that hold the
// stage shared (an apply of many files, a per-file write) to finish.
const busyWait = lockWait

// RunInfo describes the run that holds a stage.
type RunInfo struct {
	// PID is the process id of the wtx process that started the run (0
	// when it could not be recorded).
	PID int `json:"pid,omitempty"`
	// Started is when the run took the stage.
	Started time.Time `json:"started"`
}

// busyRel is the busy lock beneath the state root.
func (s *Stage) busyRel() string { return stageRel(s.ID()) + "/" + busyName }

func (s *Stage) openBusy() (*os.File, error) {
	return s.ws.state.OpenFile(s.busyRel(), os.O_RDWR|os.O_CREATE, 0o600)
}

// busyError is the refusal of a command on a stage that a run holds.
func (s *Stage) busyError(what string, info *RunInfo) *Error {
	holder := "a command run in it"
	if info != nil && info.PID > 0 {
		holder = fmt.Sprintf("a command run in it (wtx process %d, since %s)", info.PID, info.Started.Local().Format(time.DateTime))
	}
	repairs := []Repair{{Action: "wait", Detail: "wait for the run to finish, then try again"}}
	if info != nil && info.PID > 0 {
		repairs = append(repairs, Repair{Action: "stop", Detail: "stop the run (its command and every process it started end with it)", Command: "kill " + strconv.Itoa(info.PID)})
	} else {
		repairs = append(repairs, Repair{Action: "stop", Detail: "stop the run that holds the stage"})
	}
	return &Error{Code: CodeStageBusy,
		Message: fmt.Sprintf("stage %s is running: %s holds it; %s is refused until it ends, nothing was changed", s.ID(), holder, what),
		Repairs: repairs}
}

// holdShared takes the busy lock shared, without waiting, for a command
// that changes the stage (what names it in a refusal). A stage whose
// directory is gone (dropped or collected) has no owner: the command's own
// state checks answer for it. Before it returns, a run that a killed wtx
// left unfinished is marked interrupted.
func (s *Stage) holdShared(ctx context.Context, what string) (func(), error) {
	if failpoint.Disabled("busy") {
		return func() {}, nil
	}
	f, err := s.openBusy()
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return func() {}, nil
		}
		return nil, stateIOError(s.ws.stateDir, "open the busy lock of "+s.ID(), err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			info := readRunInfo(f)
			f.Close()
			return nil, s.busyError(what, info)
		}
		f.Close()
		return nil, AsError(fmt.Errorf("lock stage %s: %w", s.ID(), err))
	}
	if err := s.settleInterrupted(ctx); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// holdRun takes the busy lock exclusively for a run and records who holds
// it. It is refused when another run holds the stage; it waits (up to
// busyWait) while short commands hold it shared. The returned file holds
// the lock until it is closed.
func (s *Stage) holdRun(ctx context.Context) (*os.File, error) {
	f, err := s.openBusy()
	if err != nil {
		return nil, stateIOError(s.ws.stateDir, "open the busy lock of "+s.ID(), err)
	}
	deadline := time.Now().Add(busyWait)
	for !failpoint.Disabled("busy") {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, AsError(fmt.Errorf("lock stage %s: %w", s.ID(), err))
		}
		if errors.Is(err, unix.EWOULDBLOCK) && s.exclusivelyHeld() {
			info := readRunInfo(f)
			f.Close()
			return nil, s.busyError("another run", info)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			f.Close()
			return nil, &Error{Code: CodeStageBusy,
				Message: fmt.Sprintf("stage %s is being changed by another wtx command (an apply, a drop, a per-file op) that has not finished; the run is refused, nothing was changed", s.ID()),
				Repairs: []Repair{{Action: "wait", Detail: "wait for that command to finish, then run again"}}}
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := s.settleInterrupted(ctx); err != nil {
		f.Close()
		return nil, err
	}
	info, _ := json.Marshal(RunInfo{PID: os.Getpid(), Started: s.ws.now().UTC()})
	// The record is only informational: a refusal names the pid when it
	// can. A failed write leaves the lock as good as ever.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt(info, 0) // informational, see above
	}
	return f, nil
}

// exclusivelyHeld reports whether the busy lock is held exclusively (by a
// run) rather than shared (by short commands): a shared request then fails.
func (s *Stage) exclusivelyHeld() bool {
	g, err := s.ws.state.OpenFile(s.busyRel(), os.O_RDONLY, 0)
	if err != nil {
		return false
	}
	defer g.Close()
	err = unix.Flock(int(g.Fd()), unix.LOCK_SH|unix.LOCK_NB)
	return errors.Is(err, unix.EWOULDBLOCK)
}

func readRunInfo(f *os.File) *RunInfo {
	buf := make([]byte, 512)
	n, _ := f.ReadAt(buf, 0) // a short or failed read leaves no record
	var info RunInfo
	if n == 0 || json.Unmarshal(buf[:n], &info) != nil {
		return nil
	}
	return &info
}

// Running reports whether a run holds the stage, and what is known of it
// (nil when no run holds it). A stage found free with a run that never
// finished (its wtx was killed) gets that run marked interrupted.
func (s *Stage) Running(ctx context.Context) (*RunInfo, error) {
	f, err := s.ws.state.OpenFile(s.busyRel(), os.O_RDONLY, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, stateIOError(s.ws.stateDir, "open the busy lock of "+s.ID(), err)
	}
	defer f.Close()
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	switch {
	case errors.Is(err, unix.EWOULDBLOCK):
		if info := readRunInfo(f); info != nil {
			return info, nil
		}
		return &RunInfo{}, nil
	case err != nil:
		return nil, AsError(fmt.Errorf("lock stage %s: %w", s.ID(), err))
	}
	if s.row.State == StateOpen {
		if err := s.settleInterrupted(ctx); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// settleInterrupted finishes or rolls back a per-file op a killed wtx left
// pending (fileop.go), and marks every run of the stage that never
// finished as interrupted: the caller holds the busy lock, so no run is
// alive. The
// stage stays open, with whatever its command wrote before it was killed,
// and each such run gets its receipt: kind run, its command, the change
// set as found now, no exit status, interrupted.
func (s *Stage) settleInterrupted(ctx context.Context) error {
	if err := s.settleFileOps(ctx); err != nil {
		return err
	}
	pending, err := s.unfinishedRuns(ctx)
	if err != nil || len(pending) == 0 {
		return err
	}
	// The change set as the killed run left it. A stage whose view cannot
	// be scanned still gets its runs marked; their receipts then carry no
	// change set.
	cs, csErr := s.Changes(ctx, nil)
	if csErr != nil {
		cs = nil
		s.ws.log.Warn("scan of an interrupted run's stage", "tx", s.ID(), "err", csErr)
	}
	unlock, err := s.ws.lockWorkspace(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	// Under the workspace lock, so that two commands finding the stage
	// free do not both write the receipt.
	pending, err = s.unfinishedRuns(ctx)
	if err != nil {
		return err
	}
	for _, op := range pending {
		if !failpoint.Disabled("interrupted-receipt") {
			r := s.newReceipt("run", cs)
			r.Command = append([]string{}, op.Argv...)
			r.Interrupted = true
			if cs != nil {
				r.ResultDigest = viewDigest(cs)
			}
			if err := s.ws.storeReceipt(ctx, &r); err != nil {
				return err
			}
		}
		if err := s.setRunStatus(ctx, op.Seq, op, RunInterrupted); err != nil {
			return err
		}
	}
	return nil
}

// unfinishedRuns returns the stage's run ops still marked running.
func (s *Stage) unfinishedRuns(ctx context.Context) ([]TxOp, error) {
	// A run's body carries every file it changed, and only a running one
	// is read out and decoded: a body without the word cannot hold that
	// status (wtx writes these records with encoding/json, which spells a
	// letter out, never as an escape).
	rows, err := s.ws.db.ListTxOpsContaining(ctx, s.ID(), "run", RunRunning)
	if err != nil {
		return nil, AsError(err)
	}
	var out []TxOp
	for _, r := range rows {
		var op TxOp
		if decodeTxOp(r.Body, &op) != nil || op.Status != RunRunning {
			continue
		}
		op.Seq = r.Seq
		out = append(out, op)
	}
	return out, nil
}

// setRunStatus records the status of the run op seq.
func (s *Stage) setRunStatus(ctx context.Context, seq int, op TxOp, status string) error {
	op.Seq, op.Status = seq, status
	body, err := json.Marshal(op)
	if err != nil {
		return AsError(err)
	}
	return AsErrorOrNil(s.ws.db.UpdateTxOpBody(ctx, s.ID(), seq, body))
}
