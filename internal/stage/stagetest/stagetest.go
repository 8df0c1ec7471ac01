//go:build unix

package stagetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Run checks b against the contract every backend keeps. Each case stages
// a fresh workspace in its own temporary directory; the whole suite is
// skipped, with the reason, when b.Probe refuses that directory.
func Run(t *testing.T, b stage.Backend) {
	t.Helper()
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, b stage.Backend)
	}{
		{"ViewEqualsWorkspace", testViewEqualsWorkspace},
		{"ViewChangesStayInView", testViewChangesStayInView},
		{"SymlinksCopiedNotFollowed", testSymlinksNotFollowed},
		{"ScanAfterOpenIsBase", testScanAfterOpen},
		{"SameSizeEditSameSecond", testSameSizeEdit},
		{"Exclude", testExclude},
		{"FIFOIsSpecial", testFIFO},
		{"UnreadableFile", testUnreadable},
		{"NoSharedInodes", testNoSharedInodes},
		{"ReadOnlyDirectories", testReadOnlyDirs},
		{"Cancelled", testCancelled},
		{"RemovedWhileStaging", testRemovedWhileStaging},
	} {
		t.Run(c.name, func(t *testing.T) { c.fn(t, b) })
	}
}

// env is one workspace and one stage directory under a private temporary
// directory.
type env struct {
	b     stage.Backend
	ws    string // workspace, canonical
	state string // state root
	dir   string // the stage's directory, inside state
}

func newEnv(t *testing.T, b stage.Backend) *env {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Runs before the temporary directory is removed: read-only
	// directories left by a case must not make that removal fail.
	t.Cleanup(func() { makeWritable(root) })
	e := &env{b: b, ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state")}
	e.dir = filepath.Join(e.state, "tx")
	for _, d := range []string{e.ws, e.state, e.dir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Probe(context.Background(), e.ws, e.state); err != nil {
		t.Skipf("backend %s cannot stage %s: %v", b.Name(), e.ws, err)
	}
	return e
}

// open stages the workspace and arranges for the view to be released.
func (e *env) open(t *testing.T, exclude ...string) (stage.View, *tree.Manifest) {
	t.Helper()
	sels, err := tree.ParseSelectors(exclude)
	if err != nil {
		t.Fatal(err)
	}
	v, m, err := e.b.Open(context.Background(), stage.OpenRequest{Workspace: e.ws, Dir: e.dir, Exclude: sels})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := v.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if r, ok := v.(stage.Remover); ok {
			if err := r.Remove(context.Background()); err != nil {
				t.Errorf("Remove: %v", err)
			}
		}
	})
	return v, m
}

// removeStage removes the stage directory the way wtx drops a stage: the
// backend's own Remove if it has one, then the directory, opening
// read-only directories first. It fails the test if anything is left.
func (e *env) removeStage(t *testing.T, v stage.View) {
	t.Helper()
	if v != nil {
		v.Close()
		if r, ok := v.(stage.Remover); ok {
			if err := r.Remove(context.Background()); err != nil {
				t.Fatalf("Remove: %v", err)
			}
		}
	}
	makeWritable(e.dir)
	if err := os.RemoveAll(e.dir); err != nil {
		t.Fatalf("removing the stage directory: %v", err)
	}
	if _, err := os.Lstat(e.dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stage directory still there: %v", err)
	}
}

// makeWritable gives every directory under root owner rwx, ignoring errors.
func makeWritable(root string) {
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if d != nil && d.IsDir() {
			os.Chmod(p, 0o700)
		}
		return nil
	})
}

// node is one path of a workspace fixture.
type node struct {
	path   string
	typ    tree.Type
	perm   fs.FileMode
	data   string // file content
	target string // symlink target
}

func file(p string, perm fs.FileMode, data string) node {
	return node{path: p, typ: tree.File, perm: perm, data: data}
}
func dir(p string, perm fs.FileMode) node { return node{path: p, typ: tree.Dir, perm: perm} }
func link(p, target string) node          { return node{path: p, typ: tree.Symlink, target: target} }

// fixture is a workspace with every kind of entry and a spread of
// permission bits.
var fixture = []node{
	file("a.txt", 0o644, "alpha\n"),
	dir("bin", 0o755),
	file("bin/run.sh", 0o755, "#!/bin/sh\necho run\n"),
	dir("empty", 0o700),
	link("link", "a.txt"),
	link("dangling", "does/not/exist"),
	link("abs", "/nonexistent-wtx-target"),
	file("same.txt", 0o640, "0123456789"),
	dir("src", 0o750),
	file("src/main.go", 0o600, "package main\n"),
	dir("src/deep", 0o755),
	dir("src/deep/er", 0o711),
	file("src/deep/er/f", 0o444, strings.Repeat("x", 70000)),
	file("x.log", 0o644, "log\n"),
	file("zero", 0o400, ""),
}

// build creates nodes under root, then gives files and directories
// distinct past modification times with nanoseconds, deepest first so
// that directory times stick.
func build(t *testing.T, root string, nodes []node) {
	t.Helper()
	for _, n := range nodes {
		p := filepath.Join(root, filepath.FromSlash(n.path))
		var err error
		switch n.typ {
		case tree.File:
			err = os.WriteFile(p, []byte(n.data), 0o600)
		case tree.Dir:
			err = os.Mkdir(p, 0o700)
		case tree.Symlink:
			err = os.Symlink(n.target, p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	base := time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC)
	for i := len(nodes) - 1; i >= 0; i-- {
		n := nodes[i]
		if n.typ == tree.Symlink {
			continue
		}
		p := filepath.Join(root, filepath.FromSlash(n.path))
		mt := base.Add(time.Duration(i)*time.Second + time.Duration(i*1001+7)*time.Microsecond)
		if err := os.Chmod(p, n.perm); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mt, mt); err != nil {
			t.Fatal(err)
		}
	}
}

// wsEntry is what the suite sees of one workspace path, read directly.
type wsEntry struct {
	tree.Entry
	mtime    int64
	ino, dev uint64
}

// snapshot lists the tree at root with plain os calls, independently of
// the code under test.
func snapshot(t *testing.T, root string) map[string]wsEntry {
	t.Helper()
	out := map[string]wsEntry{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		st := fi.Sys().(*syscall.Stat_t)
		w := wsEntry{mtime: fi.ModTime().UnixNano(), ino: uint64(st.Ino), dev: uint64(st.Dev)}
		w.Path = filepath.ToSlash(rel)
		w.Type = tree.TypeOf(fi.Mode())
		switch w.Type {
		case tree.File:
			w.Perm = uint32(fi.Mode().Perm())
			w.Size = fi.Size()
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			w.Digest = digest(data)
		case tree.Dir:
			w.Perm = uint32(fi.Mode().Perm())
		case tree.Symlink:
			if w.Target, err = os.Readlink(p); err != nil {
				return err
			}
			w.Size = int64(len(w.Target))
		}
		out[w.Path] = w
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", root, err)
	}
	return out
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// sameSnapshot fails t where b differs from a in any path, type, content,
// permission bits, link target, modification time or inode.
func sameSnapshot(t *testing.T, what string, a, b map[string]wsEntry) {
	t.Helper()
	for p, x := range a {
		y, ok := b[p]
		switch {
		case !ok:
			t.Errorf("%s: %s disappeared", what, p)
		case x != y:
			t.Errorf("%s: %s changed from %+v to %+v", what, p, x, y)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			t.Errorf("%s: %s appeared", what, p)
		}
	}
}

// scan lists the view and fails t on error.
func scan(t *testing.T, v stage.View, m *tree.Manifest, exclude ...string) []tree.Entry {
	t.Helper()
	sels, err := tree.ParseSelectors(exclude)
	if err != nil {
		t.Fatal(err)
	}
	es, err := v.Scan(context.Background(), m, sels)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	for i := 1; i < len(es); i++ {
		if es[i-1].Path >= es[i].Path {
			t.Fatalf("Scan is not sorted: %q before %q", es[i-1].Path, es[i].Path)
		}
	}
	return es
}

// sh runs script with sh inside the view.
func sh(t *testing.T, v stage.View, script string) {
	t.Helper()
	cmd := exec.Command("sh", "-c", script)
	if err := v.Prepare(cmd, stage.RunOptions{}); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("running %q in the view: %v\n%s", script, err, out)
	}
}

// readView reads a staged file's content through the view.
func readView(t *testing.T, v stage.View, rel string) string {
	t.Helper()
	f, err := v.OpenFile(rel)
	if err != nil {
		t.Fatalf("OpenFile(%s): %v", rel, err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatalf("reading %s: %v", rel, err)
	}
	return string(data)
}

func byPath(es []tree.Entry) map[string]tree.Entry {
	out := make(map[string]tree.Entry, len(es))
	for _, e := range es {
		out[e.Path] = e
	}
	return out
}

func testViewEqualsWorkspace(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	want := snapshot(t, e.ws)
	v, m := e.open(t)

	if len(m.Entries) != len(want) {
		t.Errorf("manifest has %d entries, workspace %d", len(m.Entries), len(want))
	}
	for i := range m.Entries {
		me := &m.Entries[i]
		w, ok := want[me.Path]
		if !ok {
			t.Errorf("manifest entry %s is not in the workspace", me.Path)
			continue
		}
		// A backend with lazy base digests may not know a file's digest
		// yet; a digest it knows must be right.
		lazy := *me
		if lazy.Type == tree.File && lazy.Digest == "" {
			lazy.Digest = w.Digest
		}
		if !tree.SameContent(&lazy, &w.Entry) || me.Size != w.Size {
			t.Errorf("manifest %s = %+v, workspace %+v", me.Path, *me, w.Entry)
		}
		if me.Type == tree.File && (me.WS.Mtime != w.mtime || me.WS.Ino != w.ino) {
			t.Errorf("manifest %s records mtime %d inode %d, workspace has %d, %d", me.Path, me.WS.Mtime, me.WS.Ino, w.mtime, w.ino)
		}
	}

	got := byPath(scan(t, v, m))
	if len(got) != len(want) {
		t.Errorf("view has %d entries, workspace %d", len(got), len(want))
	}
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			t.Errorf("%s is missing from the view", p)
			continue
		}
		if !tree.SameContent(&g, &w.Entry) {
			t.Errorf("view %s = %+v, workspace %+v", p, g, w.Entry)
		}
		if g.Type == tree.File && g.Digest == "" && !g.Unchanged {
			t.Errorf("view %s has no digest and is not marked Unchanged", p)
		}
		switch w.Type {
		case tree.File:
			if g.View.Mtime != w.mtime && !g.Unchanged {
				t.Errorf("view %s mtime %v, workspace %v", p, time.Unix(0, g.View.Mtime), time.Unix(0, w.mtime))
			}
			if data := readView(t, v, p); digest([]byte(data)) != w.Digest {
				t.Errorf("OpenFile(%s) reads other content", p)
			}
		case tree.Symlink:
			if target, err := v.Readlink(p); err != nil || target != w.Target {
				t.Errorf("Readlink(%s) = %q, %v; want %q", p, target, err, w.Target)
			}
		}
	}
	if root := v.Root(); root != "" {
		// Directory times, where the view can be looked at directly.
		seen := snapshot(t, root)
		for p, w := range want {
			if w.Type == tree.Dir && seen[p].mtime != w.mtime {
				t.Errorf("view directory %s mtime %v, workspace %v", p, time.Unix(0, seen[p].mtime), time.Unix(0, w.mtime))
			}
		}
	}
}

func testViewChangesStayInView(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	before := snapshot(t, e.ws)
	v, m := e.open(t)
	sh(t, v, `set -e
printf 'changed\n' > a.txt
rm src/main.go
mv bin/run.sh bin/moved.sh
mkdir -p newdir/sub && printf new > newdir/sub/n
chmod 0600 same.txt
ln -sf elsewhere link
rm -r src/deep
rmdir empty
rm zero && mkdir zero
printf tmp > tmp && rm tmp`)
	sameSnapshot(t, "workspace after writing in the view", before, snapshot(t, e.ws))

	if got := readView(t, v, "a.txt"); got != "changed\n" {
		t.Errorf("view reads a.txt as %q", got)
	}
	if got := readView(t, v, "bin/moved.sh"); got != "#!/bin/sh\necho run\n" {
		t.Errorf("view reads bin/moved.sh as %q", got)
	}
	if _, err := v.OpenFile("src/main.go"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("deleted src/main.go: OpenFile error %v, want not exist", err)
	}
	want := map[string]tree.Action{
		"a.txt":         tree.Modified,
		"bin/moved.sh":  tree.Added,
		"bin/run.sh":    tree.Deleted,
		"empty":         tree.Deleted,
		"link":          tree.Modified,
		"newdir":        tree.Added,
		"newdir/sub":    tree.Added,
		"newdir/sub/n":  tree.Added,
		"same.txt":      tree.Modified,
		"src/deep":      tree.Deleted,
		"src/deep/er":   tree.Deleted,
		"src/deep/er/f": tree.Deleted,
		"src/main.go":   tree.Deleted,
		"zero":          tree.Modified,
	}
	cs := tree.Compare(m.Entries, scan(t, v, m))
	got := map[string]tree.Action{}
	for _, c := range cs {
		got[c.Path] = c.Action
	}
	for p, a := range want {
		if got[p] != a {
			t.Errorf("%s: change %v, want %v", p, got[p], a)
		}
	}
	for p, a := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected change %s %v", p, a)
		}
	}
}

func testSymlinksNotFollowed(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	outside := filepath.Join(filepath.Dir(e.ws), "outside")
	build(t, filepath.Dir(e.ws), []node{dir("outside", 0o755), file("outside/secret", 0o644, "secret")})
	build(t, e.ws, []node{
		link("out", outside),
		link("rel", "../outside"),
		link("loop", "loop"),
		dir("d", 0o755),
		link("d/up", ".."),
	})
	v, m := e.open(t)
	for _, tc := range []struct{ path, target string }{{"out", outside}, {"rel", "../outside"}, {"loop", "loop"}, {"d/up", ".."}} {
		me := m.Lookup(tc.path)
		if me == nil || me.Type != tree.Symlink || me.Target != tc.target {
			t.Errorf("manifest %s = %+v, want a symlink to %s", tc.path, me, tc.target)
		}
		if target, err := v.Readlink(tc.path); err != nil || target != tc.target {
			t.Errorf("Readlink(%s) = %q, %v", tc.path, target, err)
		}
	}
	es := scan(t, v, m)
	for _, x := range append(es, m.Entries...) {
		if strings.Contains(x.Path, "secret") || strings.HasPrefix(x.Path, "d/up/") {
			t.Errorf("%s was staged through a symlink", x.Path)
		}
	}
	if len(tree.Compare(m.Entries, es)) != 0 {
		t.Errorf("fresh view differs from its base: %+v", tree.Compare(m.Entries, es))
	}
	if f, err := v.OpenFile("out/secret"); err == nil {
		f.Close()
		t.Error("OpenFile followed a symlink out of the view")
	}
	if f, err := v.OpenFile("out"); err == nil {
		f.Close()
		t.Error("OpenFile opened a symlink")
	}
	if root := v.Root(); root != "" {
		fi, err := os.Lstat(filepath.Join(root, "out"))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("view's out is not a symlink: %v, %v", fi, err)
		}
	}
}

func testScanAfterOpen(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	v, m := e.open(t)
	es := scan(t, v, m)
	if cs := tree.Compare(m.Entries, es); len(cs) != 0 {
		t.Errorf("Scan right after Open reports changes: %+v", cs)
	}
	if len(es) != len(m.Entries) {
		t.Fatalf("Scan has %d entries, manifest %d", len(es), len(m.Entries))
	}
	for i := range es {
		if es[i].Path != m.Entries[i].Path || es[i].Digest != m.Entries[i].Digest || es[i].Target != m.Entries[i].Target {
			t.Errorf("entry %d: scan %+v, manifest %+v", i, es[i], m.Entries[i])
		}
	}
	if tree.Digest(es) != tree.Digest(m.Entries) {
		t.Error("Scan and manifest digests differ")
	}
}

func testSameSizeEdit(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	v, m := e.open(t)
	base := m.Lookup("same.txt")
	if base == nil {
		t.Fatal("same.txt missing from the manifest")
	}
	// Same length, same mtime, right after staging: only the content (and
	// the ctime, which a command cannot set) differs.
	if root := v.Root(); root != "" {
		p := filepath.Join(root, "same.txt")
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("abcdefghij"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
	} else {
		sh(t, v, `set -e; cp -p same.txt .ref; printf abcdefghij > same.txt; touch -r .ref same.txt; rm .ref`)
	}
	es := scan(t, v, m)
	got := byPath(es)["same.txt"]
	if got.View.Mtime != base.WS.Mtime || got.Size != base.Size {
		t.Fatalf("edit did not keep size and mtime: %+v vs base %+v", got, *base)
	}
	cs := tree.Compare(m.Entries, es)
	if len(cs) != 1 || cs[0].Path != "same.txt" || cs[0].Action != tree.Modified {
		t.Fatalf("same-size edit not detected: %+v", cs)
	}
	if cs[0].New.Digest != digest([]byte("abcdefghij")) {
		t.Errorf("edited file digest %s, want the new content's", cs[0].New.Digest)
	}
}

func testExclude(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	exclude := []string{"src/deep", "*.log"}
	v, m := e.open(t, exclude...)
	excluded := func(p string) bool {
		return p == "x.log" || p == "src/deep" || strings.HasPrefix(p, "src/deep/")
	}
	for _, me := range m.Entries {
		if excluded(me.Path) {
			t.Errorf("excluded %s is in the manifest", me.Path)
		}
	}
	if m.Lookup("src/main.go") == nil || m.Lookup("src") == nil {
		t.Error("exclusion took more than it selects")
	}
	for _, p := range []string{"x.log", "src/deep/er/f"} {
		if f, err := v.OpenFile(p); err == nil {
			f.Close()
			t.Errorf("excluded %s is in the view", p)
		}
	}
	if root := v.Root(); root != "" {
		for _, p := range []string{"x.log", "src/deep"} {
			if _, err := os.Lstat(filepath.Join(root, p)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("excluded %s exists in the view root: %v", p, err)
			}
		}
	}
	sh(t, v, `printf x > new.log`)
	es := scan(t, v, m, exclude...)
	for _, x := range es {
		if excluded(x.Path) || x.Path == "new.log" {
			t.Errorf("Scan lists excluded %s", x.Path)
		}
	}
	if cs := tree.Compare(m.Entries, es); len(cs) != 0 {
		t.Errorf("excluded paths produce changes: %+v", cs)
	}
}

func testFIFO(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, []node{file("a", 0o644, "a"), dir("d", 0o755)})
	if err := syscall.Mkfifo(filepath.Join(e.ws, "d", "pipe"), 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	type result struct {
		v   stage.View
		m   *tree.Manifest
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, m, err := b.Open(context.Background(), stage.OpenRequest{Workspace: e.ws, Dir: e.dir})
		ch <- result{v, m, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		// Unblock the reader (if any) so that the test process can end.
		if f, err := os.OpenFile(filepath.Join(e.ws, "d", "pipe"), os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		t.Fatal("Open blocked on a FIFO")
	}
	if r.err != nil {
		t.Fatalf("Open with a FIFO in the workspace: %v", r.err)
	}
	defer r.v.Close()
	me := r.m.Lookup("d/pipe")
	if me == nil || me.Type != tree.Special {
		t.Errorf("manifest entry for the FIFO = %+v, want Special", me)
	}
	if f, err := r.v.OpenFile("d/pipe"); err == nil {
		f.Close()
		t.Error("the FIFO was staged as a file")
	}
	if root := r.v.Root(); root != "" {
		if _, err := os.Lstat(filepath.Join(root, "d", "pipe")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the FIFO is in the view root: %v", err)
		}
	}
	if cs := tree.Compare(r.m.Entries, scan(t, r.v, r.m)); len(cs) != 0 {
		t.Errorf("an unstaged FIFO produces changes: %+v", cs)
	}
	e.removeStage(t, r.v)
}

func testUnreadable(t *testing.T, b stage.Backend) {
	if os.Geteuid() == 0 {
		t.Skip("running as root: permission bits do not stop root from reading a file")
	}
	e := newEnv(t, b)
	build(t, e.ws, []node{file("ok", 0o644, "ok"), file("secret", 0o000, "no")})
	v, _, err := b.Open(context.Background(), stage.OpenRequest{Workspace: e.ws, Dir: e.dir})
	if err == nil {
		v.Close()
		t.Fatal("Open staged a file it cannot read")
	}
	if !errors.Is(err, fs.ErrPermission) {
		t.Errorf("Open error %v does not wrap fs.ErrPermission", err)
	}
	if !strings.Contains(err.Error(), "secret") {
		t.Errorf("Open error %q does not name the file", err)
	}
	e.removeStage(t, nil)
}

func testNoSharedInodes(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	ws := snapshot(t, e.ws)
	v, m := e.open(t)
	if v.Root() == "" {
		t.Skip("the view exists only inside a namespace, where it has inodes of its own; writes copy up (see ViewChangesStayInView)")
	}
	n := 0
	for _, me := range m.Entries {
		if me.Type != tree.File {
			continue
		}
		n++
		f, err := v.OpenFile(me.Path)
		if err != nil {
			t.Fatalf("OpenFile(%s): %v", me.Path, err)
		}
		fi, err := f.Stat()
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		w := ws[me.Path]
		if uint64(st.Ino) == w.ino && uint64(st.Dev) == w.dev {
			t.Errorf("staged %s shares inode %d with the workspace file", me.Path, w.ino)
		}
		if root := v.Root(); root != "" {
			fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(me.Path)))
			if err != nil {
				t.Fatal(err)
			}
			if os.SameFile(fi, mustLstat(t, filepath.Join(e.ws, filepath.FromSlash(me.Path)))) {
				t.Errorf("view root's %s is the workspace file", me.Path)
			}
		}
	}
	if n == 0 {
		t.Fatal("fixture has no files")
	}
}

func mustLstat(t *testing.T, p string) fs.FileInfo {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

func testReadOnlyDirs(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, []node{
		dir("ro", 0o555),
		file("ro/f", 0o444, "read only"),
		dir("ro/sub", 0o500),
		file("ro/sub/g", 0o400, "deeper"),
		dir("ro/sub/x", 0o555),
	})
	v, m := e.open(t)
	got := byPath(scan(t, v, m))
	for p, perm := range map[string]uint32{"ro": 0o555, "ro/f": 0o444, "ro/sub": 0o500, "ro/sub/g": 0o400, "ro/sub/x": 0o555} {
		if g, ok := got[p]; !ok || g.Perm != perm {
			t.Errorf("view %s: %+v, want perm %04o", p, g, perm)
		}
	}
	if s := readView(t, v, "ro/sub/g"); s != "deeper" {
		t.Errorf("ro/sub/g reads %q", s)
	}
	if cs := tree.Compare(m.Entries, scan(t, v, m)); len(cs) != 0 {
		t.Errorf("fresh view of read-only directories reports changes: %+v", cs)
	}
	e.removeStage(t, v)
	if _, err := os.Lstat(filepath.Join(e.ws, "ro", "sub", "g")); err != nil {
		t.Errorf("removing the stage touched the workspace: %v", err)
	}
}

func testCancelled(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	build(t, e.ws, fixture)
	before := snapshot(t, e.ws)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v, m, err := b.Open(ctx, stage.OpenRequest{Workspace: e.ws, Dir: e.dir})
	if err == nil {
		v.Close()
		t.Fatalf("Open with a cancelled context succeeded with %d entries", len(m.Entries))
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Open error %v does not wrap context.Canceled", err)
	}
	sameSnapshot(t, "workspace after a cancelled Open", before, snapshot(t, e.ws))
	e.removeStage(t, nil)
}

// testRemovedWhileStaging removes names while the backend stages the
// workspace, as git gc prunes loose objects under a run: staging must not
// fail for it, the base may list a removed name only as the workspace held
// it before, and the view shows no change against the base (a name left
// out of both is never a deletion). Files, a symlink and a directory tree
// go when the backend reports its first 1,024 entries, with most of the
// tree still to read. Its negative control is WTX_DISABLE=walk-gone in a
// -tags wtxfailpoint build of this package's tests: every backend fails.
func testRemovedWhileStaging(t *testing.T, b stage.Backend) {
	e := newEnv(t, b)
	var nodes []node
	for _, d := range []string{"a", "z"} {
		nodes = append(nodes, dir(d, 0o755))
		for i := range 2000 {
			nodes = append(nodes, file(fmt.Sprintf("%s/f%04d", d, i), 0o644, fmt.Sprintf("%s %d\n", d, i)))
		}
	}
	nodes = append(nodes, dir("z/sub", 0o755), dir("z/sub/deep", 0o755), file("z/sub/deep/x", 0o644, "x\n"), link("z/zlink", "f0000"))
	build(t, e.ws, nodes)
	removed := map[string]bool{}
	var once sync.Once
	progress := func(int) {
		once.Do(func() {
			// From the directory being read (a sequential walk is in
			// a/ now) and from one perhaps not read yet.
			for i := 1500; i < 2000; i++ {
				for _, p := range []string{fmt.Sprintf("a/f%04d", i), fmt.Sprintf("z/f%04d", i-500)} {
					if err := os.Remove(filepath.Join(e.ws, p)); err != nil {
						t.Error(err)
					}
					removed[p] = true
				}
			}
			for _, p := range []string{"z/zlink", "z/sub/deep/x", "z/sub/deep", "z/sub"} {
				if err := os.Remove(filepath.Join(e.ws, p)); err != nil {
					t.Error(err)
				}
				removed[p] = true
			}
		})
	}
	v, m, err := b.Open(context.Background(), stage.OpenRequest{Workspace: e.ws, Dir: e.dir, Progress: progress})
	if err != nil {
		t.Fatalf("Open with names removed under it: %v", err)
	}
	t.Cleanup(func() { e.removeStage(t, v) })
	if len(removed) == 0 {
		t.Fatal("Progress was never called: nothing was removed under the walk, the case cannot fail")
	}
	now := snapshot(t, e.ws)
	for _, en := range m.Entries {
		if _, ok := now[en.Path]; !ok && !removed[en.Path] {
			t.Errorf("the base lists %s, which the workspace never held", en.Path)
		}
	}
	for p := range now {
		if m.Lookup(p) == nil {
			t.Errorf("the base lacks %s, which the workspace holds", p)
		}
	}
	if cs := tree.Compare(m.Entries, scan(t, v, m)); len(cs) > 0 {
		t.Errorf("the view differs from the base right after staging: %d changes, the first %s", len(cs), cs[0].Path)
	}
}
