package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/jsonname"
)

// envelope is every --json answer: schema_version, status, command, then
// the command's own fields.
func envelope(command string, fields map[string]any) map[string]any {
	out := map[string]any{"schema_version": 1, "status": "ok", "command": command}
	for k, v := range fields {
		out[k] = v
	}
	return out
}

type jsonError struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	ExitCode  int            `json:"exit_code"`
	Repairs   []wtx.Repair   `json:"repairs"`
	Conflicts []wtx.Conflict `json:"conflicts"`
}

func errorEnvelope(command string, e *wtx.Error, code int) map[string]any {
	// Messages are text, not names: a byte that is not UTF-8 in one is
	// written as an octal escape rather than lost to U+FFFD.
	je := jsonError{Code: e.Code, Message: textOf(e.Message), ExitCode: code, Repairs: e.Repairs, Conflicts: e.Conflicts}
	if je.Repairs == nil {
		je.Repairs = []wtx.Repair{}
	}
	if je.Conflicts == nil {
		je.Conflicts = []wtx.Conflict{}
	}
	return map[string]any{"schema_version": 1, "status": "error", "command": command, "error": je}
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// emit writes the JSON answer of a command that succeeded.
func (g *globals) emit(command string, fields map[string]any) error {
	return writeJSON(g.io.Out, envelope(command, fields))
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func writeJSONIndent(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// structFields turns a struct into its JSON fields, to merge them into an
// answer's envelope.
func structFields(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

// putName sets fields[key] to a name as JSON carries it (the name, or its
// quoted form when it is not valid UTF-8) and then fields[key+"_b64"] to
// its exact bytes (internal/jsonname). Every name an answer holds outside
// the wtx types (which encode themselves) goes through putName or putNames.
func putName(fields map[string]any, key, name string) {
	fields[key] = jsonname.Text(name)
	if b := jsonname.B64(name); b != "" {
		fields[key+"_b64"] = b
	}
}

// putNames is putName for a list (never null): key+"_b64" holds every
// member when any is not valid UTF-8.
func putNames(fields map[string]any, key string, names []string) {
	fields[key] = orEmpty(jsonname.Texts(names))
	if b := jsonname.B64s(names); b != nil {
		fields[key+"_b64"] = b
	}
}

// textOf escapes the bytes of s that are not UTF-8 (and nothing else).
func textOf(s string) string {
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
