package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
)

func newRunCommand(g *globals) *cobra.Command {
	var (
		begin          wtx.BeginOptions
		tx             string
		applyOnSuccess bool
		approve        bool
		keep           bool
		readOnly       bool
		noNetwork      bool
		wait           bool
	)
	cmd := &cobra.Command{
		Use:   "run [STAGE-FLAGS] [--tx T] [--apply-on-success [--approve]] -- CMD [ARG...]",
		Short: "Run a command in a stage; the workspace stays as it was",
		Long: `Run CMD inside a stage's view of the workspace: a new stage, or the open
stage T with --tx. CMD reads and writes the view; the workspace does not change.
When CMD ends, wtx prints a summary of the stage's change set on stderr and
keeps the stage for review ('wtx diff', 'wtx status') and 'wtx apply' or
'wtx drop'.

While CMD runs, the stage is "running" ('wtx list', 'wtx status'): apply,
drop, fork, rebase, drop-op, per-file reads and writes and another run on it
are refused until it ends.

A new stage that CMD leaves with an empty change set is settled as "empty"
(nothing to apply, nothing to drop); --keep keeps it open instead. A stage
named with --tx stays open either way.

Every process CMD starts is stopped with it: when CMD exits, what it left
running gets SIGTERM, then SIGKILL two seconds later, before the stage is
scanned, and the summary names them. With --wait, wtx waits for them
instead (an interrupt, Ctrl-C or SIGTERM, then stops them). If wtx itself is
killed, they are killed too.

With --apply-on-success, exit status 0 applies the whole change set (every
check of 'wtx apply' still runs) and any other status drops the stage. When
that apply is refused, the stage is kept for review and wtx exits 2.
--approve, given at launch, approves that apply's protected paths as 'wtx
apply --approve' does; the receipt says it was approved.

With --json, stdout carries wtx's one JSON answer and nothing else: CMD's
standard output goes to standard error instead (with CMD's own stderr),
unchanged. Redirect it inside the command to keep it apart.

EXIT STATUS
  CMD's own status (128+N when signal N killed it); 125 when wtx itself
  failed, 126 when CMD cannot be executed, 127 when it is not found; 2 when
  --apply-on-success was refused (the stage is kept).`,
		Example: `  wtx run -- npm install
  wtx run --exclude node_modules -- ./build.sh
  wtx run --tx refactor -- sed -i s/foo/bar/g src/main.go
  wtx run --apply-on-success -- gofmt -w .
  wtx run --apply-on-success --approve -- ./update-lockfiles.sh`,
		Args: cobra.ArbitraryArgs,
		RunE: func(c *cobra.Command, args []string) error {
			g.runCommand = true
			if len(args) == 0 {
				return usageError{msg: "wtx run needs a command: wtx run -- CMD [ARG...]"}
			}
			if approve && !applyOnSuccess {
				return usageError{msg: "--approve at launch approves the apply of --apply-on-success; without it, approve when you apply: wtx apply --approve"}
			}
			confine := wtx.RunOptions{ReadOnly: readOnly, NoNetwork: noNetwork, SettleEmpty: !keep && tx == "", Wait: wait}
			var land *wtx.ApplyOptions
			if applyOnSuccess {
				land = &wtx.ApplyOptions{Approve: approve}
			}
			return runRun(c, g, begin, tx, land, confine, args)
		},
	}
	f := cmd.Flags()
	f.SetInterspersed(false)
	addStageFlags(g, f, &begin)
	g.addProjectFlag(f)
	f.StringVar(&tx, "tx", "", "run in the open stage `T` instead of a new one")
	f.BoolVar(&applyOnSuccess, "apply-on-success", false, "apply the whole change set if CMD exits 0, drop the stage otherwise")
	f.BoolVar(&approve, "approve", false, "with --apply-on-success: approve changes to protected paths now")
	f.BoolVar(&keep, "keep", false, "keep a new stage open even when CMD leaves its change set empty")
	f.BoolVar(&readOnly, "read-only", false, "CMD sees the view read-only")
	f.BoolVar(&noNetwork, "no-network", false, "CMD gets loopback networking only")
	f.BoolVar(&wait, "wait", false, "when CMD exits, wait for the processes it left running instead of stopping them")
	return cmd
}

// runRun runs argv in stage tx, or in a new stage; with land, an exit
// status of 0 applies the change set with those options, any other drops
// the stage. Of confine, only the ReadOnly, NoNetwork, SettleEmpty and
// Wait switches are used.
func runRun(c *cobra.Command, g *globals, begin wtx.BeginOptions, tx string, land *wtx.ApplyOptions, confine wtx.RunOptions, argv []string) error {
	applyOnSuccess := land != nil
	ctx := c.Context()
	ws, err := g.open(ctx)
	if err != nil {
		return err
	}
	defer ws.Close()
	// The command runs where the user stands: in the view's copy of the
	// current directory.
	if rel := relFrom(ws); rel != "." {
		confine.Dir = rel
	}
	if err := wtx.LookCommand(ws.From(), argv[0]); err != nil {
		return err
	}
	var st *wtx.Stage
	if tx != "" {
		if st, err = ws.Stage(ctx, tx); err != nil {
			return err
		}
	} else {
		g.withProject(c, &begin)
		work := g.longWork("staging")
		st, err = ws.Begin(ctx, begin)
		work.end()
		if err != nil {
			return err
		}
		noteSkipped(g, st)
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	defer signal.Stop(sigs)
	// The command's end, not a signal to wtx, ends the run: the change scan
	// and the receipt must happen even after Ctrl-C.
	runCtx := context.WithoutCancel(ctx)
	res, err := st.Run(runCtx, argv, wtx.RunOptions{
		Stdin: g.io.In, Stdout: cmdStdout(g), Stderr: g.io.Err, Env: os.Environ(), Signals: sigs,
		ReadOnly: confine.ReadOnly, NoNetwork: confine.NoNetwork, SettleEmpty: confine.SettleEmpty, Wait: confine.Wait, Dir: confine.Dir,
	})
	if err != nil {
		if tx == "" {
			st.Drop(runCtx)
		}
		return err
	}
	code := res.ExitCode
	g.exitCode = &code
	out := answer.NewRun(st, res)
	if applyOnSuccess {
		if res.ExitCode == 0 {
			ar, err := st.Apply(runCtx, *land)
			if err != nil {
				return applyOnSuccessFailed(g, st, res, out, err)
			}
			applied := true
			out.Applied, out.OpID = &applied, answer.OpID(ar.OpID)
			if !g.json {
				g.notice("wtx: applied %s (%d added, %d modified, %d deleted)%s", st.ID(),
					res.Changes.Counts.Added, res.Changes.Counts.Modified, res.Changes.Counts.Deleted, opSuffix(ar.OpID))
			}
		} else if !res.Settled {
			if err := st.Drop(runCtx); err != nil {
				return err
			}
			out.Dropped = true
			g.notice("wtx: %s exited %d; dropped stage %s, the workspace is unchanged", quote.Path(argv[0]), res.ExitCode, st.ID())
		} else {
			g.notice("wtx: %s exited %d and changed nothing; stage %s is settled as empty", quote.Path(argv[0]), res.ExitCode, st.ID())
		}
	}
	out.State = st.State()
	if g.json {
		return g.emit("run", out)
	}
	if !applyOnSuccess {
		printRunSummary(g, st, res)
	} else {
		printLeftOut(g, g.io.Err, res.Changes.LeftOut)
		printRootMode(g.io.Err, res.Changes.RootMode)
	}
	return nil
}

// applyOnSuccessFailed reports a run whose --apply-on-success apply failed:
// CMD ran and its stage is kept, so the answer carries CMD's exit status,
// the change set and what is not transactional, and wtx exits 2 when the
// apply was refused (125 when it failed otherwise).
func applyOnSuccessFailed(g *globals, st *wtx.Stage, res *wtx.RunResult, out answer.Run, err error) error {
	e := wtx.AsError(err)
	code := 125
	if errors.Is(e, wtx.ErrRefused) {
		code = 2
	}
	g.exitCode = &code
	applied := false
	out.Applied, out.State = &applied, st.State()
	if g.json {
		return g.emitError("run", e, code, out)
	}
	printRunSummary(g, st, res)
	g.reportError(e)
	if !g.quiet {
		ref := stageRef(st)
		fmt.Fprintf(g.io.Err, "wtx: hint: the stage is kept and the workspace is unchanged; review with 'wtx diff %s', then 'wtx apply %s' or 'wtx drop %s'\n", ref, ref, ref)
	}
	return nil
}

// noteSkipped says, once per probe, why faster backends were not used for
// a new stage.
func noteSkipped(g *globals, st *wtx.Stage) {
	for _, sk := range st.Skipped() {
		if sk.Fresh {
			g.notice("wtx: not using the %s backend: %s", sk.Backend, sk.Reason)
		}
	}
}

func opSuffix(op string) string {
	if op == "" {
		return " (nothing to write)"
	}
	return " as " + op
}

// cmdStdout is where CMD's stdout goes: with --json, stdout carries only the
// JSON answer, so CMD's output goes to stderr.
func cmdStdout(g *globals) interface{ Write([]byte) (int, error) } {
	if g.json {
		return g.io.Err
	}
	return g.io.Out
}

func printRunSummary(g *globals, st *wtx.Stage, res *wtx.RunResult) {
	if g.quiet {
		return
	}
	w := g.io.Err
	c := res.Changes.Counts
	ref := stageRef(st)
	status := fmt.Sprintf("exited %d", res.ExitCode)
	if res.Signal != "" {
		status = "killed by " + signalName(res.Signal)
	}
	if res.Containment == string(stage.ContainBroken) {
		// The status is the supervisor's: the command's own was lost
		// with it.
		status = "lost its supervisor (" + status + "), its status unknown"
	}
	if res.Settled {
		fmt.Fprintf(w, "wtx: command %s; it changed nothing, so stage %s is settled as empty (keep it open with --keep)\n", status, ref)
	} else {
		fmt.Fprintf(w, "wtx: command %s; stage %s (%s) holds %d added, %d modified, %d deleted\n",
			status, ref, st.Backend(), c.Added, c.Modified, c.Deleted)
	}
	const maxShown = 20
	for i, ch := range res.Changes.Changes {
		if i == maxShown {
			fmt.Fprintf(w, "  … and %d more (wtx status %s)\n", len(res.Changes.Changes)-maxShown, ref)
			break
		}
		fmt.Fprintf(w, "  %s %s%s\n", actionLetter(ch), g.displayPath(ch), reservedNote(ch.Path))
	}
	for _, p := range res.Changes.Special {
		fmt.Fprintf(w, "  ! %s (FIFO, socket or device: never applied)\n", quote.Path(p))
	}
	printLeftOut(g, w, res.Changes.LeftOut)
	printRootMode(w, res.Changes.RootMode)
	printProtected(w, st, st.Protected(res.Changes))
	if line := stoppedLine(res.Stopped); line != "" {
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "wtx: not transactional: %s\n", joinList(res.Receipt.NotTransactional))
	if len(res.Changes.Changes) > 0 {
		fmt.Fprintf(w, "wtx: review with 'wtx diff %s', then 'wtx apply %s' or 'wtx drop %s'\n", ref, ref, ref)
	}
}

func actionLetter(ch wtx.Change) string {
	switch ch.Action {
	case "added":
		return "A"
	case "deleted":
		return "D"
	}
	if ch.Before != nil && ch.Before.Type != ch.Type {
		return "T"
	}
	return "M"
}

// displayPath is a change's path for a listing, relative to where the
// user stands and quoted as git quotes it (I-007): a name can never split
// or rewrite its line.
func (g *globals) displayPath(ch wtx.Change) string {
	t := ch.Type
	if t == "" && ch.Before != nil {
		t = ch.Before.Type
	}
	p := quote.Path(g.showPath(ch.Path))
	switch t {
	case "dir":
		return p + "/"
	case "symlink":
		if ch.Target != "" {
			return p + " -> " + quote.Path(ch.Target)
		}
	}
	return p
}

// quoteAll quotes every name of a list for a listing.
func quoteAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote.Path(n)
	}
	return out
}

func joinList(items []string) string {
	out := ""
	for i, s := range items {
		if i > 0 {
			out += "; "
		}
		out += s
	}
	return out
}

// printProtected warns that the change set touches protected paths, says
// why they are protected, and how an apply gets past them.
func printProtected(w io.Writer, st *wtx.Stage, pp []wtx.ProtectedPath) {
	if len(pp) == 0 {
		return
	}
	const maxNamed = 4
	var names []string
	var git, proj, sel bool
	for i, p := range pp {
		git = git || p.Reason == wtx.ProtectGit
		proj = proj || p.Reason == wtx.ProtectProject
		sel = sel || p.Reason == wtx.ProtectSelector
		if i == maxNamed {
			names = append(names, fmt.Sprintf("… %d more", len(pp)-maxNamed))
			break
		}
		names = append(names, quote.Path(p.Path))
	}
	var whys []string
	if git {
		whys = append(whys, ".git is protected by default: hooks and configuration there run code")
	}
	if proj {
		whys = append(whys, wtx.ProjectFileName+" is protected by default: it sets what every later stage protects")
	}
	if sel || len(whys) == 0 {
		whys = append(whys, "they match --protect selectors")
	}
	why := strings.Join(whys, "; ")
	ex := ""
	for _, sel := range wtx.ExcludeSelectors(pp) {
		ex += " --exclude " + quote.Shell(sel)
	}
	fmt.Fprintf(w, "wtx: warning: %d path(s) are protected (%s): %s\n", len(pp), why, strings.Join(names, ", "))
	fmt.Fprintf(w, "wtx: hint: 'wtx apply %s --approve' writes them; 'wtx apply %s%s' applies the rest and leaves them staged\n", st.ID(), st.ID(), ex)
}

// printRootMode says that the command changed the workspace root's own
// mode, which wtx does not apply.
func printRootMode(w io.Writer, rm *wtx.RootModeChange) {
	if rm != nil {
		fmt.Fprintf(w, "wtx: %s\n", rm.Notice())
	}
}

// stoppedLine names the processes a command left running that were
// stopped after it, or is "" when there were none.
func stoppedLine(procs []wtx.StoppedProcess) string {
	if len(procs) == 0 {
		return ""
	}
	const maxNamed = 4
	var names []string
	seen := map[string]bool{}
	for _, p := range procs {
		n := quote.Path(p.Comm)
		if seen[n] {
			continue
		}
		seen[n] = true
		if len(names) == maxNamed {
			names = append(names, "…")
			break
		}
		names = append(names, n)
	}
	noun := "processes"
	if len(procs) == 1 {
		noun = "process"
	}
	return fmt.Sprintf("wtx: stopped %d %s the command left running (%s)", len(procs), noun, strings.Join(names, ", "))
}

// signalName names a signal as the shell does (SIGKILL), given its
// description (killed).
func signalName(desc string) string {
	for n := syscall.Signal(1); n < 65; n++ {
		if n.String() == desc {
			if name := unix.SignalName(n); name != "" {
				return name
			}
		}
	}
	return "signal " + strconv.Quote(desc)
}
