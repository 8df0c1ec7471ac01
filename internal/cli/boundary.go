package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
)

// printLeftOut says what a command wrote under --exclude selectors: those
// paths are not in the change set and no apply writes them.
func printLeftOut(g *globals, w io.Writer, leftOut []wtx.LeftOut) {
	if g.quiet || len(leftOut) == 0 {
		return
	}
	fmt.Fprintf(w, "wtx: left out by --exclude (not in the change set, never applied): %d path(s)\n", len(leftOut))
	const maxShown = 20
	for i, l := range leftOut {
		if i == maxShown {
			fmt.Fprintf(w, "  … and %d more\n", len(leftOut)-maxShown)
			break
		}
		p := quote.Path(l.Path)
		if l.Type == "dir" {
			p += "/"
		}
		fmt.Fprintf(w, "  x %s\n", p)
	}
}

// reservedNote marks a change whose name wtx keeps for its temporary files.
func reservedNote(p string) string {
	for _, c := range strings.Split(p, "/") {
		if strings.HasPrefix(c, journal.TempPrefix) {
			return " (reserved name: never applied)"
		}
	}
	return ""
}

// withHints adds the command line's own repairs to an error from the
// library, whose messages name no flags.
func withHints(e *wtx.Error) *wtx.Error {
	var ie *wtx.InsideStageError
	if e.Code != wtx.CodeInsideStage || !errors.As(e, &ie) {
		return e
	}
	out := *e
	out.Repairs = append(append([]wtx.Repair(nil), e.Repairs...),
		wtx.Repair{Action: "leave-stage", Detail: "leave the stage's shell or let its 'wtx run' end, then act on the stage from outside", Command: "wtx status " + ie.Tx})
	return &out
}
