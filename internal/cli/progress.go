package cli

import (
	"fmt"
	"io/fs"
)

// progress returns a callback that shows a progress line on a terminal
// stderr, or nil when stderr is not a terminal or output is quiet or JSON.
func (g *globals) progress(what string) func(int) {
	if !g.io.ErrTTY || g.quiet || g.json {
		return nil
	}
	return func(n int) {
		fmt.Fprintf(g.io.Err, "\r\x1b[Kwtx: %s: %d entries", what, n)
	}
}

// progressOf returns a callback that shows "done/total" on a terminal
// stderr, or nil (see progress).
func (g *globals) progressOf(what string) func(done, total int) {
	if !g.io.ErrTTY || g.quiet || g.json {
		return nil
	}
	return func(done, total int) {
		fmt.Fprintf(g.io.Err, "\r\x1b[Kwtx: %s: %d/%d", what, done, total)
	}
}

// endProgress clears the progress line.
func (g *globals) endProgress() {
	if g.io.ErrTTY && !g.quiet && !g.json {
		fmt.Fprint(g.io.Err, "\r\x1b[K")
	}
}

func fsMode(m uint64) fs.FileMode { return fs.FileMode(m) }
