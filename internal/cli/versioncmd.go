package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/buildinfo"
)

func newVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit and Go version of this build",
		Long: `Print what the Go toolchain recorded when it built this binary: the module
version (a tag such as v1.2.0, a pseudo-version, or "(devel)" for a build from
a work tree), the commit and whether the work tree had uncommitted changes,
and the Go version. 'wtx --version' prints the same.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			return g.printVersion()
		},
	}
}

func (g *globals) printVersion() error {
	info := buildinfo.Read()
	if g.json {
		return g.emit("version", answer.Version{Info: info})
	}
	fmt.Fprintf(g.io.Out, "wtx version %s\n", info.Short())
	return nil
}
