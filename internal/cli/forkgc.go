package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
)

func newForkCommand(g *globals) *cobra.Command {
	var opts wtx.ForkOptions
	cmd := &cobra.Command{
		Use:   "fork [T] [--name N]",
		Short: "Open a new stage with T's base and a copy of its staged state",
		Long: `Open a new stage with the same base as stage T and a copy of T's staged state
(its view, per-file ops and read set), and print the new stage's id. The two
are independent from then on: what is written into one never shows in the
other, and each is applied or dropped on its own. Use it to try two ways
forward from the same point.`,
		Example: `  B=$(wtx fork --name plan-b)
  wtx run --tx plan-b -- ./try-another-way.sh
  wtx diff plan-b`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			work := g.longWork("forking " + st.ID())
			f, err := st.Fork(ctx, opts)
			work.end()
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("fork", answer.Fork{Tx: f.ID(), Name: f.Name(), ForkedFrom: st.ID(),
					Backend: f.Backend(), BaseDigest: f.BaseDigest()})
			}
			fmt.Fprintln(g.io.Out, f.ID())
			g.notice("wtx: forked %s as %s", st.ID(), f.ID())
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "a name `N` for the new stage")
	return cmd
}

func newGCCommand(g *globals) *cobra.Command {
	var opts wtx.GCOptions
	var all bool
	cmd := &cobra.Command{
		Use:   "gc [--all] [--older-than DUR] [--prune-history] [--dry-run]",
		Short: "Remove settled stages' state and unreferenced blobs",
		Long: `Remove the state of settled (applied or dropped) stages that settled more than
--older-than ago (default 7 days; 0 for all), and the blobs no record needs
any more, and say what was freed. An open stage is never touched. Blobs that
an applied op's undo or 'wtx show' needs (its pre- and post-images) are kept
unless --prune-history. The blob store is shared by every workspace of the
state root, and so is the collection: what any workspace's open stages, ops,
in-flight applies and interrupted applies need is kept, and the sweep waits
for writers of blobs not yet recorded (the blob store lock). A blob younger
than an hour (or than --older-than, when that is less) is kept besides.

With --all, every workspace of the state root is collected (each under its
own lock), then the blob store once; a workspace whose directory is gone is
left alone and said so.`,
		Example: `  wtx gc
  wtx gc --older-than 0 --dry-run
  wtx gc --older-than 72h --prune-history
  wtx gc --all --older-than 0      # every workspace of the state root`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			if opts.OlderThan < 0 {
				return usageError{msg: "--older-than must not be negative"}
			}
			if all {
				return g.gcAll(ctx, opts)
			}
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			work := g.longWork("gc")
			res, err := ws.GC(ctx, opts)
			work.end()
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("gc", answer.GC{Stages: orEmpty(res.Stages), Blobs: res.Blobs, Bytes: res.Bytes, DryRun: res.DryRun, OlderThan: opts.OlderThan.Seconds(), Kept: res.Kept})
			}
			verb := "freed"
			if res.DryRun {
				verb = "would free"
			}
			fmt.Fprintf(g.io.Out, "%s %d stage(s), %d blob(s), %s\n", verb, len(res.Stages), res.Blobs, humanBytes(res.Bytes))
			for _, s := range res.Stages {
				fmt.Fprintf(g.io.Out, "  %s\n", s)
			}
			g.gcKept(res.Kept)
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&opts.OlderThan, "older-than", 7*24*time.Hour, "only stages settled longer than `DUR` ago (0: all)")
	f.BoolVar(&opts.PruneHistory, "prune-history", false, "also remove applied ops' pre- and post-images (undo and show need them)")
	f.BoolVarP(&opts.DryRun, "dry-run", "n", false, "say what would be freed, remove nothing")
	f.BoolVar(&all, "all", false, "every workspace of the state root")
	return cmd
}

// humanBytes writes n in B, KiB, MiB or GiB.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 3 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGT"[i])
}

// completeStages offers the workspace's open stages (ids and names) for a
// stage argument or --tx.
func (g *globals) completeStages(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ws, ok := g.completeOpen(c)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer ws.Close()
	stages, err := ws.Stages(c.Context())
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, s := range stages {
		if s.State() != wtx.StateOpen {
			continue
		}
		desc := s.Backend() + ", " + s.Created().Local().Format("2006-01-02 15:04")
		if strings.HasPrefix(s.ID(), toComplete) {
			out = append(out, cobra.CompletionWithDesc(s.ID(), desc))
		}
		if s.Name() != "" && strings.HasPrefix(s.Name(), toComplete) {
			out = append(out, cobra.CompletionWithDesc(s.Name(), s.ID()))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// addCompletion wires stage completion into every command that takes a
// stage argument or a --tx flag.
func (g *globals) addCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		if c.Flags().Lookup("tx") != nil {
			c.RegisterFlagCompletionFunc("tx", g.completeStages)
		}
		if c.ValidArgsFunction == nil && (strings.Contains(c.Use, "[T]") || strings.Contains(c.Use, " T ") || strings.Contains(c.Use, "T)")) {
			c.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
				if len(args) > 0 {
					return nil, cobra.ShellCompDirectiveNoFileComp
				}
				return g.completeStages(c, args, toComplete)
			}
		}
	}
}

// gcKept says what a collection kept and why, on stderr.
func (g *globals) gcKept(k wtx.GCKept) {
	if k.OpenStages > 0 {
		g.notice("wtx: kept %d open stage(s): open stages are never collected (apply or drop them first)", k.OpenStages)
	}
	if k.RecentStages > 0 {
		g.notice("wtx: kept %d settled stage(s) younger than %s (the first becomes collectable in %s; --older-than 0 takes them now)",
			k.RecentStages, humanDuration(k.OlderThan), humanDuration(k.NextStageIn))
	}
	if k.RecentBlobs > 0 {
		g.notice("wtx: kept %d unreferenced blob(s) written less than %s ago: a writer may be about to record them", k.RecentBlobs, humanDuration(min(k.OlderThan, wtx.BlobGrace)))
	}
}

// humanDuration writes d in the largest whole unit that fits: days, hours,
// minutes or seconds.
func humanDuration(d time.Duration) string {
	switch {
	case d >= 24*time.Hour:
		return fmt.Sprintf("%dd", int(d.Round(time.Hour)/(24*time.Hour)))
	case d >= time.Hour:
		return fmt.Sprintf("%dh", int(d.Round(time.Minute)/time.Hour))
	case d >= time.Minute:
		return fmt.Sprintf("%dm", int(d.Round(time.Second)/time.Minute))
	}
	return fmt.Sprintf("%ds", int(d.Round(time.Second)/time.Second))
}
