package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wtx-dev/wtx/internal/buildinfo"
)

// genDocsCommand is the hidden command a release runs to make the man pages
// and completion scripts from the command tree, so that they never drift
// from the flags the binary has.
func newGenDocsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "__gen-docs DIR",
		Short:  "Write man pages (DIR/man) and completion scripts (DIR/completions)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return genDocs(c.Root(), args[0])
		},
	}
}

// genDocs writes DIR/man/wtx.1, DIR/man/wtx-CMD.1 for every visible command,
// and DIR/completions/wtx.bash, _wtx (zsh) and wtx.fish.
func genDocs(root *cobra.Command, dir string) error {
	manDir := filepath.Join(dir, "man")
	compDir := filepath.Join(dir, "completions")
	for _, d := range []string{manDir, compDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	version := buildinfo.Read().Version
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !visible(c) {
			return nil
		}
		page := manPage(c, version)
		if err := os.WriteFile(filepath.Join(manDir, manName(c)+".1"), page, 0o644); err != nil {
			return err
		}
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := root.GenBashCompletionV2(&b, true); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(compDir, "wtx.bash"), b.Bytes(), 0o644); err != nil {
		return err
	}
	b.Reset()
	if err := root.GenZshCompletion(&b); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(compDir, "_wtx"), b.Bytes(), 0o644); err != nil {
		return err
	}
	b.Reset()
	if err := root.GenFishCompletion(&b, true); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(compDir, "wtx.fish"), b.Bytes(), 0o644)
}

// visible reports whether c gets a man page: not hidden, not help, not
// cobra's own __complete.
func visible(c *cobra.Command) bool {
	return !c.Hidden && c.IsAvailableCommand() || c.Parent() == nil
}

// manName is wtx for the root, wtx-run for wtx run, wtx-completion-bash for
// wtx completion bash.
func manName(c *cobra.Command) string {
	return strings.ReplaceAll(c.CommandPath(), " ", "-")
}

// manPage renders c as a roff man(7) page.
func manPage(c *cobra.Command, version string) []byte {
	var b bytes.Buffer
	name := manName(c)
	fmt.Fprintf(&b, ".TH %q 1 \"\" %q \"wtx manual\"\n", strings.ToUpper(name), "wtx "+version)
	b.WriteString(".SH NAME\n")
	fmt.Fprintf(&b, "%s \\- %s\n", roffEscape(name), roffEscape(c.Short))
	b.WriteString(".SH SYNOPSIS\n")
	use := c.UseLine()
	fmt.Fprintf(&b, "\\fB%s\\fR%s\n", roffEscape(c.CommandPath()), roffEscape(strings.TrimPrefix(use, c.CommandPath())))
	b.WriteString(".SH DESCRIPTION\n")
	desc := c.Long
	if desc == "" {
		desc = c.Short
	}
	writeRoffText(&b, desc)
	if fs := c.NonInheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString(".SH OPTIONS\n")
		writeRoffFlags(&b, fs)
	}
	if fs := c.InheritedFlags(); fs.HasAvailableFlags() {
		b.WriteString(".SH OPTIONS INHERITED FROM PARENT COMMANDS\n")
		writeRoffFlags(&b, fs)
	}
	if c.Example != "" {
		b.WriteString(".SH EXAMPLE\n.PP\n.RS\n.nf\n")
		for _, line := range strings.Split(strings.TrimRight(c.Example, "\n"), "\n") {
			b.WriteString(roffLine(line) + "\n")
		}
		b.WriteString(".fi\n.RE\n")
	}
	var see []string
	if p := c.Parent(); p != nil {
		see = append(see, manName(p))
	}
	for _, sub := range c.Commands() {
		if visible(sub) {
			see = append(see, manName(sub))
		}
	}
	sort.Strings(see)
	if len(see) > 0 {
		b.WriteString(".SH SEE ALSO\n")
		for i, s := range see {
			sep := ","
			if i == len(see)-1 {
				sep = ""
			}
			fmt.Fprintf(&b, "\\fB%s\\fR(1)%s\n", roffEscape(s), sep)
		}
	}
	return b.Bytes()
}

// writeRoffText writes text as paragraphs: a blank line starts a new one,
// and indented lines (tables, examples) are kept as they are.
func writeRoffText(b *bytes.Buffer, text string) {
	b.WriteString(".PP\n")
	inPre := false
	for _, line := range strings.Split(strings.TrimRight(text, "\n"), "\n") {
		switch {
		case strings.TrimSpace(line) == "":
			if inPre {
				b.WriteString(".fi\n")
				inPre = false
			}
			b.WriteString(".PP\n")
		case strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t"):
			if !inPre {
				b.WriteString(".nf\n")
				inPre = true
			}
			b.WriteString(roffLine(line) + "\n")
		default:
			if inPre {
				b.WriteString(".fi\n")
				inPre = false
			}
			b.WriteString(roffLine(line) + "\n")
		}
	}
	if inPre {
		b.WriteString(".fi\n")
	}
}

func writeRoffFlags(b *bytes.Buffer, fs *pflag.FlagSet) {
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		b.WriteString(".TP\n")
		varname, usage := pflag.UnquoteUsage(f)
		var head string
		if f.Shorthand != "" && f.ShorthandDeprecated == "" {
			head = "\\fB\\-" + roffEscape(f.Shorthand) + "\\fR, "
		}
		head += "\\fB\\-\\-" + roffEscape(f.Name) + "\\fR"
		if varname != "" {
			head += " \\fI" + roffEscape(varname) + "\\fR"
		}
		b.WriteString(head + "\n")
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "[]" && f.DefValue != "0" {
			usage += " (default " + f.DefValue + ")"
		}
		b.WriteString(roffLine(usage) + "\n")
	})
}

// roffEscape makes s safe inside a roff line: backslashes become \e and
// hyphens \- (so that they are not broken or turned into dashes).
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	return strings.ReplaceAll(s, "-", `\-`)
}

// roffLine escapes a whole output line: a leading . or ' would be read as
// a request, so it is preceded by the zero-width \&.
func roffLine(s string) string {
	s = roffEscape(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
