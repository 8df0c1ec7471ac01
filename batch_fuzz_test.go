package wtx_test

import (
	"strings"
	"testing"

	"github.com/wtx-dev/wtx"
)

// FuzzParseBatch feeds arbitrary input to ParseBatch: it must not panic,
// an error must be a usage error, and every accepted item must be a known
// command with the fields it needs.
func FuzzParseBatch(f *testing.F) {
	for _, s := range []string{
		`{"command":"write","path":"a","content":"x"}`,
		"{\"command\":\"edit\",\"path\":\"a\",\"old\":\"x\",\"new\":\"y\"}\n\n{\"command\":\"rm\",\"path\":\"b\"}",
		`{"command":"read","path":"../etc/passwd"}`,
		`{"command":"write","path":"a"}`,
		`{"command":"write","path":"a","content":"x","extra":1}`,
		`{"command":"rm","path":"a"} {"command":"rm","path":"b"}`,
		"{\"command\":\"write\",\"path\":\"\xff\",\"content\":\"x\"}",
		`{"command":"write","path_b64":"/w==","content_b64":"/w=="}`,
		`{"command":"edit","path":"a","old_b64":"!!","new":"y"}`,
		`{"command":"write","path":"\ud800","content":""}`,
		"", "null", "[]", `{"command":"write","path":"\u0000","content":""}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		items, err := wtx.ParseBatch(strings.NewReader(in))
		if err != nil {
			if code := wtx.AsError(err).Code; code != wtx.CodeUsage {
				t.Fatalf("error code %s: %v", code, err)
			}
			return
		}
		if len(items) == 0 {
			t.Fatal("no items and no error")
		}
		for _, it := range items {
			switch {
			case it.Path == "":
				t.Fatalf("accepted an item without a path: %+v", it)
			case it.Command == "write" && it.Content == nil,
				it.Command == "edit" && (it.Old == "" || it.New == nil):
				t.Fatalf("accepted an incomplete item: %+v", it)
			case it.Command != "write" && it.Command != "edit" && it.Command != "rm" && it.Command != "read":
				t.Fatalf("accepted command %q", it.Command)
			}
		}
	})
}
