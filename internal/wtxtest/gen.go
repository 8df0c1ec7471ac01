package wtxtest

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// A tree model maps a slash-separated relative path to its type: 'f' for a
// regular file, 'd' for a directory, 'l' for a symlink.
type model map[string]byte

func (m model) of(typ byte) []string {
	var out []string
	for p, t := range m {
		if t == typ {
			out = append(out, p)
		}
	}
	sort.Strings(out)
	return out
}

// dirs lists the directories new entries may go in, "." included.
func (m model) dirs() []string { return append([]string{"."}, m.of('d')...) }

// removeAll drops p and everything beneath it.
func (m model) removeAll(p string) {
	for q := range m {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m, q)
		}
	}
}

// gen draws names, contents and choices from one seeded source.
type gen struct {
	rng  *rand.Rand
	next int
}

func (g *gen) pick(s []string) string { return s[g.rng.IntN(len(s))] }

// name returns a fresh base name, never seen before in this generator.
func (g *gen) name() string {
	g.next++
	return fmt.Sprintf("%c%d", 'a'+rune(g.rng.IntN(26)), g.next)
}

func (g *gen) content() string {
	if g.rng.IntN(8) == 0 {
		return ""
	}
	words := make([]string, 1+g.rng.IntN(4))
	for i := range words {
		words[i] = fmt.Sprintf("w%d", g.rng.IntN(1000))
	}
	return strings.Join(words, " ") + "\n"
}

func (g *gen) fileMode() fs.FileMode {
	return []fs.FileMode{0o644, 0o644, 0o755, 0o600, 0o700}[g.rng.IntN(5)]
}

// target returns a symlink target for a link at p: a dangling name, a
// sibling, or a path up and back down.
func (g *gen) target(m model, p string) string {
	switch g.rng.IntN(3) {
	case 0:
		return "missing-" + g.name()
	case 1:
		if files := m.of('f'); len(files) > 0 {
			up := strings.Repeat("../", strings.Count(p, "/"))
			return up + g.pick(files)
		}
	}
	return "./" + g.name()
}

func join(dir, name string) string {
	if dir == "." {
		return name
	}
	return dir + "/" + name
}

// RandomTree fills the empty directory dir with a random tree of about n
// paths (files with assorted modes, nested directories, symlinks to files
// and dangling ones), the same for the same rng state.
func RandomTree(rng *rand.Rand, dir string, n int) error {
	g := &gen{rng: rng, next: 1000}
	m := model{}
	for len(m) < n {
		p := join(g.pick(m.dirs()), g.name())
		full := filepath.Join(dir, filepath.FromSlash(p))
		var err error
		switch r := rng.IntN(10); {
		case r < 3:
			err = os.Mkdir(full, 0o755)
			m[p] = 'd'
		case r < 8:
			mode := g.fileMode()
			if err = os.WriteFile(full, []byte(g.content()), mode); err == nil {
				err = os.Chmod(full, mode)
			}
			m[p] = 'f'
		default:
			err = os.Symlink(g.target(m, p), full)
			m[p] = 'l'
		}
		if err != nil {
			return fmt.Errorf("random tree %s: %w", dir, err)
		}
	}
	return nil
}

// ChangeScript returns a POSIX sh script of about ops random changes to
// the tree at dir, to be run with dir as its working directory: creations
// (also in new nested directories), modifications, deletions, chmods,
// symlinks (dangling ones too), type changes between file, directory and
// symlink, and deletions of whole directories. It never writes through a
// symlink. The script is the same for the same rng state and tree.
func ChangeScript(rng *rand.Rand, dir string, ops int) (string, error) {
	m := model{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			m[filepath.ToSlash(rel)] = 'l'
		case d.IsDir():
			m[filepath.ToSlash(rel)] = 'd'
		default:
			m[filepath.ToSlash(rel)] = 'f'
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("change script %s: %w", dir, err)
	}
	g := &gen{rng: rng, next: 5000}
	var b strings.Builder
	b.WriteString("set -e\n")
	write := func(p string) {
		if c := g.content(); c == "" {
			fmt.Fprintf(&b, ": > %s\n", p)
		} else {
			fmt.Fprintf(&b, "printf '%%s\\n' '%s' > %s\n", strings.TrimSuffix(c, "\n"), p)
		}
		m[p] = 'f'
	}
	for done := 0; done < ops; {
		files, dirs, links := m.of('f'), m.of('d'), m.of('l')
		switch rng.IntN(13) {
		case 0: // create a file
			write(join(g.pick(m.dirs()), g.name()))
		case 1: // create a file in new nested directories
			d := join(g.pick(m.dirs()), g.name())
			m[d] = 'd'
			for i := rng.IntN(3); i > 0; i-- {
				d += "/" + g.name()
				m[d] = 'd'
			}
			fmt.Fprintf(&b, "mkdir -p %s\n", d)
			write(d + "/" + g.name())
		case 2, 3: // modify a file
			if len(files) == 0 {
				continue
			}
			write(g.pick(files))
		case 4: // delete a file or a symlink
			c := append(files, links...)
			if len(c) == 0 {
				continue
			}
			p := g.pick(c)
			fmt.Fprintf(&b, "rm -f %s\n", p)
			delete(m, p)
		case 5: // chmod a file
			if len(files) == 0 {
				continue
			}
			fmt.Fprintf(&b, "chmod %o %s\n", g.fileMode(), g.pick(files))
		case 6: // new symlink
			p := join(g.pick(m.dirs()), g.name())
			fmt.Fprintf(&b, "ln -s %s %s\n", g.target(m, p), p)
			m[p] = 'l'
		case 7: // file -> directory
			if len(files) == 0 {
				continue
			}
			p := g.pick(files)
			fmt.Fprintf(&b, "rm -f %s\nmkdir %s\n", p, p)
			m[p] = 'd'
			write(p + "/" + g.name())
		case 8: // directory -> file
			if len(dirs) == 0 {
				continue
			}
			p := g.pick(dirs)
			fmt.Fprintf(&b, "rm -rf %s\n", p)
			m.removeAll(p)
			write(p)
		case 9: // symlink -> file
			if len(links) == 0 {
				continue
			}
			p := g.pick(links)
			fmt.Fprintf(&b, "rm -f %s\n", p)
			write(p)
		case 10: // file or symlink -> (another) symlink
			c := append(files, links...)
			if len(c) == 0 {
				continue
			}
			p := g.pick(c)
			fmt.Fprintf(&b, "rm -f %s\nln -s %s %s\n", p, g.target(m, p), p)
			m[p] = 'l'
		case 11: // delete a directory with its contents
			if len(dirs) == 0 {
				continue
			}
			p := g.pick(dirs)
			fmt.Fprintf(&b, "rm -rf %s\n", p)
			m.removeAll(p)
		case 12: // directory permissions
			if len(dirs) == 0 {
				continue
			}
			fmt.Fprintf(&b, "chmod %s %s\n", g.pick([]string{"700", "755", "750"}), g.pick(dirs))
		}
		done++
	}
	return b.String(), nil
}

// CopyTree copies the tree at src to dst (which must not exist): files with
// their content and permission bits, directories, and symlinks as links.
// Ownership and times are not copied.
func CopyTree(src, dst string) error {
	var dirs []string
	var modes []fs.FileMode
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			if err := os.Mkdir(to, 0o700); err != nil {
				return err
			}
			dirs = append(dirs, to)
			modes = append(modes, fi.Mode().Perm()|fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
		case fi.Mode()&fs.ModeSymlink != 0:
			t, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(t, to)
		case fi.Mode().IsRegular():
			return copyFile(p, to, fi.Mode())
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("copy tree %s: %w", src, err)
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(dirs[i], modes[i]); err != nil {
			return fmt.Errorf("copy tree %s: %w", src, err)
		}
	}
	return nil
}

func copyFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(dst, mode.Perm()|mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	}
	return err
}
