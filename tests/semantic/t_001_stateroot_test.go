package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// A stateAttack plants a symlink in the state root, where wtx keeps a file
// or directory of its own, pointing outside the state root, and runs a
// command that writes there.
type stateAttack struct {
	name string
	// setup prepares the workspace and its state root and returns the
	// stage the attack is about ("" for none).
	setup func(e *stateEnv) string
	// plant puts the link in the state root st, toward out, and returns
	// its path.
	plant func(t *testing.T, st, tx, out string) string
	// args is the command that writes through the link.
	args func(tx string) []string
	// env is added to the command's environment (a crash point that keeps
	// what the command wrote).
	env []string
	// exit is the command's exit status on a refusal: 1, or 125 for a
	// run (whose own failures are told from its command's).
	exit int
	// mount, when set, plants a mount point rather than a link: a command
	// line that bind-mounts out at what plant made, then runs wtx (in a
	// user and mount namespace of its own).
	mount func(t *testing.T, out, at string) []string
}

// replaceWithLink replaces what is at p (if anything) with a symlink to
// target.
func replaceWithLink(t *testing.T, target, p string) string {
	t.Helper()
	if err := os.RemoveAll(p); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// workspaceStateDir is the directory of the only workspace of the state
// root st.
func workspaceStateDir(t *testing.T, st string) string {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(st, "workspaces", "*"))
	if err != nil || len(dirs) != 1 {
		t.Fatalf("workspace directories in %s: %v %v", st, dirs, err)
	}
	return dirs[0]
}

// sha256 prefixes of the contents the attacks write: "a\n" (a.txt, whose
// pre-image a run keeps) and "hello" (what a stage adds, stored by its
// apply).
const (
	preimagePrefix = "87"
	helloPrefix    = "2c"
)

var stateAttacks = []stateAttack{
	{
		// A run keeps the pre-image of the file its command changes.
		name:  "run/objects",
		setup: func(e *stateEnv) string { e.must("list"); return "" },
		plant: func(t *testing.T, st, _, out string) string {
			return replaceWithLink(t, out, filepath.Join(st, "objects", preimagePrefix))
		},
		args: func(string) []string {
			return []string{"--json", "run", "--backend", "copy", "--", "sh", "-c", "printf bye > a.txt"}
		},
		exit: 125,
	},
	{
		// An apply stores the contents it writes.
		name:  "apply/objects",
		setup: func(e *stateEnv) string { return e.stage("printf hello > new.txt") },
		plant: func(t *testing.T, st, _, out string) string {
			return replaceWithLink(t, out, filepath.Join(st, "objects", helloPrefix))
		},
		args: func(tx string) []string { return []string{"--json", "apply", tx} },
	},
	{
		// An apply writes its journal before it touches the workspace.
		name:  "apply/journal",
		setup: func(e *stateEnv) string { return e.stage("printf hello > new.txt") },
		plant: func(t *testing.T, st, _, out string) string {
			return replaceWithLink(t, out, filepath.Join(workspaceStateDir(t, st), "journal"))
		},
		args: func(tx string) []string { return []string{"--json", "apply", tx} },
		env:  []string{"WTX_FAILPOINT=apply:journaled"},
	},
	{
		// An undo is journaled as an apply is.
		name: "undo/journal",
		setup: func(e *stateEnv) string {
			e.must("apply", e.stage("printf hello > new.txt"))
			return ""
		},
		plant: func(t *testing.T, st, _, out string) string {
			return replaceWithLink(t, out, filepath.Join(workspaceStateDir(t, st), "journal"))
		},
		args: func(string) []string { return []string{"--json", "undo"} },
		env:  []string{"WTX_FAILPOINT=apply:journaled"},
	},
	{
		// The workspace lock is created when missing.
		name:  "apply/lock",
		setup: func(e *stateEnv) string { return e.stage("printf hello > new.txt") },
		plant: func(t *testing.T, st, _, out string) string {
			return replaceWithLink(t, filepath.Join(out, "made-by-lock"), filepath.Join(workspaceStateDir(t, st), "lock"))
		},
		args: func(tx string) []string { return []string{"--json", "apply", tx} },
	},
	{
		// A run records who holds the stage in its busy lock.
		name:  "run/busy",
		setup: func(e *stateEnv) string { return e.stage("printf hello > new.txt") },
		plant: func(t *testing.T, st, tx, out string) string {
			return replaceWithLink(t, filepath.Join(out, "victim"), filepath.Join(st, "stages", tx, "busy"))
		},
		args: func(tx string) []string { return []string{"--json", "run", "--tx", tx, "--", "true"} },
		exit: 125,
	},
	{
		// A drop takes the stage's busy lock, then removes its directory.
		name:  "drop/stage",
		setup: func(e *stateEnv) string { return e.stage("printf hello > new.txt") },
		plant: func(t *testing.T, st, tx, out string) string {
			return replaceWithLink(t, out, filepath.Join(st, "stages", tx))
		},
		args: func(tx string) []string { return []string{"--json", "drop", tx} },
	},
	{
		// A drop removes the stage's directory, which must stop at a
		// mount point in it (here a bind mount of out, in the view).
		name:  "drop/mount",
		setup: func(e *stateEnv) string { return e.stage("printf hello > new.txt") },
		plant: func(t *testing.T, st, tx, _ string) string {
			at := filepath.Join(st, "stages", tx, "view", "m")
			if err := os.Mkdir(at, 0o700); err != nil {
				t.Fatal(err)
			}
			return at
		},
		args:  func(tx string) []string { return []string{"--json", "drop", tx} },
		mount: bindAt,
	},
	{
		// gc removes the objects nothing needs, old enough.
		name:  "gc/objects",
		setup: func(e *stateEnv) string { e.must("list"); return "" },
		plant: func(t *testing.T, st, _, out string) string {
			return replaceWithLink(t, out, filepath.Join(st, "objects", "00"))
		},
		args: func(string) []string { return []string{"--json", "gc"} },
	},
}

// TestT_001_StateRoot checks T-001 for the state root: a symlink planted
// where wtx keeps its own directory or file (an objects fan-out directory,
// the journal directory, the workspace lock, a stage's busy lock, a stage
// directory), pointing outside the state root, is reported as damage
// (io.corrupt, naming it) by the command that would write through it, and
// nothing outside changes; so is a mount point in a stage's directory,
// which a drop must not remove through. The negative control
// (WTX_DISABLE=nofollow: paths resolved the ordinary way) must let each
// planted link or mount steer wtx's writes outside, into a directory the
// test owns.
func TestT_001_StateRoot(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, true)
	for _, a := range stateAttacks {
		t.Run(a.name, func(t *testing.T) {
			for _, disable := range []bool{false, true} {
				runStateAttack(t, bin, a, disable)
			}
		})
	}
}

// runStateAttack runs a once, with the discipline or (disable) without.
func runStateAttack(t *testing.T, bin string, a stateAttack, disable bool) {
	t.Helper()
	e := newStateEnv(t)
	e.bin = bin
	tx := a.setup(e)
	out := filepath.Join(filepath.Dir(e.st), "outside")
	if err := os.Mkdir(out, 0o700); err != nil {
		t.Fatal(err)
	}
	// What a sweep would take for an unneeded old object, were it in the
	// store; and a file a lock could be made to overwrite.
	victim := filepath.Join(out, strings.Repeat("0", 62))
	for _, p := range []string{victim, filepath.Join(out, "victim")} {
		if err := os.WriteFile(p, []byte("victim\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-30 * 24 * time.Hour)
	if err := os.Chtimes(victim, old, old); err != nil {
		t.Fatal(err)
	}
	before := wtxtest.MustSnapshot(t, out)
	link := a.plant(t, e.st, tx, out)
	rel, _ := filepath.Rel(e.st, link)
	fp := *e
	fp.env = append([]string{}, a.env...)
	if disable {
		fp.env = append(fp.env, "WTX_DISABLE=nofollow")
	}
	var prefix []string
	if a.mount != nil {
		prefix = a.mount(t, out, link)
	}
	r := fp.runIn(e.ws, prefix, a.args(tx)...)
	after := wtxtest.MustSnapshot(t, out)
	if disable {
		if after == before {
			t.Errorf("negative control: without the discipline the link %s did not steer a write outside the state root: the test cannot fail (exit %d)\n%s%s", rel, r.code, r.stdout, r.stderr)
		}
		return
	}
	if after != before {
		t.Errorf("wtx %v changed what the link %s points to, outside the state root:\n%s\nwas\n%s", a.args(tx), rel, after, before)
	}
	got := wantCode(t, r, max(a.exit, 1), "io.corrupt")
	if !strings.Contains(got.Error.Message, filepath.ToSlash(rel)) {
		t.Errorf("the refusal does not name %s: %s", rel, got.Error.Message)
	}
	if fi, err := os.Lstat(link); err != nil || a.mount == nil && fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("what was planted was replaced or removed: %v %v", fi, err)
	}
}

// bindAt returns a command prefix under which out is bind-mounted at at (in
// a private mount namespace, through a user namespace so that an ordinary
// user can do it), or skips the test where that cannot be done.
func bindAt(t *testing.T, out, at string) []string {
	t.Helper()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare: cannot make a bind mount here")
	}
	script := `mount --bind "$0" "$1" && shift && exec "$@"`
	if msg, err := exec.Command(unshare, "-rm", "sh", "-c", script, out, at, "true").CombinedOutput(); err != nil {
		t.Skipf("no user and mount namespace for a bind mount here (%v: %s)", err, msg)
	}
	return []string{unshare, "-rm", "sh", "-c", script, out, at}
}
