package textdiff

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// entry is one path of a tree as git sees it.
type entry struct {
	mode    uint32 // 0 when absent
	content []byte
}

func git(t *testing.T, dir string, stdin []byte, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull, "HOME="+dir,
		"GIT_AUTHOR_NAME=wtx", "GIT_AUTHOR_EMAIL=wtx@example.invalid",
		"GIT_COMMITTER_NAME=wtx", "GIT_COMMITTER_EMAIL=wtx@example.invalid")
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func writeEntry(t *testing.T, root, path string, e entry) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(path))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	switch e.mode {
	case ModeSymlink:
		if err := os.Symlink(string(e.content), p); err != nil {
			t.Fatal(err)
		}
	case ModeFile, ModeExec:
		perm := os.FileMode(0o644)
		if e.mode == ModeExec {
			perm = 0o755
		}
		if err := os.WriteFile(p, e.content, perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, perm); err != nil {
			t.Fatal(err)
		}
	}
}

// readTree returns every file and symlink under root, .git aside.
func readTree(t *testing.T, root string) map[string]entry {
	t.Helper()
	got := map[string]entry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var e entry
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			e = entry{ModeSymlink, []byte(target)}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			e = entry{ModeFile, b}
			if info.Mode().Perm()&0o100 != 0 {
				e.mode = ModeExec
			}
		}
		got[filepath.ToSlash(rel)] = e
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func randBinary(r *rand.Rand) []byte {
	b := make([]byte, 1+r.IntN(3000))
	for i := range b {
		b[i] = byte(r.IntN(256))
	}
	b[r.IntN(len(b))] = 0
	return b
}

func randTarget(r *rand.Rand) []byte {
	return []byte(fmt.Sprintf("../target-%d/file %d", r.IntN(5), r.IntN(100)))
}

// gitCase builds the old and new state of one path.
func gitCase(r *rand.Rand, i int) (string, entry, entry) {
	names := []string{
		"f%d.txt", "dir %d/with space.txt", "sub/deep/café %d", `q"uote%d`, "back\\slash%d",
		"tab\tname%d", "naïve dir %d/x", "plain%d",
	}
	path := fmt.Sprintf(names[i%len(names)], i)
	text := func() []byte { return randText(r, r.IntN(30)) }
	old := text()
	switch i % 14 {
	case 0, 1, 2:
		return path, entry{ModeFile, old}, entry{ModeFile, mutate(r, old)}
	case 3:
		return path, entry{}, entry{ModeFile, text()}
	case 4:
		return path, entry{ModeExec, old}, entry{}
	case 5:
		return path, entry{ModeFile, old}, entry{ModeExec, old}
	case 6:
		return path, entry{ModeExec, old}, entry{ModeFile, mutate(r, old)}
	case 7:
		return path, entry{ModeSymlink, randTarget(r)}, entry{ModeSymlink, randTarget(r)}
	case 8:
		return path, entry{ModeFile, old}, entry{ModeSymlink, randTarget(r)}
	case 9:
		return path, entry{ModeSymlink, randTarget(r)}, entry{ModeExec, old}
	case 10:
		b := randBinary(r)
		nb := append([]byte(nil), b...)
		nb[r.IntN(len(nb))] ^= 0xff
		return path, entry{ModeFile, b}, entry{ModeFile, append(nb, randBinary(r)...)}
	case 11:
		switch r.IntN(3) {
		case 0:
			return path, entry{}, entry{ModeFile, randBinary(r)}
		case 1:
			return path, entry{ModeFile, randBinary(r)}, entry{}
		default:
			return path, entry{ModeFile, old}, entry{ModeFile, randBinary(r)}
		}
	case 12:
		switch r.IntN(3) {
		case 0:
			return path, entry{}, entry{ModeFile, nil}
		case 1:
			return path, entry{ModeFile, nil}, entry{}
		default:
			return path, entry{ModeFile, old}, entry{ModeFile, nil}
		}
	default:
		return path, entry{ModeFile, nil}, entry{ModeFile, text()}
	}
}

func shortID(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

// TestGitApply checks that git applies our output to give exactly the new
// tree, for every kind of change.
func TestGitApply(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH")
	}
	r := rand.New(rand.NewPCG(11, 12))
	for round := 0; round < 4; round++ {
		// git needs --unidiff-zero to apply hunks without context anywhere
		// but at the ends of a file.
		context := round
		applyArgs := []string{"apply"}
		if context == 0 {
			applyArgs = append(applyArgs, "--unidiff-zero")
		}
		dir := t.TempDir()
		git(t, dir, nil, "init", "-q")
		git(t, dir, nil, "config", "core.autocrlf", "false")
		git(t, dir, nil, "config", "core.filemode", "true")
		git(t, dir, nil, "config", "core.symlinks", "true")

		want := map[string]entry{}
		var fds []FileDiff
		for i := 0; i < 50; i++ {
			path, o, n := gitCase(r, round*50+i)
			writeEntry(t, dir, path, o)
			if n.mode != 0 {
				want[path] = n
			}
			fd := FileDiff{Path: path, OldMode: o.mode, NewMode: n.mode, Old: o.content, New: n.content}
			if r.IntN(2) == 0 {
				fd.OldHash, fd.NewHash = shortID(o.content), shortID(n.content)
			}
			fds = append(fds, fd)
		}
		git(t, dir, nil, "add", "-A")
		git(t, dir, nil, "commit", "-q", "--allow-empty", "-m", "old")

		var patch bytes.Buffer
		for _, fd := range fds {
			if err := WriteGitOptions(&patch, fd, Options{Context: context, Binary: true}); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command("git", append(applyArgs, "--check", "-")...)
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(patch.Bytes())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("round %d: git apply --check: %v\n%s\npatch:\n%s", round, err, out, patch.String())
		}
		git(t, dir, patch.Bytes(), append(applyArgs, "-")...)

		got := readTree(t, dir)
		var paths []string
		for p := range want {
			paths = append(paths, p)
		}
		for p := range got {
			if _, ok := want[p]; !ok {
				paths = append(paths, p)
			}
		}
		sort.Strings(paths)
		for _, p := range paths {
			g, w := got[p], want[p]
			if g.mode != w.mode || !bytes.Equal(g.content, w.content) {
				t.Errorf("round %d: %q: got mode %o %q, want mode %o %q", round, p, g.mode, g.content, w.mode, w.content)
			}
		}
	}
}

// TestGitAgreesOnHeaders compares our headers with git's own for the cases
// where both must print the same bytes.
func TestGitAgreesOnHeaders(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not on PATH")
	}
	tests := []struct {
		path string
		o, n entry
	}{
		{"space name.txt", entry{ModeFile, []byte("a\nb\nc\n")}, entry{ModeFile, []byte("a\nB\nc")}},
		{"caf\u00e9 \"q\"", entry{}, entry{ModeFile, []byte("x\n")}},
		{"gone", entry{ModeExec, []byte("x\ny\n")}, entry{}},
		{"mode", entry{ModeFile, []byte("x\n")}, entry{ModeExec, []byte("x\n")}},
		{"link", entry{ModeSymlink, []byte("t1")}, entry{ModeSymlink, []byte("t2")}},
		{"typechange", entry{ModeFile, []byte("x\n")}, entry{ModeSymlink, []byte("t")}},
		{"empty new", entry{}, entry{ModeFile, nil}},
		{"bin", entry{ModeFile, []byte("a\x00b")}, entry{ModeFile, []byte("a\x00c")}},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		git(t, dir, nil, "init", "-q")
		writeEntry(t, dir, tt.path, tt.o)
		git(t, dir, nil, "add", "-A")
		git(t, dir, nil, "commit", "-q", "--allow-empty", "-m", "old")
		os.Remove(filepath.Join(dir, tt.path))
		writeEntry(t, dir, tt.path, tt.n)
		git(t, dir, nil, "add", "-A")
		want := git(t, dir, nil, "diff", "--cached", "--no-color", "--no-renames", "--no-ext-diff")
		// Drop git's index lines: our ids are our own.
		var keep []string
		for _, l := range strings.SplitAfter(want, "\n") {
			if !strings.HasPrefix(l, "index ") {
				keep = append(keep, l)
			}
		}
		want = strings.Join(keep, "")

		var got bytes.Buffer
		fd := FileDiff{Path: tt.path, OldMode: tt.o.mode, NewMode: tt.n.mode, Old: tt.o.content, New: tt.n.content}
		if err := WriteGit(&got, fd, 3); err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("%q:\ngot:\n%s\nwant:\n%s", tt.path, got.String(), want)
		}
	}
}

// A numbered hunk keeps git's section heading after its number.
func TestNumberedHunkKeepsHeading(t *testing.T) {
	old := "package p\n\nfunc main() {\n\ta := 1\n\tb := 2\n\tc := 3\n\td := 4\n\te := 5\n}\n"
	nw := strings.Replace(old, "d := 4", "d := 40", 1)
	var plain, numbered bytes.Buffer
	fd := FileDiff{Path: "p.go", Old: []byte(old), New: []byte(nw), OldMode: ModeFile, NewMode: ModeFile}
	if err := WriteGitOptions(&plain, fd, Options{Context: 1}); err != nil {
		t.Fatal(err)
	}
	if err := WriteGitOptions(&numbered, fd, Options{Context: 1, NumberHunks: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(plain.String(), "@@ -6,3 +6,3 @@ func main() {\n") {
		t.Fatalf("plain diff lacks the heading:\n%s", plain.String())
	}
	if !strings.Contains(numbered.String(), "@@ -6,3 +6,3 @@ hunk 1: func main() {\n") {
		t.Fatalf("numbered diff lacks number and heading:\n%s", numbered.String())
	}
}
