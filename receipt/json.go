package receipt

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// unambiguousJSON refuses a document in which an object holds two names
// that Go's decoder takes for one (equal under Unicode case folding):
// readers disagree on which one counts (Go takes the last and ignores
// case; jq and others take the exact name), so what wtx checked need not
// be what its reader sees. A refusal is one of check c.
func unambiguousJSON(data []byte, c Check) error {
	if failpoint.Disabled("receipt-ambiguous") {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		names  map[string]string
		key    bool // the next string token is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return invalidf(c, "not a JSON document: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.object && top.key {
			if prev, ok := top.names[foldName(name)]; ok {
				return invalidf(c, "the document names %q and %q in one object: readers differ on which counts, so it is refused", prev, name)
			}
			top.names[foldName(name)] = name
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, names: map[string]string{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended: a name or the end comes next
		}
	}
}

// foldName is name with each letter replaced by the smallest of its
// Unicode simple case folding orbit: two names fold equal exactly when
// strings.EqualFold says so, which is how Go's decoder matches them.
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// genericJSON decodes one JSON value, numbers as written.
func genericJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value")
	}
	return v, nil
}
