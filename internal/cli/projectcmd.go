package cli

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/project"
	"github.com/wtx-dev/wtx/internal/quote"
)

// addProjectFlag adds --no-project to a command that opens a stage.
func (g *globals) addProjectFlag(fs *pflag.FlagSet) {
	fs.BoolVar(&g.noProject, "no-project", false, "ignore the workspace's "+project.FileName+" (its excludes, protects and backend)")
}

// withProject passes --no-project on to the library, which gives every
// new stage the defaults of the workspace's project file (its excludes
// and protects first, the command line's added to them), and leaves the
// backend to the file unless --backend is given.
func (g *globals) withProject(c *cobra.Command, o *wtx.BeginOptions) {
	o.NoProject = g.noProject
	if !c.Flags().Changed("backend") {
		o.Backend = ""
	}
}

func workspaceOf(ws *wtx.Workspace) answer.Where {
	return answer.NewWhere(ws.Path(), ws.Found().String(), relFrom(ws))
}

// relFrom is the directory wtx was started in, relative to the workspace.
func relFrom(ws *wtx.Workspace) string {
	rel, err := filepath.Rel(ws.Path(), ws.From())
	if err != nil {
		return "."
	}
	return rel
}

// printWorkspace writes status's first lines: the workspace (and where in
// it wtx was started) and the project file's defaults.
func printWorkspace(w io.Writer, ws *wtx.Workspace, f *project.File) {
	line := "workspace " + quote.Path(ws.Path())
	if rel := relFrom(ws); rel != "." {
		line += " (you are in " + quote.Path(rel) + "; paths are relative to it, :/ names the top)"
	}
	fmt.Fprintln(w, line)
	if f == nil {
		return
	}
	backend := "backend " + f.Backend
	if f.Backend == "" {
		backend = "no backend"
	}
	fmt.Fprintf(w, "project  %s (%s)\n", project.FileName, backend)
	if len(f.Exclude) > 0 {
		fmt.Fprintf(w, "         exclude %s\n", joinList(quoteAll(f.Exclude)))
	}
	if len(f.Protect) > 0 {
		fmt.Fprintf(w, "         protect %s\n", joinList(quoteAll(f.Protect)))
	}
}

// runDir is the directory a command or shell starts in, relative to the
// view's root: the view's copy of the current directory.
func runDir(ws *wtx.Workspace) string {
	if rel := relFrom(ws); rel != "." {
		return rel
	}
	return ""
}
