//go:build linux

package hardening

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// straceTrace is the set of calls the audit follows: everything on paths
// and descriptors, and the syncs and *at calls named for clarity.
const straceTrace = "trace=%file,%desc,fsync,fdatasync,syncfs,renameat2,unlinkat,mkdirat,symlinkat,fchmod,fchmodat,openat2"

// cannedApply stages a modified file, a new file in new directories, a
// deletion and a symlink, and returns the fixture and the stage id. The
// library handle is closed, so that the binary can take the lock.
func cannedApply(t *testing.T) (*env, string, string) {
	e := newEnv(t)
	s, view := e.begin()
	must(t, os.WriteFile(vpath(view, "a.txt"), []byte("changed alpha\n"), 0o644))
	must(t, os.MkdirAll(vpath(view, "new/deep"), 0o755))
	must(t, os.WriteFile(vpath(view, "new/deep/n.txt"), []byte("new file\n"), 0o644))
	must(t, os.Remove(vpath(view, "dir/b.txt")))
	must(t, os.Symlink("../a.txt", vpath(view, "dir/l")))
	after := wtxtest.MustSnapshot(t, view)
	e.w.Close()
	e.w = nil
	return e, s.ID(), after
}

// straceApply runs `wtx apply id` under strace in the workspace and
// returns the parsed log.
func straceApply(t *testing.T, e *env, bin, id string, extraEnv ...string) []sysCall {
	t.Helper()
	log := filepath.Join(t.TempDir(), "strace.log")
	cmd := exec.Command("strace", "-f", "-tt", "-e", straceTrace, "-o", log, bin, "apply", id)
	cmd.Dir = e.ws
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.state), extraEnv...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if strings.Contains(out.String(), "ptrace") {
			t.Skipf("strace cannot trace here: %s", out.String())
		}
		t.Fatalf("strace wtx apply: %v\n%s", err, out.String())
	}
	f, err := os.Open(log)
	must(t, err)
	defer f.Close()
	calls, err := parseStrace(f)
	must(t, err)
	return calls
}

func newAudit(t *testing.T, e *env) *audit {
	var a, b unix.Stat_t
	must(t, unix.Stat(e.ws, &a))
	must(t, os.MkdirAll(e.state, 0o700))
	must(t, unix.Stat(e.state, &b))
	return &audit{ws: filepath.Clean(e.ws), state: filepath.Clean(e.state), cwd: filepath.Clean(e.ws), sameFS: a.Dev == b.Dev}
}

func needStrace(t *testing.T) {
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed (CI installs it): the syscall audit needs it")
	}
}

// TestApplySyscalls traces a canned apply and audits it (see audit.check):
// the journal is durable before the workspace changes, every temporary is
// synced before its rename, and every workspace path is one component
// beneath a directory descriptor.
func TestApplySyscalls(t *testing.T) {
	needStrace(t)
	e, id, after := cannedApply(t)
	calls := straceApply(t, e, wtxtest.Binary(t, false), id)
	if got := e.snap(); got != after {
		t.Fatalf("the traced apply did not land the view:\n%s", got)
	}
	a := newAudit(t, e)
	for _, v := range a.check(calls) {
		t.Error(v)
	}
	t.Logf("%d calls, %d on workspace paths, %d root opens, %d openat2 beneath the root, %d temporaries, journal %s",
		len(calls), a.wsCalls, a.rootOpens, a.beneath, a.temps, a.journal)
	// The audit must have seen what it audits.
	if a.temps < 2 || a.rootOpens == 0 || a.beneath == 0 || a.journal == "" {
		t.Errorf("the audit saw too little: %d temporaries, %d root opens, %d openat2, journal %q", a.temps, a.rootOpens, a.beneath, a.journal)
	}
}

// TestApplySyscallsNegative runs the same apply in the failpoint build
// with every fsync and syncfs switched off: the audit must object to the
// journal and to the temporaries.
func TestApplySyscallsNegative(t *testing.T) {
	needStrace(t)
	e, id, _ := cannedApply(t)
	calls := straceApply(t, e, wtxtest.Binary(t, true), id, "WTX_DISABLE=fsync")
	bad := newAudit(t, e).check(calls)
	var journal, temps bool
	for _, v := range bad {
		journal = journal || strings.Contains(v, "journal")
		temps = temps || strings.HasPrefix(v, "temporary ")
	}
	if !journal || !temps {
		t.Errorf("with fsync off the audit missed a breach (journal %v, temporaries %v): %q", journal, temps, bad)
	}
}

// goodLog is a hand-written trace of a well-behaved apply of one file into
// /w, with its journal under /s.
const goodLog = `100 10:00:00.000001 openat(AT_FDCWD, "/w", O_RDONLY|O_NOFOLLOW|O_CLOEXEC|O_DIRECTORY) = 3
100 10:00:00.000002 openat2(3, "d/e", {flags=O_RDONLY|O_DIRECTORY, resolve=RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH}, 24) = 4
100 10:00:00.000003 openat(4, "f", O_RDONLY|O_NOFOLLOW|O_CLOEXEC) = 5
100 10:00:00.000004 read(5, "old", 32768) = 3
100 10:00:00.000005 close(5) = 0
100 10:00:00.000006 mkdirat(AT_FDCWD, "/s/ws/journal/op1", 0700) = 0
100 10:00:00.000007 openat(AT_FDCWD, "/s/ws/journal", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 5
100 10:00:00.000008 fsync(5) = 0
100 10:00:00.000009 close(5) = 0
100 10:00:00.000010 openat(AT_FDCWD, "/s/ws/journal/op1/.journal.tmp-1", O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0600) = 5
100 10:00:00.000011 write(5, "WTXJ", 4) = 4
101 10:00:00.000012 fsync(5 <unfinished ...>
100 10:00:00.000013 futex(0x1, FUTEX_WAKE, 1) = 1
101 10:00:00.000014 <... fsync resumed>) = 0
100 10:00:00.000015 close(5) = 0
100 10:00:00.000016 renameat(AT_FDCWD, "/s/ws/journal/op1/.journal.tmp-1", AT_FDCWD, "/s/ws/journal/op1/journal") = 0
100 10:00:00.000017 openat(AT_FDCWD, "/s/ws/journal/op1/", O_RDONLY|O_CLOEXEC|O_DIRECTORY) = 5
100 10:00:00.000018 fsync(5) = 0
100 10:00:00.000019 close(5) = 0
100 10:00:00.000020 openat(4, ".wtx-tmp-1-0-x", O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, 0600) = 5
100 10:00:00.000021 write(5, "new", 3) = 3
100 10:00:00.000022 fchmod(5, 0644) = 0
100 10:00:00.000023 fsync(5) = 0
100 10:00:00.000024 close(5) = 0
100 10:00:00.000025 renameat2(4, ".wtx-tmp-1-0-x", 4, "f", RENAME_EXCHANGE) = 0
100 10:00:00.000026 syncfs(4) = 0
100 10:00:00.000026 --- SIGURG {si_signo=SIGURG, si_code=SI_TKILL, si_pid=100, si_uid=0} ---
100 10:00:00.000027 unlinkat(4, ".wtx-tmp-1-0-x", 0) = 0
100 10:00:00.000028 +++ exited with 0 +++
`

// TestAuditSynthetic runs the audit on goodLog and on copies of it with
// one breach each: every breach must be reported, and none in goodLog.
func TestAuditSynthetic(t *testing.T) {
	cases := []struct {
		name      string
		from, to  string // replace from by to in goodLog
		violation string // "" for none
	}{
		{"good", "", "", ""},
		{"absolute workspace path", `openat(4, "f", O_RDONLY`, `openat(AT_FDCWD, "/w/d/e/f", O_RDONLY`, "absolute workspace path"},
		{"multi-component openat", `openat(4, "f", O_RDONLY`, `openat(3, "d/e/f", O_RDONLY`, "multi-component"},
		{"multi-component from the cwd", `openat(4, "f", O_RDONLY`, `newfstatat(AT_FDCWD, "d/e", O_RDONLY`, "multi-component"},
		{"openat2 without RESOLVE_BENEATH", "resolve=RESOLVE_NO_SYMLINKS|RESOLVE_BENEATH", "resolve=RESOLVE_NO_SYMLINKS", "multi-component"},
		{"dot-dot on a workspace descriptor", `openat(4, "f", O_RDONLY`, `openat(4, "..", O_RDONLY`, `".."`},
		{"unknown descriptor", `openat(4, "f", O_RDONLY`, `openat(9, "f", O_RDONLY`, "does not know"},
		{"journal not synced", "101 10:00:00.000012 fsync(5 <unfinished ...>", "101 10:00:00.000012 getpid(5 <unfinished ...>", "without an fsync"},
		{"journal synced before its last write", "100 10:00:00.000011 write(5, \"WTXJ\", 4) = 4\n101 10:00:00.000012 fsync(5 <unfinished ...>\n100 10:00:00.000013 futex(0x1, FUTEX_WAKE, 1) = 1\n101 10:00:00.000014 <... fsync resumed>) = 0",
			"101 10:00:00.000012 fsync(5) = 0\n100 10:00:00.000011 write(5, \"WTXJ\", 4) = 4", "without an fsync"},
		{"journal directory not synced", "100 10:00:00.000018 fsync(5) = 0", "100 10:00:00.000018 getpid() = 0", "journal's directory"},
		{"new journal directory entry not synced", "100 10:00:00.000008 fsync(5) = 0", "100 10:00:00.000008 getpid() = 0", "new directory"},
		{"temporary not synced", "100 10:00:00.000023 fsync(5) = 0", "100 10:00:00.000023 getpid() = 0", "temporary"},
		{"temporary synced only after the rename", "100 10:00:00.000023 fsync(5) = 0", "100 10:00:00.000023 syncfs(5) = -1 EIO (Input/output error)", "temporary"},
		{"workspace written before the journal", `100 10:00:00.000003 openat(4, "f", O_RDONLY|O_NOFOLLOW|O_CLOEXEC) = 5`,
			`100 10:00:00.000003 openat(4, "f", O_RDWR|O_NOFOLLOW|O_CLOEXEC) = 5`, "journal's directory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			log := goodLog
			if tc.from != "" {
				if !strings.Contains(log, tc.from) {
					t.Fatalf("the case does not apply: %q not in the log", tc.from)
				}
				log = strings.Replace(log, tc.from, tc.to, 1)
			}
			calls, err := parseStrace(strings.NewReader(log))
			if err != nil {
				t.Fatal(err)
			}
			a := &audit{ws: "/w", state: "/s", cwd: "/w", sameFS: false}
			bad := a.check(calls)
			switch {
			case tc.violation == "":
				if len(bad) > 0 {
					t.Errorf("a good log breaks the rules: %q", bad)
				}
				if a.temps != 1 || a.rootOpens != 1 || a.beneath != 1 || a.journal != "/s/ws/journal/op1/journal" {
					t.Errorf("the audit saw %d temps, %d root opens, %d openat2, journal %q", a.temps, a.rootOpens, a.beneath, a.journal)
				}
			default:
				found := false
				for _, v := range bad {
					found = found || strings.Contains(v, tc.violation)
				}
				if !found {
					t.Errorf("want a breach mentioning %q, got %q", tc.violation, bad)
				}
			}
		})
	}
}
