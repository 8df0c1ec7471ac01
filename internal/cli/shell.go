package cli

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
)

func newShellCommand(g *globals) *cobra.Command {
	var readOnly, noNetwork bool
	cmd := &cobra.Command{
		Use:   "shell [T] [--read-only] [--no-network]",
		Short: "Start an interactive shell inside a stage's view",
		Long: `Start $SHELL (else /bin/sh) inside the view of the open stage T (the only
open stage when T is omitted). Everything the shell and its commands write
stays in the stage; leaving the shell prints the stage's change set, as
'wtx run' does. With the overlay backend and without root, the shell runs as
root of a private user namespace: files it creates belong to you.`,
		Example: `  wtx begin --name try && wtx shell try
  wtx shell --no-network`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			g.runCommand = true
			ctx := c.Context()
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			sh := g.getenv("SHELL")
			if sh == "" {
				sh = "/bin/sh"
			}
			// The terminal sends Ctrl-C and Ctrl-\ to the shell itself;
			// wtx must outlive them to scan the stage afterwards.
			signal.Ignore(syscall.SIGINT, syscall.SIGQUIT)
			defer signal.Reset(syscall.SIGINT, syscall.SIGQUIT)
			sigs := make(chan os.Signal, 4)
			signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
			defer signal.Stop(sigs)
			res, err := st.Run(ctx, []string{sh}, wtx.RunOptions{
				Stdin: g.io.In, Stdout: g.io.Out, Stderr: g.io.Err, Env: os.Environ(), Signals: sigs,
				ReadOnly: readOnly, NoNetwork: noNetwork, Dir: runDir(ws),
			})
			if err != nil {
				return err
			}
			code := res.ExitCode
			g.exitCode = &code
			if g.json {
				return g.emit("shell", answer.NewRun(st, res))
			}
			printRunSummary(g, st, res)
			return nil
		},
	}
	f := cmd.Flags()
	f.BoolVar(&readOnly, "read-only", false, "the shell sees the view read-only")
	f.BoolVar(&noNetwork, "no-network", false, "the shell gets loopback networking only")
	return cmd
}
