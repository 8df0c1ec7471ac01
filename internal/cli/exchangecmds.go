package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

func newExportCommand(g *globals) *cobra.Command {
	var out, ref string
	var toGit, force bool
	cmd := &cobra.Command{
		Use:   "export [T] [-o FILE] [--git [--ref REF]]",
		Short: "Write a stage's change set as a bundle another machine imports",
		Long: `Write stage T's change set as a bundle that 'wtx import' opens as a stage on
another machine (or another state root): every changed path with its base
(the drift baseline: the apply there is refused wherever that workspace no
longer holds it) and its new content, the stage's receipts, the workspace's
git HEAD and a digest of its uncommitted files, all under one digest: a
bundle altered anywhere is refused on import. The bundle is compressed and
goes to stdout (a pipe) or to -o FILE.

The export signs a receipt (kind "export") that names the change set
exactly, with your receipt key: the importing side checks the content
against it and says whether it trusts your key ('wtx receipt key' prints
it; they add it with 'wtx receipt trust add').

With --git, the change set is written instead as a commit on top of the
repository's HEAD, under REF (default refs/wtx/<stage name or id>): objects
and a ref only, the index, the worktree and the current branch stay as they
are. The commit shows exactly the change set: a stage whose base differs
from HEAD at a path it changes is refused. REF must lie under refs/wtx/
and not exist yet, unless --force. The commit's message carries the
receipts and the base of every path; 'git push' and 'git fetch' move it,
'wtx import --git REF' opens it.`,
		Example: `  wtx export fix -o fix.wtxb            # a file to copy anywhere
  wtx export fix | ssh host wtx -C /src import -
  wtx export fix --git && git push origin refs/wtx/fix`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			if toGit && out != "" {
				return usageError{msg: "export: --git writes a commit, not a file: drop -o"}
			}
			if (ref != "" || force) && !toGit {
				return usageError{msg: "export: --ref and --force go with --git"}
			}
			if !toGit && out == "" && (g.json || g.io.OutTTY) {
				return usageError{msg: "export: stdout is a terminal or carries --json: give -o FILE, or send stdout to a pipe"}
			}
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			var res *wtx.ExportResult
			switch {
			case toGit:
				res, err = st.ExportGit(ctx, wtx.ExportGitOptions{Ref: ref, Force: force})
			case out == "" || out == "-":
				res, err = st.Export(ctx, g.io.Out)
			default:
				res, err = exportToFile(ctx, st, out)
			}
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("export", res)
			}
			switch {
			case toGit:
				fmt.Fprintf(g.io.Out, "%s %s\n", res.Commit, res.Ref)
				g.notice("wtx: exported %s (%s) as commit %s under %s; move it with: git push REMOTE %s", st.ID(),
					countsLine(res.Counts), shortHash(res.Commit), res.Ref, res.Ref)
			case out != "" && out != "-":
				g.notice("wtx: exported %s (%s) to %s: %d bytes, %s", st.ID(), countsLine(res.Counts), quote.Path(out), res.Bytes, res.BundleDigest)
			default:
				g.notice("wtx: exported %s (%s): %d bytes", st.ID(), countsLine(res.Counts), res.Bytes)
			}
			if res.KeyID != "" {
				g.notice("wtx: signed with your receipt key %s; the importing side trusts it once it adds the key 'wtx receipt key' prints", res.KeyID)
			} else {
				g.notice("wtx: the export's receipt is UNSIGNED (your receipt key could not be used): the importing side cannot tell who made it")
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "write the bundle to `FILE` (- for stdout)")
	cmd.Flags().BoolVar(&toGit, "git", false, "write the change set as a git commit and ref instead")
	cmd.Flags().StringVar(&ref, "ref", "", "the `REF` a git export writes (default refs/wtx/<name or id>)")
	cmd.Flags().BoolVar(&force, "force", false, "with --git: write a ref outside refs/wtx/, or replace an existing one")
	return cmd
}

// exportToFile writes the bundle beside FILE and renames it into place, so
// FILE is either the whole bundle or untouched.
func exportToFile(ctx context.Context, st *wtx.Stage, path string) (*wtx.ExportResult, error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return nil, wtx.AsError(err)
	}
	tmp := f.Name()
	res, err := st.Export(ctx, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = wtx.AsError(cerr)
	}
	if err == nil {
		err = wtx.AsErrorOrNil(os.Rename(tmp, path))
	}
	if err != nil {
		_ = os.Remove(tmp) // the export failed; its error says why
		return nil, err
	}
	return res, nil
}

func newImportCommand(g *globals) *cobra.Command {
	var opts wtx.ImportOptions
	var ref string
	var requireSigned, requireTrusted bool
	cmd := &cobra.Command{
		Use:   "import FILE|- | --git REF [--name N]",
		Short: "Open a stage carrying a change set exported elsewhere",
		Long: `Open a stage on this workspace carrying the change set of a bundle that
'wtx export' wrote (FILE, or - for stdin), or of a git commit that
'wtx export --git' wrote (--git REF, fetched into this repository). The
bundle's base entries are the stage's drift baseline: status shows, and
apply refuses, every path where this workspace does not hold the base the
change set was made on. status, diff, review, apply, rebase and drop work
on it as on any stage. A bundle or commit altered anywhere (content,
digests, receipts, one byte) is refused as io.corrupt and nothing is made.

The content is checked against the receipts the change set carries: one
must name it (the exporter signs one for every export), or it is refused
as io.corrupt. The import says which key signed that receipt and whether
you trust it (your trust file: 'wtx receipt trust'; your own keys count);
--require-signed and --require-trusted refuse (refusal.unverified) a
change set that is unsigned, or signed by a key you do not trust. From
git, the change set is the commit's diff against its parent, and must be
what its message lists, made on that parent. Entries under this
workspace's excludes are left out, listed, and never applied here.`,
		Example: `  wtx import fix.wtxb --name fix
  git fetch origin 'refs/wtx/*:refs/wtx/*' && wtx import --git refs/wtx/fix`,
		RunE: func(c *cobra.Command, args []string) error {
			ctx := c.Context()
			switch {
			case ref != "" && len(args) > 0:
				return usageError{msg: "import: give a FILE or --git REF, not both"}
			case ref == "" && len(args) != 1:
				return usageError{msg: "import: give one FILE (- for stdin) or --git REF"}
			}
			if !c.Flags().Changed("backend") {
				opts.Backend = "" // the project file's, else auto
			}
			switch {
			case requireTrusted:
				opts.Require = wtx.RequireTrusted
			case requireSigned:
				opts.Require = wtx.RequireSigned
			}
			ws, err := g.open(ctx)
			if err != nil {
				return err
			}
			defer ws.Close()
			var st *wtx.Stage
			var res *wtx.ImportResult
			switch {
			case ref != "":
				st, res, err = ws.ImportGit(ctx, ref, opts)
			case args[0] == "-":
				st, res, err = ws.Import(ctx, g.io.In, opts)
			default:
				f, ferr := os.Open(args[0])
				if errors.Is(ferr, fs.ErrNotExist) {
					return &wtx.Error{Code: wtx.CodeFileNotFound, Message: "import: no bundle at " + quote.Path(args[0]), Err: ferr}
				}
				if ferr != nil {
					return wtx.AsError(ferr)
				}
				st, res, err = ws.Import(ctx, f, opts)
				f.Close()
			}
			if err != nil {
				return err
			}
			if g.json {
				return g.emit("import", res)
			}
			fmt.Fprintln(g.io.Out, st.ID())
			importNotices(g, st, res)
			switch {
			case res.Origin.GitHead == "":
			case res.SameGitHead:
				g.notice("wtx: made on git commit %s, which this workspace has checked out too", shortHash(res.Origin.GitHead))
			default:
				here := res.GitHeadHere
				if here == "" {
					here = "none"
				}
				g.notice("wtx: made on git commit %s; this workspace has %s checked out", shortHash(res.Origin.GitHead), shortHash(here))
			}
			if len(res.Drift) > 0 {
				g.notice("wtx: %d paths do not hold here the base the change set was made on; apply refuses them:", len(res.Drift))
				for _, d := range res.Drift {
					g.notice("  %s (%s)", quote.Path(d.Path), d.Kind)
				}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.Name, "name", "", "a name `N` for the new stage")
	cmd.Flags().StringVar(&opts.Backend, "backend", "auto", "how to stage this workspace: auto|overlay|clone|copy")
	cmd.Flags().StringArrayVar(g.selectors(&opts.Protect), "protect", nil, "make an apply touching `SEL` need --approve (repeatable)")
	cmd.Flags().StringVar(&ref, "git", "", "import the change set of the git commit `REF` wrote by 'wtx export --git'")
	cmd.Flags().BoolVar(&requireSigned, "require-signed", false, "refuse a change set no signed receipt names")
	cmd.Flags().BoolVar(&requireTrusted, "require-trusted", false, "refuse a change set no receipt signed by a key you trust names")
	return cmd
}

// importNotices says on stderr what an import made: where the change set
// says it comes from and what proves it, what was left out here.
func importNotices(g *globals, st *wtx.Stage, res *wtx.ImportResult) {
	p := res.Proof
	from, counts := res.Origin.FromTx, countsLine(res.Counts)
	switch p.Status {
	case wtx.ProofTrusted:
		g.notice("wtx: imported the change set of %s (%s, %d receipts) as %s", from, counts, len(res.Origin.Receipts), st.ID())
		g.notice("wtx: receipt %s names it, signed by %s (%s), which you trust", p.Receipt, p.KeyID, p.KeyName)
	case wtx.ProofSigned:
		g.notice("wtx: imported the change set of %s (%s, %d receipts) as %s", from, counts, len(res.Origin.Receipts), st.ID())
		g.notice("wtx: receipt %s names it, signed by key %s, which your trust file does not list: it is as that key's holder made it, whoever they are; once you know the key is theirs: wtx receipt trust add PUBKEY.pem", p.Receipt, p.KeyID)
	default:
		g.notice("wtx: imported a change set that says it comes from %s (%s, %d receipts) as %s", from, counts, len(res.Origin.Receipts), st.ID())
		g.notice("wtx: UNSIGNED: no receipt that names it carries a signature that verifies: nothing proves where it was made")
	}
	if len(res.LeftOut) > 0 {
		g.notice("wtx: %d entries lie under this workspace's excludes and were left out; they are no part of %s and are never applied here:", len(res.LeftOut), st.ID())
		for _, l := range res.LeftOut {
			g.notice("  %s", quote.Path(l.Path))
		}
		g.notice("wtx: so this stage's change set is %s, not %s, the one made (and signed) on the other side", res.ChangesetDigest, res.Origin.ChangesetDigest)
	}
}

func shortHash(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func countsLine(c wtx.Counts) string {
	return fmt.Sprintf("%d added, %d modified, %d deleted", c.Added, c.Modified, c.Deleted)
}
