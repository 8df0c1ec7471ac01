package wtxtest

import (
	"os"
	"path/filepath"
	"testing"
)

func writeModule(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func mustKey(t *testing.T, root string, failpoints bool) string {
	t.Helper()
	k, err := buildKey(root, failpoints)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestBuildKeyCoversWhatABuildReads: the key of a shared build moves with
// every file of the module (sources, embedded files, go.mod, and test
// files and testdata too, which cost a build but are never missed), the
// build tags and the go command's environment, and stays put for .git.
func TestBuildKeyCoversWhatABuildReads(t *testing.T) {
	root := t.TempDir()
	writeModule(t, root, map[string]string{
		"go.mod":          "module m\n",
		"cmd/wtx/main.go": "package main\n\nfunc main() {}\n",
		"x/x.go":          "package x\n",
		"x/data.sql":      "select 1;\n",
	})
	base := mustKey(t, root, false)
	if mustKey(t, root, false) != base {
		t.Fatal("the same tree gave two keys")
	}
	if mustKey(t, root, true) == base {
		t.Error("the failpoint build has the plain build's key")
	}
	writeModule(t, root, map[string]string{".git/HEAD": "z\n"})
	if k := mustKey(t, root, false); k != base {
		t.Error("writing .git moved the key")
	}
	for _, name := range []string{"x/x.go", "x/data.sql", "go.mod", "x/new.go", "x/x_test.go", "x/testdata/f", "_tmp/a.go", ".hidden/f"} {
		writeModule(t, root, map[string]string{name: "package x // changed\n"})
		k := mustKey(t, root, false)
		if k == base {
			t.Errorf("changing %s left the key as it was", name)
		}
		base = k
	}
	t.Setenv("GOFLAGS", "-tags=other")
	if mustKey(t, root, false) == base {
		t.Error("a change of GOFLAGS left the key as it was")
	}
}

// TestSharedBuildIsReusedUntilTheSourceChanges: a second process asking
// for the same build gets the first one's binary; after a source change
// it gets a new one.
func TestSharedBuildIsReusedUntilTheSourceChanges(t *testing.T) {
	root, dir := t.TempDir(), t.TempDir()
	writeModule(t, root, map[string]string{
		"go.mod":          "module m\n\ngo 1.22\n",
		"cmd/wtx/main.go": "package main\n\nfunc main() {}\n",
	})
	first, err := sharedBuildIn(dir, root, false)
	if err != nil {
		t.Fatal(err)
	}
	fi1, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	again, err := sharedBuildIn(dir, root, false)
	if err != nil {
		t.Fatal(err)
	}
	fi2, err := os.Stat(again)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || !os.SameFile(fi1, fi2) {
		t.Errorf("the same sources built twice: %s then %s", first, again)
	}
	writeModule(t, root, map[string]string{"cmd/wtx/main.go": "package main\n\nfunc main() { println() }\n"})
	changed, err := sharedBuildIn(dir, root, false)
	if err != nil {
		t.Fatal(err)
	}
	if changed == first {
		t.Errorf("a changed source reused the old binary %s", first)
	}
}
