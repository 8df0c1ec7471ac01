package cli

import (
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/project"
)

// completeOpts opens the workspace for a completion: quietly, and without
// recovering an interrupted apply (pressing Tab must not write anything).
func (g *globals) completeOpen(c *cobra.Command) (*wtx.Workspace, bool) {
	g.noRecover, g.quiet = true, true
	ws, err := g.open(c.Context())
	if err != nil {
		return nil, false
	}
	return ws, true
}

// completable reports whether a name can be offered to a shell: the
// completion protocol is lines of text with a tab before the description.
func completable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsAny(s, "\t\n\r")
}

// completeOps offers op ids, newest first, with what each op was.
func (g *globals) completeOps(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return g.opCompletions(c, toComplete), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

func (g *globals) opCompletions(c *cobra.Command, toComplete string) []cobra.Completion {
	ws, ok := g.completeOpen(c)
	if !ok {
		return nil
	}
	defer ws.Close()
	ops, err := ws.Ops(c.Context())
	if err != nil {
		return nil
	}
	var out []cobra.Completion
	for _, r := range logRows(c.Context(), ws, ops, false) {
		if !strings.HasPrefix(r.op.ID, toComplete) {
			continue
		}
		desc := fmt.Sprintf("%s %s, %d path(s), %s ago", r.op.Kind, r.stage, len(r.op.Written), age(time.Since(r.op.Created)))
		if r.op.UndoneBy != "" {
			desc += ", undone"
		}
		out = append(out, cobra.CompletionWithDesc(r.op.ID, strings.ToValidUTF8(strings.NewReplacer("\t", " ", "\n", " ").Replace(desc), "?")))
	}
	return out
}

// completeOpsAndStages is for receipt's OP or T.
func (g *globals) completeOpsAndStages(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	out := g.opCompletions(c, toComplete)
	stages, _ := g.completeStages(c, args, toComplete)
	return append(out, stages...), cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// completeBackends offers --backend's values.
func completeBackends(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	desc := map[string]string{
		"auto":    "the fastest that works here",
		"overlay": "an overlay mount (Linux)",
		"clone":   "a reflink copy (btrfs, XFS, APFS)",
		"copy":    "a plain copy",
	}
	var out []cobra.Completion
	for _, b := range project.Backends {
		if strings.HasPrefix(b, toComplete) {
			out = append(out, cobra.CompletionWithDesc(b, desc[b]))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// completeChangedPaths offers the paths a stage changed, for --path: the
// stage named by the command's argument, else the only open one.
func (g *globals) completeChangedPaths(c *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	ws, ok := g.completeOpen(c)
	if !ok {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer ws.Close()
	st, err := ws.Stage(c.Context(), stageArg(args))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	cs, err := st.Changes(c.Context(), nil)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, ch := range cs.Changes {
		if completable(ch.Path) && strings.HasPrefix(ch.Path, toComplete) {
			out = append(out, cobra.CompletionWithDesc(ch.Path, ch.Action))
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// addMoreCompletion wires op ids, backends and changed paths.
func (g *globals) addMoreCompletion(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "undo", "show":
			c.ValidArgsFunction = g.completeOps
		case "receipt":
			c.ValidArgsFunction = g.completeOpsAndStages
		}
		if c.Flags().Lookup("backend") != nil {
			_ = c.RegisterFlagCompletionFunc("backend", completeBackends) // only fails for an unknown or doubly registered flag
		}
		if c.Flags().Lookup("path") != nil && (c.Name() == "apply" || c.Name() == "diff" || c.Name() == "status") {
			_ = c.RegisterFlagCompletionFunc("path", g.completeChangedPaths) // as above
		}
	}
}
