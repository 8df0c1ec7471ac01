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

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
)

// RunOptions wire a command run in a stage to its caller.
type RunOptions struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Env is the command's environment (wtx adds WTX_TX and WTX_WORKSPACE).
	Env []string
	// Signals received here are forwarded to the command while it runs.
	Signals <-chan os.Signal
	// ReadOnly and NoNetwork confine the command (overlay backend only):
	// the view is read-only; the network is loopback only.
	ReadOnly, NoNetwork bool
	// SettleEmpty settles the stage as StateEmpty when the command leaves
	// its change set empty (L-004). Leave it unset for a stage that is
	// meant to live on (one opened with Begin for several steps).
	SettleEmpty bool
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
func (s *Stage) Run(ctx context.Context, argv []string, opts RunOptions) (*RunResult, error) {
	if len(argv) == 0 {
		return nil, errorf(CodeUsage, "no command given")
	}
	if err := s.checkUsable(); err != nil {
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
	v, err := s.view(ctx)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Err = nil // resolved below, relative to the view
	cmd.Stdin, cmd.Stdout, cmd.Stderr = opts.Stdin, opts.Stdout, opts.Stderr
	cmd.Env = append(append([]string(nil), opts.Env...), "WTX_TX="+s.ID(), "WTX_WORKSPACE="+s.ws.path)
	if !strings.Contains(argv[0], "/") {
		if p, err := exec.LookPath(argv[0]); err == nil {
			cmd.Path = p
		}
	}
	if err := v.Prepare(cmd, stage.RunOptions{ReadOnly: opts.ReadOnly, NoNetwork: opts.NoNetwork, Hold: hold}); err != nil {
		v.Close()
		return nil, stagingError(err)
	}
	// The run is an op of the stage too: drop-op and rebase must know a
	// command changed it (what it changed is not recorded path by path).
	// It is recorded before the command starts, so that a killed wtx
	// leaves a trace of it.
	op := TxOp{Kind: "run", Argv: append([]string(nil), argv...), Files: []TxFile{}, Status: RunRunning, Created: s.ws.now().UTC()}
	var rec FileResult
	if err := s.recordTxOp(ctx, op, &rec, nil); err != nil {
		v.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		v.Close()
		// Nothing ran: the op goes again. A failure to remove it leaves an
		// op that the next command marks interrupted, which is true enough.
		_ = s.ws.db.DeleteTxOpsFrom(ctx, s.ID(), rec.TxOp) // see above
		switch {
		case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
			return nil, &Error{Code: CodeCommandNotFound, Message: fmt.Sprintf("command %q not found", argv[0]), Err: err}
		default:
			return nil, &Error{Code: CodeCommandNotExecutable, Message: fmt.Sprintf("command %q cannot be run: %v", argv[0], err), Err: err}
		}
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case sig := <-opts.Signals:
				cmd.Process.Signal(sig)
			case <-done:
				return
			}
		}
	}()
	werr := cmd.Wait()
	close(done)
	v.Close()
	res := &RunResult{}
	if werr != nil {
		var ee *exec.ExitError
		if !errors.As(werr, &ee) {
			return nil, AsError(werr)
		}
	}
	ps := cmd.ProcessState
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
		res.ExitCode = 128 + int(ws.Signal())
	}
	cs, err := s.Changes(ctx, nil)
	if err != nil {
		return nil, err
	}
	res.Changes = cs
	if err := s.setRunStatus(ctx, rec.TxOp, op, RunDone); err != nil {
		return nil, err
	}
	r := s.newReceipt("run", cs)
	r.Command = append([]string(nil), argv...)
	code := res.ExitCode
	r.ExitCode = &code
	view := make([]tree.Entry, 0, len(cs.view))
	for _, e := range cs.view {
		if e.Type != tree.Special {
			view = append(view, e)
		}
	}
	r.ResultDigest = tree.Digest(view)
	if err := s.ws.storeReceipt(ctx, &r); err != nil {
		return nil, err
	}
	res.Receipt = &r
	if opts.SettleEmpty && len(cs.all) == 0 && len(cs.Special) == 0 && len(s.cfg.Ops) == 0 {
		if err := s.settleEmpty(ctx); err != nil {
			return nil, err
		}
		res.Settled = s.row.State == StateEmpty
	}
	return res, nil
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
	removeStageDir(s.ws.stageDir(s.ID()))
	return nil
}
