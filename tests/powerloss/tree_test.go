package powerloss

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// node is one path of a generated tree.
type node struct {
	path string
	kind byte // 'f' file, 'd' directory, 'l' symlink
	data string
	exec bool
}

// tree is a generated tree, parents before children.
type tree []node

// randomTree makes a small tree: a few files at the top, up to two
// directories of files, sometimes a symlink.
func randomTree(rng *rand.Rand) tree {
	var tr tree
	for i := range 2 + rng.IntN(4) {
		tr = append(tr, node{path: fmt.Sprintf("f%d", i), kind: 'f', data: content(rng), exec: rng.IntN(4) == 0})
	}
	for d := range rng.IntN(3) {
		dir := fmt.Sprintf("d%d", d)
		tr = append(tr, node{path: dir, kind: 'd'})
		for i := range 1 + rng.IntN(3) {
			tr = append(tr, node{path: fmt.Sprintf("%s/g%d", dir, i), kind: 'f', data: content(rng)})
		}
	}
	if rng.IntN(3) == 0 {
		tr = append(tr, node{path: "ln", kind: 'l', data: "f0"})
	}
	return tr
}

// content is a file body: usually short, sometimes a few pages, so that
// data blocks are in flight when the filesystem goes down.
func content(rng *rand.Rand) string {
	n := rng.IntN(64)
	if rng.IntN(4) == 0 {
		n = 4096 + rng.IntN(12288)
	}
	var b strings.Builder
	for i := 0; i < n; i++ {
		if i%60 == 59 {
			b.WriteByte('\n')
			continue
		}
		b.WriteByte(byte('a' + rng.IntN(26)))
	}
	return b.String()
}

func (tr tree) write(root string) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for _, n := range tr {
		p := filepath.Join(root, filepath.FromSlash(n.path))
		var err error
		switch n.kind {
		case 'd':
			err = os.Mkdir(p, 0o755)
		case 'l':
			err = os.Symlink(n.data, p)
		default:
			mode := os.FileMode(0o644)
			if n.exec {
				mode = 0o755
			}
			err = os.WriteFile(p, []byte(n.data), mode)
			if err == nil {
				err = os.Chmod(p, mode)
			}
		}
		if err != nil {
			return fmt.Errorf("write tree %s: %w", p, err)
		}
	}
	return nil
}

// randomScript writes a shell script that changes tr: each path is touched
// at most once (a removed directory takes its children with it), plus new
// files and directories.
func randomScript(rng *rand.Rand, tr tree) string {
	var cmds []string
	gone := map[string]bool{}
	put := func(p, data string, op string) {
		cmds = append(cmds, fmt.Sprintf("printf '%%s' '%s' %s %s", data, op, p))
	}
	for _, n := range tr {
		if gone[filepath.Dir(n.path)] || rng.IntN(2) == 0 {
			continue
		}
		switch n.kind {
		case 'd':
			switch rng.IntN(3) {
			case 0:
				cmds = append(cmds, "rm -r "+n.path)
				gone[n.path] = true
			case 1:
				cmds = append(cmds, "chmod 700 "+n.path)
			default:
				put(n.path+"/new", content(rng), ">")
			}
		case 'l':
			cmds = append(cmds, "rm "+n.path, "ln -s f1 "+n.path)
		default:
			switch rng.IntN(6) {
			case 0:
				put(n.path, content(rng), ">")
			case 1:
				put(n.path, content(rng), ">>")
			case 2:
				cmds = append(cmds, "rm "+n.path)
			case 3:
				cmds = append(cmds, "chmod 755 "+n.path)
			case 4:
				cmds = append(cmds, "rm "+n.path, "ln -s elsewhere "+n.path)
			default:
				cmds = append(cmds, "rm "+n.path, "mkdir "+n.path)
				put(n.path+"/inner", content(rng), ">")
			}
		}
	}
	for i := range rng.IntN(3) {
		put(fmt.Sprintf("n%d", i), content(rng), ">")
	}
	if rng.IntN(3) == 0 {
		cmds = append(cmds, "mkdir -p nd/sub")
		put("nd/sub/f", content(rng), ">")
	}
	if len(cmds) == 0 {
		put("n9", content(rng), ">")
	}
	return "set -e\n" + strings.Join(cmds, "\n")
}
