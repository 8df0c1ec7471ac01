package stage

import (
	"fmt"
	"testing"

	"github.com/wtx-dev/wtx/internal/tree"
)

func TestEntryChunksKeepEveryEntryInOrder(t *testing.T) {
	for _, n := range []int{0, 1, entryChunkLen - 1, entryChunkLen, entryChunkLen + 1, 3*entryChunkLen + 17} {
		var c entryChunks
		for i := range n {
			if got := c.add(tree.Entry{Path: fmt.Sprint(i)}); got != i+1 {
				t.Fatalf("n=%d: add returned %d, want %d", n, got, i+1)
			}
		}
		out := c.flatten()
		if len(out) != n || cap(out) != n {
			t.Fatalf("n=%d: flattened to len %d cap %d", n, len(out), cap(out))
		}
		for i, e := range out {
			if e.Path != fmt.Sprint(i) {
				t.Fatalf("n=%d: entry %d is %q", n, i, e.Path)
			}
		}
	}
}
