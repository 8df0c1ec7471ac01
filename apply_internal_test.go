package wtx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/tree"
)

// snapshot describes a tree completely: type, permission bits, content or
// link target of every path.
func snapshot(t *testing.T, root string) string {
	t.Helper()
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", rel, fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %q", data)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func buildTree(t *testing.T, root string) {
	t.Helper()
	for _, d := range []string{"keep", "gone/deep", "typechg", "mod"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		"keep/a.txt": "a\n", "gone/x": "x\n", "gone/deep/y": "y\n", "typechg/f": "f\n",
		"mod/m.txt": "one\ntwo\n", "mod/chmod.sh": "#!/bin/sh\n", "filedir": "becomes a dir\n",
	}
	for p, c := range files {
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("keep/a.txt", filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
}

const mixedScript = `set -e
rm -rf gone
rm -rf typechg && echo now-a-file > typechg
rm filedir && mkdir filedir && echo inner > filedir/inner
echo three >> mod/m.txt
chmod +x mod/chmod.sh
ln -sfn mod/m.txt link
mkdir -p new/deeper && echo n > new/deeper/n.txt
ln -s ../nowhere new/dangling
`

// TestApplyUndoesEveryFailedStep fails an apply at every step of a plan
// that mixes every kind of step, and checks that each failure leaves the
// workspace exactly as before, with no temporary files, and that the apply
// then succeeds and yields the view.
func TestApplyUndoesEveryFailedStep(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	buildTree(t, work)
	before := snapshot(t, work)
	ws, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, BeginOptions{Backend: "copy"}) // the test reads the view root
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Run(ctx, []string{"sh", "-c", mixedScript}, RunOptions{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, exit %v", err, res)
	}
	v, err := st.view(ctx)
	if err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, v.Root())
	steps := -1
	engine.TestHookStep = func(i int, s tree.Step) error {
		if i >= steps {
			steps = i + 1
		}
		return nil
	}
	// Count the steps with a dry pass: the hook sees all of them on a
	// successful apply, so fail at n for n = 0, 1, … until one succeeds.
	defer func() { engine.TestHookStep = nil }()
	injected := errors.New("injected failure")
	for n := 0; ; n++ {
		engine.TestHookStep = func(i int, s tree.Step) error {
			if i == n {
				return injected
			}
			return nil
		}
		_, err := st.Apply(ctx, ApplyOptions{})
		if err == nil {
			if n < 10 {
				t.Fatalf("plan has only %d steps; the fixture should exercise more", n)
			}
			t.Logf("failed at each of %d steps, then applied", n)
			break
		}
		if !errors.Is(err, injected) {
			t.Fatalf("step %d: unexpected error %v", n, err)
		}
		if got := snapshot(t, work); got != before {
			t.Fatalf("failure at step %d left the workspace changed:\n%s\nwant:\n%s", n, got, before)
		}
	}
	if got := snapshot(t, work); got != after {
		t.Fatalf("after apply the workspace differs from the view:\n%s\nview:\n%s", got, after)
	}
	if bytes.Contains([]byte(snapshot(t, work)), []byte(tempPrefix)) {
		t.Fatal("temporary files left in the workspace")
	}
}

// TestApplyRefusalHasEveryClass checks, through the library, that an apply
// runs every check before it refuses: a protected path and a drifted one
// come back in one refusal (errors.Is ErrRefused), the protected class
// first, each with its repair, and nothing is written.
func TestApplyRefusalHasEveryClass(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	for p, c := range map[string]string{"a.txt": "a\n", "conf/secret": "s\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, BeginOptions{Protect: []string{"conf"}})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := st.Run(ctx, []string{"sh", "-c", "echo staged > a.txt && echo t > conf/secret"}, RunOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, %v", err, res)
	}
	if err := os.WriteFile(filepath.Join(work, "a.txt"), []byte("outside\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, work)
	_, err = st.Apply(ctx, ApplyOptions{})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("apply: %v, want a refusal", err)
	}
	e := AsError(err)
	if e.Code != CodeProtected {
		t.Errorf("code %s, want %s (the first class present)", e.Code, CodeProtected)
	}
	var classes []ConflictClass
	for _, c := range e.Conflicts {
		classes = append(classes, c.Class())
	}
	if fmt.Sprint(classes) != "[protected drift]" {
		t.Errorf("conflict classes %v, want [protected drift]: %+v", classes, e.Conflicts)
	}
	repaired := map[ConflictClass][]RepairAction{}
	for _, r := range e.Repairs {
		if r.Stage != st.ID() {
			t.Errorf("repair names stage %q, want %s: %+v", r.Stage, st.ID(), r)
		}
		repaired[r.Class] = append(repaired[r.Class], r.Action)
	}
	if !slices.Contains(repaired[ClassProtected], RepairApprove) || !slices.Contains(repaired[ClassDrift], RepairExclude) {
		t.Errorf("repairs %+v, want approve for protected and exclude for drift", e.Repairs)
	}
	if got := snapshot(t, work); got != before {
		t.Fatalf("a refused apply changed the workspace:\n%s", got)
	}
}

// TestRollbackKeepsWritesAfterLanding makes an apply fail after some of its
// files landed, each time once something outside wrote into a file the
// apply had already landed (an append, a rename over it, a chmod): the
// rollback must not throw that write away. The path is left as written,
// the apply fails as not fully undone (internal, its journal kept), and the
// recovery that follows refuses to overwrite it. Every file of the apply
// kind is covered: a modified file (exchanged), a new file in an existing
// directory and a new file in a new directory (landed with the others).
// Its negative control: in a build with -tags wtxfailpoint, with
// WTX_DISABLE=still-written, every case fails (the rollback overwrites).
func TestRollbackKeepsWritesAfterLanding(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	ctx := context.Background()
	writes := map[string]func(p string) error{
		"append": func(p string) error {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				return err
			}
			_, err = f.WriteString("USER\n")
			return errors.Join(err, f.Close())
		},
		"replace": func(p string) error {
			if err := os.WriteFile(p+".new", []byte("USER\n"), 0o644); err != nil {
				return err
			}
			return os.Rename(p+".new", p)
		},
		"chmod": func(p string) error { return os.Chmod(p, 0o600) },
	}
	for _, target := range []string{"a", "new", "n/new"} {
		for how, write := range writes {
			t.Run(target+"/"+how, func(t *testing.T) {
				work, state := t.TempDir(), t.TempDir()
				for _, p := range []string{"a", "z"} {
					if err := os.WriteFile(filepath.Join(work, p), []byte("base "+p+"\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				ws, err := Open(ctx, work, Options{StateDir: state})
				if err != nil {
					t.Fatal(err)
				}
				defer ws.Close()
				st, err := ws.Begin(ctx, BeginOptions{Backend: "copy"})
				if err != nil {
					t.Fatal(err)
				}
				script := "echo staged >> a && echo staged > new && mkdir n m && echo staged > n/new && echo staged > m/x && echo staged >> z"
				if res, err := st.Run(ctx, []string{"sh", "-c", script}, RunOptions{}); err != nil || res.ExitCode != 0 {
					t.Fatalf("run: %v, %v", err, res)
				}
				injected := errors.New("injected failure")
				p := filepath.Join(work, target)
				var wrote []byte
				dirPerms := 0
				engine.TestHookStep = func(i int, s tree.Step) error {
					if s.Kind != tree.StepDirPerm {
						return nil
					}
					// The new files in new directories land before the
					// first directory's mode is set: by the second, every
					// file has landed. Write into the target, then fail.
					if dirPerms++; dirPerms < 2 {
						return nil
					}
					if err := write(p); err != nil {
						return err
					}
					var err error
					wrote, err = os.ReadFile(p)
					if err != nil {
						return err
					}
					return injected
				}
				_, err = st.Apply(ctx, ApplyOptions{})
				engine.TestHookStep = nil
				if wrote == nil {
					t.Fatalf("the hook never wrote (apply: %v)", err)
				}
				if e := AsError(err); e == nil || e.Code != CodeInternal || !strings.Contains(e.Message, engine.ErrWrittenSince.Error()) {
					t.Fatalf("apply: %v; want %s saying the path was %q", err, CodeInternal, engine.ErrWrittenSince)
				}
				got, rerr := os.ReadFile(p)
				if rerr != nil || !bytes.Equal(got, wrote) {
					t.Fatalf("%s holds %q (%v) after the rollback, want the outside write %q", target, got, rerr, wrote)
				}
				if how == "chmod" {
					if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
						t.Fatalf("%s: mode after the rollback %v (%v), want 0600", target, fi.Mode(), err)
					}
				}
				// The recovery that follows refuses to overwrite it.
				if _, err := ws.Recover(ctx, false); err == nil {
					t.Errorf("recovery overwrote nothing and did not refuse")
				}
				if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, wrote) {
					t.Errorf("%s holds %q after recovery, want %q", target, got, wrote)
				}
			})
		}
	}
}

// TestAddedInsideDeletedDirRepairWorks: a stage removes a directory while
// something outside puts a new file in it. The apply refuses, names the
// directory (the change set's path, as an apply's rmdir and recovery do),
// and its "apply the rest" repair, run as offered, applies the rest and
// leaves the directory and the newcomer alone.
func TestAddedInsideDeletedDirRepairWorks(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh")
	}
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	for p, c := range map[string]string{"a.txt": "a\n", "gone/x": "x\n"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(work, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, BeginOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := st.Run(ctx, []string{"sh", "-c", "echo staged > a.txt && rm -rf gone"}, RunOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, %v", err, res)
	}
	if err := os.WriteFile(filepath.Join(work, "gone", "newcomer"), []byte("n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = st.Apply(ctx, ApplyOptions{})
	if !errors.Is(err, ErrRefused) {
		t.Fatalf("apply: %v, want a refusal", err)
	}
	e := AsError(err)
	var found bool
	for _, c := range e.Conflicts {
		if c.Kind == "added-inside-deleted-dir" {
			found = true
			if c.Path != "gone" {
				t.Errorf("conflict path %q, want the directory the stage deletes (gone)", c.Path)
			}
			if !strings.Contains(c.Detail, "gone/newcomer") {
				t.Errorf("detail %q does not name the newcomer", c.Detail)
			}
		}
	}
	if !found {
		t.Fatalf("no added-inside-deleted-dir conflict: %+v", e.Conflicts)
	}
	var rest *Repair
	for i := range e.Repairs {
		if e.Repairs[i].Action == RepairExclude {
			rest = &e.Repairs[i]
		}
	}
	if rest == nil {
		t.Fatalf("no apply-the-rest repair: %+v", e.Repairs)
	}
	// The repair as offered: its paths as literal exclude selectors.
	var ex []string
	for _, p := range rest.Paths {
		ex = append(ex, LiteralSelector(p))
	}
	if _, err := st.Apply(ctx, ApplyOptions{Exclude: ex}); err != nil {
		t.Fatalf("the offered repair %q failed: %v", rest.Command, err)
	}
	for p, want := range map[string]string{"a.txt": "staged\n", "gone/x": "x\n", "gone/newcomer": "n\n"} {
		if got, err := os.ReadFile(filepath.Join(work, p)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
}
