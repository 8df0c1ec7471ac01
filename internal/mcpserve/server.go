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
	"encoding/json"
	"io"
	"os"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx"
)

// Config says which workspace the server works on.
type Config struct {
	Dir     string // the workspace
	Options wtx.Options
	Version string
}

// NewServer returns an MCP server with wtx's tools.
func NewServer(cfg Config) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "wtx", Title: "wtx: transactions for a directory", Version: cfg.Version}, &mcp.ServerOptions{
		Instructions: "wtx stages changes to the workspace " + cfg.Dir + ". Begin a stage, read and change files in it (the workspace is untouched), " +
			"check status or diff, then apply: all or nothing, refused if anything you read or changed moved in the workspace meanwhile. " +
			"Pass a read's digest as expect_hash to a later write or edit so it never clobbers a change made since.",
	})
	h := &handlers{cfg: cfg}
	mcp.AddTool(s, &mcp.Tool{Name: "begin", Description: "Open a new stage over the workspace; returns its id (tx). Nothing in the workspace changes."}, h.begin)
	mcp.AddTool(s, &mcp.Tool{Name: "read", Description: "Read a file as the stage sees it (its own writes included) and record the read: if the workspace's copy changes before apply, apply refuses with refusal.stale-read. Returns the content and its digest."}, h.read)
	mcp.AddTool(s, &mcp.Tool{Name: "write", Description: "Stage new content for a whole file (created if missing). expect_hash refuses unless the staged file still has that digest."}, h.write)
	mcp.AddTool(s, &mcp.Tool{Name: "edit", Description: "Replace exact text in a staged file: old must occur exactly once (or set all). Zero or several matches are errors saying how many and where."}, h.edit)
	mcp.AddTool(s, &mcp.Tool{Name: "rm", Description: "Delete a file in the stage."}, h.rm)
	mcp.AddTool(s, &mcp.Tool{Name: "status", Description: "A stage's state, change set, changeset_digest, drift (changed paths that moved in the workspace) and stale reads."}, h.status)
	mcp.AddTool(s, &mcp.Tool{Name: "diff", Description: "The stage's change set as a git-style unified diff, with its changeset_digest (pass it to apply as expect)."}, h.diff)
	mcp.AddTool(s, &mcp.Tool{Name: "apply", Description: "Apply the stage's change set (or the given paths) to the workspace, all or nothing. Refuses with a code, conflicts and repairs if anything changed behind the stage's back."}, h.apply)
	mcp.AddTool(s, &mcp.Tool{Name: "drop", Description: "Discard a stage; the workspace is untouched."}, h.drop)
	mcp.AddTool(s, &mcp.Tool{Name: "run", Description: "Run a command (argv) inside the stage's view; its writes stay in the stage. Returns its exit code, captured output and the change set."}, h.run)
	return s
}

// Serve runs the server on in/out until the client goes away.
func Serve(ctx context.Context, cfg Config, in io.ReadCloser, out io.WriteCloser) error {
	return NewServer(cfg).Run(ctx, &mcp.IOTransport{Reader: in, Writer: out})
}

type handlers struct{ cfg Config }

// toolError carries a wtx error to the agent as the same JSON object the
// command line prints with --json.
type toolError struct{ e *wtx.Error }

func (t toolError) Error() string {
	repairs, conflicts := t.e.Repairs, t.e.Conflicts
	if repairs == nil {
		repairs = []wtx.Repair{}
	}
	if conflicts == nil {
		conflicts = []wtx.Conflict{}
	}
	data, _ := json.Marshal(map[string]any{"status": "error", "error": map[string]any{
		"code": t.e.Code, "message": t.e.Message, "exit_code": t.e.ExitCode(), "repairs": repairs, "conflicts": conflicts}})
	return string(data)
}

func fail(err error) error { return toolError{wtx.AsError(err)} }

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
	Name    string   `json:"name,omitempty" jsonschema:"an optional name for the stage, usable instead of its id"`
	Exclude []string `json:"exclude,omitempty" jsonschema:"selectors left out of the stage and never applied"`
	Protect []string `json:"protect,omitempty" jsonschema:"selectors whose changes need approve at apply"`
}

// BeginOut answers begin.
type BeginOut struct {
	Tx      string `json:"tx" jsonschema:"the stage id"`
	Backend string `json:"backend"`
}

func (h *handlers) begin(ctx context.Context, _ *mcp.CallToolRequest, in BeginIn) (*mcp.CallToolResult, BeginOut, error) {
	ws, err := h.open(ctx)
	if err != nil {
		return nil, BeginOut{}, fail(err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, wtx.BeginOptions{Name: in.Name, Exclude: in.Exclude, Protect: in.Protect})
	if err != nil {
		return nil, BeginOut{}, fail(err)
	}
	return nil, BeginOut{Tx: st.ID(), Backend: st.Backend()}, nil
}

// PathIn names a file of a stage.
type PathIn struct {
	Tx   string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path string `json:"path" jsonschema:"a slash-separated path relative to the workspace root"`
}

// FileOut answers per-file tools.
type FileOut struct {
	Tx      string `json:"tx"`
	TxOp    int    `json:"tx_op" jsonschema:"the op's number in the stage"`
	Path    string `json:"path"`
	Digest  string `json:"digest,omitempty" jsonschema:"the content's digest now; pass it as expect_hash to a later write or edit"`
	Size    int64  `json:"size"`
	Before  string `json:"before,omitempty" jsonschema:"the digest the file had in the stage before the op, or absent"`
	Content string `json:"content,omitempty" jsonschema:"the file's content (read)"`
	Binary  bool   `json:"binary,omitempty" jsonschema:"set when the content is not UTF-8 text and was left out"`
}

func fileOut(st *wtx.Stage, r *wtx.FileResult) FileOut {
	return FileOut{Tx: st.ID(), TxOp: r.TxOp, Path: r.Path, Digest: r.Digest, Size: r.Size, Before: r.Before}
}

func (h *handlers) read(ctx context.Context, _ *mcp.CallToolRequest, in PathIn) (*mcp.CallToolResult, FileOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	defer ws.Close()
	r, err := st.Read(ctx, in.Path)
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	out := fileOut(st, r)
	if utf8.Valid(r.Content) && !bytes.ContainsRune(r.Content, 0) {
		out.Content = string(r.Content)
	} else {
		out.Binary = true
	}
	return nil, out, nil
}

// WriteIn are write's arguments.
type WriteIn struct {
	Tx         string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path       string `json:"path" jsonschema:"a slash-separated path relative to the workspace root"`
	Content    string `json:"content" jsonschema:"the file's whole new content"`
	ExpectHash string `json:"expect_hash,omitempty" jsonschema:"refuse unless the staged file still has this digest (from a read)"`
}

func (h *handlers) write(ctx context.Context, _ *mcp.CallToolRequest, in WriteIn) (*mcp.CallToolResult, FileOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	defer ws.Close()
	r, err := st.Write(ctx, in.Path, []byte(in.Content), wtx.WriteOptions{ExpectHash: in.ExpectHash})
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	return nil, fileOut(st, r), nil
}

// EditIn are edit's arguments.
type EditIn struct {
	Tx         string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path       string `json:"path" jsonschema:"a slash-separated path relative to the workspace root"`
	Old        string `json:"old" jsonschema:"the exact text to replace; must occur exactly once unless all is set"`
	New        string `json:"new" jsonschema:"the replacement text"`
	All        bool   `json:"all,omitempty" jsonschema:"replace every occurrence"`
	ExpectHash string `json:"expect_hash,omitempty" jsonschema:"refuse unless the staged file still has this digest (from a read)"`
}

func (h *handlers) edit(ctx context.Context, _ *mcp.CallToolRequest, in EditIn) (*mcp.CallToolResult, FileOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	defer ws.Close()
	r, err := st.Edit(ctx, in.Path, in.Old, in.New, in.All, in.ExpectHash)
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	return nil, fileOut(st, r), nil
}

// RmIn are rm's arguments.
type RmIn struct {
	Tx         string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path       string `json:"path" jsonschema:"a slash-separated path relative to the workspace root"`
	ExpectHash string `json:"expect_hash,omitempty" jsonschema:"refuse unless the staged file still has this digest (from a read)"`
}

func (h *handlers) rm(ctx context.Context, _ *mcp.CallToolRequest, in RmIn) (*mcp.CallToolResult, FileOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, FileOut{}, fail(err)
	}
	defer ws.Close()
	r, err := st.Remove(ctx, in.Path, in.ExpectHash)
	if err != nil {
		return nil, FileOut{}, fail(err)
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
		return nil, nil, fail(err)
	}
	defer ws.Close()
	s, err := st.Status(ctx, nil)
	if err != nil {
		return nil, nil, fail(err)
	}
	return nil, s, nil
}

// DiffIn are diff's arguments.
type DiffIn struct {
	Tx    string   `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Paths []string `json:"paths,omitempty" jsonschema:"only these selectors and what is beneath them"`
}

// DiffOut answers diff.
type DiffOut struct {
	Tx              string       `json:"tx"`
	Diff            string       `json:"diff" jsonschema:"a git-style unified diff"`
	ChangesetDigest string       `json:"changeset_digest" jsonschema:"pass as expect to apply exactly what was reviewed"`
	Changes         []wtx.Change `json:"changes"`
}

func (h *handlers) diff(ctx context.Context, _ *mcp.CallToolRequest, in DiffIn) (*mcp.CallToolResult, DiffOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, DiffOut{}, fail(err)
	}
	defer ws.Close()
	var buf bytes.Buffer
	res, err := st.WriteDiff(ctx, &buf, wtx.DiffOptions{Paths: in.Paths})
	if err != nil {
		return nil, DiffOut{}, fail(err)
	}
	return nil, DiffOut{Tx: st.ID(), Diff: buf.String(), ChangesetDigest: res.Changes.Digest, Changes: nonNil(res.Changes.Changes)}, nil
}

// ApplyIn are apply's arguments.
type ApplyIn struct {
	Tx               string   `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Paths            []string `json:"paths,omitempty" jsonschema:"apply only these selectors and what is beneath them"`
	Expect           string   `json:"expect,omitempty" jsonschema:"refuse unless the selected change set still has this changeset_digest"`
	Approve          bool     `json:"approve,omitempty" jsonschema:"allow changes to protected paths"`
	IgnoreStaleReads bool     `json:"ignore_stale_reads,omitempty" jsonschema:"apply even if files the stage read changed in the workspace since"`
}

// ApplyOut answers apply.
type ApplyOut struct {
	Tx              string       `json:"tx"`
	OpID            string       `json:"op_id" jsonschema:"the applied op, for undo; empty when nothing was written"`
	Written         []string     `json:"written"`
	AlreadyApplied  []string     `json:"already_applied"`
	ChangesetDigest string       `json:"changeset_digest"`
	Settled         bool         `json:"settled"`
	Receipt         *wtx.Receipt `json:"receipt,omitempty"`
}

func (h *handlers) apply(ctx context.Context, _ *mcp.CallToolRequest, in ApplyIn) (*mcp.CallToolResult, ApplyOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, ApplyOut{}, fail(err)
	}
	defer ws.Close()
	r, err := st.Apply(ctx, wtx.ApplyOptions{Paths: in.Paths, Expect: in.Expect, Approve: in.Approve, IgnoreStaleReads: in.IgnoreStaleReads})
	if err != nil {
		return nil, ApplyOut{}, fail(err)
	}
	return nil, ApplyOut{Tx: st.ID(), OpID: r.OpID, Written: nonNil(r.Written), AlreadyApplied: nonNil(r.AlreadyApplied),
		ChangesetDigest: r.ChangesetDigest, Settled: r.Settled, Receipt: r.Receipt}, nil
}

// DropOut answers drop.
type DropOut struct {
	Tx    string `json:"tx"`
	State string `json:"state"`
}

func (h *handlers) drop(ctx context.Context, _ *mcp.CallToolRequest, in PathlessIn) (*mcp.CallToolResult, DropOut, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, DropOut{}, fail(err)
	}
	defer ws.Close()
	if err := st.Drop(ctx); err != nil {
		return nil, DropOut{}, fail(err)
	}
	return nil, DropOut{Tx: st.ID(), State: st.State()}, nil
}

// PathlessIn names a stage that must be given.
type PathlessIn struct {
	Tx string `json:"tx" jsonschema:"the stage id, a unique prefix of it, or its name"`
}

// RunIn are run's arguments.
type RunIn struct {
	Tx   string   `json:"tx,omitempty" jsonschema:"run in this open stage; a new stage when empty"`
	Argv []string `json:"argv" jsonschema:"the command and its arguments, e.g. [\"go\",\"test\",\"./...\"]"`
}

// RunOut answers run.
type RunOut struct {
	Tx              string       `json:"tx"`
	ExitCode        int          `json:"exit_code"`
	Stdout          string       `json:"stdout"`
	Stderr          string       `json:"stderr"`
	Truncated       bool         `json:"truncated,omitempty" jsonschema:"set when output was cut to the last 64 KiB of each stream"`
	ChangesetDigest string       `json:"changeset_digest"`
	Changes         []wtx.Change `json:"changes"`
}

// tail keeps the last n bytes written to it.
type tail struct {
	buf []byte
	n   int
	cut bool
}

func (t *tail) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.n {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.n:]...)
		t.cut = true
	}
	return len(p), nil
}

func (h *handlers) run(ctx context.Context, _ *mcp.CallToolRequest, in RunIn) (*mcp.CallToolResult, RunOut, error) {
	if len(in.Argv) == 0 {
		return nil, RunOut{}, fail(&wtx.Error{Code: wtx.CodeUsage, Message: "argv is empty"})
	}
	ws, err := h.open(ctx)
	if err != nil {
		return nil, RunOut{}, fail(err)
	}
	defer ws.Close()
	if err := wtx.LookCommand(ws.Path(), in.Argv[0]); err != nil {
		return nil, RunOut{}, fail(err)
	}
	var st *wtx.Stage
	if in.Tx != "" {
		st, err = ws.Stage(ctx, in.Tx)
	} else {
		st, err = ws.Begin(ctx, wtx.BeginOptions{})
	}
	if err != nil {
		return nil, RunOut{}, fail(err)
	}
	stdout, stderr := &tail{n: 64 << 10}, &tail{n: 64 << 10}
	res, err := st.Run(ctx, in.Argv, wtx.RunOptions{Stdin: bytes.NewReader(nil), Stdout: stdout, Stderr: stderr, Env: os.Environ()})
	if err != nil {
		return nil, RunOut{}, fail(err)
	}
	return nil, RunOut{Tx: st.ID(), ExitCode: res.ExitCode, Stdout: string(stdout.buf), Stderr: string(stderr.buf),
		Truncated: stdout.cut || stderr.cut, ChangesetDigest: res.Changes.Digest, Changes: nonNil(res.Changes.Changes)}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
