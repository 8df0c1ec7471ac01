package main

import (
	"math/rand/v2"
	"os"
	"path/filepath"
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
