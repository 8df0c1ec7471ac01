package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"charm.land/bubbles/v2/help"
	"charm.land/bubbles/v2/key"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// reviewStage is what the review needs of a stage; *wtx.Stage has it.
type reviewStage interface {
	ID() string
	Name() string
	Backend() string
	Changes(ctx context.Context, paths []string) (*wtx.ChangeSet, error)
	FileDiffs(ctx context.Context, cs *wtx.ChangeSet) ([]wtx.FileDiff, error)
	Protected(cs *wtx.ChangeSet) []wtx.ProtectedPath
	Apply(ctx context.Context, opts wtx.ApplyOptions) (*wtx.ApplyResult, error)
	Read(ctx context.Context, path string) (*wtx.FileResult, error)
	Write(ctx context.Context, path string, data []byte, opts wtx.WriteOptions) (*wtx.FileResult, error)
	Drop(ctx context.Context) error
}

// reviewMode is what the review is doing: browsing, asking to confirm,
// reading a search, or showing help.
type reviewMode int

const (
	modeBrowse reviewMode = iota
	modeConfirmApply
	modeConfirmDrop
	modeHelp
	modeSearch
)

// tabWidth is where the review's tab stops are, as git's pager shows them.
const tabWidth = 8

// hscrollStep is how far ←/→ move the diff sideways.
const hscrollStep = 8

// reviewKeys are the review's key bindings.
type reviewKeys struct {
	Up, Down, Top, Bottom, Focus, Toggle, Skip, Select, All, None, Apply, Drop, Approve,
	PageUp, PageDown, Left, Right, Wrap, Search, Edit, Help, Quit key.Binding
}

func newReviewKeys() reviewKeys {
	b := func(help, desc string, keys ...string) key.Binding {
		return key.NewBinding(key.WithKeys(keys...), key.WithHelp(help, desc))
	}
	return reviewKeys{
		Up:       b("↑/k", "previous file or hunk", "up", "k"),
		Down:     b("↓/j", "next file or hunk", "down", "j"),
		Top:      b("g", "first file or hunk", "g", "home"),
		Bottom:   b("G", "last file or hunk", "G", "end"),
		Focus:    b("tab", "hunks", "tab", "enter"),
		Toggle:   b("space", "select", "space"),
		Skip:     b("s", "skip", "s"),
		Select:   b("y", "select", "y"),
		All:      b("a", "select everything", "a"),
		None:     b("n", "skip everything", "n"),
		Apply:    b("A", "apply", "A"),
		Drop:     b("D", "drop", "D"),
		Approve:  b("p", "approve protected", "p"),
		PageUp:   b("pgup/u", "scroll the diff up", "pgup", "u"),
		PageDown: b("pgdn/f", "scroll the diff down", "pgdown", "f"),
		Left:     b("←/h", "scroll the diff left", "left", "h"),
		Right:    b("→/l", "scroll the diff right", "right", "l"),
		Wrap:     b("w", "wrap long lines", "w"),
		Search:   b("/", "search", "/"),
		Edit:     b("e", "edit staged copy", "e"),
		Help:     b("?", "help", "?"),
		Quit:     b("q", "quit", "q", "ctrl+c", "esc"),
	}
}

// ShortHelp is the one-line help: what fits 80 columns comes first.
func (k reviewKeys) ShortHelp() []key.Binding {
	return []key.Binding{k.Toggle, k.Apply, k.Drop, k.Search, k.Help, k.Quit, k.Focus, k.Approve, k.Edit, k.Right, k.Wrap}
}

// FullHelp is the help page, where each key says more than fits the
// one-line help.
func (k reviewKeys) FullHelp() [][]key.Binding {
	long := func(b key.Binding, desc string) key.Binding {
		b.SetHelp(b.Help().Key, desc)
		return b
	}
	return [][]key.Binding{
		{k.Up, k.Down, k.Top, k.Bottom, long(k.Focus, "switch between files and hunks"), k.PageUp, k.PageDown},
		{long(k.Toggle, "select or skip"), k.Select, k.Skip, k.All, k.None, long(k.Approve, "approve protected paths")},
		{k.Left, k.Right, k.Wrap, long(k.Search, "search paths and diffs"), long(k.Edit, "edit staged copy ($EDITOR)")},
		{long(k.Apply, "apply the selection"), long(k.Drop, "drop the stage"), k.Help, k.Quit},
	}
}

// reviewModel is the state of wtx review. Update and View are pure: all
// I/O runs in the commands Update returns.
type reviewModel struct {
	ctx context.Context
	st  reviewStage
	// id, name and backend are read once: the stage itself is only
	// touched by commands, which run on their own goroutines.
	id, name, backend string
	keys              reviewKeys
	help              help.Model
	color             bool
	// getenv reads $VISUAL and $EDITOR for e.
	getenv func(string) string

	cs    *wtx.ChangeSet
	files []wtx.FileDiff
	// on holds, per file, whether it is selected; for a file that can be
	// applied hunk by hunk, one flag per hunk.
	on [][]bool
	// protected maps a protected path of the change set to why.
	protected map[string]wtx.ProtectedPath
	approve   bool // protected paths are approved for the next apply
	loaded    bool // a change set was shown before: a reload keeps choices

	cur       int  // the file under the cursor
	hunk      int  // the hunk under the cursor, with focusDiff
	focusDiff bool // the cursor moves over the current file's hunks
	scroll    int  // first line of the diff pane shown
	xoff      int  // first column of the diff pane shown
	wrap      bool // long diff lines wrap instead of scrolling sideways

	query, lastQuery string // the search being typed, the last one run

	width, height int
	mode          reviewMode
	status        string // the last outcome, shown at the bottom
	err           error
	done          bool // the stage settled or was dropped
	quitting      bool
}

// loadedMsg carries a freshly scanned change set.
type loadedMsg struct {
	cs        *wtx.ChangeSet
	files     []wtx.FileDiff
	protected []wtx.ProtectedPath
	err       error
}

// appliedMsg reports an apply.
type appliedMsg struct {
	res *wtx.ApplyResult
	err error
}

// droppedMsg reports a drop.
type droppedMsg struct{ err error }

// editedMsg reports an edit of a staged file in $EDITOR.
type editedMsg struct {
	path   string
	status string
	err    error
}

func newReviewModel(ctx context.Context, st reviewStage, color bool) reviewModel {
	h := help.New()
	return reviewModel{ctx: ctx, st: st, id: st.ID(), name: st.Name(), backend: st.Backend(), keys: newReviewKeys(), help: h, color: color,
		getenv: os.Getenv, width: 100, height: 30}
}

func (m reviewModel) load() tea.Msg {
	cs, err := m.st.Changes(m.ctx, nil)
	if err != nil {
		return loadedMsg{err: err}
	}
	files, err := m.st.FileDiffs(m.ctx, cs)
	return loadedMsg{cs: cs, files: files, protected: m.st.Protected(cs), err: err}
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
		m.reload(msg)
		return m, nil
	case appliedMsg:
		m.mode = modeBrowse
		if msg.err != nil {
			m.status = "apply refused: " + errMessage(msg.err)
			switch wtx.AsError(msg.err).Code {
			case wtx.CodeProtected:
				m.status += "; p approves them, s skips them"
			case wtx.CodeChangedSinceReview:
				m.status = "apply refused: the selection changed since it was reviewed; nothing was written"
			}
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
		m.approve = false
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
	case editedMsg:
		switch {
		case msg.err != nil:
			m.status = "edit of " + quote.Path(msg.path) + ": " + errMessage(msg.err)
		default:
			m.status = msg.status
		}
		return m, m.load
	case editReadyMsg:
		return m, m.runEditor(msg)
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

// reload takes a fresh change set. The first one starts with everything
// selected; after that every choice is kept by path: what was skipped stays
// skipped (a skipped file is never applied by the next A), a file whose
// hunks were partly applied keeps the rest unselected, and a path new
// since the last scan starts unselected.
func (m *reviewModel) reload(msg loadedMsg) {
	prev := map[string][]bool{}
	for i, f := range m.files {
		prev[f.Change.Path] = m.on[i]
	}
	curPath := ""
	if m.cur < len(m.files) {
		curPath = m.files[m.cur].Change.Path
	}
	m.cs, m.files = msg.cs, msg.files
	m.protected = map[string]wtx.ProtectedPath{}
	for _, p := range msg.protected {
		m.protected[p.Path] = p
	}
	m.on = make([][]bool, len(m.files))
	fresh := 0
	for i, f := range m.files {
		n := 1
		if f.Hunkable {
			n = len(f.Hunks)
		}
		flags := make([]bool, n)
		old, seen := prev[f.Change.Path]
		switch {
		case !m.loaded:
			for j := range flags {
				flags[j] = true
			}
		case !seen:
			fresh++
		case len(old) == n:
			copy(flags, old)
		case allOn(old):
			// Its hunks were renumbered (an edit in the stage): still
			// wholly selected.
			for j := range flags {
				flags[j] = true
			}
		}
		// Otherwise its hunks were renumbered after the selected ones
		// landed: what is left was not selected, and stays so.
		m.on[i] = flags
	}
	m.cur = 0
	for i, f := range m.files {
		if f.Change.Path == curPath {
			m.cur = i
		}
	}
	m.cur = min(m.cur, max(0, len(m.files)-1))
	m.hunk, m.scroll, m.focusDiff = 0, 0, false
	if fresh > 0 && m.status == "" {
		m.status = fmt.Sprintf("%d path(s) new since the last scan: not selected", fresh)
	}
	if len(m.files) == 0 && m.status == "" {
		m.status = "nothing staged: the change set is empty"
	}
	m.loaded = true
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
	case modeSearch:
		return m.searchKey(k)
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
	case key.Matches(k, ks.Top):
		m.move(-len(m.files) - 1<<20)
	case key.Matches(k, ks.Bottom):
		m.move(len(m.files) + 1<<20)
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
	case key.Matches(k, ks.Right):
		if !m.wrap && len(m.files) > 0 {
			widest := 0
			for _, l := range m.diffLines(m.cur) {
				widest = max(widest, ansi.StringWidth(l.text))
			}
			// Scroll no further than shows the end of the widest line.
			m.xoff = min(m.xoff+hscrollStep, max(0, widest-max(10, m.width)+hscrollStep))
		}
	case key.Matches(k, ks.Left):
		m.xoff = max(0, m.xoff-hscrollStep)
	case key.Matches(k, ks.Wrap):
		m.wrap, m.xoff = !m.wrap, 0
	case key.Matches(k, ks.Approve):
		m.approve = !m.approve
		if m.approve {
			m.status = fmt.Sprintf("protected paths approved for the next apply (%d in the change set)", len(m.protected))
		} else {
			m.status = "protected paths not approved"
		}
	case key.Matches(k, ks.Search):
		m.mode, m.query = modeSearch, ""
	case key.Matches(k, ks.Edit):
		return m, m.edit()
	case key.Matches(k, ks.Apply):
		if len(m.files) == 0 {
			return m, nil
		}
		paths, _ := m.selection()
		if len(paths) == 0 {
			m.status = "nothing selected"
			return m, nil
		}
		if n := m.selectedProtected(); n > 0 && !m.approve {
			m.status = fmt.Sprintf("%d selected path(s) are protected: p approves them, s skips them", n)
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

// searchKey reads the search text; enter runs it (an empty one repeats
// the last), esc cancels.
func (m reviewModel) searchKey(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	switch k.String() {
	case "esc", "ctrl+c":
		m.mode = modeBrowse
		return m, nil
	case "enter":
		m.mode = modeBrowse
		q := m.query
		if q == "" {
			q = m.lastQuery
		}
		if q != "" {
			m.lastQuery = q
			m.search(q)
		}
		return m, nil
	case "backspace":
		if r := []rune(m.query); len(r) > 0 {
			m.query = string(r[:len(r)-1])
		}
		return m, nil
	}
	if k.Text != "" {
		m.query += k.Text
	}
	return m, nil
}

// search moves to the next file, after the one under the cursor and round
// again, whose path or diff holds q, and scrolls its diff to the first line
// that does.
func (m *reviewModel) search(q string) {
	n := len(m.files)
	for step := 1; step <= n; step++ {
		i := (m.cur + step) % n
		f := m.files[i]
		line := -1
		if !strings.Contains(f.Change.Path, q) {
			for j, l := range m.diffLines(i) {
				if strings.Contains(l.text, q) {
					line = j
					break
				}
			}
			if line < 0 {
				continue
			}
		}
		m.cur, m.focusDiff, m.hunk, m.xoff = i, false, 0, 0
		// The matching line comes into view with two lines above it, or
		// the whole diff when it fits.
		m.scroll = 0
		if rows := len(m.diffLines(i)); line > 0 && rows > m.diffHeight() {
			m.scroll = max(0, line-2)
		}
		m.status = fmt.Sprintf("/%s: %s", quote.Text(q), quote.Path(f.Change.Path))
		return
	}
	m.status = fmt.Sprintf("/%s: no path or diff line holds it", quote.Text(q))
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
	m.scroll, m.xoff = 0, 0
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

// selectedProtected counts the selected protected paths.
func (m reviewModel) selectedProtected() int {
	n := 0
	for i, f := range m.files {
		if _, ok := m.protected[f.Change.Path]; ok && anyOn(m.on[i]) {
			n++
		}
	}
	return n
}

// applyOptions is the apply of the selection shown, bound to its digest.
func (m reviewModel) applyOptions() wtx.ApplyOptions {
	paths, hunks := m.selection()
	opts := wtx.ApplyOptions{Paths: paths, Hunks: hunks, Approve: m.approve}
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

// edit opens the staged copy of the file under the cursor in $VISUAL or
// $EDITOR (vi when neither is set): the content goes to a private temporary
// file, and what the editor leaves there is written back into the stage as
// a per-file write bound to the content read (refused if the stage's copy
// changed meanwhile). The workspace is not touched.
func (m reviewModel) edit() tea.Cmd {
	if len(m.files) == 0 {
		return nil
	}
	c := m.files[m.cur].Change
	if c.Action == "deleted" || c.Type != "file" {
		return func() tea.Msg {
			return editedMsg{path: c.Path, status: "e edits files the stage holds; " + quote.Path(c.Path) + " is not one"}
		}
	}
	editor := m.getenv("VISUAL")
	if editor == "" {
		editor = m.getenv("EDITOR")
	}
	if editor == "" {
		editor = "vi"
	}
	st, ctx := m.st, m.ctx
	return func() tea.Msg {
		rd, err := st.Read(ctx, c.Path)
		if err != nil {
			return editedMsg{path: c.Path, err: err}
		}
		dir, err := os.MkdirTemp("", "wtx-edit-")
		if err != nil {
			return editedMsg{path: c.Path, err: err}
		}
		base := filepath.Base(c.Path)
		if !utf8.ValidString(base) || strings.ContainsAny(base, "\n\r") {
			base = "staged"
		}
		tmp := filepath.Join(dir, base)
		if err := os.WriteFile(tmp, rd.Content, 0o600); err != nil {
			os.RemoveAll(dir)
			return editedMsg{path: c.Path, err: err}
		}
		return editReadyMsg{path: c.Path, editor: editor, dir: dir, tmp: tmp, read: rd}
	}
}

// editReadyMsg carries a staged file copied out for the editor.
type editReadyMsg struct {
	path, editor, dir, tmp string
	read                   *wtx.FileResult
}

// runEditor runs the editor on the copy, then stages what it left there.
func (m reviewModel) runEditor(e editReadyMsg) tea.Cmd {
	// The editor is a shell word list, as git runs core.editor.
	cmd := exec.Command("/bin/sh", "-c", e.editor+` "$@"`, e.editor, e.tmp)
	st, ctx, c, editor, dir, tmp, rd := m.st, m.ctx, wtx.Change{Path: e.path}, e.editor, e.dir, e.tmp, e.read
	return tea.ExecProcess(cmd, func(runErr error) tea.Msg {
		defer os.RemoveAll(dir)
		if runErr != nil {
			return editedMsg{path: c.Path, err: fmt.Errorf("%s: %w; the stage is unchanged", editor, runErr)}
		}
		data, err := os.ReadFile(tmp)
		if err != nil {
			return editedMsg{path: c.Path, err: err}
		}
		if bytes.Equal(data, rd.Content) {
			return editedMsg{path: c.Path, status: "edit of " + quote.Path(c.Path) + ": unchanged"}
		}
		if _, err := st.Write(ctx, c.Path, data, wtx.WriteOptions{ExpectHash: rd.Digest}); err != nil {
			return editedMsg{path: c.Path, err: err}
		}
		return editedMsg{path: c.Path, status: "staged your edit of " + quote.Path(c.Path) + " (the workspace is untouched)"}
	})
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
		b.WriteString(m.keysView())
		b.WriteString("\n\nA path is applied whole, or (a text file modified in the stage) hunk by hunk:\n" +
			"tab moves the cursor onto the file's hunks. Deletions and type changes are\n" +
			"always listed. Apply is bound to the digest of the selection shown: if the\n" +
			"stage changed since, it is refused and nothing is written. Paths marked !\n" +
			"are protected (.git, .wtx.toml by default): p approves them to apply.\n" +
			"What you skip stays skipped after an apply. e edits the staged copy.\n\npress any key")
		return b.String()
	}
	b.WriteString(m.header() + "\n")
	b.WriteString(m.listView())
	b.WriteString(m.separator() + "\n")
	b.WriteString(m.diffView())
	b.WriteString(m.footer())
	return b.String()
}

// keysView lists every key in two columns, as wide as the screen allows.
func (m reviewModel) keysView() string {
	var cells []string
	for _, group := range m.keys.FullHelp() {
		for _, k := range group {
			h := k.Help()
			cells = append(cells, fmt.Sprintf("%-7s %s", h.Key, h.Desc))
		}
	}
	colw := max(10, m.width/2)
	rows := (len(cells) + 1) / 2
	var b strings.Builder
	for r := 0; r < rows; r++ {
		left := ansi.Truncate(cells[r], colw-1, "…")
		line := left
		if r+rows < len(cells) {
			line += strings.Repeat(" ", max(1, colw-ansi.StringWidth(left))) + ansi.Truncate(cells[r+rows], colw, "…")
		}
		b.WriteString(strings.TrimRight(line, " ") + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// header is the first line: the stage, its counts and the selection.
func (m reviewModel) header() string {
	c := m.cs.Counts
	sel := 0
	for i := range m.files {
		if anyOn(m.on[i]) {
			sel++
		}
	}
	who := m.id
	if m.name != "" {
		who = quote.Text(m.name)
	}
	counts := fmt.Sprintf("%s %s %s", m.paint(styleAdded, fmt.Sprintf("+%d", c.Added)),
		m.paint(styleModified, fmt.Sprintf("~%d", c.Modified)), m.paint(styleDeleted, fmt.Sprintf("-%d", c.Deleted)))
	if m.width >= 100 {
		counts = fmt.Sprintf("%s %s %s", m.paint(styleAdded, fmt.Sprintf("+%d added", c.Added)),
			m.paint(styleModified, fmt.Sprintf("~%d modified", c.Modified)), m.paint(styleDeleted, fmt.Sprintf("-%d deleted", c.Deleted)))
	}
	line := fmt.Sprintf("%s %s (%s)  %s  selected %d/%d", m.paint(styleTitle, "wtx review"), who, m.backend, counts, sel, len(m.files))
	return ansi.Truncate(line, max(10, m.width), "…")
}

// listHeight is how many rows the file list gets: every file when they fit
// in half the screen, else half of it.
func (m reviewModel) listHeight() int {
	return max(1, min(len(m.files), max(3, (m.height-4)/2)))
}

func (m reviewModel) diffHeight() int {
	return max(3, m.height-m.listHeight()-4)
}

// listStart is the first file the list shows: the cursor stays in view.
func (m reviewModel) listStart() int {
	h := m.listHeight()
	if m.cur >= h {
		return m.cur - h + 1
	}
	return 0
}

func (m reviewModel) listView() string {
	var b strings.Builder
	h := m.listHeight()
	start := m.listStart()
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
		mark := " " // between the box and the letter: ! marks a protected path
		if pp, ok := m.protected[f.Change.Path]; ok {
			mark = "!"
			note = strings.TrimSpace(note + "  protected: " + pp.Detail())
			if m.approve {
				note += " (approved)"
			}
		}
		line := fmt.Sprintf("%s%s%s %s", box, mark, letter, quote.Path(f.Change.Path))
		if note != "" {
			line += "  " + note
		}
		line = ansi.Truncate(line, max(10, m.width), "…")
		if i == m.cur && !m.focusDiff {
			line = m.paint(styleCursor, line)
		} else {
			line = m.paint(style, line)
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// separator divides the list from the diff and says where the list is:
// which file of how many, and the rows shown when they are not all.
func (m reviewModel) separator() string {
	w := max(10, m.width)
	label := ""
	if n := len(m.files); n > 0 {
		label = fmt.Sprintf(" %d of %d ", m.cur+1, n)
		if h := m.listHeight(); h < n {
			start := m.listStart()
			label = fmt.Sprintf(" %d of %d (rows %d-%d) ", m.cur+1, n, start+1, start+h)
		}
		if n := len(m.protected); n > 0 {
			if m.approve {
				label += fmt.Sprintf("─ ! %d protected: approved ", n)
			} else {
				label += fmt.Sprintf("─ ! %d protected: p approves ", n)
			}
		}
		if m.xoff > 0 {
			label += fmt.Sprintf("─ column %d ", m.xoff+1)
		}
		if m.wrap {
			label += "─ wrapped "
		}
	}
	line := "──" + label
	line += strings.Repeat("─", max(0, w-ansi.StringWidth(line)))
	return m.paint(styleFaint, ansi.Truncate(line, w, ""))
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

// lineKind says how a line of the diff pane is styled.
type lineKind int

const (
	lineContext lineKind = iota
	lineMeta
	lineHunk
	lineHunkCursor
	lineAdded
	lineDeleted
)

// diffLine is one line of the diff pane, as plain text: tabs expanded,
// control characters made visible.
type diffLine struct {
	text string
	kind lineKind
}

// diffLines renders file i's diff as the pane's lines, before they are cut
// to the pane's width.
func (m reviewModel) diffLines(i int) []diffLine {
	f := m.files[i]
	var lines []diffLine
	add := func(text string, kind lineKind) {
		for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
			lines = append(lines, diffLine{expandLine(l, 0), kind})
		}
	}
	switch {
	case f.Unavailable:
		add("(the base content of this path is gone: its workspace copy changed since the stage opened)", lineContext)
	case f.Header == "" && len(f.Hunks) == 0:
		add("(a directory: "+f.Change.Action+")", lineContext)
	default:
		add(f.Header, lineMeta)
	}
	for j, hk := range f.Hunks {
		body := strings.SplitN(hk, "\n", 2)
		mark := ""
		if f.Hunkable {
			mark = "[ ] "
			if m.on[i][j] {
				mark = "[x] "
			}
		}
		kind := lineHunk
		if m.focusDiff && i == m.cur && j == m.hunk {
			kind = lineHunkCursor
		}
		lines = append(lines, diffLine{expandLine(fmt.Sprintf("%s%s  hunk %d", mark, body[0], j+1), 0), kind})
		if len(body) < 2 {
			continue
		}
		for _, l := range strings.Split(strings.TrimSuffix(body[1], "\n"), "\n") {
			kind := lineContext
			switch {
			case strings.HasPrefix(l, "+"):
				kind = lineAdded
			case strings.HasPrefix(l, "-"):
				kind = lineDeleted
			}
			// The first column is the diff's own (+, - or space): tab
			// stops count from the content after it, so a changed line
			// and its unchanged neighbours line up.
			if l != "" {
				l = l[:1] + expandLine(l[1:], 0)
			}
			lines = append(lines, diffLine{l, kind})
		}
	}
	return lines
}

// expandLine makes s safe and even on a terminal: tabs become spaces to the
// next stop (counted from column col), control characters and bytes that
// are not UTF-8 become visible escapes. No byte of a file can drive the
// terminal or shift its neighbours.
func expandLine(s string, col int) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\t':
			n := tabWidth - col%tabWidth
			b.WriteString(strings.Repeat(" ", n))
			col += n
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
			col += 4
		case r < 0x20 || r == 0x7f:
			b.WriteByte('^')
			b.WriteByte(byte(r) ^ 0x40)
			col += 2
		case r >= 0x80 && r < 0xa0, r == 0x2028, r == 0x2029, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, "\\u%04x", r)
			col += 6
		default:
			b.WriteRune(r)
			col += ansi.StringWidth(string(r))
		}
		i += size
	}
	return b.String()
}

// fit cuts a pane line to the pane: from column xoff, width columns, with
// › where it goes on past the right edge and ‹ where the left is hidden.
// With wrap, the line is broken into as many rows as it needs instead.
func (m reviewModel) fit(text string) []string {
	w := max(10, m.width)
	tw := ansi.StringWidth(text)
	if m.wrap {
		var rows []string
		for start := 0; start < tw || start == 0; start += w {
			rows = append(rows, ansi.Cut(text, start, start+w))
			if tw <= w {
				break
			}
		}
		return rows
	}
	left := ""
	if m.xoff > 0 && tw > 0 {
		left = "‹"
	}
	if tw-m.xoff <= w-len(left) {
		return []string{left + ansi.Cut(text, m.xoff, tw)}
	}
	return []string{left + ansi.Cut(text, m.xoff, m.xoff+w-1-len([]rune(left))) + "›"}
}

func (m reviewModel) diffView() string {
	h := m.diffHeight()
	if len(m.files) == 0 {
		return strings.Repeat("\n", h)
	}
	var rows []string
	for _, l := range m.diffLines(m.cur) {
		for _, r := range m.fit(l.text) {
			switch l.kind {
			case lineMeta:
				r = m.paint(styleMeta, r)
			case lineHunk:
				r = m.paint(styleHunk, r)
			case lineHunkCursor:
				r = m.paint(styleCursor, r)
			case lineAdded:
				r = m.paint(styleAdded, r)
			case lineDeleted:
				r = m.paint(styleDeleted, r)
			}
			rows = append(rows, r)
		}
	}
	start := min(m.scroll, max(0, len(rows)-1))
	end := min(len(rows), start+h)
	out := strings.Join(rows[start:end], "\n") + "\n"
	for i := end - start; i < h; i++ {
		out += "\n"
	}
	return out
}

func (m reviewModel) footer() string {
	w := max(10, m.width)
	switch m.mode {
	case modeConfirmApply:
		paths, hunks := m.selection()
		what := fmt.Sprintf("%d path(s)", len(paths))
		if len(hunks) > 0 {
			what += fmt.Sprintf(", %d of them in part", len(hunks))
		}
		if n := m.selectedProtected(); n > 0 {
			what += fmt.Sprintf(", %d protected (approved)", n)
		}
		return m.paint(styleWarn, ansi.Truncate(fmt.Sprintf("apply %s (digest %s)? y/n", what, short(m.digest())), w, "…")) + "\n"
	case modeConfirmDrop:
		return m.paint(styleWarn, ansi.Truncate(fmt.Sprintf("drop %s and everything staged in it? y/n", m.id), w, "…")) + "\n"
	case modeSearch:
		return ansi.Truncate("/"+quote.Text(m.query)+"█", w, "…") + "\n" + m.paint(styleFaint, "enter finds the next path or diff line holding it (empty: the last search); esc cancels")
	}
	status := m.status
	if status == "" {
		status = "digest " + short(m.digest())
	}
	return ansi.Truncate(status, w, "…") + "\n" + m.help.ShortHelpView(m.keys.ShortHelp())
}

func short(d string) string {
	if len(d) > 19 {
		return d[:19] + "…"
	}
	return d
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
			rm := newReviewModel(ctx, st, g.color())
			rm.getenv = g.getenv
			p := tea.NewProgram(rm, tea.WithContext(ctx),
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
