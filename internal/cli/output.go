package cli

import (
	"encoding/json"
	"io"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
)

// Every --json answer is a typed struct of internal/answer, shared with
// the MCP server; these helpers write them.

// emit writes the JSON answer of a command that succeeded: the head, then
// body's fields.
func (g *globals) emit(command string, body any) error {
	return answer.OK(g.io.Out, command, body)
}

// emitError writes an error answer for e with exit status code, followed
// by the fields of extra (a struct, or nil).
func (g *globals) emitError(command string, e *wtx.Error, code int, extra any) error {
	return answer.WriteError(g.io.Out, command, answer.NewError(e, code), extra)
}

func orEmpty[T any](s []T) []T { return answer.OrEmpty(s) }

func writeJSONIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
