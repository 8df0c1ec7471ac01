package cli

import (
	"bufio"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/project"
	"github.com/wtx-dev/wtx/internal/quote"
)

func newBeginCommand(g *globals) *cobra.Command {
	var begin wtx.BeginOptions
	cmd := &cobra.Command{
		Use:   "begin [STAGE-FLAGS]",
		Short: "Open an empty stage and print its id",
		Long: `Open a stage over the workspace without running anything in it, and print its
id on stdout. Run commands in it later with 'wtx run --tx ID -- CMD'.

With --at OP the view (and the stage's base) is the workspace as it was right
after op OP: every path a later op wrote is set back, in the view only, to
what it held before the first of those ops. Applying the stage is checked
against the workspace as it is now: a path a later op wrote that the stage
changes again has drifted and is refused (merge it with 'wtx rebase --merge');
paths set back that the stage leaves alone are not applied (undo the later
ops with 'wtx undo' for that).`,
		Example: `  T=$(wtx begin --name fmt)
  wtx run --tx "$T" -- gofmt -w .
  T=$(wtx begin --at op-20261130T081500Z-1a2b3c4d)`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if c.Flags().Changed("at") && begin.At == "" {
				return &wtx.Error{Code: wtx.CodeUsage, Message: "--at needs an op id (see 'wtx log')"}
			}
			ws, err := g.open(c.Context())
			if err != nil {
				return err
			}
			defer ws.Close()
			g.withProject(c, &begin)
			work := g.longWork("staging")
			st, err := ws.Begin(c.Context(), begin)
			work.end()
			if err != nil {
				return err
			}
			setBack, err := st.Reversed()
			if err != nil {
				return err
			}
			if g.json {
				out := answer.Begin{Tx: st.ID(), Name: st.Name(), Backend: st.Backend(),
					BackendSkipped: orEmpty(st.Skipped()), BaseDigest: st.BaseDigest()}
				if st.At() != "" {
					n := len(setBack)
					out.At, out.SetBack = st.At(), &n
				}
				return g.emit("begin", out)
			}
			fmt.Fprintln(g.io.Out, st.ID())
			if st.At() != "" && !g.quiet {
				fmt.Fprintf(g.io.Err, "view: the workspace right after %s (%d path(s) set back; the workspace is untouched)\n", st.At(), len(setBack))
			}
			return nil
		},
	}
	addStageFlags(g, cmd.Flags(), &begin)
	cmd.Flags().StringVar(&begin.At, "at", "", "open the stage on the workspace as it was right after op `OP` (later ops set back in the view)")
	g.addProjectFlag(cmd.Flags())
	return cmd
}

func newListCommand(g *globals) *cobra.Command {
	var all, settled bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the workspace's stages",
		Long: `List the workspace's stages: id, name, age, the disk its state takes, backend,
state and, for open stages, the counts of their change sets. A stage that a
command run in it holds shows as "running" (in JSON: "running": true, with the
wtx process id and start time under "run"). Settled stages (applied, dropped,
empty) are shown with --settled.

With --all, every workspace of the state root instead: its path (marked when
the directory is gone), its open and recorded stages, its applied ops and
the disk its stages' state takes.`,
		Example: `  wtx list
  wtx list --settled
  wtx list --all                 # every workspace of the state root
  wtx list --json | jq -r '.stages[].tx'`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			if all {
				if settled {
					return usageError{msg: "--all lists workspaces, --settled a workspace's settled stages: give one"}
				}
				return g.listAll(ctx)
			}
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			out, err := answer.ListOf(ctx, ws, settled)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("list", out)
			}
			rows := out.Stages
			if len(rows) == 0 {
				g.notice("wtx: no open stages in %s", quote.Path(ws.Path()))
				return nil
			}
			tw := tabwriter.NewWriter(g.io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "STAGE\tNAME\tAGE\tSIZE\tBACKEND\tSTATE\tCHANGES")
			for _, r := range rows {
				changes := "-"
				if r.Counts != nil {
					changes = fmt.Sprintf("+%d ~%d -%d", r.Counts.Added, r.Counts.Modified, r.Counts.Deleted)
				}
				state := r.State
				if r.Running {
					state = "running"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Tx, dash(r.Name), age(time.Since(r.Created)), humanBytes(r.Size), r.Backend, state, changes)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&settled, "settled", false, "also list settled stages (applied, dropped, empty)")
	cmd.Flags().BoolVarP(&all, "all", "a", false, "every workspace of the state root")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func newStatusCommand(g *globals) *cobra.Command {
	var paths []string
	cmd := &cobra.Command{
		Use:   "status [T]",
		Short: "Show one stage: state, change set, drift",
		Example: `  wtx status
  wtx status fmt --path src/
  wtx status --json | jq .changeset_digest`,
		Long: `Show a stage's state, backend, change set and changeset digest, and drift:
changed paths whose workspace copy moved since the stage opened (an apply of
them would be refused). T is a stage id, a unique prefix of one, or a name; it
may be left out when the workspace has exactly one open stage.`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			st, err := ws.Stage(ctx, stageArg(args))
			if err != nil {
				if stageArg(args) == "" && !g.json && wtx.AsError(err).Code == wtx.CodeNoStage {
					// As git status always answers: where you are, the
					// project file (or why it cannot be used), and how
					// to start.
					return g.statusWithoutStage(ws)
				}
				return err
			}
			s, err := st.Status(ctx, paths)
			if err != nil {
				return err
			}
			proj, err := ws.Project()
			if err != nil {
				return err
			}
			if g.json {
				return answer.Write(g.io.Out, answer.StatusOK, "status", s,
					answer.StatusContext{Workspace: workspaceOf(ws), Project: answer.NewProject(proj)})
			}
			// One write per line would be a system call per changed path.
			bw := bufio.NewWriter(g.io.Out)
			w := bw
			printWorkspace(w, ws, proj)
			name := ""
			if s.Name != "" {
				name = " (" + s.Name + ")"
			}
			state := s.State
			if s.Running {
				state += ", running"
				if s.Run != nil && s.Run.PID > 0 {
					state += fmt.Sprintf(" (wtx process %d, since %s)", s.Run.PID, s.Run.Started.Local().Format(time.DateTime))
				}
			}
			fmt.Fprintf(w, "stage    %s%s\nstate    %s\nbackend  %s (view %s)\ncreated  %s (%s ago)\n",
				s.Tx, name, state, s.Backend, s.View, s.Created.Local().Format(time.DateTime), age(time.Since(s.Created)))
			for _, sk := range s.Skipped {
				fmt.Fprintf(w, "         %s skipped: %s\n", sk.Backend, sk.Reason)
			}
			if s.At != "" {
				fmt.Fprintf(w, "at       %s (base: the workspace right after it)\n", s.At)
			}
			if len(s.Exclude) > 0 {
				fmt.Fprintf(w, "exclude  %s\n", joinList(quoteAll(s.Exclude)))
			}
			if len(s.Protect) > 0 {
				fmt.Fprintf(w, "protect  %s\n", joinList(quoteAll(s.Protect)))
			}
			fmt.Fprintf(w, "changes  %d added, %d modified, %d deleted\ndigest   %s\n", s.Counts.Added, s.Counts.Modified, s.Counts.Deleted, s.ChangesetDigest)
			drift := map[string]string{}
			for _, d := range s.Drift {
				drift[d.Path] = d.Kind
			}
			color := g.color()
			conflicted := map[string]bool{}
			for _, p := range s.Conflicted {
				conflicted[p] = true
			}
			for _, ch := range s.Changes {
				line := fmt.Sprintf("  %s %s%s", paintAction(color, actionLetter(ch)), g.displayPath(ch), reservedNote(ch.Path))
				if k, ok := drift[ch.Path]; ok {
					line += paint(color, sgrRed, "   [drift: "+k+" outside the stage]")
				}
				if conflicted[ch.Path] {
					line += paint(color, sgrRed, "   [conflict markers: edit them out, or wtx resolve --ours|--theirs]")
				}
				fmt.Fprintln(w, line)
			}
			changed := make(map[string]bool, len(s.Changes))
			for _, ch := range s.Changes {
				changed[ch.Path] = true
			}
			for _, d := range s.Drift {
				if !changed[d.Path] {
					fmt.Fprintf(w, "  %s %s   %s\n", paint(color, sgrRed, "!"), quote.Path(d.Path), paint(color, sgrRed, "[drift: "+d.Kind+"]"))
				}
			}
			for _, p := range s.Special {
				fmt.Fprintf(w, "  ! %s (FIFO, socket or device: never applied)\n", quote.Path(p))
			}
			printLeftOut(g, w, s.LeftOut)
			if s.RootMode != nil {
				fmt.Fprintf(w, "notice   %s\n", s.RootMode.Notice())
			}
			if len(s.Ops) > 0 {
				fmt.Fprintf(w, "ops      %s\n", joinList(s.Ops))
			}
			writeTxOps(w, s.TxOps, color)
			return bw.Flush()
		},
	}
	cmd.Flags().StringArrayVar(g.selectors(&paths), "path", nil, "only paths under `SEL` (repeatable)")
	return cmd
}

func newDropCommand(g *globals) *cobra.Command {
	var empty, all bool
	cmd := &cobra.Command{
		Use:     "drop [T]... [--empty | --all]",
		Aliases: []string{"abort"},
		Short:   "Discard stages; the workspace is untouched (alias: abort)",
		Example: `  wtx drop
  wtx drop tx-20261130T081500Z-1a2b3c4d fmt
  wtx drop --empty   # every open stage whose change set is empty
  wtx drop --all     # every open stage`,
		Long: `Discard the stages T (the only open stage when none is named): each view is
removed and the stage can never be applied. The workspace is not touched.
--empty drops every open stage whose change set is empty; --all every open
stage. A stage that a command run in it holds is refused (and the others are
still dropped); so is a stage whose change set was applied: undo its op to
take the change back out of the workspace. Dropping a dropped or empty stage
changes nothing.`,
		RunE: func(c *cobra.Command, args []string) error {
			if empty && all {
				return usageError{msg: "--empty and --all cannot be used together"}
			}
			if (empty || all) && len(args) > 0 {
				return usageError{msg: "name stages or give --empty or --all, not both"}
			}
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			var stages []*wtx.Stage
			switch {
			case empty || all:
				list, err := ws.Stages(ctx)
				if err != nil {
					return err
				}
				for _, st := range list {
					if st.State() != wtx.StateOpen {
						continue
					}
					if empty {
						if run, err := st.Running(ctx); err != nil || run != nil {
							continue // a running stage is not empty yet
						}
						cs, err := st.Changes(ctx, nil)
						if err != nil || len(cs.Changes) > 0 || len(cs.Special) > 0 || cs.RootMode != nil {
							continue
						}
					}
					stages = append(stages, st)
				}
			case len(args) == 0:
				st, err := ws.Stage(ctx, "")
				if err != nil {
					return err
				}
				stages = append(stages, st)
			default:
				seen := map[string]bool{}
				for _, a := range args {
					st, err := ws.Stage(ctx, a)
					if err != nil {
						return err
					}
					if !seen[st.ID()] {
						seen[st.ID()] = true
						stages = append(stages, st)
					}
				}
			}
			var done []answer.Dropped
			var failed []*wtx.Error
			var allDiscarded []string // every dropped stage's, in order
			for _, st := range stages {
				// What the drop throws away: the paths of the change set.
				var discarded []string
				if st.State() == wtx.StateOpen {
					if cs, err := st.Changes(ctx, nil); err == nil {
						for _, ch := range cs.Changes {
							discarded = append(discarded, ch.Path)
						}
					}
				}
				if err := st.Drop(ctx); err != nil {
					e := wtx.AsError(err)
					failed = append(failed, e)
					continue
				}
				allDiscarded = append(allDiscarded, discarded...)
				d := answer.Dropped{Tx: st.ID(), State: st.State()}
				d.Discarded, d.DiscardedB64 = answer.Names(discarded)
				done = append(done, d)
				if len(discarded) > 0 {
					g.notice("wtx: dropped %s, discarding %d changed path(s); the workspace is unchanged", st.ID(), len(discarded))
				} else {
					g.notice("wtx: dropped %s; the workspace is unchanged", st.ID())
				}
			}
			if len(failed) > 0 {
				if len(stages) == 1 {
					return failed[0]
				}
				last := failed[len(failed)-1]
				if g.json {
					// The refusal, and which stages were dropped all the same.
					code := last.ExitCode()
					g.exitCode = &code
					return g.emitError(commandName(c), last, code, answer.DropPartial{Stages: orEmpty(done)})
				}
				for _, e := range failed[:len(failed)-1] {
					g.reportError(e)
				}
				return last
			}
			if g.json {
				out := answer.Drop{Stages: orEmpty(done), Discarded: []string{}}
				if len(done) == 1 {
					out.Tx, out.State, out.Discarded, out.DiscardedB64 = done[0].Tx, done[0].State, done[0].Discarded, done[0].DiscardedB64
				} else {
					out.Discarded, out.DiscardedB64 = answer.Names(allDiscarded)
				}
				return g.emit(commandName(c), out)
			}
			if len(stages) == 0 {
				g.notice("wtx: no open stage to drop")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&empty, "empty", false, "drop every open stage whose change set is empty")
	f.BoolVar(&all, "all", false, "drop every open stage")
	return cmd
}

// statusWithoutStage is status's answer for a workspace with no open
// stage: the workspace, its project file or why it cannot be used, its
// newest op, and how to start a stage.
func (g *globals) statusWithoutStage(ws *wtx.Workspace) error {
	w := g.io.Out
	proj, perr := ws.Project()
	printWorkspace(w, ws, proj)
	if perr != nil {
		fmt.Fprintf(w, "project  %s cannot be used: %s\n", project.FileName, wtx.AsError(perr).Message)
	}
	fmt.Fprintln(w, "no open stage: start one with 'wtx run -- CMD' or 'wtx begin'")
	return nil
}
