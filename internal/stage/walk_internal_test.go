package stage

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// TestRetyped: a call on a walked name that failed because the name was
// replaced by another type says so (ErrUnstable, naming both types); one
// on a name since removed is errGone; any other failure is passed on as it
// came, so that a real error is never taken for a race.
func TestRetyped(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"file", "same", "gone"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, err := fsx.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	d, err := root.OpenDir(".")
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	seen := map[string]fsx.Stat{}
	for _, n := range []string{"file", "same", "gone"} {
		if seen[n], err = d.Lstat(n); err != nil {
			t.Fatal(err)
		}
	}
	// The walk saw three files; now one is a directory, one is gone.
	if err := os.Remove(filepath.Join(dir, "file")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "file"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "gone")); err != nil {
		t.Fatal(err)
	}
	met := &os.PathError{Op: "open", Path: "file", Err: syscall.EISDIR}
	got := retyped(d, "file", "sub/file", seen["file"], met)
	if !errors.Is(got, ErrUnstable) || !strings.Contains(got.Error(), "sub/file: a file replaced by a dir") {
		t.Errorf("file replaced by a directory: %v, want ErrUnstable naming both types", got)
	}
	if got := retyped(d, "gone", "gone", seen["gone"], met); !errors.Is(got, errGone) {
		t.Errorf("removed name: %v, want errGone", got)
	}
	other := &os.PathError{Op: "open", Path: "same", Err: syscall.EACCES}
	if got := retyped(d, "same", "same", seen["same"], other); got != error(other) {
		t.Errorf("a failure on a name of the same type: %v, want it passed on", got)
	}
	if got := retyped(d, "same", "same", seen["same"], nil); got != nil {
		t.Errorf("no failure: %v", got)
	}
}
