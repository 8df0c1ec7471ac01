package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
)

func newDiffCommand(g *globals) *cobra.Command {
	var (
		paths      []string
		exclude    []string
		stat, ns   bool
		binaryFlag bool
		noPager    bool
		numbered   bool
		drift      bool
	)
	cmd := &cobra.Command{
		Use:   "diff [T] [--path SEL]... [--exclude SEL]... [--stat | --name-status | --drift]",
		Short: "Show a stage's change set as a git-style diff",
		Long: `Show stage T's change set as a unified diff in git's format, which
'git apply' accepts: new and deleted files, mode changes, symlinks (mode
120000) and type changes. Binary changes are written as git binary patches when
the output is not a terminal (or with --binary), and marked "Binary files …
differ" on a terminal. Directories appear in --name-status with a trailing
slash. With --json, the change set and its changeset_digest are printed
instead (the digest that 'wtx apply --expect' checks).

--path and --exclude select as apply does; a selector that matches no path
of the change set is an error (not-found.path), as git's pathspec is.

Hunks are numbered from 1 in diff order, per file; --hunks writes the number
after each hunk header ("@@ -1,3 +1,4 @@ hunk 1"), which git apply ignores.
'wtx apply --path P --hunks 1,3' applies those hunks of P alone.

On a terminal the diff is coloured (not with NO_COLOR or --no-color) and shown
through a pager like git's: $PAGER, else "less -FRX"; --no-pager or PAGER=cat
turns it off. Output to a pipe or a file is never paged.

With --drift, the other side: for each path that blocks an apply because the
workspace moved (a changed path that drifted, or a file the stage read that
changed since), the workspace's change since the stage's base, a/ being the
base and b/ the workspace now. It is shown where wtx kept the base content
(the files per-file ops touched, and whatever an earlier apply stored); for
the other paths a line on stderr (and "shown": false with a note in --json)
says that only the digests are known.`,
		Example: `  wtx diff
  wtx diff --stat
  wtx diff --path src/ | git apply --check
  wtx diff --hunks --path src/main.go   # number the hunks for apply --hunks
  wtx diff --json | jq -r .changeset_digest`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			if stat && ns {
				return usageError{msg: "--stat and --name-status cannot be used together"}
			}
			if drift && (stat || ns || numbered) {
				return usageError{msg: "--drift shows the workspace's side as a diff: it does not go with --stat, --name-status or --hunks"}
			}
			ctx := c.Context()
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			if drift {
				return g.driftDiff(c, st, paths, noPager)
			}
			if g.json {
				cs, err := st.SelectChanges(ctx, wtx.Selection{Paths: paths, Exclude: exclude})
				if err != nil {
					return err
				}
				if err := cs.CheckMatched(st.ID()); err != nil {
					return err
				}
				out := answer.Diff{Tx: st.ID(), Changes: orEmpty(cs.Changes), Counts: cs.Counts, ChangesetDigest: cs.Digest}
				out.Special, out.SpecialB64 = answer.Names(cs.Special)
				return g.emit("diff", out)
			}
			opts := wtx.DiffOptions{Paths: paths, Exclude: exclude, Color: g.color(), Binary: binaryFlag || !g.io.OutTTY, NumberHunks: numbered}
			switch {
			case stat:
				opts.Format = wtx.DiffStat
			case ns:
				opts.Format = wtx.DiffNameStatus
			}
			out := g.io.Out
			pg := g.startPager(noPager)
			if pg != nil {
				out = pg
			}
			work := g.longWork("diff")
			res, err := st.WriteDiff(ctx, work.writer(out), opts)
			work.end()
			if pg != nil {
				pg.wait()
			}
			if err != nil {
				return err
			}
			for _, p := range res.Unavailable {
				fmt.Fprintf(g.io.Err, "wtx: %s: not shown: its workspace copy changed since the stage opened, so its base content is gone\n", quote.Path(p))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(g.selectors(&paths), "path", nil, "only paths under `SEL` (repeatable)")
	f.StringArrayVar(g.selectors(&exclude), "exclude", nil, "leave out paths under `SEL` (repeatable)")
	f.BoolVar(&stat, "stat", false, "a per-file summary like git diff --stat")
	f.BoolVar(&ns, "name-status", false, "one line per change: A, M, D or T (type change), a tab, the path")
	f.BoolVar(&binaryFlag, "binary", false, "write binary changes as git binary patches even on a terminal")
	f.BoolVar(&noPager, "no-pager", false, "never page the output, even on a terminal")
	f.BoolVar(&numbered, "hunks", false, "number each hunk after its @@ header, for apply --hunks")
	f.BoolVar(&drift, "drift", false, "show the workspace's changes since the stage's base, for the paths that block an apply")
	return cmd
}

// driftDiff is diff --drift.
func (g *globals) driftDiff(c *cobra.Command, st *wtx.Stage, paths []string, noPager bool) error {
	ctx := c.Context()
	if g.json {
		var buf bytes.Buffer
		entries, err := st.WriteDrift(ctx, &buf, paths, wtx.DiffOptions{})
		if err != nil {
			return err
		}
		out := answer.Drift{Tx: st.ID(), Paths: orEmpty(entries)}
		if utf8.Valid(buf.Bytes()) {
			out.Diff = buf.String()
		} else {
			out.DiffB64 = base64.StdEncoding.EncodeToString(buf.Bytes())
		}
		return g.emit("diff", out)
	}
	w := g.io.Out
	pg := g.startPager(noPager)
	if pg != nil {
		w = pg
	}
	entries, err := st.WriteDrift(ctx, w, paths, wtx.DiffOptions{Color: g.color()})
	if pg != nil {
		pg.wait()
	}
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		g.notice("wtx: nothing of %s moved in the workspace: an apply meets no drift and no stale read", st.ID())
	}
	for _, e := range entries {
		if !e.Shown {
			what := "drifted"
			if e.Stale {
				what = "read by the stage, changed since"
			}
			fmt.Fprintf(g.io.Err, "wtx: %s (%s, %s): not shown: %s (base %s, now %s)\n", quote.Path(e.Path), what, e.Kind, e.Note, e.Base, e.Current)
		}
	}
	return nil
}

func newApplyCommand(g *globals) *cobra.Command {
	var (
		opts  wtx.ApplyOptions
		all   bool
		hunks string
	)
	cmd := &cobra.Command{
		Use:     "apply [T] [--path SEL]... [--exclude SEL]... [--hunks N,M] [--all] [--approve] [--dry-run] [--expect DIGEST]",
		Aliases: []string{"commit"},
		Short:   "Apply a stage's change set to the workspace, all or nothing (alias: commit)",
		Long: `Apply the selected part of stage T's change set to the workspace (the whole
change set by default, or --all), all or nothing. Before writing anything,
wtx checks every selected path against the workspace as it was when the stage
opened: if any changed outside the stage, the apply is refused and nothing is
written. Paths under a --protect selector need --approve. Files are written
through a temporary name in their own directory, synced, then renamed into
place; a symlink in the workspace is never followed.

--exclude leaves what it selects out of the apply: it stays staged (a
deleted directory above an excluded path stays too). A --path or --exclude
selector that matches no path of the change set is an error
(not-found.path), as git's pathspec is, unless it matches what an earlier
apply of the stage wrote: then wtx says "already applied as op-…". Paths
under .git are protected by default (hooks and configuration there run
code): they need --approve, or --exclude .git to apply the rest.

Paths that already hold their staged state are left alone: applying again is a
no-op. When the whole change set has landed the stage is settled.

With --hunks, only the chosen hunks of one text file (named by a single
--path, which may be left out when the stage changes only that file) land: hunks are numbered from 1 in diff order, as
'wtx diff --hunks --path P' shows them. The file's base in the stage
advances to exactly what landed, so the remaining hunks stay staged and are
numbered afresh by the next diff. --expect is checked against the whole
file's change as 'wtx diff --json --path P' reports it.

EXIT STATUS
  0 applied (or nothing to do), 1 error, 2 refused: nothing was changed.`,
		Example: `  wtx apply
  wtx apply --path src/ --path go.mod
  wtx apply --dry-run
  wtx apply --exclude .git     # the rest; what is under .git stays staged
  wtx apply --expect sha256:… # what 'wtx diff --json' reported
  wtx apply --path src/main.go --hunks 1,3`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			if all && len(opts.Paths) > 0 {
				return usageError{msg: "--all and --path cannot be used together"}
			}
			ctx := c.Context()
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			if c.Flags().Changed("hunks") {
				if len(opts.Paths) == 0 {
					p, err := onlyChangedPath(ctx, st)
					if err != nil {
						return err
					}
					opts.Paths = []string{p}
				}
				h, err := parseHunks(hunks, opts.Paths)
				if err != nil {
					return err
				}
				opts.Hunks = h
			}
			work := g.longWork("applying")
			res, err := st.Apply(ctx, opts)
			work.end()
			if err != nil {
				return st.OfferRebase(ctx, err)
			}
			if !res.DryRun && res.OpID != "" {
				g.finished = "apply " + res.OpID
			}
			if g.json {
				return g.emit(commandName(c), answer.NewApply(st.ID(), res))
			}
			switch {
			case res.DryRun:
				fmt.Fprintf(g.io.Out, "would write %d path(s) of %s:\n", len(res.Written), st.ID())
				for _, p := range res.Written {
					fmt.Fprintf(g.io.Out, "  %s\n", quote.Path(p))
				}
			case res.OpID == "" && len(res.AppliedIn) > 0 && len(res.Changes) == 0:
				g.notice("wtx: already applied as %s; nothing left to apply from %s", strings.Join(res.AppliedIn, ", "), st.ID())
			case res.OpID == "" && len(res.AlreadyApplied) > 0:
				g.notice("wtx: the workspace already holds the selected change(s) of %s; nothing to write", st.ID())
			case res.OpID == "":
				g.notice("wtx: nothing to apply from %s", st.ID())
			default:
				fmt.Fprintln(g.io.Out, res.OpID)
				left := ""
				if !res.Settled {
					left = "; the rest stays staged"
				}
				g.notice("wtx: applied %d path(s) of %s as %s%s", len(res.Written), st.ID(), res.OpID, left)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(g.selectors(&opts.Paths), "path", nil, "apply only `SEL` and what is beneath it (repeatable)")
	f.StringArrayVar(g.selectors(&opts.Exclude), "exclude", nil, "leave out `SEL` and what is beneath it: it stays staged (repeatable)")
	f.BoolVar(&all, "all", false, "apply the whole change set (the default)")
	f.BoolVar(&opts.Approve, "approve", false, "allow changes under --protect selectors")
	f.BoolVarP(&opts.DryRun, "dry-run", "n", false, "run every check, write nothing")
	f.StringVar(&opts.Expect, "expect", "", "refuse unless the selected change set still has `DIGEST`")
	f.StringVar(&hunks, "hunks", "", "apply only hunks `N,M`… (from 1, as 'wtx diff --hunks' numbers them) of the one --path")
	f.BoolVar(&opts.IgnoreStaleReads, "ignore-stale-reads", false, "apply even if files the stage read changed in the workspace since")
	return cmd
}

// onlyChangedPath is the path --hunks means without --path: the stage's
// only change.
func onlyChangedPath(ctx context.Context, st *wtx.Stage) (string, error) {
	cs, err := st.Changes(ctx, nil)
	if err != nil {
		return "", err
	}
	if len(cs.Changes) != 1 {
		return "", usageError{msg: fmt.Sprintf("--hunks needs --path naming one text file: %s changes %d paths", stageLabel(st.ID(), st.Name()), len(cs.Changes))}
	}
	return cs.Changes[0].Path, nil
}

// parseHunks reads --hunks N,M,… for the single file named by --path.
func parseHunks(list string, paths []string) (map[string][]int, error) {
	if len(paths) != 1 {
		return nil, usageError{msg: "--hunks needs exactly one --path naming a text file"}
	}
	var nums []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, usageError{msg: fmt.Sprintf("--hunks %q: want hunk numbers from 1, separated by commas", list)}
		}
		nums = append(nums, n)
	}
	return map[string][]int{strings.TrimSuffix(paths[0], "/"): nums}, nil
}
