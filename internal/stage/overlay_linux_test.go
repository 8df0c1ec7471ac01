package stage_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/stage/stagetest"
	"github.com/wtx-dev/wtx/internal/tree"
)

func TestOverlayConformance(t *testing.T) {
	stagetest.Run(t, stage.Overlay{})
}

// overlayEnv is a workspace staged with the overlay backend.
type overlayEnv struct {
	ws, dir string
	v       stage.View
	m       *tree.Manifest
}

// openOverlay builds files (path -> content; a trailing slash makes a
// directory) and stages them, skipping when overlay cannot work here.
func openOverlay(t *testing.T, files map[string]string, share ...string) *overlayEnv {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &overlayEnv{ws: filepath.Join(root, "ws"), dir: filepath.Join(root, "state", "tx")}
	if err := os.MkdirAll(e.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		full := filepath.Join(e.ws, filepath.FromSlash(strings.TrimSuffix(p, "/")))
		if strings.HasSuffix(p, "/") {
			err = os.MkdirAll(full, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(full), 0o755); err == nil {
			err = os.WriteFile(full, []byte(files[p]), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := (stage.Overlay{}).Probe(context.Background(), e.ws, filepath.Dir(e.dir)); err != nil {
		t.Skipf("overlay cannot work here: %v", err)
	}
	sels, err := tree.ParseSelectors(share)
	if err != nil {
		t.Fatal(err)
	}
	e.v, e.m, err = stage.Overlay{}.Open(context.Background(), stage.OpenRequest{Workspace: e.ws, Dir: e.dir, Share: sels})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		e.v.Close()
		e.v.(stage.Remover).Remove(context.Background())
	})
	return e
}

// run runs script in the view and returns its output and error.
func (e *overlayEnv) run(t *testing.T, opts stage.RunOptions, script string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	if err := e.v.Prepare(cmd, opts); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (e *overlayEnv) mustRun(t *testing.T, script string) string {
	t.Helper()
	out, err := e.run(t, stage.RunOptions{}, script)
	if err != nil {
		t.Fatalf("%q in the view: %v\n%s", script, err, out)
	}
	return out
}

// changes scans the view and returns path -> action.
func (e *overlayEnv) changes(t *testing.T) map[string]string {
	t.Helper()
	es, err := e.v.Scan(context.Background(), e.m, nil)
	if err != nil {
		t.Fatalf("Scan: %v", err)
	}
	got := map[string]string{}
	for _, c := range tree.Compare(e.m.Entries, es) {
		got[c.Path] = c.Action.String()
	}
	return got
}

func sameChanges(t *testing.T, got, want map[string]string) {
	t.Helper()
	for p, a := range want {
		if got[p] != a {
			t.Errorf("%s: %q, want %q", p, got[p], a)
		}
	}
	for p, a := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("unexpected change %s %s", p, a)
		}
	}
}

func TestOverlayWhiteoutsAndOpaqueDirs(t *testing.T) {
	e := openOverlay(t, map[string]string{
		"d/a": "a", "d/b": "b", "d/sub/c": "c", "e": "e", "keep/x": "x", "f": "f",
	})
	e.mustRun(t, `set -e
rm e
rm -r d && mkdir d && printf new > d/new
rm -r keep/x
mkdir f.d`)
	sameChanges(t, e.changes(t), map[string]string{
		"e": "deleted", "d/a": "deleted", "d/b": "deleted", "d/sub": "deleted", "d/sub/c": "deleted",
		"d/new": "added", "keep/x": "deleted", "f.d": "added",
	})
	// The base digests of deleted files were filled from the workspace.
	if b := e.m.Lookup("d/a"); b.Digest == "" {
		t.Error("Scan left the digest of deleted d/a unknown")
	}
	if _, err := e.v.OpenFile("d/a"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenFile of a path beneath an opaque directory: %v", err)
	}
	if _, err := e.v.OpenFile("e"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenFile of a whited-out path: %v", err)
	}
	if f, err := e.v.OpenFile("d/new"); err != nil {
		t.Errorf("OpenFile(d/new): %v", err)
	} else {
		f.Close()
	}
}

func TestOverlayTouchedButUnchanged(t *testing.T) {
	e := openOverlay(t, map[string]string{"a": "same", "b": "same", "dir/c": "c"})
	e.mustRun(t, `set -e
touch a
chmod 0644 a
printf same > b
touch dir/c.tmp && rm dir/c.tmp`)
	if _, err := os.Lstat(filepath.Join(e.dir, "upper", "b")); err != nil {
		t.Fatalf("b was not copied up, the case proves nothing: %v", err)
	}
	sameChanges(t, e.changes(t), map[string]string{})
	e.mustRun(t, `chmod 0600 a`)
	sameChanges(t, e.changes(t), map[string]string{"a": "modified"})
}

func TestOverlayLiveLowerAndRunAgain(t *testing.T) {
	e := openOverlay(t, map[string]string{"untouched": "old", "mine": "old"})
	e.mustRun(t, `printf staged > mine`)
	if err := os.WriteFile(filepath.Join(e.ws, "untouched"), []byte("new outside"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := e.mustRun(t, `cat untouched; printf ' '; cat mine`); got != "new outside staged" {
		t.Errorf("second run reads %q, want the workspace's current untouched and the stage's mine", got)
	}
	if data, _ := os.ReadFile(filepath.Join(e.ws, "mine")); string(data) != "old" {
		t.Errorf("workspace mine = %q", data)
	}
	sameChanges(t, e.changes(t), map[string]string{"mine": "modified"})
}

func TestOverlayWorkspacePathAndCwd(t *testing.T) {
	e := openOverlay(t, map[string]string{"sub/f": "f"})
	cmd := exec.Command("/bin/sh", "-c", `pwd; printf x > here`)
	cmd.Dir = "sub"
	if err := e.v.Prepare(cmd, stage.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != filepath.Join(e.ws, "sub") {
		t.Errorf("command ran in %q, want the workspace's own path %q", got, filepath.Join(e.ws, "sub"))
	}
	sameChanges(t, e.changes(t), map[string]string{"sub/here": "added"})
}

func TestOverlayShare(t *testing.T) {
	e := openOverlay(t, map[string]string{"cache/old": "o", "src": "s"}, "cache")
	e.mustRun(t, `set -e; printf hot > cache/new; printf s2 > src`)
	if data, err := os.ReadFile(filepath.Join(e.ws, "cache", "new")); err != nil || string(data) != "hot" {
		t.Errorf("a write to a shared path did not go straight through: %q, %v", data, err)
	}
	if data, _ := os.ReadFile(filepath.Join(e.ws, "src")); string(data) != "s" {
		t.Errorf("an unshared write reached the workspace: %q", data)
	}
	if e.m.Lookup("cache") != nil || e.m.Lookup("cache/old") != nil {
		t.Error("a shared path is in the base manifest")
	}
	sameChanges(t, e.changes(t), map[string]string{"src": "modified"})
}

func TestOverlayReadOnly(t *testing.T) {
	e := openOverlay(t, map[string]string{"a": "a"})
	if out, err := e.run(t, stage.RunOptions{ReadOnly: true}, `cat a`); err != nil || out != "a" {
		t.Errorf("reading a read-only view: %q, %v", out, err)
	}
	if out, err := e.run(t, stage.RunOptions{ReadOnly: true}, `printf x > a`); err == nil {
		t.Errorf("a write to a read-only view succeeded: %s", out)
	}
	if out, err := e.run(t, stage.RunOptions{ReadOnly: true}, `printf x > new`); err == nil {
		t.Errorf("a create in a read-only view succeeded: %s", out)
	}
	sameChanges(t, e.changes(t), map[string]string{})
}

// TestOverlayReadOnlyShare checks that --read-only covers a shared path
// and everything in it (it is bound read-only before it is attached),
// while a run without it writes there straight through.
func TestOverlayReadOnlyShare(t *testing.T) {
	e := openOverlay(t, map[string]string{"cache/sub/old": "o", "a": "a"}, "cache")
	for _, p := range []string{"cache/new", "cache/sub/new"} {
		if out, err := e.run(t, stage.RunOptions{ReadOnly: true}, "printf x > "+p); err == nil {
			t.Errorf("a write to %s in a read-only view succeeded: %s", p, out)
		}
		if _, err := os.Lstat(filepath.Join(e.ws, p)); err == nil {
			t.Errorf("%s reached the workspace from a read-only view", p)
		}
	}
	e.mustRun(t, "printf x > cache/sub/new")
	if data, err := os.ReadFile(filepath.Join(e.ws, "cache", "sub", "new")); err != nil || string(data) != "x" {
		t.Errorf("without --read-only, a write to the shared path did not go through: %q, %v", data, err)
	}
}

func TestOverlayNoNetwork(t *testing.T) {
	e := openOverlay(t, map[string]string{"a": "a"})
	ifaces := func(opts stage.RunOptions) []string {
		out, err := e.run(t, opts, `cat /proc/net/dev`)
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		var names []string
		for _, line := range strings.Split(out, "\n") {
			if name, _, ok := strings.Cut(line, ":"); ok {
				names = append(names, strings.TrimSpace(name))
			}
		}
		return names
	}
	if got := ifaces(stage.RunOptions{NoNetwork: true}); len(got) != 1 || got[0] != "lo" {
		t.Errorf("interfaces with NoNetwork: %v, want [lo]", got)
	}
	if got := ifaces(stage.RunOptions{}); len(got) < 2 {
		t.Logf("this machine has only %v: the contrast proves nothing here", got)
	}
}

// TestCopyConfinesOrRefuses checks that the copy backend gives --read-only
// where it can confine a command (the write fails, the view and the
// workspace stay as they were) and refuses it with ErrConfinement where it
// cannot.
func TestCopyConfinesOrRefuses(t *testing.T) {
	ws, dir := t.TempDir(), t.TempDir()
	v, _, err := stage.Copy{}.Open(context.Background(), stage.OpenRequest{Workspace: ws, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	for _, opts := range []stage.RunOptions{{ReadOnly: true}, {NoNetwork: true}, {Confine: true}} {
		err := v.Prepare(exec.Command("true"), opts)
		if stage.CanConfineViews() != (err == nil) || err != nil && !errors.Is(err, stage.ErrConfinement) {
			t.Errorf("Prepare(%+v) = %v where views can be confined: %v", opts, err, stage.CanConfineViews())
		}
	}
	if stage.CanConfineViews() {
		cmd := exec.Command("sh", "-c", `echo x > f || exit 3; echo x > "$0/g" || exit 4`, ws)
		c, err := stage.Start(v, cmd, stage.RunOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.Wait()
		if err != nil {
			t.Fatal(err)
		}
		if out.ExitCode != 3 || !out.Confined {
			t.Errorf("a write in a read-only copy view: exit %d, confined %v; want 3 (refused), confined", out.ExitCode, out.Confined)
		}
		for _, p := range []string{filepath.Join(v.Root(), "f"), filepath.Join(ws, "g"), filepath.Join(ws, "f")} {
			if _, err := os.Lstat(p); err == nil {
				t.Errorf("%s was written", p)
			}
		}
	}
	sels, _ := tree.ParseSelectors([]string{"cache"})
	if _, _, err := (stage.Copy{}).Open(context.Background(), stage.OpenRequest{Workspace: ws, Dir: t.TempDir(), Share: sels}); !errors.Is(err, stage.ErrUnsupported) {
		t.Errorf("copy with --share: %v, want ErrUnsupported", err)
	}
}

// TestOverlayOneMountPerUpper checks that a second command in a view
// whose overlay is mounted by a first one fails instead of mounting the
// same upper directory twice.
func TestOverlayOneMountPerUpper(t *testing.T) {
	e := openOverlay(t, map[string]string{"a": "a\n"})
	first := exec.Command("/bin/sh", "-c", "echo up; exec sleep 30")
	if err := e.v.Prepare(first, stage.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := first.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		first.Process.Kill()
		first.Wait()
	}()
	buf := make([]byte, 3)
	if _, err := out.Read(buf); err != nil {
		t.Fatalf("the first command did not start: %v", err)
	}
	msg, err := e.run(t, stage.RunOptions{}, "echo second")
	if err == nil || !strings.Contains(msg, "in use by another command") {
		t.Errorf("a second mount of the same upper directory: %v\n%s", err, msg)
	}
}
