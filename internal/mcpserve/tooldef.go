package mcpserve

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/failpoint"
)

// hints says, for each tool, what a host may assume about it: whether it
// leaves the workspace and the stage as they are (read-only), whether it
// may undo or overwrite work (destructive), whether calling it twice with
// the same arguments does no more than once (idempotent), and whether it
// reaches beyond the workspace (open world: a command it runs may).
// A tool missing here is a programming error, found by any test that
// starts a server.
var hints = map[string]mcp.ToolAnnotations{
	"begin":       {Title: "Open a stage", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	"read":        {Title: "Read a file in a stage", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	"write":       {Title: "Stage a file's new content", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	"edit":        {Title: "Stage an exact-text edit", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	"rm":          {Title: "Stage a file's removal", DestructiveHint: ptr(false), IdempotentHint: true, OpenWorldHint: ptr(false)},
	"status":      {Title: "A stage's state and change set", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	"diff":        {Title: "A stage's change as a diff", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	"list":        {Title: "The workspace's stages", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	"log":         {Title: "The ops applied to the workspace", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: ptr(false)},
	"apply":       {Title: "Apply a stage to the workspace", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	"apply_hunks": {Title: "Apply chosen hunks to the workspace", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	"undo":        {Title: "Undo an applied op", DestructiveHint: ptr(true), OpenWorldHint: ptr(false)},
	"drop":        {Title: "Discard a stage", DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
	"rebase":      {Title: "Carry a stage onto the workspace", DestructiveHint: ptr(false), OpenWorldHint: ptr(false)},
	"run":         {Title: "Run a command in a stage", DestructiveHint: ptr(false), OpenWorldHint: ptr(true)},
}

func ptr[T any](v T) *T { return &v }

// addTool adds a tool. Its arguments are checked here, not by the SDK, so
// that every refusal — a string that is not valid UTF-8 (decoding would
// put U+FFFD in place of the bytes and act on a name nobody sent), a
// missing or mistyped argument, an unknown one — is the same JSON error
// object as every other error the tool gives.
func addTool[In, Out any](s *mcp.Server, t *mcp.Tool, h mcp.ToolHandlerFor[In, Out]) {
	a, ok := hints[t.Name]
	if !ok {
		panic(fmt.Sprintf("tool %q has no annotations", t.Name)) // a programming error
	}
	t.Annotations = &a
	if t.OutputSchema == nil {
		t.OutputSchema = describe[Out]()
	}
	in := inputSchema[In]()
	resolved, err := in.Resolve(nil)
	if err != nil {
		panic(fmt.Sprintf("input schema of %s: %v", t.Name, err)) // a programming error
	}
	t.InputSchema = in
	s.AddTool(t, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		args, err := checkArgs(req, resolved)
		if err != nil {
			return errorResult(err), nil
		}
		var v In
		if err := json.Unmarshal(args, &v); err != nil {
			return errorResult(usage("the arguments do not fit the tool's input schema: %v", err)), nil
		}
		res, out, err := h(ctx, req, v)
		if err != nil {
			if w, ok := err.(*jsonrpc.Error); ok {
				return nil, w
			}
			return errorResult(err), nil
		}
		return withOutput(res, out)
	})
}

// checkArgs returns the call's arguments once they are valid UTF-8 and
// valid against the tool's input schema.
func checkArgs(req *mcp.CallToolRequest, in *jsonschema.Resolved) (json.RawMessage, error) {
	var args json.RawMessage
	if req != nil && req.Params != nil {
		args = req.Params.Arguments
	}
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	if !failpoint.Disabled("utf8-check") {
		if err := checkText(args); err != nil {
			return nil, err
		}
	}
	var m map[string]any
	if err := json.Unmarshal(args, &m); err != nil {
		return nil, usage("the arguments are not a JSON object: %v", err)
	}
	if err := in.Validate(m); err != nil {
		return nil, usage("the arguments do not fit the tool's input schema: %v", err)
	}
	return args, nil
}

func usage(format string, a ...any) error {
	return &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf(format, a...)}
}

// errorResult is err as a tool's error answer: the JSON error object.
func errorResult(err error) *mcp.CallToolResult {
	if _, ok := err.(toolError); !ok {
		err = fail(err)
	}
	var r mcp.CallToolResult
	r.SetError(err)
	return &r
}

// withOutput puts out in res as structured content, and as its JSON text
// for clients that read only text, before any block res already has.
func withOutput[Out any](res *mcp.CallToolResult, out Out) (*mcp.CallToolResult, error) {
	if res == nil {
		res = &mcp.CallToolResult{}
	}
	var v any = out
	if rv := reflect.ValueOf(out); rv.Kind() == reflect.Pointer && rv.IsNil() {
		v = reflect.Zero(rv.Type().Elem()).Interface() // an empty object, not null
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("marshaling output: %w", err)
	}
	res.StructuredContent = json.RawMessage(data)
	// The JSON text comes first; blocks the tool added (a diff as plain
	// text) follow it.
	res.Content = append([]mcp.Content{&mcp.TextContent{Text: string(data)}}, res.Content...)
	return res, nil
}

// inputSchema is In's schema as a contract: an argument is never null (a
// Go slice or pointer may be nil; an absent argument says the same), and a tool that takes a path
// as path or path_b64 says that one of them is required.
func inputSchema[In any]() *jsonschema.Schema {
	s, err := jsonschema.For[In](&jsonschema.ForOptions{})
	if err != nil {
		panic(fmt.Sprintf("input schema of %T: %v", *new(In), err)) // a programming error
	}
	for _, p := range s.Properties {
		if len(p.Types) == 2 && p.Types[0] == "null" {
			p.Types, p.Type = nil, p.Types[1]
		}
	}
	if _, ok := s.Properties["path_b64"]; ok {
		s.AnyOf = []*jsonschema.Schema{{Required: []string{"path"}}, {Required: []string{"path_b64"}}}
	}
	return s
}
