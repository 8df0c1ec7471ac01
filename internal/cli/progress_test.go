package cli

import (
	"bytes"
	"strings"
	"testing"
)

func TestProgressOnlyOnATerminal(t *testing.T) {
	var errb bytes.Buffer
	g := &globals{io: Streams{Err: &errb, ErrTTY: true}}
	p := g.progressOf("applying")
	if p == nil {
		t.Fatal("no progress on a terminal")
	}
	p(3, 10)
	g.endProgress()
	if got := errb.String(); !strings.Contains(got, "wtx: applying: 3/10") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Fatalf("progress wrote %q", got)
	}
	for _, g := range []*globals{
		{io: Streams{Err: &errb}},                            // a pipe
		{io: Streams{Err: &errb, ErrTTY: true}, json: true},  // --json
		{io: Streams{Err: &errb, ErrTTY: true}, quiet: true}, // --quiet
	} {
		if g.progressOf("applying") != nil || g.progress("staging") != nil {
			t.Fatalf("progress shown with %+v", g)
		}
	}
}
