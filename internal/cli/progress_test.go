package cli

import (
	"bytes"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx"
)

func TestProgressOnlyOnATerminal(t *testing.T) {
	var errb bytes.Buffer
	g := &globals{io: Streams{Err: &errb, ErrTTY: true}}
	w := g.longWork("applying")
	w.end()
	if errb.Len() != 0 {
		t.Fatalf("work that ended before %v drew %q", progressDelay, errb.String())
	}
	w = g.longWork("applying")
	g.meter.report(wtx.Progress{Phase: wtx.PhaseWrite, Done: 3, Total: 10})
	w.draw()
	w.end()
	if got := errb.String(); !strings.Contains(got, "wtx: applying: writing 3/10 (30%)") || !strings.HasSuffix(got, "\r\x1b[K") {
		t.Fatalf("progress wrote %q", got)
	}
	for _, g := range []*globals{
		{io: Streams{Err: &errb}},                            // a pipe
		{io: Streams{Err: &errb, ErrTTY: true}, json: true},  // --json
		{io: Streams{Err: &errb, ErrTTY: true}, quiet: true}, // --quiet
	} {
		if w := g.longWork("applying"); w.stop != nil {
			t.Fatalf("progress started with %+v", g)
		}
	}
}
