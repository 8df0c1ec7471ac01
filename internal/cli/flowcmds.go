package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/flow"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
)

func newFlowCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "flow",
		Short: "Durable multi-step runs: one step, one transaction",
		Long: `A flow file names ordered steps; each step runs in its own stage and lands as
one op, and its result (exit status, output digests and kept output, change-set
digest, op id, receipts) is recorded in the same transaction as that op. A run
that stops (a failing step, a kill, a reboot) is resumed where it stopped: a
step with a recorded result never runs again. 'flow show' replays what a run
recorded and runs nothing.

A flow file (TOML):

  version = 1
  name = "tidy"

  [[steps]]
  name = "format"
  kind = "run"                     # run | batch | agent
  command = ["gofmt", "-w", "."]
  timeout = "5m"

  [[steps]]
  name = "license"
  kind = "batch"
  [[steps.ops]]
  command = "write"
  path = "LICENSE"
  content = "MIT\n"

  [[steps]]
  name = "review-bot"
  kind = "agent"                   # runs read-only; prints JSON lines of ops
  command = ["./bot.sh"]
  [steps.allow]
  paths = ["docs/**"]
  ops = ["write", "edit"]
  max_bytes = 65536

Per step also: on_success = "apply" | "review" | "keep" (run steps), exclude,
protect, share (selectors), read_only, no_network, backend, approve, timeout,
effects = ["network", …] (a step with effects is not idempotent unless it says
idempotent = true), keep_output (bytes of stdout/stderr kept, default 256 KiB),
and, for batch steps, from = "previous" (take the ops from the previous step's
stdout).`,
	}
	cmd.AddCommand(newFlowRunCommand(g), newFlowResumeCommand(g), newFlowShowCommand(g), newFlowListCommand(g),
		newFlowAbandonCommand(g), newFlowForkCommand(g))
	return cmd
}

// flowProgress prints a line per step as it starts and ends.
func (g *globals) flowProgress() func(flow.StepState) {
	if g.json || g.quiet {
		return nil
	}
	return func(s flow.StepState) {
		line := fmt.Sprintf("wtx: step %d %s (%s): %s", s.Index, s.Name, s.Kind, s.Status)
		if len(s.Attempts) == 1 && s.Attempts[0].Attempt > 1 {
			line += fmt.Sprintf(" (attempt %d)", s.Attempts[0].Attempt)
		}
		fmt.Fprintln(g.io.Err, quote.Text(line))
	}
}

// finishFlow answers a run that ran: the run as JSON or a summary, and an
// exit status of 1 when it stopped on a failure or a decision.
func (g *globals) finishFlow(command string, run *flow.Run) error {
	withFlowCommands(run)
	switch run.Status {
	case flow.RunDone, flow.RunReview:
	default:
		one := 1
		g.exitCode = &one
	}
	if g.json {
		return g.emit(command, answer.Flow{Run: run})
	}
	writeFlowSummary(g.io.Out, run)
	for _, r := range run.Repairs {
		if r.Command != "" {
			fmt.Fprintf(g.io.Err, "wtx: hint: %s: %s\n", quote.Text(r.Detail), quote.Text(r.Command))
		}
	}
	return nil
}

// withFlowCommands renders the command of each repair of run that the
// library gave as data only (a stage to rebase, merge or drop).
func withFlowCommands(run *flow.Run) {
	for i, r := range run.Repairs {
		if r.Command == "" {
			run.Repairs[i].Command = repairCommand(r)
		}
	}
}

func writeFlowSummary(w io.Writer, run *flow.Run) {
	name := ""
	if run.Name != "" {
		name = " (" + run.Name + ")"
	}
	fmt.Fprintf(w, "%s%s: %s\n", run.ID, name, run.Status)
	for _, s := range run.Steps {
		fmt.Fprintln(w, quote.Text(stepLine(s)))
	}
}

func stepLine(s flow.StepState) string {
	line := fmt.Sprintf("  %d. %-16s %-5s  %s", s.Index, s.Name, s.Kind, s.Status)
	if len(s.Attempts) == 0 {
		return line
	}
	a := s.Attempts[len(s.Attempts)-1]
	if a.Attempt > 1 {
		line += fmt.Sprintf(" (attempt %d)", a.Attempt)
	}
	if r := a.Result; r != nil {
		if r.ExitCode != nil {
			line += fmt.Sprintf("  exit %d", *r.ExitCode)
		}
		if r.TimedOut {
			line += "  timed out"
		}
		if r.OpID != "" {
			line += "  " + r.OpID
		} else if a.Status == flow.StepReview || a.Status == flow.StepStaged {
			line += "  stage " + r.StageID
		}
		if r.Counts.Added+r.Counts.Modified+r.Counts.Deleted > 0 {
			line += fmt.Sprintf("  +%d ~%d -%d", r.Counts.Added, r.Counts.Modified, r.Counts.Deleted)
		}
		if r.Error != nil {
			line += "  " + r.Error.Code + ": " + r.Error.Message
		}
	}
	return line
}

func newFlowRunCommand(g *globals) *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "run FILE [--name N]",
		Short: "Start a run of a flow file",
		Long: `Start a run of the flow in FILE ("-" for stdin) and run its steps in order until
one fails or stops for review, or all are done. The run keeps the file's bytes
and their digest: a resume runs what this run started with, whatever FILE holds
by then. Exit status 0 when the run is done or waits for review, 1 when it
stopped on a failure or for a decision.`,
		Example: `  wtx flow run tidy.toml --name tidy-1
  wtx flow show tidy-1`,
		Args: exactlyOne("flow file"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			var data []byte
			var err error
			if args[0] == "-" {
				data, err = io.ReadAll(io.LimitReader(g.io.In, 4<<20+1))
			} else {
				data, err = os.ReadFile(args[0])
			}
			if err != nil {
				return &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("flow file %s: %v", quote.Path(args[0]), err)}
			}
			def, err := flow.Parse(data)
			if err != nil {
				e := wtx.AsError(err)
				out := *e
				out.Message = strings.Replace(e.Message, "flow file", "flow file "+quote.Path(args[0]), 1)
				return &out
			}
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			run, err := flow.Start(ctx, ws, def, flow.Options{Name: name, Env: os.Environ(), Progress: g.flowProgress()})
			if err != nil {
				return err
			}
			return g.finishFlow("flow run", run)
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "a name `N` for the run")
	return cmd
}

func newFlowResumeCommand(g *globals) *cobra.Command {
	var retry, skip bool
	cmd := &cobra.Command{
		Use:   "resume RUN [--retry] [--skip]",
		Short: "Continue a run at its first step without a result",
		Long: `Continue run RUN (an id, unique prefix or name) at its first step without a
recorded result. A step interrupted before its apply committed runs again; a
step with a recorded result never does. A step with external effects that was
interrupted is not run again on its own: --retry runs it again (its effects may
then happen twice), --skip records it as skipped and goes on. A step kept for
review is applied; when that apply is refused (the workspace moved, a protected
path, a busy stage) its stage is kept, with the step's change and any edits in
it, and the run stops as "refused" with the repairs (rebase, merge, drop);
resume again once the stage or the workspace is put right. --skip also gets a
run past a failed step; it drops a stage kept for review only while that holds
exactly what the step left (refusal.changed-since-review otherwise).`,
		Example: `  wtx flow resume tidy-1
  wtx flow resume tidy-1 --skip`,
		Args: exactlyOne("run"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			run, err := flow.Resume(ctx, ws, args[0], flow.Options{Env: os.Environ(), Retry: retry, Skip: skip, Progress: g.flowProgress()})
			if err != nil {
				return err
			}
			return g.finishFlow("flow resume", run)
		},
	}
	cmd.Flags().BoolVar(&retry, "retry", false, "run an interrupted step with external effects again")
	cmd.Flags().BoolVar(&skip, "skip", false, "record the first step without a result as skipped and go on")
	return cmd
}

func newFlowShowCommand(g *globals) *cobra.Command {
	var noDiff bool
	cmd := &cobra.Command{
		Use:   "show RUN [--no-diff]",
		Short: "Replay a run's recorded results; runs nothing",
		Long: `Show what run RUN recorded: its definition's digest, its base, and per step
every attempt's status, exit status, output (as kept) and digests, op and
receipts, and the diff each op applied. Nothing runs and no workspace is
touched: not even an interrupted apply is recovered.`,
		Example: `  wtx flow show tidy-1
  wtx flow show tidy-1 --json | jq '.run.steps[].status'`,
		Args: exactlyOne("run"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			// A replay reads; it does not even finish an interrupted
			// apply (negative control: WTX_DISABLE=replay recovers).
			g.noRecover = !failpoint.Disabled("replay")
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			run, err := flow.Show(ctx, ws, args[0])
			if err != nil {
				return err
			}
			withFlowCommands(run)
			if g.json {
				return g.emit("flow show", answer.Flow{Run: run})
			}
			return writeFlowShow(ctx, g, ws, run, !noDiff)
		},
	}
	cmd.Flags().BoolVar(&noDiff, "no-diff", false, "leave out the ops' diffs")
	return cmd
}

// writeFlowShow renders a run's recorded results, and the diff of each
// op its steps applied. It reads the state root only.
func writeFlowShow(ctx context.Context, g *globals, ws *wtx.Workspace, run *flow.Run, diffs bool) error {
	w := g.io.Out
	name := ""
	if run.Name != "" {
		name = " (" + run.Name + ")"
	}
	fmt.Fprintf(w, "run %s%s: %s\n", run.ID, quote.Text(name), run.Status)
	if run.FlowName != "" {
		fmt.Fprintf(w, "flow:       %s\n", quote.Text(run.FlowName))
	}
	fmt.Fprintf(w, "definition: %s\n", run.DefinitionDigest)
	if run.BaseDigest != "" {
		fmt.Fprintf(w, "base:       %s\n", run.BaseDigest)
	}
	if run.ForkedFrom != "" {
		fmt.Fprintf(w, "forked:     from %s after step %s\n", run.ForkedFrom, quote.Text(run.ForkedAt))
	}
	for _, s := range run.Steps {
		fmt.Fprintf(w, "\nstep %d %s (%s, %s)\n", s.Index, quote.Text(s.Name), s.Kind, map[bool]string{true: "idempotent", false: "not idempotent"}[s.Idempotent])
		if len(s.Attempts) == 0 {
			fmt.Fprintln(w, "  pending")
		}
		for _, a := range s.Attempts {
			fmt.Fprintf(w, "  attempt %d: %s  %s\n", a.Attempt, a.Status, a.Updated.Format("2006-01-02 15:04:05Z"))
			r := a.Result
			if r == nil {
				continue
			}
			if len(r.Command) > 0 {
				fmt.Fprintf(w, "    command:   %s\n", quote.Text(strings.Join(r.Command, " ")))
			}
			if r.ExitCode != nil {
				status := fmt.Sprintf("%d", *r.ExitCode)
				if r.Signal != "" {
					status += " (" + r.Signal + ")"
				}
				if r.TimedOut {
					status += " (timed out)"
				}
				fmt.Fprintf(w, "    exit:      %s\n", status)
			}
			if r.StdoutDigest != "" {
				fmt.Fprintf(w, "    stdout:    %d bytes %s\n", r.StdoutSize, r.StdoutDigest)
				writeKept(w, r.Stdout, r.StdoutSize)
				fmt.Fprintf(w, "    stderr:    %d bytes %s\n", r.StderrSize, r.StderrDigest)
				writeKept(w, r.Stderr, r.StderrSize)
			}
			if r.ProposalDigest != "" {
				fmt.Fprintf(w, "    proposal:  %d op(s) %s\n", r.ProposalOps, r.ProposalDigest)
			}
			if r.ChangesetDigest != "" {
				fmt.Fprintf(w, "    changes:   +%d ~%d -%d %s\n", r.Counts.Added, r.Counts.Modified, r.Counts.Deleted, r.ChangesetDigest)
			}
			if r.StageID != "" {
				fmt.Fprintf(w, "    stage:     %s\n", r.StageID)
			}
			if r.OpID != "" {
				fmt.Fprintf(w, "    op:        %s\n", r.OpID)
			}
			if len(r.Receipts) > 0 {
				fmt.Fprintf(w, "    receipts:  %s\n", strings.Join(r.Receipts, " "))
			}
			for _, nt := range r.NotTransactional {
				fmt.Fprintf(w, "    not transactional: %s\n", quote.Text(nt))
			}
			if r.Error != nil {
				fmt.Fprintf(w, "    error:     %s: %s\n", r.Error.Code, quote.Text(r.Error.Message))
			}
			if diffs && r.OpID != "" && a.Status == flow.StepDone {
				op, err := ws.Op(ctx, r.OpID)
				if err != nil {
					fmt.Fprintf(w, "    diff:      unavailable (%s)\n", quote.Text(wtx.AsError(err).Message))
					continue
				}
				if err := op.WriteDiff(w, g.color()); err != nil {
					fmt.Fprintf(w, "    diff:      unavailable (%s)\n", quote.Text(wtx.AsError(err).Message))
				}
			}
		}
	}
	if len(run.Repairs) > 0 && run.Status != flow.RunDone {
		fmt.Fprintln(w)
		for _, r := range run.Repairs {
			fmt.Fprintf(w, "%s: %s\n", quote.Text(r.Detail), quote.Text(r.Command))
		}
	}
	return nil
}

// writeKept writes kept output indented, saying when it was cut.
func writeKept(w io.Writer, kept []byte, size int64) {
	if len(kept) == 0 {
		return
	}
	for _, line := range strings.SplitAfter(string(kept), "\n") {
		if line == "" {
			continue
		}
		fmt.Fprintf(w, "      | %s\n", quote.Text(strings.TrimSuffix(line, "\n")))
	}
	if int64(len(kept)) < size {
		fmt.Fprintf(w, "      | … %d more bytes not kept\n", size-int64(len(kept)))
	}
}

func newFlowListCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the workspace's flow runs",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			g.noRecover = true
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			runs, err := flow.Runs(ctx, ws)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("flow list", answer.FlowList{Runs: orEmpty(runs)})
			}
			for _, r := range runs {
				done := 0
				for _, s := range r.Steps {
					if s.Status == flow.StepDone.String() || s.Status == flow.StepSkipped.String() || s.Status == flow.StepStaged.String() {
						done++
					}
				}
				line := fmt.Sprintf("%s  %-11s %d/%d steps  %s", r.ID, r.Status, done, len(r.Steps), r.Created.Format("2006-01-02 15:04:05Z"))
				if r.Name != "" {
					line += "  " + r.Name
				}
				if r.FlowName != "" {
					line += "  flow " + r.FlowName
				}
				fmt.Fprintln(g.io.Out, quote.Text(line))
			}
			return nil
		},
	}
}

func newFlowAbandonCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "abandon RUN",
		Short: "Stop a run for good",
		Long: `Mark run RUN abandoned: it never runs again. What its steps applied stays (undo
their ops to take it back); a stage it kept for review is dropped, unless it
holds changes made since the step kept it (a person's edits, a rebase): then
nothing is done (refusal.changed-since-review) until you apply or drop it.`,
		Args: exactlyOne("run"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			run, err := flow.Abandon(ctx, ws, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("flow abandon", answer.Flow{Run: run})
			}
			writeFlowSummary(g.io.Out, run)
			return nil
		},
	}
}

func newFlowForkCommand(g *globals) *cobra.Command {
	var at, name string
	cmd := &cobra.Command{
		Use:   "fork RUN --at STEP [--name N]",
		Short: "Start a new run from the state after a step of RUN",
		Long: `Start a new run of RUN's definition (as RUN pinned it) that shares RUN's steps up
to STEP (a name or a number from 1): their results are the new run's, and they
never run again. The next step's stage opens on the workspace as it was right
after the last op of those steps (as 'wtx begin --at OP' does), and the new run
goes on from there; each of its steps lands through the ordinary checks
against the current workspace. RUN itself is left as it is.`,
		Example: `  wtx flow fork tidy-1 --at format --name tidy-2`,
		Args:    exactlyOne("run"),
		RunE: func(c *cobra.Command, args []string) error {
			if at == "" {
				return usageError{msg: "flow fork needs --at STEP"}
			}
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			run, err := flow.Fork(ctx, ws, args[0], at, flow.Options{Name: name, Env: os.Environ(), Progress: g.flowProgress()})
			if err != nil {
				return err
			}
			return g.finishFlow("flow fork", run)
		},
	}
	cmd.Flags().StringVar(&at, "at", "", "the step `STEP` (name or number) after which the new run starts")
	cmd.Flags().StringVar(&name, "name", "", "a name `N` for the new run")
	return cmd
}
