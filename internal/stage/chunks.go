package stage

import (
	"sync"
	"sync/atomic"

	"github.com/wtx-dev/wtx/internal/tree"
)

// entryChunkLen is the number of entries per chunk of an entryChunks.
const entryChunkLen = 4096

// maxEntryHint is the largest size hint taken; a larger one is no hint.
const maxEntryHint = 1 << 22

// entryChunks collects the entries of a walk from any number of goroutines
// at once, then hands them over as one slice.
//
// Without a size hint they go into fixed-size chunks, flattened at the end
// into one slice of exactly their number. Appending to one slice would grow
// it by a quarter at a time on a large tree, allocating about five times
// its final size and holding two copies at the peak.
//
// With a size hint (newEntryChunks) one slice of the hinted number and an
// eighth more is made first, and each entry takes the next free place in
// it without a lock. A walk that fills at least half of it and stays within
// it is handed over as it is, never copied, and the places it does not use
// are never touched; entries past it go into chunks as above, and a walk
// that fills less than half is copied into a slice of its size, so that a
// tree that shrank does not keep the old tree's size for the command.
type entryChunks struct {
	hinted []tree.Entry
	next   atomic.Int64 // places taken in hinted, or asked for past it

	mu   sync.Mutex // guards the chunks
	full [][]tree.Entry
	cur  []tree.Entry
	over int // entries in the chunks
}

// newEntryChunks returns an entryChunks that expects about hint entries;
// hint <= 0 means unknown.
func newEntryChunks(hint int) *entryChunks {
	c := &entryChunks{}
	if hint > 0 && hint <= maxEntryHint { // past it, no hint: a damaged one
		c.hinted = make([]tree.Entry, hint+hint/8+64)
	}
	return c
}

// add stores e and returns the number of entries stored so far, counting
// those other goroutines are storing at the same time.
func (c *entryChunks) add(e tree.Entry) int {
	if i := c.next.Add(1) - 1; i < int64(len(c.hinted)) {
		c.hinted[i] = e
		return int(i) + 1
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]tree.Entry, 0, entryChunkLen)
	}
	c.cur = append(c.cur, e)
	c.over++
	return len(c.hinted) + c.over
}

// flatten returns every entry added and releases them; it must not run
// while an add does. One goroutine's entries keep their order.
func (c *entryChunks) flatten() []tree.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	inHint := min(int(c.next.Load()), len(c.hinted))
	var out []tree.Entry
	if c.over == 0 && c.hinted != nil && inHint >= len(c.hinted)/2 {
		out = c.hinted[:inHint] // all within the hinted slice: no copy
	} else {
		// Past the hint, or far below it (the tree shrank): one slice of
		// the exact number, and the hinted one goes.
		out = make([]tree.Entry, 0, inHint+c.over)
		out = append(out, c.hinted[:inHint]...)
		for _, ch := range c.full {
			out = append(out, ch...)
		}
		out = append(out, c.cur...)
	}
	c.hinted, c.full, c.cur, c.over = nil, nil, nil, 0
	c.next.Store(0)
	return out
}
