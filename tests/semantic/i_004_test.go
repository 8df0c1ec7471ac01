package semantic

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// umask0 runs wtx with umask 000, so that only wtx's own modes count.
var umask0 = []string{"sh", "-c", `umask 000; exec "$@"`, "sh"}

// TestI004_PrivateUnderAnyUmask checks I-004: a state root wtx creates is
// private whatever the umask: directories 0700, files 0600 (objects 0400),
// the database's -wal and -shm files too.
func TestI004_PrivateUnderAnyUmask(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.st = filepath.Join(e.st, "nested", "wtx")
	// The command lists the database files while wtx holds them open.
	r := e.runIn(e.ws, umask0, "--json", "run", "--backend", "copy", "--", "sh", "-c",
		`echo b > b.txt; stat -c '%a %n' "$0"/wtx.db*`, e.st)
	if r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	if r := e.runIn(e.ws, umask0, "apply"); r.code != 0 {
		t.Fatalf("wtx apply: %v", r)
	}
	if bad := notPrivate(t, e.st); len(bad) > 0 {
		t.Errorf("not private under umask 000:\n%s", strings.Join(bad, "\n"))
	}
	// stdout holds the run's JSON; the stat lines went to stderr or stdout
	// depending on the backend's plumbing: look at both.
	lines := 0
	for _, l := range strings.Split(r.stdout+"\n"+r.stderr, "\n") {
		if strings.Contains(l, "/wtx.db") && !strings.HasPrefix(l, "{") {
			lines++
			if !strings.HasPrefix(l, "600 ") {
				t.Errorf("database file while in use: %s; want mode 600", l)
			}
		}
	}
	if lines == 0 {
		t.Errorf("the command saw no database files: %v", r)
	}
}

// TestI004_LooseStateRootTightened checks I-004: a state root left looser
// by someone (0755, a 0644 database, a 0777 directory) is made private by the
// next command.
func TestI004_LooseStateRootTightened(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.stage("echo b > b.txt")
	for p, m := range map[string]os.FileMode{"": 0o755, "wtx.db": 0o644, "stages": 0o777, "workspaces": 0o755} {
		if err := os.Chmod(filepath.Join(e.st, p), m); err != nil {
			t.Fatal(err)
		}
	}
	e.must("list")
	for p, want := range map[string]os.FileMode{"": 0o700, "wtx.db": 0o600, "stages": 0o700, "workspaces": 0o700} {
		fi, err := os.Stat(filepath.Join(e.st, p))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s: mode %04o after a command, want %04o", filepath.Join(e.st, p), fi.Mode().Perm(), want)
		}
	}
}

// TestI004_ForeignStateRootRefused checks I-004: a state root owned by
// someone else is refused as precondition.state-unsafe, naming the path, the
// owner and the mode, before anything is written in it.
func TestI004_ForeignStateRootRefused(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	if os.Geteuid() == 0 {
		// A directory of another user that anyone may write to.
		if err := os.Mkdir(e.st, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(e.st, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(e.st, 0o777); err != nil {
			t.Fatal(err)
		}
	} else {
		// An ordinary user cannot give a directory away: use one that
		// belongs to root and does not hold the workspace.
		e.st = ""
		for _, d := range []string{"/var/tmp", "/tmp", "/usr/share", "/etc"} {
			fi, err := os.Stat(d)
			if err == nil && fi.IsDir() && int(fi.Sys().(*syscall.Stat_t).Uid) != os.Geteuid() && !strings.HasPrefix(e.ws, d+"/") {
				e.st = d
				break
			}
		}
		if e.st == "" {
			t.Skip("no directory of another user to use as a state root: cannot test the refusal here")
		}
	}
	before, err := os.ReadDir(e.st)
	if err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(e.st)
	for _, args := range [][]string{{"--json", "list"}, {"--json", "begin"}} {
		r := e.run(args...)
		got := wantCode(t, r, 1, "precondition.state-unsafe")
		uid := fi.Sys().(*syscall.Stat_t).Uid
		for _, want := range []string{e.st, "uid " + strconv.Itoa(int(uid)), "mode " + octal4(fi.Mode())} {
			if !strings.Contains(got.Error.Message, want) {
				t.Errorf("message %q does not name %q", got.Error.Message, want)
			}
		}
	}
	after, err := os.ReadDir(e.st)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Errorf("the refused state root changed: %d entries before, %d after", len(before), len(after))
	}
	for _, n := range []string{"wtx.db", "stages", "workspaces", "objects"} {
		if _, err := os.Lstat(filepath.Join(e.st, n)); err == nil && os.Geteuid() == 0 {
			t.Errorf("%s was created in a refused state root", n)
		}
	}
}

// TestI004_ForeignEntryRefused checks I-004 for an entry of the state root:
// a database file another user owns is refused, not used.
func TestI004_ForeignEntryRefused(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	e := newStateEnv(t)
	e.must("list")
	if err := os.Chown(filepath.Join(e.st, "wtx.db"), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	got := wantCode(t, e.run("--json", "list"), 1, "precondition.state-unsafe")
	if !strings.Contains(got.Error.Message, filepath.Join(e.st, "wtx.db")) {
		t.Errorf("message %q does not name the database", got.Error.Message)
	}
}

// TestI004_StateRootReadOnly checks that a state root on a read-only mount
// is reported as io.read-only (not internal) by every command, even list.
func TestI004_StateRootReadOnly(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("no unshare: cannot make a read-only bind mount here")
	}
	if out, err := exec.Command(unshare, "-rm", "true").CombinedOutput(); err != nil {
		t.Skipf("no user and mount namespace here (%v: %s): cannot make a read-only bind mount", err, out)
	}
	e := newStateEnv(t)
	e.stage("echo b > b.txt")
	ro := []string{unshare, "-rm", "--propagation", "slave", "sh", "-c",
		`mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" "$0" && exec "$@"`, e.st}
	for _, args := range [][]string{{"--json", "list"}, {"--json", "status"}, {"--json", "begin"}} {
		wantCode(t, e.runIn(e.ws, ro, args...), 1, "io.read-only")
	}
}

// TestI004_StateRootUnwritable checks that a state root its owner cannot
// write (chmod 0500) is reported as io.permission by every command.
func TestI004_StateRootUnwritable(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root writes a 0500 directory anyway: the ordinary-user pass covers this")
	}
	e := newStateEnv(t)
	e.stage("echo b > b.txt")
	if err := os.Chmod(e.st, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(e.st, 0o700) })
	for _, args := range [][]string{{"--json", "list"}, {"--json", "status"}, {"--json", "begin"}} {
		wantCode(t, e.run(args...), 1, "io.permission")
	}
}

func octal4(m os.FileMode) string {
	p := uint32(m.Perm())
	if m&os.ModeSticky != 0 {
		p |= 0o1000
	}
	if m&os.ModeSetgid != 0 {
		p |= 0o2000
	}
	if m&os.ModeSetuid != 0 {
		p |= 0o4000
	}
	return string([]byte{byte('0' + p>>9&7), byte('0' + p>>6&7), byte('0' + p>>3&7), byte('0' + p&7)})
}
