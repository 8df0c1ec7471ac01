package cli

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/mcpserve"
)

// Version is wtx's version as reported to MCP clients.
var Version = "0.1.0-dev"

func newMCPCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve wtx to coding agents over the Model Context Protocol (stdio)",
		Example: `  wtx mcp                       # serve on stdin/stdout
  wtx -C ~/project mcp          # for a client that starts it by path`,
		Long: `Run a Model Context Protocol server on stdin/stdout for the workspace (-C DIR or
the current directory). It exposes begin, read, write, edit, rm, status, diff,
apply, drop and run as tools with JSON schemas; errors carry the same codes,
conflicts and repairs as --json. Logs go to stderr.

Register it with an agent, for example:

  claude mcp add wtx -- wtx -C /path/to/project mcp
  codex mcp add wtx -- wtx -C /path/to/project mcp

or in a JSON configuration:

  {"mcpServers": {"wtx": {"command": "wtx", "args": ["-C", "/path/to/project", "mcp"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			dir := g.dir
			if dir == "" {
				var err error
				if dir, err = os.Getwd(); err != nil {
					return wtx.AsError(err)
				}
			}
			sd, err := g.stateDir()
			if err != nil {
				return err
			}
			// Check the workspace once up front, so a bad -C fails at once.
			ws, err := g.open(c.Context())
			if err != nil {
				return err
			}
			ws.Close()
			cfg := mcpserve.Config{Dir: dir, Options: wtx.Options{StateDir: sd, Home: g.home(),
				InStage: wtx.InStage{Tx: g.getenv("WTX_TX"), Workspace: g.getenv("WTX_WORKSPACE")}}, Version: Version}
			in, out := readCloser(g.io.In), writeCloser(g.io.Out)
			return mcpserve.Serve(c.Context(), cfg, in, out)
		},
	}
}

type nopReadCloser struct{ io.Reader }

func (nopReadCloser) Close() error { return nil }

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

func readCloser(r io.Reader) io.ReadCloser {
	if rc, ok := r.(io.ReadCloser); ok {
		return rc
	}
	return nopReadCloser{r}
}

func writeCloser(w io.Writer) io.WriteCloser {
	if wc, ok := w.(io.WriteCloser); ok {
		return wc
	}
	return nopWriteCloser{w}
}
