package stage

import "github.com/wtx-dev/wtx/internal/tree"

// entryChunkLen is the number of entries per chunk of an entryChunks.
const entryChunkLen = 4096

// entryChunks collects the entries of a walk in fixed-size chunks, then
// flattens them into one slice of exactly their number. Appending to one
// slice would grow it by a quarter at a time on a large tree, allocating
// about five times its final size and holding two copies at the peak.
type entryChunks struct {
	full [][]tree.Entry
	cur  []tree.Entry
	n    int
}

// add appends e and returns the number of entries so far.
func (c *entryChunks) add(e tree.Entry) int {
	if len(c.cur) == cap(c.cur) {
		if c.cur != nil {
			c.full = append(c.full, c.cur)
		}
		c.cur = make([]tree.Entry, 0, entryChunkLen)
	}
	c.cur = append(c.cur, e)
	c.n++
	return c.n
}

// flatten returns every entry added, in order, and releases the chunks.
func (c *entryChunks) flatten() []tree.Entry {
	out := make([]tree.Entry, 0, c.n)
	for _, ch := range c.full {
		out = append(out, ch...)
	}
	out = append(out, c.cur...)
	*c = entryChunks{}
	return out
}
