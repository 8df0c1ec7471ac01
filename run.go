package wtx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/sandbox"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// Reexec runs what this process was started for when wtx started it from
// the program's own binary (/proc/self/exe), and exits with its status;
// otherwise it returns false at once. Stage.Run, and the per-file
// operations and probes of the overlay backend, start the binary they run
// in to supervise, confine and reach a view: a program that uses them calls
// Reexec first in main (and in TestMain), as cmd/wtx does:
//
//	func main() {
//		if wtx.Reexec() {
//			return
//		}
//		...
//	}
//
// Nothing of it runs by itself: a program that merely imports wtx is never
// taken over.
func Reexec() bool { return sandbox.Main() }

// RunOptions wire a command run in a stage to its caller.
type RunOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the command's environment (wtx adds WTX_TX and WTX_WORKSPACE).
	Env []string
	// Signals received here are forwarded to the command while it runs.
	Signals <-chan os.Signal
	// ReadOnly and NoNetwork confine the command: the view is read-only;
	// the network is loopback only. Where they cannot be given the run is
	// refused (precondition.confinement).
	ReadOnly, NoNetwork bool
	// Confine refuses the run (precondition.confinement) where the command
	// cannot be confined to its view: MCP runs and flow agent steps ask
	// for it. Without it, a run where no backend can confine (no
	// namespaces) goes ahead, and its receipt says it was unconfined.
	Confine bool
	// SettleEmpty settles the stage as StateEmpty when the command leaves
	// its change set empty (L-004). Leave it unset for a stage that is
	// meant to live on (one opened with Begin for several steps).
	SettleEmpty bool
	// Wait waits for the processes the command leaves running instead of
	// stopping them when it ends.
	Wait bool
	// Dir is the command's working directory, relative to the view's root
	// (as the caller's directory is to the workspace); "" is the root.
	Dir string
}

// RunResult reports a command run in a stage.
type RunResult struct {
	// ExitCode is the command's exit status; 128+N when signal N killed it.
	ExitCode int
	// Signal names the signal that killed the command, if one did.
	Signal string
	// Changes is the stage's whole change set after the command.
	Changes *ChangeSet
	// Receipt records the run.
	Receipt *Receipt
	// Settled is set when the run settled the stage as StateEmpty.
	Settled bool
	// Containment says what held the command's processes: "pid-namespace",
	// "subreaper" (every process stopped with the command), or
	// "process-group" and "none" (a process that detached itself is not).
	Containment string
	// Stopped lists the processes the command left running that were
	// stopped when it ended (or when ctx was cancelled).
	Stopped []StoppedProcess
}

// StoppedProcess is a process stopped with its command: its pid, as the
// command's container saw it, and its command name.
type StoppedProcess struct {
	PID  int
	Comm string
}

// LookCommand checks that name can be run in a stage of workspace: a name
// without a slash is looked up in PATH; one with a slash is taken relative
// to the workspace (the view holds the same file).
func LookCommand(workspace, name string) error {
	if name == "" {
		return errorf(CodeUsage, "no command given")
	}
	var path string
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
				return &Error{Code: CodeCommandNotFound, Message: fmt.Sprintf("command %q not found in PATH", name), Err: err}
			}
			return &Error{Code: CodeCommandNotExecutable, Message: fmt.Sprintf("command %q cannot be run: %v", name, err), Err: err}
		}
		path = p
	} else if filepath.IsAbs(name) {
		path = name
	} else {
		path = filepath.Join(workspace, name)
	}
	fi, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &Error{Code: CodeCommandNotFound, Message: fmt.Sprintf("command %q not found", name), Err: err}
		}
		return &Error{Code: CodeCommandNotExecutable, Message: fmt.Sprintf("command %q cannot be run: %v", name, err), Err: err}
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return &Error{Code: CodeCommandNotExecutable, Message: fmt.Sprintf("command %q is not executable", name)}
	}
	return nil
}

// Run runs argv inside the stage's view, forwarding signals, and records a
// run receipt with the change set it left. A command that cannot be started
// gives an *Error (not-found.command or precondition.command-not-executable);
// a command that ran and failed is not an error: see RunResult.ExitCode.
//
// The run holds the stage's busy lock from before the command starts until
// its receipt is stored: meanwhile the stage is running, and applies, drops,
// per-file ops and other runs on it are refused (refusal.stage-busy). The
// run is recorded (as an op of the stage) before the command starts; a wtx
// killed during it leaves that op unfinished, and the next command that
// finds the stage free marks it interrupted.
//
// When ctx ends while the command runs, its whole container is stopped; the
// run is then finished like any other (change set, op, receipt), so the
// caller can report what the command staged before it was stopped.
func (s *Stage) Run(ctx context.Context, argv []string, opts RunOptions) (*RunResult, error) {
	if len(argv) == 0 {
		return nil, errorf(CodeUsage, "no command given")
	}
	if err := s.checkUsable(); err != nil {
		return nil, err
	}
	if err := s.authorizeRun(); err != nil {
		return nil, err
	}
	hold, err := s.holdRun(ctx)
	if err != nil {
		return nil, err
	}
	defer hold.Close()
	if err := s.reload(ctx); err != nil {
		return nil, err
	}
	if err := s.checkUsable(); err != nil {
		return nil, err
	}
	// The run's receipt is signed when it ends: a key that cannot sign
	// it stops the run before its command starts.
	if err := s.ws.checkReceiptKey(); err != nil {
		return nil, err
	}
	if opts.Dir != "" && (filepath.IsAbs(opts.Dir) || !filepath.IsLocal(opts.Dir)) {
		return nil, errorf(CodeUsage, "run directory %q must be relative to the workspace and inside it", opts.Dir)
	}
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Err = nil // resolved below, relative to the view
	cmd.Dir = opts.Dir
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	cmd.Env = append(append([]string(nil), opts.Env...), "WTX_TX="+s.ID(), "WTX_WORKSPACE="+s.ws.path)
	if !strings.Contains(argv[0], "/") {
		if p, err := exec.LookPath(argv[0]); err == nil {
			cmd.Path = p
		}
	}
	// The run is an op of the stage too, recorded before the command
	// starts so that a killed wtx leaves a trace of it; once the command
	// ended it records what the command changed (checkpoint.go).
	op := TxOp{Kind: "run", Argv: append([]string(nil), argv...), Files: []TxFile{}, Status: RunRunning, Created: s.ws.now().UTC(), Flow: s.flowAttempt}
	var rec FileResult
	if err := s.recordTxOp(ctx, op, &rec, nil); err != nil {
		v.Close()
		return nil, err
	}
	// Nothing ran: the op goes again. A failure to remove it leaves an op
	// that the next command marks interrupted, which is true enough.
	unrecord := func() { _ = s.ws.db.DeleteTxOpsFrom(ctx, s.ID(), rec.TxOp) } // see above
	// What the view holds before the command, to record what it changed.
	checkpoint := !failpoint.Disabled("run-checkpoint")
	var pre []tree.Entry
	if checkpoint {
		var err error
		if pre, err = s.preRunEntries(ctx, v, rec.TxOp); err != nil {
			v.Close()
			unrecord()
			return nil, err
		}
	}
	c, err := stage.Start(v, cmd, stage.RunOptions{ReadOnly: opts.ReadOnly, NoNetwork: opts.NoNetwork, Confine: opts.Confine, Hold: hold, Wait: opts.Wait})
	if err != nil {
		v.Close()
		unrecord()
		return nil, stagingError(err)
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-opts.Signals:
				c.Signal(sig)
			case <-ctx.Done():
				// Cancelled: the whole container is stopped, not only the
				// command.
				c.Stop()
				return
			case <-done:
				return
			}
		}
	}()
	out, werr := c.Wait()
	close(done)
	v.Close()
	if werr != nil {
		return nil, AsError(werr)
	}
	if out.ExecErr != nil {
		unrecord()
		if out.ExecErr.Confinement {
			return nil, &Error{Code: CodeConfinement, Message: fmt.Sprintf("command %q was not run: %s", argv[0], out.ExecErr.Message), Err: out.ExecErr}
		}
		if out.ExecErr.NotFound {
			return nil, &Error{Code: CodeCommandNotFound, Message: fmt.Sprintf("command %q not found", argv[0]), Err: out.ExecErr}
		}
		return nil, &Error{Code: CodeCommandNotExecutable, Message: fmt.Sprintf("command %q cannot be run: %s", argv[0], out.ExecErr.Message), Err: out.ExecErr}
	}
	status := RunDone
	if ctx.Err() != nil {
		// Cancelled: the container is stopped; recording what it left
		// must not fail for the same reason.
		ctx = context.WithoutCancel(ctx)
		status = RunCancelled
	}
	res := &RunResult{ExitCode: out.ExitCode, Containment: string(out.Containment)}
	if out.Signal != 0 {
		res.Signal = syscall.Signal(out.Signal).String()
	}
	for _, p := range out.Stopped {
		res.Stopped = append(res.Stopped, StoppedProcess{PID: p.PID, Comm: p.Comm})
	}
	cs, err := s.Changes(ctx, nil)
	if err != nil {
		return nil, err
	}
	res.Changes = cs
	op.Signal = res.Signal
	if err := s.finishRunOp(ctx, rec.TxOp, op, status, pre, cs, checkpoint); err != nil {
		return nil, err
	}
	r := s.newReceipt("run", cs)
	r.Command = append([]string(nil), argv...)
	r.Containment = res.Containment
	if out.Containment.Complete() {
		r.NotTransactional = withoutItem(r.NotTransactional, receipt.NotOutliving)
	}
	markConfined(&r, out.Confined)
	code := res.ExitCode
	r.ExitCode = &code
	r.ResultDigest = viewDigest(cs)
	if err := s.ws.storeReceipt(ctx, &r); err != nil {
		return nil, err
	}
	res.Receipt = &r
	// A changed root mode is nothing to apply, but the stage stays open
	// so that a person sees it (status says so).
	if opts.SettleEmpty && len(cs.all) == 0 && len(cs.Special) == 0 && len(s.cfg.Ops) == 0 && cs.RootMode == nil {
		if err := s.settleEmpty(ctx); err != nil {
			return nil, err
		}
		res.Settled = s.row.State == StateEmpty
	}
	return res, nil
}

// finishRunOp records the run's op as ended with status (done or
// cancelled) and, with checkpoint, what its command changed (see
// checkpoint.go), its contents kept.
func (s *Stage) finishRunOp(ctx context.Context, seq int, op TxOp, status string, pre []tree.Entry, cs *ChangeSet, checkpoint bool) error {
	if !checkpoint {
		return s.setRunStatus(ctx, seq, op, status)
	}
	release, err := s.keepLock(ctx)
	if err != nil {
		return err
	}
	defer release()
	files, err := s.checkpoint(ctx, pre, cs)
	if err != nil {
		return err
	}
	op.Files, op.Checkpoint = files, true
	return s.setRunStatus(ctx, seq, op, status)
}

// settleEmpty settles an open stage with an empty change set as
// StateEmpty and removes its directory (there is nothing in it to keep).
func (s *Stage) settleEmpty(ctx context.Context) error {
	unlock, err := s.ws.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.reload(ctx); err != nil {
		return err
	}
	if s.row.State != StateOpen {
		return nil
	}
	if err := s.settle(ctx, StateEmpty); err != nil {
		return err
	}
	return s.ws.removeStageDir(s.ID())
}

func withoutItem(items []string, drop string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		if it != drop {
			out = append(out, it)
		}
	}
	return out
}
