package stage

import (
	"fmt"
	"sync"
	"testing"

	"github.com/wtx-dev/wtx/internal/tree"
)

func TestEntryChunksKeepEveryEntryInOrder(t *testing.T) {
	for _, n := range []int{0, 1, entryChunkLen - 1, entryChunkLen, entryChunkLen + 1, 3*entryChunkLen + 17} {
		c := newEntryChunks(0)
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

func TestEntryChunksWithinHintAreNotCopied(t *testing.T) {
	for _, tc := range []struct{ hint, n int }{
		{1, 1}, {100, 0}, {100, 100}, {100, 176}, {100, 177}, {100, 5000}, {3 * entryChunkLen, 3*entryChunkLen + 1},
		{1000, 100}, {1000, 562}, {1000, 563}, {maxEntryHint + 1, 10},
	} {
		c := newEntryChunks(tc.hint)
		var first *tree.Entry
		for i := range tc.n {
			c.add(tree.Entry{Path: fmt.Sprint(i)})
			if i == 0 {
				if c.hinted != nil {
					first = &c.hinted[0]
				} else {
					first = &c.cur[0]
				}
			}
		}
		out := c.flatten()
		if len(out) != tc.n {
			t.Fatalf("hint %d, n %d: flattened to %d entries", tc.hint, tc.n, len(out))
		}
		for i, e := range out {
			if e.Path != fmt.Sprint(i) {
				t.Fatalf("hint %d, n %d: entry %d is %q", tc.hint, tc.n, i, e.Path)
			}
		}
		if tc.n == 0 {
			continue
		}
		size := len(newEntryChunks(tc.hint).hinted)
		within := tc.n <= size && tc.n >= size/2
		if copied := &out[0] != first; copied == within {
			t.Errorf("hint %d, n %d: copied = %v, want %v", tc.hint, tc.n, copied, !within)
		}
		if !within && cap(out) != tc.n {
			t.Errorf("hint %d, n %d: copied into cap %d", tc.hint, tc.n, cap(out))
		}
	}
}

// Entries added from many goroutines at once, within a hint and past it,
// all come out, each once.
func TestEntryChunksConcurrentAdds(t *testing.T) {
	const goroutines, each = 8, 3000
	for _, hint := range []int{0, 1000, goroutines * each, 4 * goroutines * each} {
		c := newEntryChunks(hint)
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					c.add(tree.Entry{Path: fmt.Sprint(g, "/", i), Size: int64(g*each + i)})
				}
			}()
		}
		wg.Wait()
		out := c.flatten()
		if len(out) != goroutines*each {
			t.Fatalf("hint %d: %d entries out, want %d", hint, len(out), goroutines*each)
		}
		seen := make([]bool, goroutines*each)
		last := make([]int64, goroutines)
		for g := range last {
			last[g] = -1
		}
		for _, e := range out {
			if seen[e.Size] {
				t.Fatalf("hint %d: entry %s twice", hint, e.Path)
			}
			seen[e.Size] = true
			g := e.Size / each
			if e.Size <= last[g] {
				t.Fatalf("hint %d: goroutine %d's entries out of order", hint, g)
			}
			last[g] = e.Size
		}
	}
}
