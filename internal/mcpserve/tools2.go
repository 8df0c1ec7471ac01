package mcpserve

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
)

// addMoreTools adds the tools beyond the per-file transaction: history
// (log, undo), the stages (list), rebase and hunk selection.
func addMoreTools(s *mcp.Server, h *handlers) {
	addTool(s, &mcp.Tool{Name: "list", Description: "The workspace's stages: id, name, backend, state, whether a command holds it, and the counts of open stages' change sets. Settled stages (applied, dropped, empty) with settled: true."}, h.list)
	addTool(s, &mcp.Tool{Name: "log", Description: "The journal of ops applied to the workspace, oldest first: op id, stage, paths written; an op id is what undo takes."}, h.log)
	if h.has("rebase") {
		addTool(s, &mcp.Tool{Name: "rebase", Description: "Carry a stage's edits onto the workspace's current content for every changed path that drifted (changed in the workspace since the stage opened); with merge, merge three-way what cannot be re-run. All or nothing: if a path cannot be carried, the stage is unchanged. Changes only the stage, never the workspace."}, h.rebase)
	}
	if h.has("undo") {
		addTool(s, &mcp.Tool{Name: "undo", Description: "Reverse an applied op (from log) as a new op: every path it wrote gets back what it held before, all or nothing; refused if any of them changed since. The op defaults to the last one."}, h.undo)
	}
	if h.has("apply_hunks") {
		addTool(s, &mcp.Tool{Name: "apply_hunks", Description: "Apply only the chosen hunks of one text file of a stage (numbered from 1 as diff with number_hunks shows them), all or nothing. The rest of the file's change stays staged and is numbered afresh by the next diff."}, h.applyHunks)
	}
}

// ListIn are list's arguments.
type ListIn struct {
	Settled bool `json:"settled,omitempty" jsonschema:"also list settled stages (applied, dropped, empty)"`
}

func (h *handlers) list(ctx context.Context, _ *mcp.CallToolRequest, in ListIn) (*mcp.CallToolResult, answer.List, error) {
	ws, err := h.open(ctx)
	if err != nil {
		return nil, answer.List{}, h.fail("list", "", err)
	}
	defer ws.Close()
	out, err := answer.ListOf(ctx, ws, in.Settled)
	if err != nil {
		return nil, answer.List{}, h.fail("list", "", err)
	}
	return nil, out, nil
}

// LogIn are log's arguments (none).
type LogIn struct{}

func (h *handlers) log(ctx context.Context, _ *mcp.CallToolRequest, _ LogIn) (*mcp.CallToolResult, answer.Log, error) {
	ws, err := h.open(ctx)
	if err != nil {
		return nil, answer.Log{}, h.fail("log", "", err)
	}
	defer ws.Close()
	ops, err := ws.Ops(ctx)
	if err != nil {
		return nil, answer.Log{}, h.fail("log", "", err)
	}
	out := answer.Log{Ops: answer.OrEmpty(ops)}
	out.Workspace, out.WorkspaceB64 = answer.Name(ws.Path())
	return nil, out, nil
}

// RebaseIn are rebase's arguments.
type RebaseIn struct {
	Tx    string `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Merge bool   `json:"merge,omitempty" jsonschema:"merge three-way what cannot be re-run (a whole write, a command run), where the original is known"`
}

func (h *handlers) rebase(ctx context.Context, _ *mcp.CallToolRequest, in RebaseIn) (*mcp.CallToolResult, answer.Rebase, error) {
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, answer.Rebase{}, h.fail("rebase", in.Tx, err)
	}
	defer ws.Close()
	r, err := st.Rebase(ctx, in.Merge)
	if err != nil {
		return nil, answer.Rebase{}, h.fail("rebase", st.ID(), err)
	}
	return nil, answer.NewRebase(st.ID(), r), nil
}

// UndoIn are undo's arguments.
type UndoIn struct {
	Op      string   `json:"op,omitempty" jsonschema:"the op to reverse (an op id from log, or a unique prefix); the newest applied op not undone yet when absent"`
	Paths   []string `json:"paths,omitempty" jsonschema:"take back only these selectors of the op's paths and what is beneath them; a selector that selects no path of the op is an error"`
	Exclude []string `json:"exclude,omitempty" jsonschema:"leave these selectors of the op's paths as they are"`
	Approve bool     `json:"approve,omitempty" jsonschema:"allow the undo to write protected paths (honoured only when the server was started to allow it)"`
}

func (h *handlers) undo(ctx context.Context, _ *mcp.CallToolRequest, in UndoIn) (*mcp.CallToolResult, answer.Undo, error) {
	ws, err := h.open(ctx)
	if err != nil {
		return nil, answer.Undo{}, h.fail("undo", "", err)
	}
	defer ws.Close()
	// As the command line: with no op named, the newest apply not undone
	// yet, chosen under the workspace lock, so a second undo walks further
	// back rather than redoing. Undoing is writing: the library's gate
	// judges the paths the undo writes (agents propose, people approve).
	res, err := ws.UndoWith(ctx, in.Op, wtx.UndoOptions{Paths: in.Paths, Exclude: in.Exclude, Newest: in.Op == "", Approve: in.Approve})
	if err != nil {
		return nil, answer.Undo{}, h.fail("undo", "", h.protectedUndo(err))
	}
	return nil, answer.NewUndo(res), nil
}

// protectedUndo phrases an undo's refusal.protected for an agent: call
// undo again approving it, or take back the rest, where this server lets
// it; else a person undoes it at the command line.
func (h *handlers) protectedUndo(err error) error {
	e := wtx.AsError(err)
	if e.Code != wtx.CodeProtected || len(e.Repairs) == 0 || e.Repairs[0].Op == "" {
		return err
	}
	op := e.Repairs[0].Op
	n := len(e.Conflicts)
	out := &wtx.Error{Code: e.Code, Conflicts: e.Conflicts, Err: e}
	if h.cfg.AllowApprove {
		out.Message = fmt.Sprintf("the undo of %s writes %d protected path(s); call undo again with approve set to write them", op, n)
		out.Repairs = []wtx.Repair{{Action: "undo-approve", Detail: "call undo with approve: true", Command: "wtx undo " + op + " --approve"}}
		return out
	}
	out.Message = fmt.Sprintf("the undo of %s writes %d protected path(s) and this server does not approve changes to them: a person undoes it from the command line", op, n)
	out.Repairs = []wtx.Repair{{Action: "person-undo", Detail: "a person reverses the op, protected paths included", Command: "wtx undo " + op + " --approve"}}
	return out
}

// HunksIn are apply_hunks' arguments.
type HunksIn struct {
	Tx      string `json:"tx,omitempty" jsonschema:"the stage id, a unique prefix of it, or its name"`
	Path    string `json:"path,omitempty" jsonschema:"the text file whose hunks to apply"`
	PathB64 string `json:"path_b64,omitempty" jsonschema:"the path's exact bytes, base64 (instead of path)"`
	Hunks   []int  `json:"hunks" jsonschema:"hunk numbers, from 1, as diff with number_hunks shows them"`
	Expect  string `json:"expect,omitempty" jsonschema:"refuse unless the file's change still has this changeset_digest (diff with paths: [path])"`
}

func (h *handlers) applyHunks(ctx context.Context, _ *mcp.CallToolRequest, in HunksIn) (*mcp.CallToolResult, answer.Apply, error) {
	path, err := needPath(in.Path, in.PathB64)
	if err != nil {
		return nil, answer.Apply{}, h.fail("apply_hunks", in.Tx, err)
	}
	if len(in.Hunks) == 0 {
		return nil, answer.Apply{}, h.fail("apply_hunks", in.Tx, &wtx.Error{Code: wtx.CodeUsage, Message: "hunks is empty: name at least one hunk number"})
	}
	for _, n := range in.Hunks {
		if n < 1 {
			return nil, answer.Apply{}, h.fail("apply_hunks", in.Tx, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("hunk %d: hunks are numbered from 1", n)})
		}
	}
	ws, st, err := h.stage(ctx, in.Tx)
	if err != nil {
		return nil, answer.Apply{}, h.fail("apply_hunks", in.Tx, err)
	}
	defer ws.Close()
	r, err := st.Apply(ctx, wtx.ApplyOptions{Paths: []string{path}, Hunks: map[string][]int{path: in.Hunks}, Expect: in.Expect})
	if err != nil {
		return nil, answer.Apply{}, h.fail("apply_hunks", st.ID(), st.OfferRebase(ctx, h.protected(st, err, false)))
	}
	return nil, answer.NewApply(st.ID(), r), nil
}
