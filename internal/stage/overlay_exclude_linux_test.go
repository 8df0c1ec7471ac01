package stage

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/wtx-dev/wtx/internal/tree"
)

func TestExcludedPaths(t *testing.T) {
	ws := t.TempDir()
	for _, p := range []string{"build/x", "a.key", "src/b.key", "src/deep/c.key", "src/ok.go", "vendor/v.key", "link/x"} {
		if err := os.MkdirAll(filepath.Join(ws, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ws, p), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("build", filepath.Join(ws, "lnk")); err != nil {
		t.Fatal(err)
	}
	sels, err := tree.ParseSelectors([]string{"build", "src/**/*.key", "*.key", "missing/dir", "lnk/x", "vendor"})
	if err != nil {
		t.Fatal(err)
	}
	dirs, files, err := excludedPaths(context.Background(), ws, sels)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(dirs)
	slices.Sort(files)
	if want := []string{"build", "vendor"}; !slices.Equal(dirs, want) {
		t.Errorf("dirs %v, want %v", dirs, want)
	}
	if want := []string{"a.key", "src/b.key", "src/deep/c.key"}; !slices.Equal(files, want) {
		t.Errorf("files %v, want %v", files, want)
	}
}
