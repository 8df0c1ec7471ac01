package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// synthSpec describes a synthetic tree: how many regular files, and the seed
// that makes it reproducible.
type synthSpec struct {
	Files int
	Seed  uint64
	// Small draws every file between 100 bytes and 4 KiB (a package tree
	// like node_modules, and the scale trees) instead of the source mix.
	Small bool
}

// Size mix of a synthetic tree, close to a large source tree: 3% empty
// files, 2% between 100 KiB and 1 MiB, the rest between 1 and 16 KiB.
const (
	emptyPermille = 30
	largePermille = 20
	maxDepth      = 8
)

// fileSize draws one file size from the mix.
func fileSize(r *rand.Rand) int {
	switch k := r.IntN(1000); {
	case k < emptyPermille:
		return 0
	case k < emptyPermille+largePermille:
		return 100<<10 + r.IntN(924<<10)
	default:
		return 1<<10 + r.IntN(15<<10)
	}
}

// writeSynthetic creates dir and fills it with the tree spec describes:
// directories up to maxDepth deep (about one per 15 files), text-like files
// of the size mix, each with a unique first line so no two share content,
// and about one symlink per 1,000 files (some dangling).
func writeSynthetic(dir string, spec synthSpec) error {
	r := rand.New(rand.NewPCG(spec.Seed, 0xbe4c))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("generate %s: %w", dir, err)
	}
	// A pool of text the files take slices of: words over lines, like code.
	words := []string{"func", "return", "struct", "int", "if", "else", "for", "static", "const", "void",
		"error", "nil", "err", "ctx", "buf", "len", "size", "0x1f", "{", "}", "(", ")", ";", "=", "+="}
	var pool bytes.Buffer
	for pool.Len() < 2<<20 {
		for i := range 1 + r.IntN(12) {
			if i > 0 {
				pool.WriteByte(' ')
			}
			pool.WriteString(words[r.IntN(len(words))])
		}
		pool.WriteByte('\n')
	}
	text := pool.Bytes()

	dirs := []string{""}
	nDirs := max(1, spec.Files/15)
	for i := range nDirs {
		parent := dirs[r.IntN(len(dirs))]
		if strings.Count(parent, "/")+1 >= maxDepth {
			parent = ""
		}
		d := path.Join(parent, fmt.Sprintf("d%04d", i))
		if err := os.Mkdir(filepath.Join(dir, filepath.FromSlash(d)), 0o755); err != nil {
			return fmt.Errorf("generate %s: %w", dir, err)
		}
		dirs = append(dirs, d)
	}
	exts := []string{".c", ".h", ".go", ".txt", ".md", ".json", ""}
	files := make([]string, 0, spec.Files)
	for i := range spec.Files {
		p := path.Join(dirs[r.IntN(len(dirs))], fmt.Sprintf("f%06d%s", i, exts[r.IntN(len(exts))]))
		size := fileSize(r)
		if spec.Small {
			size = 100 + r.IntN(4<<10-100)
		}
		var b []byte
		if size > 0 {
			b = fmt.Appendf(make([]byte, 0, size), "// %s seed %d\n", p, spec.Seed)
			for len(b) < size {
				off := r.IntN(len(text))
				b = append(b, text[off:min(len(text), off+size-len(b))]...)
			}
			b = b[:size]
		}
		mode := os.FileMode(0o644)
		if r.IntN(50) == 0 {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), b, mode); err != nil {
			return fmt.Errorf("generate %s: %w", dir, err)
		}
		files = append(files, p)
	}
	for i := range spec.Files/1000 + 1 {
		p := path.Join(dirs[r.IntN(len(dirs))], fmt.Sprintf("link%04d", i))
		target := "missing-target"
		if i%4 != 0 && len(files) > 0 {
			rel, err := filepath.Rel(path.Dir("/"+p), "/"+files[r.IntN(len(files))])
			if err != nil {
				return fmt.Errorf("generate %s: %w", dir, err)
			}
			target = filepath.ToSlash(rel)
		}
		if err := os.Symlink(target, filepath.Join(dir, filepath.FromSlash(p))); err != nil {
			return fmt.Errorf("generate %s: %w", dir, err)
		}
	}
	return nil
}

// removeGit removes every .git (directory or file) under dir, at any depth.
func removeGit(dir string) error {
	var found []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Name() == ".git" && p != dir {
			found = append(found, p)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk %s: %w", dir, err)
	}
	for _, p := range found {
		if err := os.RemoveAll(p); err != nil {
			return err
		}
	}
	return nil
}

// treeStats summarises a tree: its regular files (sorted, slash-separated,
// relative to the root), their total size, the number of directories and
// symlinks, and the deepest file's depth. A version-control directory (.git,
// and a submodule's or worktree's .git file) is left out at any depth: it is
// not the tree's content, and the bench changes only the files listed here.
type treeStats struct {
	Files    []string `json:"-"`
	NFiles   int      `json:"files"`
	Bytes    int64    `json:"bytes"`
	Dirs     int      `json:"dirs"`
	Symlinks int      `json:"symlinks"`
	Depth    int      `json:"depth"`
}

func statTree(root string) (*treeStats, error) {
	st := &treeStats{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.Name() == ".git" {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		switch t := d.Type(); {
		case t.IsDir():
			st.Dirs++
		case t&fs.ModeSymlink != 0:
			st.Symlinks++
		case t.IsRegular():
			if strings.ContainsRune(rel, '\n') {
				return nil // cannot be listed one a line; never changed by the bench
			}
			fi, err := d.Info()
			if err != nil {
				return err
			}
			st.Files = append(st.Files, rel)
			st.Bytes += fi.Size()
			st.Depth = max(st.Depth, strings.Count(rel, "/"))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	slices.Sort(st.Files)
	st.NFiles = len(st.Files)
	return st, nil
}
