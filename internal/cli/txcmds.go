package cli

import (
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
)

// stageFor opens the workspace and finds stage tx (or the only open one).
func (g *globals) stageFor(c *cobra.Command, tx string) (*wtx.Workspace, *wtx.Stage, error) {
	ws, err := g.open(c.Context())
	if err != nil {
		return nil, nil, err
	}
	st, err := ws.Stage(c.Context(), tx)
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return ws, st, nil
}

func newReadCommand(g *globals) *cobra.Command {
	var tx string
	cmd := &cobra.Command{
		Use:   "read PATH --tx T",
		Short: "Print a file as the stage sees it, and remember the read",
		Long: `Print PATH as stage T sees it (its own writes included) and record it in the
stage's read set with its digest. If the workspace's copy of PATH changes before
the stage is applied, the apply is refused (refusal.stale-read) unless
--ignore-stale-reads; reading again refreshes the record. With --json the answer
carries the digest to pass to 'wtx write --expect-hash'.`,
		Example: `  wtx read src/main.go --tx T
  wtx read src/main.go --tx T --json | jq -r .digest`,
		Args: exactlyOne("path"),
		RunE: func(c *cobra.Command, args []string) error {
			ws, st, err := g.stageFor(c, tx)
			if err != nil {
				return err
			}
			defer ws.Close()
			path, err := g.pathArg(args[0])
			if err != nil {
				return err
			}
			r, err := st.Read(c.Context(), path)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("read", answer.NewRead(st.ID(), r))
			}
			_, err = g.io.Out.Write(r.Content)
			return err
		},
	}
	cmd.Flags().StringVar(&tx, "tx", "", "the stage `T` (may be left out when the workspace has one open stage)")
	return cmd
}

func newWriteCommand(g *globals) *cobra.Command {
	var (
		tx, expect string
		mode       string
	)
	cmd := &cobra.Command{
		Use:   "write PATH --tx T < CONTENT",
		Short: "Stage new content for a file (from stdin)",
		Long: `Replace (or create) PATH in stage T with the bytes on stdin. The workspace is
not touched until the stage is applied. --expect-hash refuses the write
(refusal.stale-read) unless the staged file still has that digest: pass the
digest a 'wtx read --json' returned, so a write never clobbers a change made
since.

Like read, edit and rm, it refuses a PATH under one of the stage's --exclude
selectors (refusal.boundary: outside the stage's surface) and a name starting
with .wtx-tmp- (usage.reserved-name: wtx's temporary files), before anything
is written.`,
		Example: `  printf 'hello\n' | wtx write notes.txt --tx T
  wtx write src/a.go --tx T --expect-hash sha256:… < a.go`,
		Args: exactlyOne("path"),
		RunE: func(c *cobra.Command, args []string) error {
			opts := wtx.WriteOptions{ExpectHash: expect}
			if mode != "" {
				m, err := strconv.ParseUint(mode, 8, 32)
				if err != nil || m > 0o777 {
					return usageError{msg: fmt.Sprintf("--mode %q: give octal permission bits such as 644 or 755", mode)}
				}
				opts.Perm = fsMode(m)
			}
			data, err := io.ReadAll(g.io.In)
			if err != nil {
				return wtx.AsError(err)
			}
			ws, st, err := g.stageFor(c, tx)
			if err != nil {
				return err
			}
			defer ws.Close()
			path, err := g.pathArg(args[0])
			if err != nil {
				return err
			}
			r, err := st.Write(c.Context(), path, data, opts)
			if err != nil {
				return err
			}
			return g.fileOpDone("write", st, r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tx, "tx", "", "the stage `T`")
	f.StringVar(&expect, "expect-hash", "", "refuse unless the staged file still has `DIGEST`")
	f.StringVar(&mode, "mode", "", "permission bits of a new file, octal (default 644; an existing file keeps its own)")
	return cmd
}

func newEditCommand(g *globals) *cobra.Command {
	var (
		tx, expect, old, new string
		all                  bool
	)
	cmd := &cobra.Command{
		Use:   "edit PATH --old S --new S [--all] --tx T",
		Short: "Replace exact text in a staged file",
		Long: `Replace the exact text --old with --new in PATH as stage T holds it. --old must
occur exactly once; with --all every occurrence is replaced (at least one must
exist). Zero or several matches are errors that say how many and on which
lines. Edits are content-based, so 'wtx rebase' can re-run them when the
workspace's copy changes.`,
		Example: `  wtx edit src/a.go --old 'func old(' --new 'func renamed(' --tx T
  wtx edit go.mod --old 'go 1.25' --new 'go 1.26' --tx T`,
		Args: exactlyOne("path"),
		RunE: func(c *cobra.Command, args []string) error {
			if !c.Flags().Changed("old") || !c.Flags().Changed("new") {
				return usageError{msg: "edit needs --old and --new"}
			}
			ws, st, err := g.stageFor(c, tx)
			if err != nil {
				return err
			}
			defer ws.Close()
			path, err := g.pathArg(args[0])
			if err != nil {
				return err
			}
			r, err := st.Edit(c.Context(), path, old, new, all, expect)
			if err != nil {
				return err
			}
			return g.fileOpDone("edit", st, r)
		},
	}
	f := cmd.Flags()
	f.StringVar(&tx, "tx", "", "the stage `T`")
	f.StringVar(&old, "old", "", "the exact text to replace")
	f.StringVar(&new, "new", "", "the text to put instead")
	f.BoolVar(&all, "all", false, "replace every occurrence")
	f.StringVar(&expect, "expect-hash", "", "refuse unless the staged file still has `DIGEST`")
	return cmd
}

func newRmCommand(g *globals) *cobra.Command {
	var tx, expect string
	cmd := &cobra.Command{
		Use:     "rm PATH --tx T",
		Short:   "Delete a file in a stage",
		Example: `  wtx rm old/notes.txt --tx fmt`,
		Args:    exactlyOne("path"),
		RunE: func(c *cobra.Command, args []string) error {
			ws, st, err := g.stageFor(c, tx)
			if err != nil {
				return err
			}
			defer ws.Close()
			path, err := g.pathArg(args[0])
			if err != nil {
				return err
			}
			r, err := st.Remove(c.Context(), path, expect)
			if err != nil {
				return err
			}
			return g.fileOpDone("rm", st, r)
		},
	}
	cmd.Flags().StringVar(&tx, "tx", "", "the stage `T`")
	cmd.Flags().StringVar(&expect, "expect-hash", "", "refuse unless the staged file still has `DIGEST`")
	return cmd
}

func (g *globals) fileOpDone(command string, st *wtx.Stage, r *wtx.FileResult) error {
	if g.json {
		return g.emit(command, answer.NewFile(st.ID(), r))
	}
	switch command {
	case "rm":
		g.notice("wtx: op %d of %s: removed %s", r.TxOp, st.ID(), quote.Path(r.Path))
	default:
		g.notice("wtx: op %d of %s: %s %s (%s)", r.TxOp, st.ID(), command, quote.Path(r.Path), r.Digest)
	}
	return nil
}

func newRebaseCommand(g *globals) *cobra.Command {
	var merge bool
	cmd := &cobra.Command{
		Use:   "rebase [T] [--merge]",
		Short: "Carry a stage's edits onto the workspace's current content",
		Example: `  wtx rebase
  wtx rebase fmt --merge`,
		Long: `For every path stage T changed that also changed in the workspace since the
stage opened (drift), re-run T's content-based edits (wtx edit --old/--new) on
the workspace's current content, and move the path's base to it. With --merge, a
path whose ops cannot be re-run (a whole write, an expected hash, a command
run) is merged three-way when it is text and its original is known. Lines both
the stage and the workspace changed are written into the staged file between
git's conflict markers, with the base section (<<<<<<< stage, ||||||| base,
=======, >>>>>>> workspace); 'wtx status' lists such paths as conflicted and
apply refuses them until the markers are gone: edit them out in the stage, or
take one side whole with 'wtx resolve'. If any drifted path cannot be carried
at all (binary, original unknown), nothing changes.`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			r, err := st.Rebase(c.Context(), merge)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("rebase", answer.NewRebase(st.ID(), r))
			}
			if len(r.Rebased)+len(r.Merged) == 0 {
				g.notice("wtx: nothing of %s drifted; nothing to rebase", st.ID())
			}
			for _, p := range r.Rebased {
				fmt.Fprintf(g.io.Out, "rebased %s\n", quote.Path(p))
			}
			conflicted := map[string]bool{}
			for _, p := range r.Conflicted {
				conflicted[p] = true
			}
			for _, p := range r.Merged {
				if !conflicted[p] {
					fmt.Fprintf(g.io.Out, "merged %s\n", quote.Path(g.showPath(p)))
				}
			}
			for _, p := range r.Conflicted {
				fmt.Fprintf(g.io.Out, "CONFLICT %s\n", quote.Path(g.showPath(p)))
			}
			if len(r.Conflicted) > 0 {
				g.notice("wtx: %d path(s) hold conflict markers; edit them out in the stage, or take a side: wtx resolve %s --ours|--theirs -- PATH", len(r.Conflicted), quote.Shell(st.ID()))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&merge, "merge", false, "merge three-way what cannot be re-run")
	return cmd
}

func newResolveCommand(g *globals) *cobra.Command {
	var ours, theirs bool
	cmd := &cobra.Command{
		Use:   "resolve [T] (--ours | --theirs) PATH...",
		Short: "Take one side whole for paths a rebase left conflicted",
		Example: `  wtx resolve --theirs -- src/main.go   # the workspace's content
  wtx resolve fmt --ours -- README        # the stage's content from before the rebase`,
		Long: `For each PATH that 'wtx rebase --merge' left with conflict markers in stage T,
stage one side whole: --ours, the stage's content from before the rebase; or
--theirs, the workspace's content the rebase merged with. Each is a per-file
write of the stage (drop-op takes it back). Editing the markers out of the
staged file resolves a path as well.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			if ours == theirs {
				return usageError{msg: "say which side to take: --ours or --theirs"}
			}
			tx := ""
			switch n := c.ArgsLenAtDash(); {
			case n == 1:
				tx, args = args[0], args[1:]
			case n > 1:
				return usageError{msg: "at most one stage before --; the paths come after it"}
			}
			if len(args) == 0 {
				return usageError{msg: "name the paths to resolve"}
			}
			ws, st, err := g.stageFor(c, tx)
			if err != nil {
				return err
			}
			defer ws.Close()
			for _, a := range args {
				p, err := g.pathArg(a)
				if err != nil {
					return err
				}
				r, err := st.Resolve(c.Context(), p, theirs)
				if err != nil {
					return err
				}
				if err := g.fileOpDone("resolve", st, r); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&ours, "ours", false, "take the stage's content from before the rebase")
	cmd.Flags().BoolVar(&theirs, "theirs", false, "take the workspace's content")
	return cmd
}

func newDropOpCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "drop-op [T] N",
		Short: "Remove op N and every later op of a stage",
		Example: `  wtx drop-op 3          # forget op 3 of the open stage and every later one
  wtx drop-op fmt 3      # the same in stage fmt`,
		Long: `Remove op N (as 'wtx status' numbers them under "tx ops", tx_op in its JSON)
and every later op of stage T: each path they touched gets back its staged
state from before op N. T may be left out when the workspace has exactly one
open stage.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 && len(args) != 2 {
				return usageError{msg: "drop-op takes an op number, after the stage when more than one is open: wtx drop-op [T] N"}
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			num, ref := args[len(args)-1], ""
			if len(args) == 2 {
				ref = args[0]
			}
			n, err := strconv.Atoi(num)
			if err != nil || n < 1 {
				return usageError{msg: fmt.Sprintf("op number %q: give a positive number (see \"tx ops\" in 'wtx status')", num)}
			}
			ws, st, err := g.stageFor(c, ref)
			if err != nil {
				return err
			}
			defer ws.Close()
			r, err := st.DropTxOps(c.Context(), n)
			if err != nil {
				return err
			}
			if g.json {
				out := answer.DropOp{Tx: st.ID(), From: n, Dropped: orEmpty(r.Dropped)}
				out.Restored, out.RestoredB64 = answer.Names(r.Restored)
				return g.emit("drop-op", out)
			}
			g.notice("wtx: dropped %s of %s; restored %d path(s)", opNumbers(r.Dropped), st.ID(), len(r.Restored))
			return nil
		},
	}
}

func newBatchCommand(g *globals) *cobra.Command {
	var (
		atomic bool
		begin  wtx.BeginOptions
		apply  wtx.ApplyOptions
	)
	cmd := &cobra.Command{
		Use:     "batch [STAGE-FLAGS] < COMMANDS.jsonl",
		Short:   "Run per-file commands from JSON lines and apply them all or none",
		Example: `  printf '%s\n' '{"command":"write","path":"a.txt","content":"hi\\n"}' | wtx batch`,
		Long: `Read JSON lines on stdin, one command each:

  {"command":"write","path":"a.txt","content":"…"}
  {"command":"edit","path":"b.go","old":"x","new":"y","all":false}
  {"command":"rm","path":"c.txt"}
  {"command":"read","path":"d.txt"}

("expect_hash" may guard any of them). Names are bytes: a path or text that is
not valid UTF-8 goes in "path_b64", "content_b64", "old_b64" or "new_b64"
(standard base64) instead; a JSON string that is not valid UTF-8, or a field
given both ways, is refused (usage.invalid), never substituted. All run in one new stage, which is then
applied: either every command lands or none does. On a failure the answer is the
first failure's error code, and the workspace is untouched. Paths are checked
before the stage opens: one under --exclude (refusal.boundary) or starting with
.wtx-tmp- (usage.reserved-name) refuses the whole batch.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			items, err := wtx.ParseBatch(g.io.In)
			if err != nil {
				return err
			}
			ws, err := g.open(c.Context())
			if err != nil {
				return err
			}
			defer ws.Close()
			g.withProject(c, &begin)
			r, err := ws.Batch(c.Context(), items, begin, apply)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("batch", answer.NewBatch(r))
			}
			fmt.Fprintln(g.io.Out, r.OpID)
			g.notice("wtx: applied %d command(s) as %s", len(r.Items), r.OpID)
			return nil
		},
	}
	f := cmd.Flags()
	// All or nothing is the only mode; --atomic is still accepted.
	f.BoolVar(&atomic, "atomic", true, "apply all commands or none (the only mode; kept for scripts that say so)")
	f.Lookup("atomic").Hidden = true
	addStageFlags(g, f, &begin)
	g.addProjectFlag(f)
	f.BoolVar(&apply.Approve, "approve", false, "allow changes under --protect selectors")
	return cmd
}

// opNumbers says which op numbers were dropped: "op 3", "ops 3-5".
func opNumbers(ns []int) string {
	switch len(ns) {
	case 0:
		return "no ops"
	case 1:
		return fmt.Sprintf("op %d", ns[0])
	}
	return fmt.Sprintf("ops %d-%d", ns[0], ns[len(ns)-1])
}
