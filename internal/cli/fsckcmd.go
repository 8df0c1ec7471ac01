package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
)

func newFsckCommand(g *globals) *cobra.Command {
	var opts wtx.FsckOptions
	cmd := &cobra.Command{
		Use:   "fsck [--repair] [--reinit]",
		Short: "Verify the state root: database, objects, journals, stages, modes",
		Long: `Verify the whole state root, for every workspace it serves: the database
(SQLite integrity, application id, schema version), every object a record
needs (present, and hashing to its name; every stored object is hashed), the
journals of applies (they decode; a pending one waits for 'wtx recover'), stage
directories against stage records (orphans both ways), the contents an open
stage's per-file ops need, every receipt (content, signature, record), every
flow run (definition and step records), the receipt key and its keyring, and
that everything is private to its owner (directories 0700, files 0600).

Each finding names its kind, the path or object, what is lost, and a repair.
fsck changes nothing unless asked:

  --repair   makes entries private again (the receipt key too: if anyone else
             could have read it, make a new key) and sets orphaned stage
             directories aside into lost+found in the state root (nothing is
             deleted)
  --reinit   when the database is missing or damaged: sets it and the stage
             directories aside into lost+found and starts an empty history
             (objects, journals and locks stay). Refused for a sound database.

Exit status 0 when the state root is sound (or every finding was repaired),
1 when damage is left. Run it while no other wtx command runs.`,
		Example: `  wtx fsck
  wtx fsck --json
  wtx fsck --repair
  wtx fsck --reinit            # after wtx.db was lost, and no backup`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			sd, err := g.stateDir()
			if err != nil {
				return err
			}
			rep, err := wtx.Fsck(c.Context(), sd, opts)
			if err != nil {
				return err
			}
			for i := range rep.Findings {
				rep.Findings[i].Repairs = findingRepairs(rep.Findings[i])
			}
			left := 0
			for _, f := range rep.Findings {
				if !f.Repaired {
					left++
				}
			}
			if g.json {
				out := answer.Fsck{Findings: orEmpty(rep.Findings), Checked: rep.Checked}
				out.StateDir, out.StateDirB64 = answer.Name(rep.StateDir)
				if rep.SetAside != "" {
					out.SetAside, out.SetAsideB64 = answer.Name(rep.SetAside)
				}
				if left == 0 {
					return g.emit("fsck", out)
				}
				one := 1
				g.exitCode = &one
				return g.emitError("fsck", fsckError(rep, left), 1, out)
			}
			for _, f := range rep.Findings {
				what := f.Path
				if f.Object != "" && f.Path == "" {
					what = f.Object
				}
				state := "damage"
				if f.Repaired {
					state = "repaired"
				}
				fmt.Fprintf(g.io.Out, "%s: %s (%s) %s\n  %s\n", state, f.Kind, f.Code, quote.Path(what), quote.Text(f.Detail))
				switch {
				case f.Repaired:
				case len(f.Repairs) > 0:
					for _, r := range f.Repairs {
						line := r.Detail
						if r.Command != "" {
							line += ": " + r.Command
						}
						fmt.Fprintf(g.io.Out, "  repair: %s\n", quote.Text(line))
					}
				case f.Repair != "":
					fmt.Fprintf(g.io.Out, "  repair: %s\n", quote.Text(f.Repair))
				}
			}
			ch := rep.Checked
			fmt.Fprintf(g.io.Out, "state root %s: %d workspace(s), %d stage(s), %d op(s), %d journal(s), %d object(s), %d receipt(s) (%d unsigned), %d flow run(s), %d key(s), %d entries checked\n",
				quote.Path(rep.StateDir), ch.Workspaces, ch.Stages, ch.Ops, ch.Journals, ch.Objects, ch.Receipts, ch.Unsigned, ch.FlowRuns, ch.Keys, ch.Entries)
			if rep.SetAside != "" {
				fmt.Fprintf(g.io.Out, "set aside: %s\n", quote.Path(rep.SetAside))
			}
			if left == 0 {
				fmt.Fprintln(g.io.Out, "no damage found")
				return nil
			}
			fmt.Fprintf(g.io.Out, "%d problem(s) found\n", left)
			one := 1
			g.exitCode = &one
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&opts.Repair, "repair", false, "make entries private again and set orphaned stage directories aside")
	f.BoolVar(&opts.Reinit, "reinit", false, "replace a missing or damaged database with an empty one (the old one is set aside)")
	return cmd
}

// fsckError is the error object of an fsck answer that found damage: the
// code of the first unrepaired finding.
func fsckError(rep *wtx.FsckReport, left int) *wtx.Error {
	e := &wtx.Error{Code: wtx.CodeCorrupt, Message: fmt.Sprintf("fsck found %d problem(s) in the state root %s", left, rep.StateDir)}
	for _, f := range rep.Findings {
		if !f.Repaired {
			e.Code = f.Code
			break
		}
	}
	return e
}

// findingRepairs renders a finding's repairs as commands a person types,
// in the finding's workspace.
func findingRepairs(f wtx.Finding) []wtx.Repair {
	if len(f.Repairs) == 0 {
		return f.Repairs
	}
	out := make([]wtx.Repair, len(f.Repairs))
	for i, r := range f.Repairs {
		if r.Command == "" {
			r.Command = repairCommand(r)
			if r.Stage != "" && f.Workspace != "" && strings.HasPrefix(r.Command, "wtx ") {
				r.Command = "wtx -C " + quote.Shell(f.Workspace) + r.Command[len("wtx"):]
			}
		}
		out[i] = r
	}
	return out
}
