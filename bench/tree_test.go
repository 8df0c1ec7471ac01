package main

import (
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

func TestFileSizeMix(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var empty, small, large int
	const n = 100000
	for range n {
		switch s := fileSize(r); {
		case s == 0:
			empty++
		case s >= 1<<10 && s < 16<<10:
			small++
		case s >= 100<<10 && s < 1<<20:
			large++
		default:
			t.Fatalf("size %d is outside the mix", s)
		}
	}
	for _, c := range []struct {
		name      string
		got, want int // per mille
	}{
		{"empty", empty * 1000 / n, emptyPermille},
		{"large", large * 1000 / n, largePermille},
		{"small", small * 1000 / n, 1000 - emptyPermille - largePermille},
	} {
		if c.got < c.want-5 || c.got > c.want+5 {
			t.Errorf("%s files: %d‰, want about %d‰", c.name, c.got, c.want)
		}
	}
}

func TestWriteSyntheticIsReproducible(t *testing.T) {
	stats := func(seed uint64) (*treeStats, map[string]string) {
		dir := filepath.Join(t.TempDir(), "tree")
		if err := writeSynthetic(dir, synthSpec{Files: 300, Seed: seed}); err != nil {
			t.Fatal(err)
		}
		st, err := statTree(dir)
		if err != nil {
			t.Fatal(err)
		}
		content := map[string]string{}
		for _, f := range st.Files {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			content[f] = string(b)
		}
		return st, content
	}
	a, ca := stats(3)
	b, cb := stats(3)
	c, cc := stats(4)
	if a.NFiles != 300 || a.Symlinks != 1 || a.Depth > maxDepth {
		t.Fatalf("tree: %d files, %d symlinks, depth %d; want 300, 1, at most %d", a.NFiles, a.Symlinks, a.Depth, maxDepth)
	}
	if a.Bytes != b.Bytes || len(ca) != len(cb) {
		t.Fatalf("same seed, different trees: %d vs %d bytes", a.Bytes, b.Bytes)
	}
	for f, s := range ca {
		if cb[f] != s {
			t.Fatalf("same seed, %s differs", f)
		}
	}
	same := 0
	for f, s := range ca {
		if x, ok := cc[f]; ok && x == s {
			same++
		}
	}
	if a.Bytes == c.Bytes && same == len(ca) {
		t.Fatal("different seeds gave the same tree")
	}
	seen := map[string]string{}
	for f, s := range ca {
		if s == "" {
			continue
		}
		if g, ok := seen[s]; ok {
			t.Fatalf("%s and %s share content; every non-empty file should be unique", f, g)
		}
		seen[s] = f
	}
}

// TestStatTreeLeavesOutGit: a tree that is a git repository (with a
// submodule's .git file and a nested repository) never offers a file under
// .git to change; the bench once appended to .git/packed-refs.
func TestStatTreeLeavesOutGit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	for name, body := range map[string]string{
		"a.c":                      "a\n",
		"sub/b.c":                  "b\n",
		".git/packed-refs":         "# pack-refs\n",
		".git/objects/ab/cdef":     "x",
		"mod/.git":                 "gitdir: ../.git/modules/mod\n",
		"mod/c.c":                  "c\n",
		"nested/.git/HEAD":         "ref: refs/heads/main\n",
		"nested/d.c":               "d\n",
		"not.git/e.c":              "e\n",
		".github/workflows/ci.yml": "on: push\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := exec.LookPath("git"); err == nil {
		cmd := exec.Command("git", "init", "-q", filepath.Join(dir, "real"))
		cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
	}
	st, err := statTree(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".github/workflows/ci.yml", "a.c", "mod/c.c", "nested/d.c", "not.git/e.c", "sub/b.c"}
	if !slices.Equal(st.Files, want) {
		t.Fatalf("files = %q, want %q", st.Files, want)
	}
	// The git baseline's copy loses every .git (a worktree's .git file
	// would lead git init and commit into the real repository), and
	// nothing else.
	if err := removeGit(dir); err != nil {
		t.Fatal(err)
	}
	var left []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p) // p is under dir
			left = append(left, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(left)
	if !slices.Equal(left, want) {
		t.Fatalf("after removeGit: %q, want %q", left, want)
	}
}

func TestStraceCounts(t *testing.T) {
	p := filepath.Join(t.TempDir(), "strace.txt")
	const summary = `% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 40.00    0.004000           4      1000           fsync
 30.00    0.003000           1      2500        12 openat
 30.00    0.003000           1      2000           close
------ ----------- ----------- --------- --------- ----------------
100.00    0.010000           1      5500        12 total
`
	if err := os.WriteFile(p, []byte(summary), 0o644); err != nil {
		t.Fatal(err)
	}
	total, each, err := straceCounts(p)
	if err != nil {
		t.Fatal(err)
	}
	if total != 5500 || len(each) != 3 || each[0] != (syscallCount{"openat", 2500}) || each[2] != (syscallCount{"fsync", 1000}) {
		t.Fatalf("total %d, each %v", total, each)
	}
	if err := os.WriteFile(p, []byte("wtx: error\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := straceCounts(p); err == nil {
		t.Fatal("a summary without a total was read")
	}
}

func TestPerfCount(t *testing.T) {
	for _, c := range []struct {
		csv  string
		want int64
		ok   bool
	}{
		{"# started on Sun Dec  6 07:00:00 2026\n\n49825,,raw_syscalls:sys_enter,1003,100.00,,\n", 49825, true},
		{"<not counted>,,raw_syscalls:sys_enter,0,100.00,,\n", 0, false},
		{"<not supported>,,raw_syscalls:sys_enter,0,100.00,,\n", 0, false},
		{"12,,syscalls:sys_enter_futex,1,100.00,,\n", 0, false},
		{"", 0, false},
	} {
		got, ok := perfCount([]byte(c.csv), "raw_syscalls:sys_enter")
		if got != c.want || ok != c.ok {
			t.Errorf("perfCount(%q) = %d, %v; want %d, %v", c.csv, got, ok, c.want, c.ok)
		}
	}
}
