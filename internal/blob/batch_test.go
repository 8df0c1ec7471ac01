package blob

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// TestBatchConcurrentPuts puts files from many goroutines at once, many of
// them with one content: each content is written once, every object is
// stored and intact after Commit, and no temporary file is left.
func TestBatchConcurrentPuts(t *testing.T) {
	s := newStore(t)
	src := t.TempDir()
	const n = 64
	for i := range n {
		content := fmt.Sprintf("content %d\n", i%8) // eight contents, eight puts each
		if i%16 == 0 {
			content = string(make([]byte, 70<<10)) + content // one large content (i%8 is 0), past the small-object size: Put's path
		}
		if err := os.WriteFile(filepath.Join(src, fmt.Sprint(i)), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := s.NewBatch()
	digests := make([]Digest, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			f, err := fsx.OpenPath(filepath.Join(src, fmt.Sprint(i)))
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			d, _, err := b.PutFile(context.Background(), f)
			if err != nil {
				errs <- err
				return
			}
			digests[i] = d
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	b.mu.Lock()
	written := len(b.pending)
	b.mu.Unlock()
	if written != 9 {
		t.Errorf("%d objects pending for 9 contents (8 small, 1 large): want each once", written)
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	for i, d := range digests {
		data, err := os.ReadFile(filepath.Join(src, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		if d != Sum(data) {
			t.Fatalf("file %d: put returned %s, its content is %s", i, d, Sum(data))
		}
		if err := s.Verify(d); err != nil {
			t.Errorf("file %d: %v", i, err)
		}
	}
	if left := tmpEntries(t, s); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
