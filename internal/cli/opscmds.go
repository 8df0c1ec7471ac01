package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/receipt"
)

func newLogCommand(g *globals) *cobra.Command {
	var reverse, noPager bool
	cmd := &cobra.Command{
		Use:   "log [--reverse]",
		Short: "List the ops applied to the workspace, newest first",
		Example: `  wtx log
  wtx log --json | jq -r '.ops[].op_id'`,
		Long: `List the workspace's ops, newest first (--reverse: oldest first): every apply
and undo that wrote something, with when it happened, its stage (by name when
it has one), the number of paths written, the command that made the stage's
change, and whether it was undone. 'wtx show OP' shows one as a diff; 'wtx
undo OP' reverses it. On a terminal the list goes through the pager, as
'wtx diff' does. --json lists the ops oldest first, as they were recorded.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			ops, err := ws.Ops(ctx)
			if err != nil {
				return err
			}
			if g.json {
				out := answer.Log{Ops: orEmpty(ops)}
				out.Workspace, out.WorkspaceB64 = answer.Name(ws.Path())
				return g.emit("log", out)
			}
			if len(ops) == 0 {
				g.notice("wtx: no ops in %s yet", quote.Path(ws.Path()))
				return nil
			}
			rows := logRows(ctx, ws, ops, reverse)
			var out io.Writer = g.io.Out
			pg := g.startPager(noPager)
			if pg != nil {
				out = pg
				defer pg.wait()
			}
			writeLog(out, rows, g.color(), time.Now())
			return nil
		},
	}
	cmd.Flags().BoolVar(&reverse, "reverse", false, "oldest first")
	cmd.Flags().BoolVar(&noPager, "no-pager", false, "never page the output, even on a terminal")
	return cmd
}

func newShowCommand(g *globals) *cobra.Command {
	var noPager bool
	cmd := &cobra.Command{
		Use:   "show [OP]",
		Short: "Show one op as a diff (default: the newest)",
		Example: `  wtx show
  wtx show op-20261130T081500Z-1a2b3c4d | git apply -R --check`,
		Long: `Show op OP (an id or a unique prefix; default: the workspace's newest op) as a
git-style diff from what it replaced to what it wrote. On a terminal the diff
goes through the pager, as 'wtx diff' does.`,
		Args: maxOne("op"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			var op *wtx.Op
			if len(args) == 1 {
				op, err = ws.Op(ctx, args[0])
			} else {
				op, err = ws.LatestOp(ctx, false)
			}
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("show", answer.Show{Op: op, OpID: op.ID, Changes: orEmpty(op.Changes)})
			}
			var out io.Writer = g.io.Out
			pg := g.startPager(noPager)
			if pg != nil {
				out = pg
				defer pg.wait()
			}
			return op.WriteDiff(out, g.color())
		},
	}
	cmd.Flags().BoolVar(&noPager, "no-pager", false, "never page the output, even on a terminal")
	return cmd
}

func newUndoCommand(g *globals) *cobra.Command {
	var opts wtx.UndoOptions
	cmd := &cobra.Command{
		Use:   "undo [OP] [--path SEL]... [--exclude SEL]... [--approve]",
		Short: "Reverse an applied op, or part of it (default: the newest one not undone yet)",
		Long: `Reverse op OP as a new op: every path it wrote gets back what it held
before, all or nothing, through the same journaled protocol as an apply. If any
of those paths changed since OP wrote it, nothing is changed and the paths are
listed (exit 2), each with the later op that wrote it, if one did.

Without OP, the newest apply that is not undone yet is reversed: a second
'wtx undo' reverses the apply before it, as jj's undo walks back. To take an
undo back, name the undo op.

With --path, only the paths of OP that the selectors select are taken back
(--exclude leaves what it selects out):
all or nothing for them, with the same checks, recorded as an op of its own
with its own receipt. A selector that selects no path of OP is an error. The
rest of OP stays as it is; a later undo of OP takes back what is left.

Undoing is writing: an undo that writes protected paths (the op's stage's
--protect selectors, .git, .wtx.toml) is refused (exit 2,
refusal.protected) unless --approve is given, whether OP was an apply or an
undo of one.`,
		Example: `  wtx undo
  wtx log
  wtx undo op-20261130T081500Z-1a2b3c4d
  wtx undo op-20261130T081500Z-1a2b3c4d --path src/main.go
  wtx undo op-20261130T081500Z-1a2b3c4d --exclude .git/index`,
		Args: maxOne("op"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			// No op named: the newest apply not undone yet, which the
			// library finds reading its record once.
			ref, what := "", "the newest apply"
			if len(args) == 1 {
				ref, what = args[0], args[0]
			}
			undo := opts
			undo.Newest = len(args) == 0
			work := g.longWork("undoing " + what)
			res, err := ws.UndoWith(ctx, ref, undo)
			work.end()
			if err != nil {
				return err
			}
			if res.OpID != "" {
				g.finished = "undo " + res.OpID
			}
			if g.json {
				return g.emit("undo", answer.NewUndo(res))
			}
			if res.OpID == "" {
				g.notice("wtx: every path of %s already holds what it held before; nothing to undo", res.Undoes)
				return nil
			}
			fmt.Fprintln(g.io.Out, res.OpID)
			part := ""
			if len(opts.Paths) > 0 || len(opts.Exclude) > 0 {
				part = " in part"
			}
			g.notice("wtx: undid %s%s (%d path(s)) as %s", res.Undoes, part, len(res.Written), res.OpID)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(g.selectors(&opts.Paths), "path", nil, "take back only the paths of OP under `SEL` (repeatable)")
	cmd.Flags().StringArrayVar(g.selectors(&opts.Exclude), "exclude", nil, "leave the paths of OP under `SEL` as they are (repeatable)")
	cmd.Flags().BoolVar(&opts.Approve, "approve", false, "allow the undo to write protected paths (--protect selectors, .git, .wtx.toml)")
	return cmd
}

func newRecoverCommand(g *globals) *cobra.Command {
	var rollback bool
	var setAside string
	cmd := &cobra.Command{
		Use:   "recover [--rollback | --set-aside OP]",
		Short: "Finish or roll back an apply a crash interrupted",
		Example: `  wtx recover               # finish an apply a crash interrupted
  wtx recover --rollback    # or undo it`,
		Long: `Every wtx command first finishes an apply that a crash interrupted (when it
had committed) or rolls it back (when it had not). If a path changed after the
crash, wtx does not overwrite it and stops with refusal.interrupted-apply.

'wtx recover' tries again (after you have put such paths back). 'wtx recover
--rollback' rolls back everything else and keeps the paths that changed after
the crash as they are; their earlier content stays in the blob store.

A step of the recovery that fails (a permission, a full disk) is reported
with every other failed step, and the journal stays for the next try.

A damaged journal of an apply that had touched the workspace (temporary
files of wtx are there) is never discarded: wtx refuses to act on the
workspace (refusal.interrupted-apply) and names the temporary files. Put the
workspace right by hand, then 'wtx recover --set-aside OP' moves the journal
into lost+found in the state root. A damaged journal that left no trace is
set aside the same way, and reported.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			g.noRecover = true
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			if setAside != "" {
				if rollback {
					return usageError{msg: "--set-aside and --rollback do not go together"}
				}
				dst, err := ws.SetAsideJournal(ctx, setAside)
				if err != nil {
					return err
				}
				if g.json {
					return g.emit("recover", answer.SetAside{OpID: setAside, SetAside: dst})
				}
				fmt.Fprintf(g.io.Out, "set the journal of %s aside: %s\n", setAside, dst)
				return nil
			}
			g.opened = false // an interrupt now may stop a recovery part-way
			res, err := ws.Recover(ctx, rollback)
			if err != nil {
				return err
			}
			g.opened = true
			if g.json {
				return g.emit("recover", answer.Recover{Recover: res})
			}
			for i, op := range res.Discarded {
				fmt.Fprintf(g.io.Out, "set aside the damaged journal of %s (nothing of it reached the workspace: no temporary files of wtx, and every open stage's paths still hold what the stage is based on): %s\n", op, res.SetAside[i])
			}
			if len(res.RolledBack)+len(res.RolledForward)+len(res.Discarded) == 0 {
				g.notice("wtx: nothing to recover")
			}
			for _, op := range res.RolledBack {
				fmt.Fprintf(g.io.Out, "rolled back %s\n", op)
			}
			for _, op := range res.RolledForward {
				fmt.Fprintf(g.io.Out, "finished %s\n", op)
			}
			for _, u := range res.Unsettled {
				fmt.Fprintf(g.io.Out, "%s\n", u)
			}
			for _, k := range res.Kept {
				fmt.Fprintf(g.io.Out, "kept %s as it is (%s)\n", quote.Path(k.Path), k.Detail)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&rollback, "rollback", false, "roll back, keeping paths that changed after the crash as they are")
	cmd.Flags().StringVar(&setAside, "set-aside", "", "move the damaged journal of `OP` into lost+found, once the workspace is put right")
	return cmd
}

func newReceiptCommand(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "receipt (OP | T)",
		Short: "Print the signed receipt of an op or of a stage's latest run or apply",
		Example: `  wtx receipt op-20261130T081500Z-1a2b3c4d > apply.receipt.json
  wtx receipt verify apply.receipt.json
  wtx receipt key > wtx-receipt-key.pem      # give this to whoever checks
  wtx receipt verify --key wtx-receipt-key.pem apply.receipt.json
  wtx receipt T --all`,
		Long: `Print a receipt: the op's receipt for an op id, or the latest receipt of
stage T (--all: every receipt of T, oldest first: runs, checkpoints, applies,
refusals, undos). A receipt is an in-toto Statement v1 in a DSSE envelope
signed with your receipt key (ed25519, made with the state root, private to
you; see 'wtx receipt key --help'); 'wtx receipt key' prints its public half.
A receipt made before receipts were signed prints bare and verifies only as
"unsigned".

'wtx receipt verify FILE' checks a receipt file: the signature (with your
own keys, the current one and every older one the state root keeps, or
--key PUB), every field, the digests, and that not_transactional holds every
entry the receipt's backend, shared paths and containment require. Given a
--json answer, the readable receipt beside the envelope must be the signed
one, field for field. It says which key verified and every check it made.`,
		Args: exactlyOne("op or stage"),
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			if all {
				if strings.HasPrefix(args[0], "op-") {
					return &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("--all lists the receipts of a stage; %s is an op", args[0])}
				}
				tx, recs, err := ws.ReceiptRecordsOf(ctx, args[0])
				if err != nil {
					return err
				}
				if g.json {
					l := answer.ReceiptList{Tx: tx, Receipts: []answer.Receipt{}}
					for i := range recs {
						l.Receipts = append(l.Receipts, receiptAnswer(&recs[i]))
					}
					return g.emit("receipt", l)
				}
				for _, r := range recs {
					printReceiptLine(g.io.Out, r)
				}
				return nil
			}
			r, err := ws.ReceiptRecord(ctx, args[0])
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("receipt", receiptAnswer(r))
			}
			if r.Envelope != nil {
				return writeJSONIndent(g.io.Out, r.Envelope)
			}
			return writeJSONIndent(g.io.Out, r.Receipt)
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "list every receipt of stage T, oldest first")
	cmd.AddCommand(newReceiptTrustCommand(g))
	cmd.AddCommand(newReceiptVerifyCommand(g), newReceiptKeyCommand(g))
	return cmd
}

// newReceiptVerifyCommand is 'receipt verify'.
func newReceiptVerifyCommand(g *globals) *cobra.Command {
	var keyFile string
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Check a receipt file (- for stdin): signature, digests, disclaimer",
		Args:  exactlyOne("file"),
		RunE: func(c *cobra.Command, args []string) error {
			data, err := readReceiptDoc(g, args[0])
			if err != nil {
				return err
			}
			v, err := verifyReceiptDoc(g, data, keyFile)
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("receipt verify", answer.ReceiptVerify{ReceiptID: v.Receipt.ID, Valid: true, Status: string(v.Status),
					Kind: v.Receipt.Kind, KeyID: v.KeyID, KeySource: string(v.KeySource), Checked: v.Checked})
			}
			printVerified(g.io.Out, v)
			return nil
		},
	}
	verify.Flags().StringVar(&keyFile, "key", "", "the signer's public key (`PUB`, PEM as 'wtx receipt key' prints it); default: your own")
	return verify
}

func receiptAnswer(r *receipt.Record) answer.Receipt {
	return answer.Receipt{Receipt: &r.Receipt, Envelope: r.Envelope, Signed: r.Envelope != nil}
}

// printReceiptLine writes one line of receipt --all.
func printReceiptLine(w io.Writer, r receipt.Record) {
	rc := r.Receipt
	op := rc.OpID
	if op == "" {
		op = "-"
	}
	what := fmt.Sprintf("%d added, %d modified, %d deleted", rc.Counts.Added, rc.Counts.Modified, rc.Counts.Deleted)
	if rc.Refusal != nil {
		what = "refused: " + rc.Refusal.Code
	}
	if rc.LeftOut > 0 {
		what += fmt.Sprintf(", %d left out by --exclude", rc.LeftOut)
	}
	signed := "signed"
	if r.Envelope == nil {
		signed = "UNSIGNED"
	}
	fmt.Fprintf(w, "%s  %-5s  %s  %s  %s  %s\n", rc.ID, rc.Kind, rc.CreatedAt.Format(time.RFC3339), op, signed, what)
}

func maxOne(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > 1 {
			return usageError{msg: fmt.Sprintf("%s takes at most one %s, got %d arguments", cmd.Name(), what, len(args))}
		}
		return nil
	}
}

func exactlyOne(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageError{msg: fmt.Sprintf("%s takes exactly one %s, got %d arguments", cmd.Name(), what, len(args))}
		}
		return nil
	}
}
