// Package mcpserve serves wtx to coding agents over the Model Context
// Protocol: begin, read, write, edit, rm, status, diff, apply, drop and run
// as tools with JSON schemas, answering errors with the same codes, repairs
// and conflicts as the command line's --json.
//
// Each tool call opens the workspace afresh, so the server sees stages that
// other wtx processes (a person at a terminal, say) made or changed, and
// every call runs the recovery of interrupted applies first.
package mcpserve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Config says which workspace the server works on and what it lets an
// agent do.
type Config struct {
	Dir     string // the workspace
	Options wtx.Options
	Version string
	// AllowApprove lets the apply tool's approve argument pass changes to
	// protected paths. Without it, protected paths are refused and a person
	// applies them from the command line: agents propose, people approve.
	AllowApprove bool
	// ProposeOnly leaves out every tool that changes the workspace (apply,
	// drop): agents work in stages, a person lands them.
	ProposeOnly bool
	// MaxRequest is the longest request line taken, in bytes; 0 means
	// DefaultMaxRequest.
	MaxRequest int
	// RunTimeout is how long the run tool lets a command run when the call
	// names no timeout, and MaxRunTimeout the longest a call may ask for;
	// 0 means DefaultRunTimeout and DefaultMaxRunTimeout.
	RunTimeout, MaxRunTimeout time.Duration
	// Log, when set, receives the server's log (bad request lines, say).
	Log *slog.Logger
}

// Run timeouts when the configuration names none.
const (
	DefaultRunTimeout    = 10 * time.Minute
	DefaultMaxRunTimeout = time.Hour
)

func (c Config) runTimeouts() (def, max time.Duration) {
	def, max = c.RunTimeout, c.MaxRunTimeout
	if max <= 0 {
		max = DefaultMaxRunTimeout
	}
	if def <= 0 {
		def = DefaultRunTimeout
	}
	if def > max {
		def = max
	}
	return def, max
}

// NewServer returns an MCP server with wtx's tools.
func NewServer(cfg Config) *mcp.Server {
	s, _ := newServer(cfg)
	return s
}

func newServer(cfg Config) (*mcp.Server, *handlers) {
	instructions := "wtx stages changes to the workspace " + cfg.Dir + ". Begin a stage, read and change files in it (the workspace is untouched), " +
		"check status or diff, then apply: all or nothing, refused if anything you read or changed moved in the workspace meanwhile. " +
		"Pass a read's digest as expect_hash to a later write or edit so it never clobbers a change made since. " +
		"Names and contents that are not UTF-8 travel base64-encoded in path_b64, content_b64, old_b64 and new_b64."
	if cfg.ProposeOnly {
		instructions = "wtx stages changes to the workspace " + cfg.Dir + ". This server only proposes: begin a stage, read and change files in it, " +
			"run commands in it and check status or diff; a person reviews the stage and applies it. The workspace itself is never changed from here. " +
			"Pass a read's digest as expect_hash to a later write or edit so it never clobbers a change made since. " +
			"Names and contents that are not UTF-8 travel base64-encoded in path_b64, content_b64, old_b64 and new_b64."
	}
	s := mcp.NewServer(&mcp.Implementation{Name: "wtx", Title: "wtx: transactions for a directory", Version: cfg.Version},
		&mcp.ServerOptions{Instructions: instructions, Logger: cfg.Log})
	// Every call acts for the agent: the library's gate asks the
	// authority table about it (T-003).
	cfg.Options.Actor = cfg.Actor()
	h := &handlers{cfg: cfg, base: context.Background()}
	def, max := cfg.runTimeouts()
	addTool(s, &mcp.Tool{Name: "begin", Description: "Open a new stage over the workspace; returns its id (tx). Nothing in the workspace changes."}, h.begin)
	addTool(s, &mcp.Tool{Name: "read", Description: "Read a file as the stage sees it (its own writes included) and record the read: if the workspace's copy changes before apply, apply refuses with refusal.stale-read. Returns the content (content_b64 when it is not UTF-8 text) and its digest."}, h.read)
	addTool(s, &mcp.Tool{Name: "write", Description: "Stage new content for a whole file (created if missing). expect_hash refuses unless the staged file still has that digest."}, h.write)
	addTool(s, &mcp.Tool{Name: "edit", Description: "Replace exact text in a staged file: old must occur exactly once (or set all). Zero or several matches are errors saying how many and where."}, h.edit)
	addTool(s, &mcp.Tool{Name: "rm", Description: "Delete a file in the stage."}, h.rm)
	addTool(s, &mcp.Tool{Name: "status", Description: "A stage's state, change set, changeset_digest, drift (changed paths that moved in the workspace) and stale reads."}, h.status)
	addTool(s, &mcp.Tool{Name: "diff", Description: "The stage's change set as a git-style unified diff, with its changeset_digest (pass it to apply as expect)."}, h.diff)
	if h.has("apply") {
		approve := "Changes to protected paths are refused (refusal.protected): this server does not approve them, a person applies them from the command line."
		if cfg.AllowApprove {
			approve = "Changes to protected paths need approve: true."
		}
		addTool(s, &mcp.Tool{Name: "apply", Description: "Apply the stage's change set (or the given paths) to the workspace, all or nothing. Refuses with a code, conflicts and repairs if anything changed behind the stage's back. " + approve}, h.apply)
	}
	if h.has("drop") {
		addTool(s, &mcp.Tool{Name: "drop", Description: "Discard a stage; the workspace is untouched."}, h.drop)
	}
	addMoreTools(s, h)
	addTool(s, &mcp.Tool{Name: "run", Description: fmt.Sprintf("Run a command (argv) inside the stage's view; its writes stay in the stage. Returns its exit code, captured output and the change set. "+
		"The command and everything it started are stopped when the call is cancelled or after timeout seconds (default %d, at most %d).", int(def.Seconds()), int(max.Seconds()))}, h.run)
	return s, h
}

// describe is the output schema of T as a description, not a contract the
// SDK enforces: the library's types write themselves (a name that is not
// UTF-8 adds path_b64, say), so extra members are allowed and none is
// required. A strict schema would turn such an answer into an error.
func describe[T any]() *jsonschema.Schema {
	rt := reflect.TypeFor[T]()
	if rt.Kind() == reflect.Pointer {
		rt = rt.Elem()
	}
	s, err := jsonschema.ForType(rt, &jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("output schema of %v: %v", rt, err)) // a programming error, found by any test that starts a server
	}
	var loosen func(*jsonschema.Schema)
	loosen = func(s *jsonschema.Schema) {
		if s == nil {
			return
		}
		s.Required, s.AdditionalProperties = nil, nil
		for _, p := range s.Properties {
			loosen(p)
		}
		for _, d := range s.Defs {
			loosen(d)
		}
		loosen(s.Items)
		for _, l := range [][]*jsonschema.Schema{s.PrefixItems, s.AllOf, s.AnyOf, s.OneOf} {
			for _, x := range l {
				loosen(x)
			}
		}
	}
	loosen(s)
	return s
}

// Serve runs the server on in/out until the client goes away (in ends) or
// ctx is cancelled. When in ends, every request read before answers: a
// call still running DefaultEndGrace later is stopped (a command with
// everything it started) and answers so. When ctx is cancelled, running
// commands are stopped at once.
func Serve(ctx context.Context, cfg Config, in io.ReadCloser, out io.WriteCloser) error {
	s, h := newServer(cfg)
	base, stop := context.WithCancel(ctx)
	defer stop()
	h.base = base
	if failpoint.Disabled("line-framing") {
		return s.Run(ctx, &mcp.IOTransport{Reader: in, Writer: out, MaxLineLength: cfg.MaxRequest})
	}
	return s.Run(ctx, &lineTransport{in: in, out: out, max: cfg.MaxRequest, log: cfg.Log, grace: DefaultEndGrace, stop: stop})
}

type handlers struct {
	cfg  Config
	base context.Context // cancelled when the server stops
}

// toolError carries a wtx error to the agent as the same JSON object the
// command line prints with --json, in the tools' own terms: messages name
// arguments, not command-line flags, and repairs are tool calls.
type toolError struct {
	e    *wtx.Error
	tool string
	tx   string // the stage the call named, for repairs
	has  func(tool string) bool
}

func (t toolError) Error() string {
	var b strings.Builder
	_ = answer.WriteError(&b, t.tool, renderError(t.e, t.tx, t.has), nil) // a strings.Builder does not fail
	return strings.TrimSuffix(b.String(), "\n")
}

func fail(err error) error { return toolError{e: wtx.AsError(err)} }

// fail is the error answer of a call of tool on stage tx.
func (h *handlers) fail(tool, tx string, err error) error {
	return toolError{e: wtx.AsError(err), tool: tool, tx: tx, has: h.has}
}

// Actor is who the server's agent is in the authority table (T-003).
func (c Config) Actor() wtx.Actor {
	switch {
	case c.ProposeOnly:
		return wtx.ActorProposingAgent
	case c.AllowApprove:
		return wtx.ActorApprovingAgent
	}
	return wtx.ActorAgent
}

// has reports whether the server offers tool, as the authority table says
// its agent may use it; "ignore_stale_reads" asks about apply's argument.
func (h *handlers) has(tool string) bool {
	may := func(a wtx.Action) bool { return wtx.VerdictOf(h.cfg.Actor(), a) != wtx.Refused }
	switch tool {
	case "apply", "undo", "apply_hunks":
		return may(wtx.ActionApply)
	case "drop":
		return may(wtx.ActionDrop)
	case "ignore_stale_reads":
		return may(wtx.ActionIgnoreStaleReads)
	case "rebase":
		// rebase writes only the stage, but moves its base onto what the
		// workspace holds now: a person's call on a propose-only server.
		return may(wtx.ActionApply) && !h.cfg.ProposeOnly
	}
	return true
}

func (h *handlers) open(ctx context.Context) (*wtx.Workspace, error) {
	return wtx.Open(ctx, h.cfg.Dir, h.cfg.Options)
}

func (h *handlers) stage(ctx context.Context, tx string) (*wtx.Workspace, *wtx.Stage, error) {
	ws, err := h.open(ctx)
	if err != nil {
		return nil, nil, err
	}
	st, err := ws.Stage(ctx, tx)
	if err != nil {
		ws.Close()
		return nil, nil, err
	}
	return ws, st, nil
}

// BeginIn are begin's arguments.
type BeginIn struct {
	Name       string   `json:"name,omitempty" jsonschema:"an optional name for the stage, usable instead of its id"`
	Exclude    []string `json:"exclude,omitempty" jsonschema:"selectors left out of the stage and never applied"`
	ExcludeB64 []string `json:"exclude_b64,omitempty" jsonschema:"the exclude selectors' exact bytes, base64 (instead of exclude)"`
	Protect    []string `json:"protect,omitempty" jsonschema:"selectors whose changes need a person's approval at apply"`
	ProtectB64 []string `json:"protect_b64,omitempty" jsonschema:"the protect selectors' exact bytes, base64 (instead of protect)"`
	Backend    string   `json:"backend,omitempty" jsonschema:"auto (the default), overlay, clone or copy"`
	At         *string  `json:"at,omitempty" jsonschema:"an op id (or unique prefix): the stage's view is the workspace as it was right after that op, later ops set back in the view only"`
}

// BeginOut answers begin: the command line's answer.
type BeginOut = answer.Begin

func (h *handlers) begin(ctx context.Context, _ *mcp.CallToolRequest, in BeginIn) (*mcp.CallToolResult, BeginOut, error) {
	var at string
	if in.At != nil {
		// Given but empty is refused, as the command line's --at '': an
		// agent that lost the op id must not get a stage on the present.
		if at = *in.At; at == "" {
			return nil, BeginOut{}, h.fail("begin", "", &wtx.Error{Code: wtx.CodeUsage, Message: "at needs an op id (find it with the log tool), or leave at out for a stage on the workspace as it is"})
		}
	}
	exclude, err := selectors("exclude", in.Exclude, in.ExcludeB64)
	if err != nil {
		return nil, BeginOut{}, h.fail("begin", "", err)
	}
	protect, err := selectors("protect", in.Protect, in.ProtectB64)
	if err != nil {
		return nil, BeginOut{}, h.fail("begin", "", err)
	}
	ws, err := h.open(ctx)
	if err != nil {
		return nil, BeginOut{}, h.fail("begin", "", err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, wtx.BeginOptions{Name: in.Name, Exclude: exclude, Protect: protect, Backend: in.Backend, At: at})
	if err != nil {
		return nil, BeginOut{}, h.fail("begin", "", err)
	}
	out := BeginOut{Tx: st.ID(), Name: st.Name(), Backend: st.Backend(), BackendSkipped: answer.OrEmpty(st.Skipped()), BaseDigest: st.BaseDigest()}
	if st.At() != "" {
		setBack, err := st.Reversed()
		if err != nil {
			return nil, BeginOut{}, h.fail("begin", "", err)
		}
		n := len(setBack)
		out.At, out.SetBack = st.At(), &n
	}
	return nil, out, nil
}

// PathIn names a file of a stage.
type PathIn struct {
	Tx      string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path    string `json:"path,omitempty" jsonschema:"a slash-separated path relative to the workspace root"`
	PathB64 string `json:"path_b64,omitempty" jsonschema:"the path's exact bytes, base64: for names that are not UTF-8 (instead of path)"`
}

// FileOut answers per-file tools: the command line's answer.
type FileOut = answer.File

func fileOut(st *wtx.Stage, r *wtx.FileResult) FileOut { return answer.NewFile(st.ID(), r) }

func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, in PathIn) (*mcp.CallToolResult, FileOut, error) {
	path, err := needPath(in.Path, in.PathB64)
	if err != nil {
		return nil, FileOut{}, h.fail("read", in.Tx, err)
	}
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, h.fail("read", in.Tx, err)
	}
	defer ws.Close()
	r, err := st.Read(ctx, path)
	if err != nil {
		return nil, FileOut{}, h.fail("read", in.Tx, err)
	}
	return nil, answer.NewRead(st.ID(), r), nil
}

// WriteIn are write's arguments.
type WriteIn struct {
	Tx         string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path       string `json:"path,omitempty" jsonschema:"a slash-separated path relative to the workspace root"`
	PathB64    string `json:"path_b64,omitempty" jsonschema:"the path's exact bytes, base64: for names that are not UTF-8 (instead of path)"`
	Content    string `json:"content,omitempty" jsonschema:"the file's whole new content"`
	ContentB64 string `json:"content_b64,omitempty" jsonschema:"the file's whole new content, base64: for content that is not UTF-8 (instead of content)"`
	ExpectHash string `json:"expect_hash,omitempty" jsonschema:"refuse unless the staged file still has this digest (from a read)"`
}

func (h *handlers) write(ctx context.Context, _ *mcp.CallToolRequest, in WriteIn) (*mcp.CallToolResult, FileOut, error) {
	path, err := needPath(in.Path, in.PathB64)
	if err != nil {
		return nil, FileOut{}, h.fail("write", in.Tx, err)
	}
	content, _, err := pick("content", in.Content, in.ContentB64)
	if err != nil {
		return nil, FileOut{}, h.fail("write", in.Tx, err)
	}
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, h.fail("write", in.Tx, err)
	}
	defer ws.Close()
	r, err := st.Write(ctx, path, []byte(content), wtx.WriteOptions{ExpectHash: in.ExpectHash})
	if err != nil {
		return nil, FileOut{}, h.fail("write", in.Tx, err)
	}
	return nil, fileOut(st, r), nil
}

// EditIn are edit's arguments.
type EditIn struct {
	Tx         string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path       string `json:"path,omitempty" jsonschema:"a slash-separated path relative to the workspace root"`
	PathB64    string `json:"path_b64,omitempty" jsonschema:"the path's exact bytes, base64: for names that are not UTF-8 (instead of path)"`
	Old        string `json:"old,omitempty" jsonschema:"the exact text to replace; must occur exactly once unless all is set"`
	OldB64     string `json:"old_b64,omitempty" jsonschema:"the exact bytes to replace, base64 (instead of old)"`
	New        string `json:"new,omitempty" jsonschema:"the replacement text"`
	NewB64     string `json:"new_b64,omitempty" jsonschema:"the replacement bytes, base64 (instead of new)"`
	All        bool   `json:"all,omitempty" jsonschema:"replace every occurrence"`
	ExpectHash string `json:"expect_hash,omitempty" jsonschema:"refuse unless the staged file still has this digest (from a read)"`
}

func (h *handlers) edit(ctx context.Context, _ *mcp.CallToolRequest, in EditIn) (*mcp.CallToolResult, FileOut, error) {
	path, err := needPath(in.Path, in.PathB64)
	if err != nil {
		return nil, FileOut{}, h.fail("edit", in.Tx, err)
	}
	old, ok, err := pick("old", in.Old, in.OldB64)
	if err == nil && !ok {
		err = &wtx.Error{Code: wtx.CodeUsage, Message: "old (or old_b64) is required and must not be empty"}
	}
	if err != nil {
		return nil, FileOut{}, h.fail("edit", in.Tx, err)
	}
	repl, _, err := pick("new", in.New, in.NewB64)
	if err != nil {
		return nil, FileOut{}, h.fail("edit", in.Tx, err)
	}
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, h.fail("edit", in.Tx, err)
	}
	defer ws.Close()
	r, err := st.Edit(ctx, path, old, repl, in.All, in.ExpectHash)
	if err != nil {
		return nil, FileOut{}, h.fail("edit", in.Tx, err)
	}
	return nil, fileOut(st, r), nil
}

// RmIn are rm's arguments.
type RmIn struct {
	Tx         string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path       string `json:"path,omitempty" jsonschema:"a slash-separated path relative to the workspace root"`
	PathB64    string `json:"path_b64,omitempty" jsonschema:"the path's exact bytes, base64: for names that are not UTF-8 (instead of path)"`
	ExpectHash string `json:"expect_hash,omitempty" jsonschema:"refuse unless the staged file still has this digest (from a read)"`
}

func (h *handlers) rm(ctx context.Context, _ *mcp.CallToolRequest, in RmIn) (*mcp.CallToolResult, FileOut, error) {
	path, err := needPath(in.Path, in.PathB64)
	if err != nil {
		return nil, FileOut{}, h.fail("rm", in.Tx, err)
	}
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, h.fail("rm", in.Tx, err)
	}
	defer ws.Close()
	r, err := st.Remove(ctx, path, in.ExpectHash)
	if err != nil {
		return nil, FileOut{}, h.fail("rm", in.Tx, err)
	}
	return nil, fileOut(st, r), nil
}

// StageIn names a stage.
type StageIn struct {
	Tx string `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name; may be left out when the workspace has exactly one open stage"`
}

func (h *handlers) status(ctx context.Context, _ *mcp.CallToolRequest, in StageIn) (*mcp.CallToolResult, *wtx.Status, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, nil, h.fail("status", in.Tx, err)
	}
	defer ws.Close()
	s, err := st.Status(ctx, nil)
	if err != nil {
		return nil, nil, h.fail("status", in.Tx, err)
	}
	return nil, s, nil
}

// DiffIn are diff's arguments.
type DiffIn struct {
	Tx          string   `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Paths       []string `json:"paths,omitempty" jsonschema:"only these selectors and what is beneath them"`
	Exclude     []string `json:"exclude,omitempty" jsonschema:"leave out these selectors and what is beneath them; a selector (paths or exclude) that matches nothing is an error"`
	NumberHunks bool     `json:"number_hunks,omitempty" jsonschema:"number each hunk (from 1, per file) for apply_hunks"`
	Drift       bool     `json:"drift,omitempty" jsonschema:"instead of the stage's change, show the workspace's change since the stage's base for each path that blocks an apply (drift, stale reads), where the base content is known"`
}

// DiffOut answers diff: the command line's answer, with the diff's text.
type DiffOut = answer.Diff

func (h *handlers) diff(ctx context.Context, _ *mcp.CallToolRequest, in DiffIn) (*mcp.CallToolResult, DiffOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, DiffOut{}, h.fail("diff", in.Tx, err)
	}
	defer ws.Close()
	var buf bytes.Buffer
	if in.Drift {
		entries, err := st.WriteDrift(ctx, &buf, in.Paths, wtx.DiffOptions{})
		if err != nil {
			return nil, DiffOut{}, h.fail("diff", in.Tx, err)
		}
		out := DiffOut{Tx: st.ID(), Changes: []wtx.Change{}, Special: []string{}, Drift: answer.OrEmpty(entries)}
		out.Diff, out.DiffB64 = textOr(buf.String())
		return plainDiff(out.Diff), out, nil
	}
	res, err := st.WriteDiff(ctx, &buf, wtx.DiffOptions{Paths: in.Paths, Exclude: in.Exclude, NumberHunks: in.NumberHunks})
	if err != nil {
		return nil, DiffOut{}, h.fail("diff", in.Tx, err)
	}
	out := DiffOut{Tx: st.ID(), ChangesetDigest: res.Changes.Digest, Changes: nonNil(res.Changes.Changes), Counts: res.Changes.Counts}
	out.Special, out.SpecialB64 = answer.Names(res.Changes.Special)
	out.Diff, out.DiffB64 = textOr(buf.String())
	return plainDiff(out.Diff), out, nil
}

// plainDiff is a result whose second block is the diff as plain text, for
// a reader that would otherwise unescape it from the JSON. A diff that is
// not UTF-8 travels only as diff_b64.
func plainDiff(diff string) *mcp.CallToolResult {
	if diff == "" {
		return nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: diff}}}
}

// ApplyIn are apply's arguments.
type ApplyIn struct {
	Tx               string   `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Paths            []string `json:"paths,omitempty" jsonschema:"apply only these selectors and what is beneath them"`
	Exclude          []string `json:"exclude,omitempty" jsonschema:"leave these selectors out of the apply: they stay staged"`
	Expect           string   `json:"expect,omitempty" jsonschema:"refuse unless the selected change set still has this changeset_digest"`
	Approve          bool     `json:"approve,omitempty" jsonschema:"allow changes to protected paths (honoured only when the server was started to allow it)"`
	IgnoreStaleReads bool     `json:"ignore_stale_reads,omitempty" jsonschema:"apply even if files the stage read changed in the workspace since (honoured only when the server was started to allow approval)"`
}

// ApplyOut answers apply: the command line's answer.
type ApplyOut = answer.Apply

func (h *handlers) apply(ctx context.Context, _ *mcp.CallToolRequest, in ApplyIn) (*mcp.CallToolResult, ApplyOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, ApplyOut{}, h.fail("apply", in.Tx, err)
	}
	defer ws.Close()
	// The agent's approve and ignore_stale_reads count only as far as the
	// authority table lets this server's agent: the library's gate decides.
	r, err := st.Apply(ctx, wtx.ApplyOptions{Paths: in.Paths, Exclude: in.Exclude, Expect: in.Expect, Approve: in.Approve, IgnoreStaleReads: in.IgnoreStaleReads})
	if err != nil {
		return nil, ApplyOut{}, h.fail("apply", in.Tx, st.OfferRebase(ctx, h.protected(st, err, in.Approve)))
	}
	return nil, answer.NewApply(st.ID(), r), nil
}

// protected phrases a refusal.protected for an agent: what it may do here,
// and what a person does at the command line.
func (h *handlers) protected(st *wtx.Stage, err error, asked bool) error {
	e := wtx.AsError(err)
	if e.Code != wtx.CodeProtected {
		return err
	}
	n := len(e.Conflicts)
	out := &wtx.Error{Code: e.Code, Conflicts: e.Conflicts, Err: e}
	switch {
	case h.cfg.AllowApprove:
		out.Message = fmt.Sprintf("%d path(s) of %s are protected; call apply again with approve set to write them", n, st.ID())
		out.Repairs = []wtx.Repair{{Action: "approve", Detail: "call apply with approve: true"}}
	default:
		out.Message = fmt.Sprintf("%d path(s) of %s are protected and this server does not approve changes to them: a person reviews the stage and applies it from the command line", n, st.ID())
		if asked {
			out.Message = fmt.Sprintf("approval refused: %d path(s) of %s are protected and this server does not approve changes to them; a person reviews the stage and applies it from the command line", n, st.ID())
		}
		out.Repairs = []wtx.Repair{
			{Action: "review", Detail: "a person looks at the change", Command: "wtx diff " + st.ID()},
			{Action: "approve", Detail: "a person applies it, protected paths included", Command: "wtx apply " + st.ID() + " --approve"},
		}
	}
	return out
}

// DropOut answers drop: the command line's answer.
type DropOut = answer.Drop

func (h *handlers) drop(ctx context.Context, _ *mcp.CallToolRequest, in PathlessIn) (*mcp.CallToolResult, DropOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, DropOut{}, h.fail("drop", in.Tx, err)
	}
	defer ws.Close()
	var discarded []string
	if st.State() == wtx.StateOpen {
		if cs, err := st.Changes(ctx, nil); err == nil {
			for _, c := range cs.Changes {
				discarded = append(discarded, c.Path)
			}
		}
	}
	if err := st.Drop(ctx); err != nil {
		return nil, DropOut{}, h.fail("drop", in.Tx, err)
	}
	d := answer.Dropped{Tx: st.ID(), State: st.State()}
	d.Discarded, d.DiscardedB64 = answer.Names(discarded)
	return nil, DropOut{Stages: []answer.Dropped{d}, Tx: d.Tx, State: d.State, Discarded: d.Discarded, DiscardedB64: d.DiscardedB64}, nil
}

// PathlessIn names a stage that must be given.
type PathlessIn struct {
	Tx string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
}

// RunIn are run's arguments.
type RunIn struct {
	Tx      string   `json:"tx,omitempty" jsonschema:"run in this open stage; a new stage when empty"`
	Argv    []string `json:"argv" jsonschema:"the command and its arguments, e.g. [\"go\",\"test\",\"./...\"]"`
	Timeout float64  `json:"timeout,omitempty" jsonschema:"seconds after which the command and everything it started are stopped; the server's default when absent"`
}

// RunOut answers run: the command line's answer, with the command's
// output captured.
type RunOut = answer.Run

// StoppedOut is one process a command left running, stopped after it.
type StoppedOut = answer.Stopped

// tail keeps the last n bytes written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
	n   int
	cut bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.n:]...)
		t.cut = true
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

func (h *handlers) run(ctx context.Context, _ *mcp.CallToolRequest, in RunIn) (*mcp.CallToolResult, RunOut, error) {
	if len(in.Argv) == 0 {
		return nil, RunOut{}, h.fail("run", in.Tx, &wtx.Error{Code: wtx.CodeUsage, Message: "argv is empty"})
	}
	timeout, max := h.cfg.runTimeouts()
	switch {
	case in.Timeout < 0 || in.Timeout > max.Seconds():
		return nil, RunOut{}, h.fail("run", in.Tx, &wtx.Error{Code: wtx.CodeUsage,
			Message: fmt.Sprintf("timeout %g is out of range: give seconds above 0 and at most %g", in.Timeout, max.Seconds())})
	case in.Timeout > 0:
		timeout = time.Duration(in.Timeout * float64(time.Second))
	}
	ws, err := h.open(ctx)
	if err != nil {
		return nil, RunOut{}, h.fail("run", in.Tx, err)
	}
	defer ws.Close()
	if err := wtx.LookCommand(ws.Path(), in.Argv[0]); err != nil {
		return nil, RunOut{}, h.fail("run", in.Tx, err)
	}
	var st *wtx.Stage
	if in.Tx != "" {
		st, err = ws.Stage(ctx, in.Tx)
	} else {
		st, err = ws.Begin(ctx, wtx.BeginOptions{})
	}
	if err != nil {
		return nil, RunOut{}, h.fail("run", in.Tx, err)
	}
	// The command's context ends when the call is cancelled
	// (notifications/cancelled), when the client goes away (the input
	// ends), when the server stops, or at the timeout; the stage's run then
	// stops everything the command started.
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	defer context.AfterFunc(h.base, cancel)()
	stdout, stderr := &tail{n: 64 << 10}, &tail{n: 64 << 10}
	res, err := st.Run(runCtx, in.Argv, wtx.RunOptions{Stdin: bytes.NewReader(nil), Stdout: stdout, Stderr: stderr, Env: os.Environ(), Confine: true})
	timedOut := errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil
	if err != nil {
		if timedOut {
			e := wtx.AsError(err)
			err = &wtx.Error{Code: e.Code, Message: fmt.Sprintf("the command ran past its timeout of %gs and was stopped: %s", timeout.Seconds(), e.Message),
				Repairs: e.Repairs, Conflicts: e.Conflicts, Err: e}
		}
		return nil, RunOut{}, h.fail("run", in.Tx, err)
	}
	out := answer.NewRun(st, res)
	out.TimedOut, out.Truncated = timedOut, stdout.cut || stderr.cut
	out.Stdout, out.StdoutB64 = textOr(stdout.String())
	out.Stderr, out.StderrB64 = textOr(stderr.String())
	return nil, out, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
