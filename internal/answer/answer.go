// Package answer holds every JSON answer wtx gives, as typed structs: the
// command line's --json output and the MCP server's tool results are both
// rendered from these types, so a field has one name and one meaning in
// both places.
//
// A command-line answer is one object: the head (schema_version, status,
// command) followed by the answer's own fields (Write splices them). An
// MCP tool result is the answer's own fields; an MCP tool error is the same
// object as the command line's error envelope.
//
// Names are bytes: a field X holding a name that is not valid UTF-8 carries
// git's quoted form, and X_b64 its exact bytes (internal/jsonname). The
// wtx types encode themselves that way; the fields here that hold names
// come in X / X_b64 pairs, filled by Name and Names.
package answer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/jsonname"
)

// SchemaVersion is the version of the JSON answers' shape. It moves only
// when a field is removed or changes meaning for an existing reader.
const SchemaVersion = 1

// Statuses of an answer.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// Head starts every command-line answer.
type Head struct {
	SchemaVersion int    `json:"schema_version"`
	Status        string `json:"status"`
	Command       string `json:"command"`
}

// Write writes one answer: the head, then the fields of each part (structs
// that encode as JSON objects, or nil), in order, as one object and one
// line. A field name must not repeat across parts.
func Write(w io.Writer, status, command string, parts ...any) error {
	var out bytes.Buffer
	head, err := marshal(Head{SchemaVersion: SchemaVersion, Status: status, Command: Text(command)})
	if err != nil {
		return err
	}
	out.Write(head[:len(head)-1]) // without its closing brace
	for _, p := range parts {
		if p == nil {
			continue
		}
		b, err := marshal(p)
		if err != nil {
			return err
		}
		if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
			return fmt.Errorf("answer part %T is not a JSON object", p)
		}
		if inner := bytes.TrimSpace(b[1 : len(b)-1]); len(inner) > 0 {
			out.WriteByte(',')
			out.Write(inner)
		}
	}
	out.WriteString("}\n")
	_, err = w.Write(out.Bytes())
	return err
}

// OK writes a successful answer.
func OK(w io.Writer, command string, body any) error {
	return Write(w, StatusOK, command, body)
}

func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Name returns a name's X and X_b64 fields.
func Name(name string) (text, b64 string) {
	return jsonname.Text(name), jsonname.B64(name)
}

// Names returns a list of names' X field (never null) and X_b64 field
// (nil unless some member is not valid UTF-8).
func Names(names []string) (texts, b64s []string) {
	return orEmpty(jsonname.Texts(names)), jsonname.B64s(names)
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// OrEmpty returns s, or an empty list for nil: lists in answers are never
// null.
func OrEmpty[T any](s []T) []T { return orEmpty(s) }

// OpID is an op id as answers carry it: null when no op was recorded
// (nothing was applied), never "".
func OpID(id string) *string {
	if id == "" {
		return nil
	}
	return &id
}

// Repair is a way out of an error, in the terms of the one who reads it:
// Command is a command line for a person or a script; Tool and Arguments
// a tool call for an MCP client. Either may be missing when the repair is
// something to do by hand.
type Repair struct {
	Action string `json:"action"`
	// Class is the class of conflicts the repair answers (drift,
	// stale-read, protected, boundary); empty for the refusal as a whole.
	Class     string    `json:"class,omitempty"`
	Detail    string    `json:"detail"`
	Command   string    `json:"command,omitempty"`
	Tool      string    `json:"tool,omitempty"`
	Arguments *ToolArgs `json:"arguments,omitempty"`
	// Person marks, for an MCP client, a repair only a person can make, at
	// the command line (Command): approving a protected path, say.
	Person bool `json:"person,omitempty"`
}

// ToolArgs are the arguments of a tool call a repair proposes.
type ToolArgs struct {
	Tx      string   `json:"tx,omitempty"`
	Op      string   `json:"op,omitempty"`
	Path    string   `json:"path,omitempty"`
	PathB64 string   `json:"path_b64,omitempty"`
	Paths   []string `json:"paths,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	Merge   bool     `json:"merge,omitempty"`
	Approve bool     `json:"approve,omitempty"`
	// IgnoreStaleReads is apply's ignore_stale_reads.
	IgnoreStaleReads bool `json:"ignore_stale_reads,omitempty"`
}

// Error is the "error" member of an error answer.
type Error struct {
	Code        string           `json:"code"`
	Message     string           `json:"message"`
	ExitCode    int              `json:"exit_code"`
	Repairs     []Repair         `json:"repairs"`
	Conflicts   []wtx.Conflict   `json:"conflicts"`
	Diagnostics []wtx.Diagnostic `json:"diagnostics,omitempty"`
}

// ErrorBody is the part of an error answer after its head.
type ErrorBody struct {
	Error Error `json:"error"`
}

// NewError renders e for a reader whose repairs are the command lines the
// library wrote (the command line's own terms), with exit status code.
func NewError(e *wtx.Error, code int) Error {
	out := Error{Code: e.Code, Message: Text(e.Message), ExitCode: code, Repairs: []Repair{},
		Conflicts: orEmpty(e.Conflicts), Diagnostics: e.Diagnostics}
	for _, r := range e.Repairs {
		out.Repairs = append(out.Repairs, Repair{Action: string(r.Action), Class: string(r.Class), Detail: r.Detail, Command: r.Command})
	}
	return out
}

// WriteError writes an error answer, and the fields of extra (a struct, or
// nil) after its error member.
func WriteError(w io.Writer, command string, e Error, extra any) error {
	return Write(w, StatusError, command, ErrorBody{Error: e}, extra)
}

// Text escapes the bytes of s that are not UTF-8 (and nothing else):
// messages are text, not names, and a byte that is not UTF-8 in one is
// written as an octal escape rather than lost to U+FFFD.
func Text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			fmt.Fprintf(&b, "\\%03o", s[i])
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
