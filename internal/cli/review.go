package cli

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// reviewStage is what the review needs of a stage; *wtx.Stage has it.
type reviewStage interface {
	ID() string
	Backend() string
	Changes(ctx context.Context, paths []string) (*wtx.ChangeSet, error)
	FileDiffs(ctx context.Context, cs *wtx.ChangeSet) ([]wtx.FileDiff, error)
	Apply(ctx context.Context, opts wtx.ApplyOptions) (*wtx.ApplyResult, error)
	Drop(ctx context.Context) error
}

// reviewMode is what the review is doing: browsing, asking to confirm, or
// showing help.
type reviewMode int

const (
	modeBrowse reviewMode = iota
	modeConfirmApply
	modeConfirmDrop
	modeHelp
)

// reviewKeys are the review's key bindings.
type reviewKeys struct {
	Up, Down, Focus, Toggle, Skip, Select, All, None, Apply, Drop, PageUp, PageDown, Help, Quit key.Binding
}

func newReviewKeys() reviewKeys {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return reviewKeys{
		Up:       b("↑/k", "previous file or hunk", "up", "k"),
		Down:     b("↓/j", "next file or hunk", "down", "j"),
		Focus:    b("tab", "switch between files and hunks", "tab", "enter"),
		Toggle:   b("space", "select or skip", "space"),
		Skip:     b("s", "skip", "s"),
		Select:   b("y", "select", "y"),
		All:      b("a", "select everything", "a"),
		None:     b("n", "skip everything", "n"),
		Apply:    b("A", "apply the selection", "A"),
		Drop:     b("D", "drop the stage", "D"),
		PageUp:   b("pgup/u", "scroll the diff up", "pgup", "u"),
		PageDown: b("pgdn/f", "scroll the diff down", "pgdown", "f"),
		Help:     b("?", "help", "?"),
		Quit:     b("q", "quit", "q", "ctrl+c", "esc"),
	}
}

// ShortHelp is the one-line help.
func (k reviewKeys) ShortHelp() []key.Binding {
	return []key.Binding{k.Toggle, k.Focus, k.Apply, k.Drop, k.Help, k.Quit}
}

// FullHelp is the help page.
func (k reviewKeys) FullHelp() [][]key.Binding {
	return [][]key.Binding{
		{k.Up, k.Down, k.Focus, k.PageUp, k.PageDown},
		{k.Toggle, k.Select, k.Skip, k.All, k.None},
		{k.Apply, k.Drop, k.Help, k.Quit},
	}
}

// reviewModel is the state of wtx review. Update and View are pure: all
// I/O runs in the commands Update returns.
type reviewModel struct {
	ctx context.Context
	st  reviewStage
	// id and backend are read once: the stage itself is only touched by
	// commands, which run on their own goroutines.
	id, backend string
	keys        reviewKeys
	help        help.Model
	color       bool

	cs    *wtx.ChangeSet
	files []wtx.FileDiff
	// on holds, per file, whether it is selected; for a file that can be
	// applied hunk by hunk, one flag per hunk.
	on [][]bool

	cur       int  // the file under the cursor
	hunk      int  // the hunk under the cursor, with focusHunks
	focusDiff bool // the cursor moves over the current file's hunks
	scroll    int  // first line of the diff pane shown

	width, height int
	mode          reviewMode
	status        string // the last outcome, shown at the bottom
	err           error
	done          bool // the stage settled or was dropped
	quitting      bool
}

// loadedMsg carries a freshly scanned change set.
type loadedMsg struct {
	cs    *wtx.ChangeSet
	files []wtx.FileDiff
	err   error
}

// appliedMsg reports an apply.
type appliedMsg struct {
	res *wtx.ApplyResult
	err error
}

// droppedMsg reports a drop.
type droppedMsg struct{ err error }

func newReviewModel(ctx context.Context, st reviewStage, color bool) reviewModel {
	h := help.New()
	return reviewModel{ctx: ctx, st: st, id: st.ID(), backend: st.Backend(), keys: newReviewKeys(), help: h, color: color, width: 100, height: 30}
}

func (m reviewModel) load() tea.Msg {
	cs, err := m.st.Changes(m.ctx, nil)
	if err != nil {
		return loadedMsg{err: err}
	}
	files, err := m.st.FileDiffs(m.ctx, cs)
	return loadedMsg{cs: cs, files: files, err: err}
}

// Init scans the stage.
func (m reviewModel) Init() tea.Cmd { return m.load }

// Update handles one message.
func (m reviewModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.help.SetWidth(msg.Width)
		return m, nil
	case loadedMsg:
		if msg.err != nil {
			m.err = msg.err
			return m, nil
		}
		m.cs, m.files = msg.cs, msg.files
		m.on = make([][]bool, len(m.files))
		for i, f := range m.files {
			n := 1
			if f.Hunkable {
				n = len(f.Hunks)
			}
			m.on[i] = make([]bool, n)
			for j := range m.on[i] {
				m.on[i][j] = true
			}
		}
		m.cur, m.hunk, m.scroll, m.focusDiff = min(m.cur, max(0, len(m.files)-1)), 0, 0, false
		if len(m.files) == 0 && m.status == "" {
			m.status = "nothing staged: the change set is empty"
		}
		return m, nil
	case appliedMsg:
		m.mode = modeBrowse
		if msg.err != nil {
			m.status = "apply refused: " + errMessage(msg.err)
			return m, m.load
		}
		switch {
		case msg.res.OpID == "":
			m.status = "nothing to apply"
		case msg.res.Settled:
			m.status = fmt.Sprintf("applied %d path(s) as %s; the stage is settled", len(msg.res.Written), msg.res.OpID)
		default:
			m.status = fmt.Sprintf("applied %d path(s) as %s; the rest stays staged", len(msg.res.Written), msg.res.OpID)
		}
		if msg.res.Settled {
			m.done = true
		}
		return m, m.load
	case droppedMsg:
		m.mode = modeBrowse
		if msg.err != nil {
			m.status = "drop failed: " + errMessage(msg.err)
			return m, nil
		}
		m.status = "dropped " + m.id + "; the workspace is untouched"
		m.done, m.quitting = true, true
		return m, tea.Quit
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

func errMessage(err error) string {
	if e, ok := err.(*wtx.Error); ok {
		return quote.Text(e.Message)
	}
	return quote.Text(err.Error())
}

func (m reviewModel) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch m.mode {
	case modeHelp:
		m.mode = modeBrowse
		return m, nil
	case modeConfirmApply, modeConfirmDrop:
		if k.String() != "y" {
			m.mode, m.status = modeBrowse, "cancelled"
			return m, nil
		}
		if m.mode == modeConfirmDrop {
			st := m.st
			ctx := m.ctx
			return m, func() tea.Msg { return droppedMsg{err: st.Drop(ctx)} }
		}
		opts := m.applyOptions()
		st, ctx := m.st, m.ctx
		m.status = "applying…"
		return m, func() tea.Msg {
			res, err := st.Apply(ctx, opts)
			return appliedMsg{res: res, err: err}
		}
	}
	ks := m.keys
	switch {
	case key.Matches(k, ks.Quit):
		m.quitting = true
		return m, tea.Quit
	case key.Matches(k, ks.Help):
		m.mode = modeHelp
	case key.Matches(k, ks.Down):
		m.move(1)
	case key.Matches(k, ks.Up):
		m.move(-1)
	case key.Matches(k, ks.Focus):
		if len(m.files) > 0 && m.files[m.cur].Hunkable {
			m.focusDiff = !m.focusDiff
			m.hunk = 0
			m.scrollToHunk()
		} else {
			m.focusDiff = false
		}
	case key.Matches(k, ks.Toggle):
		m.set(toggle)
	case key.Matches(k, ks.Skip):
		m.set(off)
	case key.Matches(k, ks.Select):
		m.set(on)
	case key.Matches(k, ks.All), key.Matches(k, ks.None):
		v := key.Matches(k, ks.All)
		for i := range m.on {
			for j := range m.on[i] {
				m.on[i][j] = v
			}
		}
	case key.Matches(k, ks.PageDown):
		m.scroll += max(1, m.diffHeight()-2)
	case key.Matches(k, ks.PageUp):
		m.scroll = max(0, m.scroll-max(1, m.diffHeight()-2))
	case key.Matches(k, ks.Apply):
		if len(m.files) == 0 {
			return m, nil
		}
		if paths, _ := m.selection(); len(paths) == 0 {
			m.status = "nothing selected"
			return m, nil
		}
		m.mode = modeConfirmApply
	case key.Matches(k, ks.Drop):
		if m.done {
			return m, nil
		}
		m.mode = modeConfirmDrop
	}
	return m, nil
}

func (m *reviewModel) move(d int) {
	if len(m.files) == 0 {
		return
	}
	if m.focusDiff {
		m.hunk = min(max(0, m.hunk+d), len(m.files[m.cur].Hunks)-1)
		m.scrollToHunk()
		return
	}
	m.cur = min(max(0, m.cur+d), len(m.files)-1)
	m.scroll = 0
}

// scrollToHunk brings the hunk under the cursor to the top of the pane.
func (m *reviewModel) scrollToHunk() {
	if !m.focusDiff {
		m.scroll = 0
		return
	}
	f := m.files[m.cur]
	line := strings.Count(f.Header, "\n")
	for _, h := range f.Hunks[:m.hunk] {
		line += strings.Count(h, "\n")
	}
	m.scroll = line
}

type setOp int

const (
	toggle setOp = iota
	on
	off
)

// set selects or skips the hunk under the cursor (with the hunk focus) or
// the file under the cursor and every path beneath it. Skipping a path
// skips the directories above it too: selecting a directory would select
// it as well.
func (m *reviewModel) set(op setOp) {
	if len(m.files) == 0 {
		return
	}
	flags := m.on[m.cur]
	if m.focusDiff {
		flags[m.hunk] = apply(op, flags[m.hunk])
		if !flags[m.hunk] {
			m.skipAncestors(m.files[m.cur].Change.Path)
		}
		return
	}
	v := apply(op, allOn(flags))
	p := m.files[m.cur].Change.Path
	for i, f := range m.files {
		if f.Change.Path == p || strings.HasPrefix(f.Change.Path, p+"/") {
			for j := range m.on[i] {
				m.on[i][j] = v
			}
		}
	}
	if !v {
		m.skipAncestors(p)
	}
}

func (m *reviewModel) skipAncestors(p string) {
	for i, f := range m.files {
		if strings.HasPrefix(p, f.Change.Path+"/") {
			for j := range m.on[i] {
				m.on[i][j] = false
			}
		}
	}
}

func apply(op setOp, cur bool) bool {
	switch op {
	case on:
		return true
	case off:
		return false
	}
	return !cur
}

func allOn(flags []bool) bool {
	for _, f := range flags {
		if !f {
			return false
		}
	}
	return true
}

func anyOn(flags []bool) bool {
	for _, f := range flags {
		if f {
			return true
		}
	}
	return false
}

// selection returns the selected paths (as literal selectors) and the
// chosen hunks of partly selected files.
func (m reviewModel) selection() ([]string, map[string][]int) {
	var paths []string
	var hunks map[string][]int
	for i, f := range m.files {
		if !anyOn(m.on[i]) {
			continue
		}
		paths = append(paths, wtx.LiteralSelector(f.Change.Path))
		if allOn(m.on[i]) {
			continue
		}
		if hunks == nil {
			hunks = map[string][]int{}
		}
		for j, v := range m.on[i] {
			if v {
				hunks[f.Change.Path] = append(hunks[f.Change.Path], j+1)
			}
		}
	}
	sort.Strings(paths)
	return paths, hunks
}

// applyOptions is the apply of the selection shown, bound to its digest.
func (m reviewModel) applyOptions() wtx.ApplyOptions {
	paths, hunks := m.selection()
	opts := wtx.ApplyOptions{Paths: paths, Hunks: hunks}
	if m.cs != nil {
		if sel, err := m.cs.Select(paths); err == nil {
			opts.Expect = sel.Digest
		}
	}
	return opts
}

// digest is the changeset digest of the selection shown.
func (m reviewModel) digest() string {
	return m.applyOptions().Expect
}

// Styles of the review.
var (
	styleTitle    = lipgloss.NewStyle().Bold(true)
	styleAdded    = lipgloss.NewStyle().Foreground(lipgloss.Color("2"))
	styleDeleted  = lipgloss.NewStyle().Foreground(lipgloss.Color("1")).Bold(true)
	styleModified = lipgloss.NewStyle().Foreground(lipgloss.Color("3"))
	styleHunk     = lipgloss.NewStyle().Foreground(lipgloss.Color("6"))
	styleMeta     = lipgloss.NewStyle().Bold(true)
	styleFaint    = lipgloss.NewStyle().Faint(true)
	styleCursor   = lipgloss.NewStyle().Reverse(true)
	styleWarn     = lipgloss.NewStyle().Foreground(lipgloss.Color("5")).Bold(true)
)

func (m reviewModel) paint(s lipgloss.Style, text string) string {
	if !m.color {
		return text
	}
	return s.Render(text)
}

// View renders the review.
func (m reviewModel) View() tea.View {
	v := tea.NewView(m.render())
	v.AltScreen = true
	return v
}

func (m reviewModel) render() string {
	var b strings.Builder
	if m.err != nil {
		fmt.Fprintf(&b, "wtx review: %s\n\npress q to quit\n", errMessage(m.err))
		return b.String()
	}
	if m.cs == nil {
		return "wtx review: scanning the stage…\n"
	}
	if m.mode == modeHelp {
		b.WriteString(m.paint(styleTitle, "wtx review — keys") + "\n\n")
		b.WriteString(m.help.FullHelpView(m.keys.FullHelp()))
		b.WriteString("\n\nA path is applied whole, or (a text file modified in the stage) hunk by hunk:\n" +
			"tab moves the cursor onto the file's hunks. Deletions and type changes are\n" +
			"always listed. Apply is bound to the digest of the selection shown: if the\n" +
			"stage changed since, it is refused and nothing is written.\n\npress any key")
		return b.String()
	}
	c := m.cs.Counts
	sel, total := 0, len(m.files)
	for i := range m.files {
		if anyOn(m.on[i]) {
			sel++
		}
	}
	fmt.Fprintf(&b, "%s %s (%s)  %s %s %s  selected %d/%d\n",
		m.paint(styleTitle, "wtx review"), m.id, m.backend,
		m.paint(styleAdded, fmt.Sprintf("+%d added", c.Added)),
		m.paint(styleModified, fmt.Sprintf("~%d modified", c.Modified)),
		m.paint(styleDeleted, fmt.Sprintf("-%d deleted", c.Deleted)), sel, total)
	b.WriteString(m.listView())
	b.WriteString(m.paint(styleFaint, strings.Repeat("─", max(10, m.width))) + "\n")
	b.WriteString(m.diffView())
	b.WriteString(m.footer())
	return b.String()
}

// listHeight is how many rows the file list gets.
func (m reviewModel) listHeight() int {
	return max(1, min(len(m.files), max(3, (m.height-4)/3)))
}

func (m reviewModel) diffHeight() int {
	return max(3, m.height-m.listHeight()-4)
}

func (m reviewModel) listView() string {
	var b strings.Builder
	h := m.listHeight()
	start := 0
	if m.cur >= h {
		start = m.cur - h + 1
	}
	for i := start; i < len(m.files) && i < start+h; i++ {
		f := m.files[i]
		box := "[ ]"
		switch {
		case allOn(m.on[i]):
			box = "[x]"
		case anyOn(m.on[i]):
			box = "[~]"
		}
		letter, note, style := describe(f.Change)
		if f.Hunkable {
			n := 0
			for _, v := range m.on[i] {
				if v {
					n++
				}
			}
			note = strings.TrimSpace(fmt.Sprintf("%s  %d/%d hunks", note, n, len(f.Hunks)))
		}
		if f.Unavailable {
			note = strings.TrimSpace(note + "  (base content gone: changed in the workspace)")
		}
		line := fmt.Sprintf("%s %s %s", box, letter, quote.Path(f.Change.Path))
		if note != "" {
			line += "  " + note
		}
		line = truncate(line, m.width)
		if i == m.cur && !m.focusDiff {
			line = m.paint(styleCursor, line)
		} else {
			line = m.paint(style, line)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// describe returns a change's letter, what to mark about it, and its style.
// Deletions and type changes are never hidden; exec-bit and link-target
// changes are spelled out.
func describe(c wtx.Change) (string, string, lipgloss.Style) {
	switch c.Action {
	case "added":
		note := c.Type
		if c.Type == "symlink" {
			note = "symlink → " + quote.Path(c.Target)
		}
		return "A", note, styleAdded
	case "deleted":
		return "D", "deleted " + c.Before.Type, styleDeleted
	}
	b := c.Before
	var notes []string
	letter := "M"
	if b != nil && b.Type != c.Type {
		letter = "T"
		notes = append(notes, "type change: "+b.Type+" → "+c.Type)
	}
	if b != nil && b.Type == c.Type && b.Mode != c.Mode && c.Mode != "" {
		what := "mode"
		if execBit(b.Mode) != execBit(c.Mode) {
			what = "exec bit"
		}
		notes = append(notes, fmt.Sprintf("%s %s → %s", what, b.Mode, c.Mode))
	}
	if b != nil && c.Type == "symlink" && b.Type == "symlink" && b.Target != c.Target {
		notes = append(notes, "link target "+quote.Path(b.Target)+" → "+quote.Path(c.Target))
	}
	style := styleModified
	if letter == "T" {
		style = styleWarn
	}
	return letter, strings.Join(notes, ", "), style
}

func execBit(mode string) bool {
	var n uint32
	fmt.Sscanf(mode, "%o", &n)
	return n&0o111 != 0
}

func (m reviewModel) diffView() string {
	h := m.diffHeight()
	if len(m.files) == 0 {
		return strings.Repeat("\n", h)
	}
	f := m.files[m.cur]
	var lines []string
	add := func(text string, style *lipgloss.Style) {
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			l = truncate(l, m.width)
			if style != nil {
				l = m.paint(*style, l)
			}
			lines = append(lines, l)
		}
	}
	switch {
	case f.Unavailable:
		add("(the base content of this path is gone: its workspace copy changed since the stage opened)", nil)
	case f.Header == "" && len(f.Hunks) == 0:
		add("(a directory: "+f.Change.Action+")", nil)
	default:
		add(f.Header, &styleMeta)
	}
	for j, hk := range f.Hunks {
		body := strings.SplitN(hk, "\n", 2)
		mark := ""
		if f.Hunkable {
			mark = "[ ] "
			if m.on[m.cur][j] {
				mark = "[x] "
			}
		}
		head := fmt.Sprintf("%s%s  hunk %d", mark, body[0], j+1)
		head = truncate(head, m.width)
		if m.focusDiff && j == m.hunk {
			lines = append(lines, m.paint(styleCursor, head))
		} else {
			lines = append(lines, m.paint(styleHunk, head))
		}
		if len(body) == 2 {
			for _, l := range strings.Split(strings.TrimSuffix(body[1], "\n"), "\n") {
				t := truncate(l, m.width)
				switch {
				case strings.HasPrefix(l, "+"):
					t = m.paint(styleAdded, t)
				case strings.HasPrefix(l, "-"):
					t = m.paint(styleDeleted, t)
				}
				lines = append(lines, t)
			}
		}
	}
	start := min(m.scroll, max(0, len(lines)-1))
	end := min(len(lines), start+h)
	out := strings.Join(lines[start:end], "\n") + "\n"
	for i := end - start; i < h; i++ {
		out += "\n"
	}
	return out
}

func (m reviewModel) footer() string {
	switch m.mode {
	case modeConfirmApply:
		paths, hunks := m.selection()
		what := fmt.Sprintf("%d path(s)", len(paths))
		if len(hunks) > 0 {
			what += fmt.Sprintf(", %d of them in part", len(hunks))
		}
		return m.paint(styleWarn, fmt.Sprintf("apply %s (digest %s)? y/n", what, short(m.digest()))) + "\n"
	case modeConfirmDrop:
		return m.paint(styleWarn, fmt.Sprintf("drop %s and everything staged in it? y/n", m.id)) + "\n"
	}
	status := m.status
	if status == "" {
		status = "digest " + short(m.digest())
	}
	return truncate(status, m.width) + "\n" + m.help.ShortHelpView(m.keys.ShortHelp())
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
}

// truncate cuts s to width runes.
func truncate(s string, width int) string {
	if width <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= width {
		return s
	}
	return string(r[:width-1]) + "…"
}

func newReviewCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "review [T]",
		Short: "Review a stage interactively: read diffs, pick files and hunks, apply or drop",
		Long: `Open an interactive review of stage T on the terminal: the change set with its
counts (deletions and type changes are always listed; exec-bit and link-target
changes are marked), the diff of the file under the cursor, and keys to select
or skip a file or a single hunk, apply the selection, or drop the stage.

Every file starts selected. tab moves the cursor onto the hunks of a text file
modified in the stage, where space selects or skips one hunk; the hunks left
out stay staged. A applies the selection after a y/n prompt, always bound to
the changeset digest of the selection shown (as 'wtx apply --expect' does): if
the stage changed since it was shown, nothing is written. D drops the stage
after a y/n prompt. ? shows every key; q quits.

wtx review needs a terminal on stdin and stdout.`,
		Example: `  wtx review
  wtx review fmt            # the stage named fmt
  wtx run -- gofmt -w . && wtx review`,
		Args: maxOneStage,
		RunE: func(c *cobra.Command, args []string) error {
			if g.json {
				return usageError{msg: "wtx review is interactive and has no --json form; use 'wtx diff --json' and 'wtx apply --expect'"}
			}
			in, ok := g.io.In.(*os.File)
			if !ok || !g.io.OutTTY || !term.IsTerminal(int(in.Fd())) {
				return usageError{msg: "wtx review needs a terminal; use 'wtx diff' and 'wtx apply' in scripts"}
			}
			ctx := c.Context()
			ws, st, err := g.stageFor(c, stageArg(args))
			if err != nil {
				return err
			}
			defer ws.Close()
			if _, err := st.Changes(ctx, nil); err != nil {
				return err
			}
			p := tea.NewProgram(newReviewModel(ctx, st, g.color()), tea.WithContext(ctx),
				tea.WithInput(in), tea.WithOutput(g.io.Out))
			final, err := p.Run()
			if err != nil {
				return wtx.AsError(fmt.Errorf("review %s: %w", st.ID(), err))
			}
			if m, ok := final.(reviewModel); ok && m.status != "" {
				g.notice("wtx: %s", m.status)
			}
			return nil
		},
	}
}
