package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// KeepPreimages makes sure the content every change of todo displaces is
// in the blob store before the op's journal is written, so that the op can
// be undone: content the store holds intact already (a run keeps the base
// content of what its command changed) is left alone, and any other is
// copied into batch, checked against the object and digest Check
// saw (ident); a damaged object is so replaced, and heals.
// Each content is read and written once, however many paths held it.
func KeepPreimages(ctx context.Context, root *fsx.Root, store *blob.Store, batch *blob.Batch, todo []tree.Change, ident map[string]fsx.Stat) error {
	if failpoint.Disabled("keep-preimage") {
		return nil // negative control: an op that cannot be undone
	}
	var digests []blob.Digest
	seen := map[blob.Digest]bool{}
	for _, c := range todo {
		if c.Old == nil || c.Old.Type != tree.File {
			continue
		}
		if d := blob.Digest(c.Old.Digest); !seen[d] {
			seen[d] = true
			digests = append(digests, d)
		}
	}
	kept := allIntact(store, digests)
	for _, c := range todo {
		if c.Old == nil || c.Old.Type != tree.File {
			continue
		}
		d := blob.Digest(c.Old.Digest)
		if kept[d] {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyPreimage(ctx, root, batch, c, ident[c.Path]); err != nil {
			return err
		}
		kept[d] = true
	}
	return nil
}

// allIntact reports which of digests the blob store holds intact (see
// Intact), verified by a few workers: it reads and hashes every object.
func allIntact(store *blob.Store, digests []blob.Digest) map[blob.Digest]bool {
	ok := make([]bool, len(digests))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(digests), 8) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(digests); i = int(next.Add(1) - 1) {
				ok[i] = Intact(store, digests[i])
			}
		}()
	}
	wg.Wait()
	out := make(map[blob.Digest]bool, len(digests))
	for i, d := range digests {
		out[d] = ok[i]
	}
	return out
}

// copyPreimage copies the file at c's path, which must still be the object
// id Check saw holding c.Old, into batch. (WTX_DISABLE=cas, the
// negative control of the compare-and-swap, stores whatever is there.)
func copyPreimage(ctx context.Context, root *fsx.Root, batch *blob.Batch, c tree.Change, id fsx.Stat) error {
	noCAS := failpoint.Disabled("cas")
	changed := &Error{Kind: ErrUnstable, Err: errBeingWritten,
		Msg: fmt.Sprintf("%s changed while it was applied; run the apply again", quote.Path(c.Path))}
	d, err := root.OpenDir(tree.Parent(c.Path))
	if err != nil {
		return cause(fmt.Errorf("store pre-image of %s: %w", quote.Path(c.Path), err))
	}
	defer d.Close()
	f, err := d.Open(tree.Base(c.Path))
	if err != nil {
		return cause(fmt.Errorf("store pre-image of %s: %w", quote.Path(c.Path), err))
	}
	defer f.Close()
	if !noCAS && f.Stat().Ino != id.Ino {
		return changed
	}
	got, _, err := batch.PutFile(ctx, f)
	if err != nil {
		return cause(fmt.Errorf("store pre-image of %s: %w", quote.Path(c.Path), err))
	}
	if string(got) != c.Old.Digest && !noCAS {
		return changed
	}
	return nil
}

// Intact reports whether the blob store holds object d with its content
// whole: a damaged object counts as missing, so that storing its content
// again replaces it (heals it) instead of relying on it.
func Intact(store *blob.Store, d blob.Digest) bool {
	return store.Verify(d) == nil
}
