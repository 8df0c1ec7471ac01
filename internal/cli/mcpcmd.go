package cli

import (
	"github.com/wtx-dev/wtx/internal/buildinfo"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/mcpserve"
)

func newMCPCommand(g *globals) *cobra.Command {
	var allowApprove, proposeOnly bool
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve wtx to coding agents over the Model Context Protocol (stdio)",
		Example: `  wtx mcp                       # serve on stdin/stdout
  wtx -C ~/project mcp          # for a client that starts it by path
  wtx mcp --propose-only        # agents stage and run; a person applies`,
		Long: `Run a Model Context Protocol server on stdin/stdout for the workspace (-C DIR or
the current directory). It exposes begin, read, write, edit, rm, status, diff,
apply, drop and run as tools with JSON schemas; errors carry the same codes,
conflicts and repairs as --json. Logs go to stderr.

Agents propose, people approve: an apply or undo that writes protected paths
(--protect'ed ones, .git, .wtx.toml) is refused (refusal.protected) unless the
server was started with --allow-approve and the call approves; a person
applies them with 'wtx apply TX --approve' or 'wtx undo OP --approve'.
ignore_stale_reads needs --allow-approve too. An agent never shares a path,
and every stage it opens gets the project file's excludes and protects. With --propose-only the server
offers no tool that changes the workspace (no apply, undo or drop): agents
begin stages, read, write, edit, rm, run, status and diff.

The run tool stops the command and everything it started when the call is
cancelled (notifications/cancelled), when the client closes the server's
input, or after its timeout (seconds; default 600, at most 3600). A request
line that is not JSON-RPC, or one over 16 MiB, gets a JSON-RPC error and the
server reads on. Names and contents that are not UTF-8 travel as base64 in
path_b64, content_b64, old_b64 and new_b64; a string that is not valid UTF-8
is refused (usage.invalid).

Register it with an agent, for example:

  claude mcp add wtx -- wtx -C /path/to/project mcp
  codex mcp add wtx -- wtx -C /path/to/project mcp

or in a JSON configuration:

  {"mcpServers": {"wtx": {"command": "wtx", "args": ["-C", "/path/to/project", "mcp"]}}}`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, args []string) error {
			sd, err := g.stateDir()
			if err != nil {
				return err
			}
			// Check the workspace once up front, so a bad -C fails at once.
			ws, err := g.open(c.Context())
			if err != nil {
				return err
			}
			// The server keeps to the workspace found now.
			dir := ws.Path()
			ws.Close()
			if allowApprove && proposeOnly {
				return &wtx.Error{Code: wtx.CodeUsage, Message: "--allow-approve and --propose-only exclude each other: a server that cannot apply has nothing to approve"}
			}
			safe, sudo, err := g.trustOptions()
			if err != nil {
				return err
			}
			cfg := mcpserve.Config{Dir: dir, Options: wtx.Options{StateDir: sd, Home: g.home(),
				InStage: wtx.InStage{Tx: g.getenv("WTX_TX"), Workspace: g.getenv("WTX_WORKSPACE")}, SafeDirectories: safe, SudoUID: sudo}, Version: buildinfo.Read().Version,
				AllowApprove: allowApprove, ProposeOnly: proposeOnly,
				Log: slog.New(slog.NewTextHandler(g.io.Err, &slog.HandlerOptions{Level: slog.LevelWarn}))}
			in, out := readCloser(g.io.In), writeCloser(g.io.Out)
			return mcpserve.Serve(c.Context(), cfg, in, out)
		},
	}
	c.Flags().BoolVar(&allowApprove, "allow-approve", false, "let the agent approve changes to protected paths (apply's approve argument)")
	c.Flags().BoolVar(&proposeOnly, "propose-only", false, "offer no tool that changes the workspace (no apply, no drop)")
	return c
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
