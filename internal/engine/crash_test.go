package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
)

// node is one path of a test tree: a file (content), a symlink (target)
// or a directory (dir).
type node struct {
	perm    fs.FileMode
	content string
	target  string
	dir     bool
}

// crashBefore and crashAfter are the two states a crash may leave: the op
// runs every kind of step (write, exchange, remove, rmdir, mkdir, chmod,
// a directory's mode, a symlink's target, a type change, new files that
// land together in a new directory).
var (
	crashBefore = map[string]node{
		"keep":         {perm: 0o644, content: "same"},
		"mod":          {perm: 0o644, content: "old content"},
		"gone":         {perm: 0o644, content: "to remove"},
		"link":         {target: "keep"},
		"perm":         {perm: 0o644, content: "mode only"},
		"olddir":       {perm: 0o755, dir: true},
		"olddir/f":     {perm: 0o644, content: "in the old directory"},
		"typechange":   {perm: 0o644, content: "was a file"},
		"closed":       {perm: 0o755, dir: true},
		"closed/there": {perm: 0o644, content: "there before"},
	}
	crashAfter = map[string]node{
		"keep":         {perm: 0o644, content: "same"},
		"mod":          {perm: 0o644, content: "new content"},
		"add":          {perm: 0o640, content: "added"},
		"link":         {target: "mod"},
		"perm":         {perm: 0o600, content: "mode only"},
		"newdir":       {perm: 0o750, dir: true},
		"newdir/a":     {perm: 0o644, content: "a"},
		"newdir/b":     {perm: 0o600, content: "b"},
		"typechange":   {perm: 0o755, dir: true},
		"typechange/g": {perm: 0o644, content: "in the new directory"},
		"closed":       {perm: 0o555, dir: true},
		"closed/there": {perm: 0o644, content: "there before"},
		"closed/new":   {perm: 0o644, content: "new in a closed directory"},
	}
)

const crashOp = "op-crashtest-0123456789"

// makeTree builds nodes under dir, modes exact whatever the umask.
func makeTree(t testing.TB, dir string, nodes map[string]node) {
	paths := make([]string, 0, len(nodes))
	for p := range nodes {
		paths = append(paths, p)
	}
	slices.Sort(paths) // a directory before what it holds
	for _, p := range paths {
		n, full := nodes[p], filepath.Join(dir, p)
		var err error
		switch {
		case n.dir:
			err = os.Mkdir(full, 0o700)
		case n.target != "":
			err = os.Symlink(n.target, full)
		default:
			err = os.WriteFile(full, []byte(n.content), 0o600)
		}
		if err == nil && n.target == "" && !n.dir {
			err = os.Chmod(full, n.perm)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range slices.Backward(paths) { // close directories last
		if n := nodes[p]; n.dir {
			if err := os.Chmod(filepath.Join(dir, p), n.perm); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// render is what a tree of nodes looks like to snapshot.
func render(nodes map[string]node) string {
	var lines []string
	for p, n := range nodes {
		lines = append(lines, line(p, n))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

func line(p string, n node) string {
	switch {
	case n.dir:
		return fmt.Sprintf("%s dir %04o", p, n.perm)
	case n.target != "":
		return fmt.Sprintf("%s -> %s", p, n.target)
	}
	return fmt.Sprintf("%s file %04o %q", p, n.perm, n.content)
}

// snapshot renders the tree at dir, every name in it (a leftover
// temporary file included).
func snapshot(t testing.TB, dir string) string {
	var lines []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p) // p is under dir
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		n := node{perm: fi.Mode().Perm(), dir: fi.IsDir()}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			n.target, err = os.Readlink(p)
		case !fi.IsDir():
			var b []byte
			b, err = os.ReadFile(p)
			n.content = string(b)
		}
		lines = append(lines, line(rel, n))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// entries lists nodes as tree entries, sorted by path.
func entries(nodes map[string]node) []tree.Entry {
	var es []tree.Entry
	for p, n := range nodes {
		e := tree.Entry{Path: p, Type: tree.File, Perm: uint32(n.perm), Size: int64(len(n.content))}
		switch {
		case n.dir:
			e.Type, e.Size = tree.Dir, 0
		case n.target != "":
			e = tree.Entry{Path: p, Type: tree.Symlink, Target: n.target, Size: int64(len(n.target))}
		default:
			e.Digest = string(blob.Sum([]byte(n.content)))
		}
		es = append(es, e)
	}
	tree.SortEntries(es)
	return es
}

// crashStore opens the store of the test tree at dir: the workspace in
// dir/ws, blobs in dir/blobs, journals in dir/state/journal.
func crashStore(t testing.TB, dir string) *Store {
	ws, err := fsx.OpenRoot(filepath.Join(dir, "ws"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ws.Close() }) // a directory handle
	if err := os.MkdirAll(filepath.Join(dir, "blobs"), 0o700); err != nil {
		t.Fatal(err)
	}
	blobs, err := blob.Open(filepath.Join(dir, "blobs"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = blobs.Close() }) // handles only
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	state, err := fsx.OpenRoot(filepath.Join(dir, "state"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = state.Close() }) // a directory handle
	return &Store{Root: ws, Blobs: blobs, Journals: journal.Dir{Root: state, Rel: "journal"}, Workspace: filepath.Join(dir, "ws")}
}

// commitCrashOp runs the op from crashBefore to crashAfter on the store at
// dir, as an apply does: check, store payloads and pre-images, commit.
// Record writes dir/recorded.
func commitCrashOp(t testing.TB, dir string) error {
	ctx := context.Background()
	s := crashStore(t, dir)
	changes := tree.Compare(entries(crashBefore), entries(crashAfter))
	c, err := Check(ctx, s.Root, nil, changes, nil)
	if err != nil {
		return err
	}
	if len(c.Conflicts) > 0 || len(c.Todo) != len(changes) {
		t.Fatalf("check: %d to do of %d, conflicts %v", len(c.Todo), len(changes), c.Conflicts)
	}
	batch := s.Blobs.NewBatch()
	for _, n := range crashAfter {
		if !n.dir && n.target == "" {
			if _, _, err := batch.Put(ctx, strings.NewReader(n.content)); err != nil {
				return err
			}
		}
	}
	if err := KeepPreimages(ctx, s.Root, s.Blobs, batch, c.Todo, c.Ident); err != nil {
		return err
	}
	if err := batch.Commit(); err != nil {
		return err
	}
	record := func(context.Context) error {
		return os.WriteFile(filepath.Join(dir, "recorded"), []byte(crashOp), 0o600)
	}
	return s.Commit(ctx, Op{ID: crashOp, Kind: "apply", Body: []byte("{}")}, c, Finish{Record: record})
}

// TestCrashChild is the process TestCrashRecovery kills: it commits the
// op (or with WTX_ENGINE_CRASH_MODE=recover recovers it) and kills itself
// at the failpoint numbered WTX_ENGINE_CRASH_AT.
func TestCrashChild(t *testing.T) {
	dir, at := os.Getenv("WTX_ENGINE_CRASH_DIR"), os.Getenv("WTX_ENGINE_CRASH_AT")
	if dir == "" {
		t.Skip("run by TestCrashRecovery")
	}
	n, err := strconv.Atoi(at)
	if err != nil {
		t.Fatal(err)
	}
	var count atomic.Int64 // points are hit by the workers too
	testHit = func(string) {
		if count.Add(1) == int64(n) {
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL) // the crash; it does not return
			select {}
		}
	}
	if os.Getenv("WTX_ENGINE_CRASH_MODE") == "recover" {
		recoverAll(t, dir, true)
		return
	}
	if err := commitCrashOp(t, dir); err != nil {
		t.Fatal(err)
	}
}

// crashAt runs the op in a child process killed at failpoint n, and
// reports whether it was killed (false: it ran to the end).
func crashAt(t *testing.T, dir string, n int) bool {
	return crashIn(t, dir, n, "commit")
}

// crashIn runs mode (commit, or recover) in a child process killed at its
// failpoint n, and reports whether it was killed.
func crashIn(t *testing.T, dir string, n int, mode string) bool {
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "WTX_ENGINE_CRASH_DIR="+dir, "WTX_ENGINE_CRASH_AT="+strconv.Itoa(n), "WTX_ENGINE_CRASH_MODE="+mode)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
			return true
		}
	}
	if err != nil {
		t.Fatalf("point %d: %s failed: %v\n%s", n, mode, err, out)
	}
	return false
}

// recoverAll finishes or rolls back every journal of the store at dir as
// recovery does; rollBack false skips the rollback (the negative control).
// It reports whether the op had committed.
func recoverAll(t *testing.T, dir string, rollBack bool) bool {
	ctx := context.Background()
	s := crashStore(t, dir)
	ops, err := s.Journals.Pending()
	if err != nil {
		t.Fatal(err)
	}
	committed := false
	for _, op := range ops {
		j, c, err := s.Journals.Load(op)
		if err != nil {
			t.Fatalf("load the journal of %s: %v", op, err)
		}
		switch {
		case c:
			committed = true
			if err := s.RollForward(ctx, j); err != nil {
				t.Fatalf("roll forward: %v", err)
			}
			// Recording is the caller's and idempotent: as Finish.Record.
			if err := os.WriteFile(filepath.Join(dir, "recorded"), []byte(op), 0o600); err != nil {
				t.Fatal(err)
			}
		case rollBack:
			if _, err := s.RollBack(ctx, j, false); err != nil {
				t.Fatalf("roll back: %v", err)
			}
		}
		if err := s.Journals.Remove(op); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "recorded")); err == nil {
		committed = true // the op finished before the crash, or recovery finished it
	}
	return committed
}

// crashRun kills the op at each failpoint in turn, recovers, and returns
// the points whose recovery left neither exactly the state before nor
// exactly the state after (or the wrong one of them).
// Without rollBack it stops at the first such point (points is then the
// number of points before it).
func crashRun(t *testing.T, rollBack bool) (bad []string, points int) {
	before, after := render(crashBefore), render(crashAfter)
	for n := 1; ; n++ {
		dir := crashDir(t)
		if !crashAt(t, dir, n) {
			if got := snapshot(t, filepath.Join(dir, "ws")); got != after {
				t.Fatalf("the op ran to the end and left:\n%s\nwant:\n%s", got, after)
			}
			return bad, n - 1
		}
		committed := recoverAll(t, dir, rollBack)
		want := before
		if committed {
			want = after
		}
		if got := snapshot(t, filepath.Join(dir, "ws")); got != want {
			bad = append(bad, fmt.Sprintf("killed at point %d (committed %v), recovery left:\n%s\nwant:\n%s", n, committed, got, want))
			if !rollBack {
				return bad, n - 1
			}
		}
	}
}

// crashDir returns a fresh directory holding the workspace before the op.
func crashDir(t *testing.T) string {
	dir := t.TempDir()
	t.Cleanup(func() { openUp(filepath.Join(dir, "ws")) }) // before TempDir's own
	makeTree(t, filepath.Join(dir, "ws"), map[string]node{"": {perm: 0o755, dir: true}})
	makeTree(t, filepath.Join(dir, "ws"), crashBefore)
	return dir
}

// TestCrashRecovery kills a commit at every failpoint of the protocol (a
// process killed with SIGKILL, as a crash) and shows that recovery brings
// the workspace to exactly the state before the op, or, once its commit
// marker is durable, exactly the state after it, with no name of the
// engine's left.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process at each failpoint")
	}
	bad, points := crashRun(t, true)
	if points < 15 {
		t.Fatalf("only %d failpoints: the op should pass more", points)
	}
	for _, b := range bad {
		t.Error(b)
	}
	t.Logf("killed at each of %d points, recovered each time", points)
}

// TestCrashRecoveryNegativeControl is TestCrashRecovery with recovery's
// rollback skipped (the journal dropped as it is): at some point the
// workspace is then left half written, and the check above must see it.
func TestCrashRecoveryNegativeControl(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process at each failpoint")
	}
	bad, points := crashRun(t, false)
	if len(bad) == 0 {
		t.Fatalf("with no rollback, all %d crash points still recovered: the check cannot fail", points)
	}
	t.Logf("without the rollback, a crash at point %d leaves a half-written workspace", points+1)
}

// openUp makes every directory of the tree at dir writable again (the op
// closes one), so that an ordinary user's clean-up can remove it.
func openUp(dir string) {
	// Best effort: TempDir's clean-up reports what stays.
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o755) // as above
		}
		return nil
	})
}

// TestCrashDuringRecovery kills the recovery of a crashed op at each of
// its own failpoints, then recovers again: the workspace must still end
// exactly before or after the op. It does so for a few crash points of
// the op, one before its commit marker and one after; WTX_SOAK=1 for
// every point.
func TestCrashDuringRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("kills a process at each failpoint")
	}
	before, after := render(crashBefore), render(crashAfter)
	points := []int{20, 60}
	if os.Getenv("WTX_SOAK") == "1" {
		points = nil
		for n := 2; n <= 64; n++ {
			points = append(points, n)
		}
	}
	for _, n := range points {
		for m := 1; ; m++ {
			dir := crashDir(t)
			if !crashAt(t, dir, n) {
				t.Fatalf("the op ran to the end before point %d", n)
			}
			marked := crashStore(t, dir).Journals.Committed(crashOp)
			killed := crashIn(t, dir, m, "recover")
			want := before
			if recoverAll(t, dir, true) {
				want = after
			}
			if got := snapshot(t, filepath.Join(dir, "ws")); got != want {
				t.Errorf("op killed at point %d, its recovery at point %d; the next recovery left:\n%s\nwant:\n%s", n, m, got, want)
			}
			if !killed {
				t.Logf("op killed at point %d (committed: %v): its recovery killed at each of %d points", n, marked, m-1)
				break
			}
		}
	}
}
