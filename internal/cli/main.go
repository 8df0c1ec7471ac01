package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// Streams are the command's standard streams and what is known about them.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
	// OutTTY and ErrTTY say whether stdout and stderr are terminals.
	OutTTY, ErrTTY bool
}

// SystemStreams returns the process's own streams.
func SystemStreams() Streams {
	return Streams{
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
		OutTTY: term.IsTerminal(int(os.Stdout.Fd())),
		ErrTTY: term.IsTerminal(int(os.Stderr.Fd())),
	}
}

// globals holds the global flags and the streams.
type globals struct {
	io      Streams
	dir     string
	json    bool
	quiet   bool
	noColor bool
	// noProject ignores the workspace's .wtx.toml (--no-project).
	noProject bool
	// showVersion is wtx --version.
	showVersion bool
	getenv      func(string) string

	// meter holds the library's latest progress report (see longWork).
	meter meter
	// finished names the op a command completed; an interrupt that came
	// too late to stop it is then reported as such (see Run).
	finished string
	// opened: the workspace was opened and any recovery of an earlier
	// interrupted apply it ran had finished (wtx recover clears it while
	// it recovers).
	opened bool

	// exitCode, when set by a command, is the process exit status even
	// without an error (wtx run passes CMD's status through).
	exitCode *int
	// runCommand marks errors of wtx run, whose own failures exit 125.
	runCommand bool
	// specs are the command line's paths and selectors (pathspec.go).
	specs pathspecs
	// noRecover keeps open from recovering (wtx recover does it itself).
	noRecover bool
	// args are the command line; jsonParsed is set once flags were parsed
	// (so g.json is known).
	args       []string
	jsonParsed bool
}

// Main runs wtx with args and returns the process exit status. It never
// calls os.Exit.
func Main(args []string) int {
	return Run(context.Background(), args, SystemStreams(), os.Getenv)
}

// Run is Main with its dependencies given, for tests.
func Run(ctx context.Context, args []string, streams Streams, getenv func(string) string) int {
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	g := &globals{io: streams, getenv: getenv}
	root := newRootCommand(g)
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.Err)
	g.args = args
	cmd, err := root.ExecuteContextC(ctx)
	name := "wtx"
	if cmd != nil && cmd != root {
		name = commandName(cmd)
	} else if err != nil {
		name = unknownName(args)
	}
	signalled := ctx.Err() != nil
	if err != nil {
		if signalled && errors.Is(err, context.Canceled) {
			if !g.opened && g.meter.recovered.Load() {
				// Stopped while opening the workspace finished an earlier
				// interrupted apply: its journal stays, and the workspace
				// may be part-way back until the next command finishes it.
				return g.interrupted(name, "interrupted while recovering an earlier interrupted apply; its journal is kept and the next wtx command finishes the recovery")
			}
			// Stopped before its commit point: every command undoes what
			// it did to the workspace before it returns such an error.
			return g.interrupted(name, "interrupted; the workspace is unchanged")
		}
		return g.fail(name, err)
	}
	if signalled && g.finished != "" {
		return g.interrupted(name, fmt.Sprintf("interrupted after %s passed its commit point; it finished", g.finished))
	}
	if g.exitCode != nil {
		return *g.exitCode
	}
	return 0
}

// exitInterrupted is the exit status after SIGINT or SIGTERM, as a shell
// reports a command a signal stopped (128 + SIGINT).
const exitInterrupted = 130

// interrupted reports an interrupt and what state it left: msg.
func (g *globals) interrupted(command, msg string) int {
	if g.json {
		_ = g.emitError(command, &wtx.Error{Code: wtx.CodeInternal, Message: msg}, exitInterrupted, nil) // stdout is gone: nothing else to tell
	} else {
		fmt.Fprintln(g.io.Err, "wtx: "+msg)
	}
	return exitInterrupted
}

// fail reports err (as text on stderr, or JSON on stdout) and returns the
// exit status.
func (g *globals) fail(command string, err error) int {
	var e *wtx.Error
	if !errors.As(err, &e) {
		var ue usageError
		if errors.As(err, &ue) {
			e = &wtx.Error{Code: wtx.CodeUsage, Message: ue.Error()}
		} else if !g.jsonParsed {
			// cobra's own: an unknown command, or arguments a command
			// does not take.
			msg := strings.TrimSpace(strings.ReplaceAll(err.Error(), "\n\n", "; "))
			e = &wtx.Error{Code: wtx.CodeUsage, Message: strings.ReplaceAll(msg, "\n\t", " ") + " (see 'wtx --help')"}
		} else if errors.Is(err, context.Canceled) {
			e = &wtx.Error{Code: wtx.CodeInternal, Message: "interrupted"}
		} else {
			e = wtx.AsError(err)
		}
	}
	e = withCommands(trustHints(withHints(e)))
	code := e.ExitCode()
	if g.runCommand {
		switch e.Code {
		case wtx.CodeCommandNotFound:
			code = 127
		case wtx.CodeCommandNotExecutable:
			code = 126
		default:
			// A refusal (the stage is busy or settled) ran nothing and
			// changed nothing: 2, as for every other command.
			if code != 2 {
				code = 125
			}
		}
	}
	if g.json || (!g.jsonParsed && jsonAsked(g.args)) {
		// A usage error can come before --json was parsed (an unknown
		// command or flag): the answer is JSON all the same.
		_ = g.emitError(command, e, code, nil) // stdout is gone: nothing else to tell
		return code
	}
	g.reportError(e)
	return code
}

// reportError writes e, its conflicts and its repairs to stderr. Names in
// messages are quoted where they are made; quote.Text is the net: nothing
// in a message can break its line or drive the terminal.
func (g *globals) reportError(e *wtx.Error) {
	fmt.Fprintf(g.io.Err, "wtx: error: %s\n", quote.Text(e.Message))
	for _, c := range e.Conflicts {
		line := fmt.Sprintf("  %s: %s", quote.Path(c.Path), c.Kind)
		if c.Detail != "" {
			line += " (" + c.Detail + ")"
		}
		fmt.Fprintln(g.io.Err, quote.Text(line))
	}
	for _, r := range e.Repairs {
		if r.Command != "" {
			fmt.Fprintf(g.io.Err, "wtx: hint: %s: %s\n", quote.Text(r.Detail), quote.Text(r.Command))
		} else {
			fmt.Fprintf(g.io.Err, "wtx: hint: %s\n", quote.Text(r.Detail))
		}
	}
}

// usageError is a flag or argument mistake.
type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

// stateDir finds the state root: $WTX_STATE_DIR, else $XDG_STATE_HOME/wtx,
// else ~/.local/state/wtx.
func (g *globals) stateDir() (string, error) {
	if d := g.getenv("WTX_STATE_DIR"); d != "" {
		return filepath.Abs(d)
	}
	if d := g.getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "wtx"), nil
	}
	home := g.home()
	if home == "" {
		return "", &wtx.Error{Code: wtx.CodeUsage, Message: "cannot find a state root: set WTX_STATE_DIR or HOME"}
	}
	return filepath.Join(home, ".local", "state", "wtx"), nil
}

func (g *globals) home() string {
	if h := g.getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

// open opens the workspace named by -C, or else the one found from the
// current directory (wtx.Options.Discover).
func (g *globals) open(ctx context.Context) (*wtx.Workspace, error) {
	dir := g.dir
	if dir == "" {
		var err error
		if dir, err = os.Getwd(); err != nil {
			return nil, wtx.AsError(err)
		}
	}
	sd, err := g.stateDir()
	if err != nil {
		return nil, err
	}
	// Without -C, the current directory is where the user stands: the
	// workspace is found from it, as git finds the repository. -C names
	// the workspace itself.
	// Opening recovers an apply or undo a crash interrupted, which takes
	// as long as the op did: it gets a progress line like the op's own.
	safe, sudo, err := g.trustOptions()
	if err != nil {
		return nil, err
	}
	work := g.longWork("opening the workspace")
	ws, err := wtx.Open(ctx, dir, wtx.Options{StateDir: sd, Home: g.home(), NoRecover: g.noRecover, Progress: g.meter.report, Discover: g.dir == "",
		InStage: wtx.InStage{Tx: g.getenv("WTX_TX"), Workspace: g.getenv("WTX_WORKSPACE")}, SafeDirectories: safe, SudoUID: sudo})
	work.end()
	if err != nil {
		return nil, err
	}
	g.opened = true
	if err := g.resolvePathspecs(ws); err != nil {
		ws.Close()
		return nil, err
	}
	if r := ws.Recovered(); r != nil {
		for _, op := range r.RolledBack {
			g.notice("wtx: an apply (%s) was interrupted; rolled it back: the workspace is as it was before it", op)
		}
		for _, op := range r.RolledForward {
			g.notice("wtx: an apply (%s) was interrupted after it committed; finished it", op)
		}
		for _, u := range r.Unsettled {
			g.notice("wtx: %s", u)
		}
		for i, op := range r.Discarded {
			g.notice("wtx: the journal of an apply (%s) was damaged; nothing of it reached the workspace (no temporary files of wtx, and every open stage's paths still hold what the stage is based on); set it aside: %s", op, r.SetAside[i])
		}
	}
	return ws, nil
}

// color reports whether stdout gets colour.
func (g *globals) color() bool {
	return g.io.OutTTY && !g.noColor && !g.json && g.getenv("NO_COLOR") == "" && g.getenv("TERM") != "dumb"
}

// notice prints a line on stderr unless --quiet or --json.
func (g *globals) notice(format string, args ...any) {
	if g.quiet || g.json {
		return
	}
	fmt.Fprintln(g.io.Err, quote.Text(fmt.Sprintf(format, args...)))
}

func newRootCommand(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "wtx",
		Short: "Give a directory transactions",
		Long: `wtx runs any command against a staged view of a directory (the workspace).
The workspace stays exactly as it was; the command's net change is kept in a
stage, where it can be reviewed, applied whole or in part, or dropped. Every
apply is all-or-nothing and refuses to overwrite anything that changed outside
the stage since it opened.

State lives outside the workspace, in $WTX_STATE_DIR, else $XDG_STATE_HOME/wtx,
else ~/.local/state/wtx.

EXIT STATUS
  0    done
  1    error (usage, precondition, I/O, internal)
  2    refusal: nothing was changed
  wtx run exits with the command's own status; 125 when wtx itself failed,
  126 when the command cannot be executed, 127 when it is not found.`,
		Example: `  wtx run -- make fmt          # run a command in a new stage
  wtx diff                     # what it changed
  wtx apply                    # land it, all or nothing
  wtx drop                     # or throw it away`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError{msg: err.Error() + " (see '" + c.CommandPath() + " --help')"}
	})
	root.PersistentPreRun = func(*cobra.Command, []string) { g.jsonParsed = true }

	pf := root.PersistentFlags()
	pf.StringVarP(&g.dir, "directory", "C", "", "the workspace `DIR`, exactly (default: found from the current directory, walking up as git does)")
	pf.BoolVar(&g.json, "json", false, "print one JSON object on stdout")
	pf.BoolVarP(&g.quiet, "quiet", "q", false, "print no notices or summaries")
	pf.BoolVar(&g.noColor, "no-color", false, "never colour output")
	root.Flags().BoolVar(&g.showVersion, "version", false, "print the version, commit and Go version of this build")
	root.RunE = func(c *cobra.Command, args []string) error {
		if g.showVersion {
			return g.printVersion()
		}
		if g.json {
			return usageError{msg: "no command given (see 'wtx --help')"}
		}
		return c.Help()
	}
	root.AddGroup(
		&cobra.Group{ID: "stage", Title: "Stage a command and land its change:"},
		&cobra.Group{ID: "agent", Title: "Per-file transactions (for coding agents):"},
		&cobra.Group{ID: "history", Title: "History and recovery:"},
	)
	group := func(id string, cmds ...*cobra.Command) {
		for _, c := range cmds {
			c.GroupID = id
			root.AddCommand(c)
		}
	}
	group("stage", newRunCommand(g), newBeginCommand(g), newShellCommand(g), newListCommand(g),
		newStatusCommand(g), newDiffCommand(g), newReviewCommand(g), newApplyCommand(g), newDropCommand(g),
		newForkCommand(g), newExportCommand(g), newImportCommand(g))
	group("agent", newReadCommand(g), newWriteCommand(g), newEditCommand(g), newRmCommand(g),
		newRebaseCommand(g), newResolveCommand(g), newDropOpCommand(g), newBatchCommand(g), newMCPCommand(g), newFlowCommand(g))
	root.AddCommand(newVersionCommand(g), newGenDocsCommand(g), newSafeDirectoryCommand(g))
	group("history", newLogCommand(g), newShowCommand(g), newUndoCommand(g), newRecoverCommand(g),
		newReceiptCommand(g), newGCCommand(g), newFsckCommand(g))
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			c.Example = `  source <(wtx completion bash)
  wtx completion zsh > "${fpath[1]}/_wtx"
  wtx completion fish > ~/.config/fish/completions/wtx.fish`
		}
	}
	g.addCompletion(root)
	g.addMoreCompletion(root)
	g.guardParents(root)
	return root
}

// guardParents gives every parent command below the root (flow, receipt,
// completion …) an answer to an argument that names none of its
// subcommands: cobra alone prints the parent's help and exits 0, so
// `wtx flow resme RUN && deploy` would go on as if the resume had run.
// An unknown subcommand is a usage error, as it is at the top level; a
// bare parent prints its help (under --json: a usage error, since help is
// not one JSON object).
func (g *globals) guardParents(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		if c == root || !c.HasSubCommands() || c.Runnable() {
			return
		}
		c.Args = cobra.ArbitraryArgs
		if c.SuggestionsMinimumDistance <= 0 {
			c.SuggestionsMinimumDistance = 2
		}
		c.RunE = func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
				if s := c.SuggestionsFor(args[0]); len(s) > 0 {
					msg += fmt.Sprintf("; did you mean %q?", s[0])
				}
				return usageError{msg: msg + " (see '" + c.CommandPath() + " --help')"}
			}
			if g.json {
				return usageError{msg: fmt.Sprintf("no subcommand given for %q (see '%s --help')", c.CommandPath(), c.CommandPath())}
			}
			return c.Help()
		}
	}
	walk(root)
}

// maxOneStage is cobra.Args for commands that take an optional stage.
func maxOneStage(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageError{msg: fmt.Sprintf("%s takes at most one stage, got %d arguments", cmd.Name(), len(args))}
	}
	return nil
}

func stageArg(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	return ""
}

// jsonAsked reports whether --json is among the global flags of args
// (before a "--" that ends them): for errors found before flags are parsed.
func jsonAsked(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--json", a == "--json=true", a == "--json=1":
			return true
		}
	}
	return false
}

// commandName is the answer's "command": the command's path below wtx
// ("apply", "receipt verify"), as it was called ("commit" for the alias).
func commandName(c *cobra.Command) string {
	name := c.CalledAs()
	if name == "" {
		name = c.Name()
	}
	for p := c.Parent(); p != nil && p.HasParent(); p = p.Parent() {
		name = p.Name() + " " + name
	}
	return name
}

// unknownName is the "command" of an answer to a command line that named
// no known command: its first word that is not a flag, else "wtx".
func unknownName(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return "wtx"
		case a == "-C" || a == "--directory":
			i++
		case len(a) > 0 && a[0] == '-':
		default:
			return a
		}
	}
	return "wtx"
}
