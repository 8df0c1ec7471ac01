//go:build linux

package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// T-004: a workspace boundary or project file owned by another user (not
// root) is not obeyed unless the caller trusts it explicitly; the refusal
// names the file and its owner. The planted project file switches the
// backend to copy and excludes out/: obeyed, the command's output in out/
// is silently left out of the change set.

// Users the tests make files for when they run as root: a victim that runs
// wtx and an attacker that plants a boundary. Neither needs an account.
const (
	victimUID   = 4321
	attackerUID = 4322
)

// plantedProject is the project file an attacker plants.
const plantedProject = "backend = \"copy\"\nexclude = [\"out\", \"*/out\"]\n"

// trustRig is a tree under a 0755 base that callers of several uids can
// reach, with copies of both wtx builds they can run.
type trustRig struct {
	t            *testing.T
	base         string
	bin, fpBin   string
	root, victim caller
}

// caller is who runs wtx: its uid and the command that makes a process it.
type caller struct {
	name   string
	uid    int
	prefix []string
}

func newTrustRig(t *testing.T) *trustRig {
	t.Helper()
	base, err := os.MkdirTemp("", "wtx-trust-")
	mustDo(t, err)
	t.Cleanup(func() {
		_ = filepath.Walk(base, func(p string, fi os.FileInfo, err error) error {
			if err == nil && fi.IsDir() {
				_ = os.Chmod(p, 0o755) // so that the tree can go; RemoveAll reports what stays
			}
			return nil
		})
		mustDo(t, os.RemoveAll(base))
	})
	mustDo(t, os.Chmod(base, 0o755))
	r := &trustRig{t: t, base: base, bin: filepath.Join(base, "wtx"), fpBin: filepath.Join(base, "wtx-fp")}
	copyExec(t, wtxtest.Binary(t, false), r.bin)
	copyExec(t, wtxtest.Binary(t, true), r.fpBin)
	r.root = caller{name: "self", uid: os.Geteuid()}
	if os.Geteuid() == 0 {
		r.root.name = "root"
		p, err := exec.LookPath("setpriv")
		if err != nil {
			t.Skip("no setpriv: cannot run wtx as another user")
		}
		id := strconv.Itoa(victimUID)
		r.victim = caller{name: "user", uid: victimUID, prefix: []string{p, "--reuid=" + id, "--regid=" + id, "--clear-groups"}}
	}
	return r
}

// needRoot skips a test whose files must belong to another user.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("making a file another user owns needs root; the root pass runs this as root and as an ordinary user")
	}
}

// path is rel under the base.
func (r *trustRig) path(rel string) string { return filepath.Join(r.base, filepath.FromSlash(rel)) }

// dir makes directory rel with mode, owned by uid (when the test is root).
func (r *trustRig) dir(rel string, mode fs.FileMode, uid int) string {
	p := r.path(rel)
	mustDo(r.t, os.MkdirAll(p, 0o755))
	r.own(p, mode, uid)
	return p
}

// file writes file rel with mode, owned by uid (when the test is root).
func (r *trustRig) file(rel, content string, mode fs.FileMode, uid int) string {
	p := r.path(rel)
	mustDo(r.t, os.WriteFile(p, []byte(content), 0o600))
	r.own(p, mode, uid)
	return p
}

func (r *trustRig) own(p string, mode fs.FileMode, uid int) {
	if os.Geteuid() == 0 {
		mustDo(r.t, os.Lchown(p, uid, uid))
	}
	mustDo(r.t, os.Chmod(p, mode))
}

// run runs wtx as c (the failpoint build when fp) from dir, with a home,
// configuration directory and state root of c's own, and env added.
func (r *trustRig) run(c caller, fp bool, dir string, env []string, args ...string) wtxResult {
	r.t.Helper()
	home := r.path("home-" + strconv.Itoa(c.uid))
	if _, err := os.Stat(home); err != nil {
		r.dir("home-"+strconv.Itoa(c.uid), 0o700, c.uid)
	}
	bin := r.bin
	if fp {
		bin = r.fpBin
	}
	argv := append(append(append([]string{}, c.prefix...), bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "HOME="+home, "WTX_STATE_DIR="+filepath.Join(home, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_STATE_HOME=", "WTX_SAFE_DIRECTORIES=", "SUDO_UID="), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		r.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// trustAnswer is what the tests read of a --json answer.
type trustAnswer struct {
	Status string `json:"status"`
	Error  *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Repairs []struct {
			Action  string `json:"action"`
			Command string `json:"command"`
		} `json:"repairs"`
	} `json:"error"`
	Backend string `json:"backend"`
	LeftOut []struct {
		Path string `json:"path"`
	} `json:"left_out"`
	Receipt *struct {
		Workspace string `json:"workspace"`
	} `json:"receipt"`
}

func decodeTrust(t *testing.T, r wtxResult) trustAnswer {
	t.Helper()
	var a trustAnswer
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatalf("not a JSON answer (%v): exit %d\n%s\n%s", err, r.code, r.stdout, r.stderr)
	}
	return a
}

// outRun is the command a victim runs: output under out/ and beside it.
var outRun = []string{"--json", "run", "--", "sh", "-c", "mkdir out && echo o > out/o && echo y > y.txt"}

// obeyed reports whether a run answer shows the planted project file
// obeyed: its backend and its exclude of out/.
func (a trustAnswer) obeyed() bool {
	return a.Status == "ok" && a.Backend == "copy" && len(a.LeftOut) == 1 && strings.HasSuffix("/"+a.LeftOut[0].Path, "/out")
}

// refused checks that a is the refusal of a boundary or project file,
// naming the file, its owner and the setting that trusts it.
func (a trustAnswer) refused(t *testing.T, file string, owner int) {
	t.Helper()
	if a.Error == nil || a.Error.Code != "precondition.untrusted-owner" {
		t.Fatalf("want precondition.untrusted-owner, got %+v", a)
	}
	if !strings.Contains(a.Error.Message, file) || owner >= 0 && !strings.Contains(a.Error.Message, "uid "+strconv.Itoa(owner)) {
		t.Errorf("the refusal does not name %s and uid %d: %s", file, owner, a.Error.Message)
	}
	for _, rp := range a.Error.Repairs {
		if rp.Action == "trust" && strings.HasPrefix(rp.Command, "wtx safe-directory add ") {
			return
		}
	}
	t.Errorf("the refusal names no setting that trusts it: %+v", a.Error.Repairs)
}

// sharedParent makes shared/ (root's, 1777 like /tmp) holding a boundary
// of owner's (the project file, a .git directory or a .git file) and the
// victim c's directory shared/<name>/ with a file in it.
func (r *trustRig) sharedParent(name, boundary string, owner int, c caller) (shared, work string) {
	shared = r.dir(name, fs.ModeSticky|0o777, 0)
	switch boundary {
	case ".wtx.toml":
		r.file(name+"/.wtx.toml", plantedProject, 0o644, owner)
	case ".git":
		r.dir(name+"/.git", 0o755, owner)
	case ".git file":
		r.file(name+"/.git", "gitdir: /nonexistent/.git/worktrees/x\n", 0o644, owner)
	}
	work = r.dir(name+"/work", 0o755, c.uid)
	r.file(name+"/work/v.txt", "v\n", 0o644, c.uid)
	return shared, work
}

// TestT_004_ForeignBoundaryRefused: a boundary another user planted in a
// shared parent (a project file, a .git directory, a .git file) does not
// become the victim's workspace, whether the victim is root or not; the
// refusal names the file, the owner and the setting; trusting the parent
// (WTX_SAFE_DIRECTORIES) makes it the workspace; a boundary root owns is
// obeyed without trust. Negative control: WTX_DISABLE=untrusted-owner,
// and the planted boundary is the workspace again (the project file's
// exclude then drops the victim's output).
func TestT_004_ForeignBoundaryRefused(t *testing.T) {
	t.Parallel()
	needRoot(t)
	r := newTrustRig(t)
	for ci, c := range []caller{r.root, r.victim} {
		for bi, boundary := range []string{".wtx.toml", ".git", ".git file"} {
			name := "s" + strconv.Itoa(ci) + strconv.Itoa(bi)
			shared, work := r.sharedParent(name, boundary, attackerUID, c)
			file := filepath.Join(shared, strings.Fields(boundary)[0])
			t.Run(c.name+"/"+boundary, func(t *testing.T) {
				decodeTrust(t, r.run(c, false, work, nil, outRun...)).refused(t, file, attackerUID)
				a := decodeTrust(t, r.run(c, false, work, []string{"WTX_SAFE_DIRECTORIES=" + shared}, outRun...))
				if a.Receipt == nil || a.Receipt.Workspace != shared {
					t.Errorf("trusted: the workspace is not %s: %+v", shared, a)
				}
				a = decodeTrust(t, r.run(c, true, work, []string{"WTX_DISABLE=untrusted-owner"}, outRun...))
				if a.Receipt == nil || a.Receipt.Workspace != shared || boundary == ".wtx.toml" && !a.obeyed() {
					t.Errorf("negative control: with the check off the planted %s did not steer the run: %+v", boundary, a)
				}
			})
		}
	}
	t.Run("root-owned", func(t *testing.T) {
		shared, work := r.sharedParent("rootowned", ".wtx.toml", 0, r.victim)
		a := decodeTrust(t, r.run(r.victim, false, work, nil, outRun...))
		if a.Receipt == nil || a.Receipt.Workspace != shared || !a.obeyed() {
			t.Errorf("a project file root owns in a directory root owns is not obeyed: %+v %+v", a, a.Error)
		}
	})
}

// TestT_004_ForeignProjectFileRefused: a project file another user owns in
// a workspace named with -C is refused by every command that opens a
// stage (run, begin, batch, a flow step, the MCP server's begin) and by
// status, for root and for an ordinary user; so is one in a workspace
// directory another user owns. --no-project, and a trusted directory,
// open the stage; a foreign workspace without a project file obeys nothing
// and is not refused. Negative control: WTX_DISABLE=untrusted-owner, and
// the run obeys the file.
func TestT_004_ForeignProjectFileRefused(t *testing.T) {
	t.Parallel()
	needRoot(t)
	r := newTrustRig(t)
	flow := r.file("flow.toml", "version = 1\n[[steps]]\nname = \"s\"\nkind = \"run\"\ncommand = [\"true\"]\n", 0o644, 0)
	for ci, c := range []caller{r.root, r.victim} {
		owner := attackerUID
		ws := r.dir("p"+strconv.Itoa(ci), 0o755, c.uid)
		file := r.file("p"+strconv.Itoa(ci)+"/.wtx.toml", plantedProject, 0o644, owner)
		t.Run(c.name, func(t *testing.T) {
			for _, args := range [][]string{outRun, {"--json", "begin"}} {
				decodeTrust(t, r.run(c, false, ws, nil, append([]string{"-C", ws}, args...)...)).refused(t, file, owner)
			}
			// A flow's step opens its stage as begin does: the step fails
			// with the refusal, and nothing of it runs.
			var f flowJSON
			res := r.run(c, false, ws, nil, "-C", ws, "--json", "flow", "run", flow)
			mustDo(t, json.Unmarshal([]byte(res.stdout), &f))
			if s := f.Run.Steps; f.Run.Status != "failed" || len(s) != 1 || s[0].Attempts[0].Result.Error == nil ||
				s[0].Attempts[0].Result.Error.Code != "precondition.untrusted-owner" {
				t.Errorf("flow run with another user's project file: %s", res.stdout)
			}
			batch := r.runIn(c, ws, `{"command":"write","path":"b.txt","content":"b"}`+"\n", "-C", ws, "--json", "batch")
			decodeTrust(t, batch).refused(t, file, owner)
			// A stage opened without the file: status still reads it.
			if res := r.run(c, false, ws, nil, "-C", ws, "begin", "--no-project"); res.code != 0 {
				t.Fatalf("begin --no-project: %+v", res)
			}
			decodeTrust(t, r.run(c, false, ws, nil, "-C", ws, "--json", "status")).refused(t, file, owner)
			a := decodeTrust(t, r.run(c, false, ws, []string{"WTX_SAFE_DIRECTORIES=" + ws}, append([]string{"-C", ws}, outRun...)...))
			if !a.obeyed() {
				t.Errorf("trusted: the project file is not obeyed: %+v", a)
			}
			a = decodeTrust(t, r.run(c, true, ws, []string{"WTX_DISABLE=untrusted-owner"}, append([]string{"-C", ws}, outRun...)...))
			if !a.obeyed() {
				t.Errorf("negative control: with the check off the foreign project file was not obeyed: %+v", a)
			}
		})
	}
	t.Run("foreign-directory", func(t *testing.T) {
		// The victim's own project file in a workspace another user owns,
		// who could replace it at any time.
		ws := r.dir("fd", 0o755, attackerUID)
		r.file("fd/.wtx.toml", plantedProject, 0o644, victimUID)
		decodeTrust(t, r.run(r.victim, false, ws, nil, append([]string{"-C", ws}, outRun...)...)).refused(t, ws, attackerUID)
	})
	t.Run("foreign-workspace-without-file", func(t *testing.T) {
		ws := r.dir("nf", 0o777, attackerUID)
		a := decodeTrust(t, r.run(r.root, false, ws, nil, append([]string{"-C", ws}, outRun...)...))
		if a.Status != "ok" || len(a.LeftOut) != 0 {
			t.Errorf("a workspace another user owns, without a project file, given with -C: %+v", a)
		}
	})
	t.Run("mcp", func(t *testing.T) {
		ws := r.dir("mcp", 0o755, 0)
		r.file("mcp/.wtx.toml", plantedProject, 0o644, victimUID)
		home := r.dir("mcphome", 0o700, 0)
		s := startMCP(t, r.bin, ws, filepath.Join(home, "state"), []string{"HOME=" + home, "XDG_CONFIG_HOME=", "WTX_SAFE_DIRECTORIES="})
		if code := s.call("begin", map[string]any{}).errorCode(); code != "precondition.untrusted-owner" {
			t.Errorf("MCP begin in a workspace with another user's project file: %q", code)
		}
	})
}

// runIn is run with stdin.
func (r *trustRig) runIn(c caller, dir, stdin string, args ...string) wtxResult {
	r.t.Helper()
	home := r.path("home-" + strconv.Itoa(c.uid))
	argv := append(append(append([]string{}, c.prefix...), r.bin), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	cmd.Env = append(os.Environ(), "HOME="+home, "WTX_STATE_DIR="+filepath.Join(home, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "XDG_STATE_HOME=", "WTX_SAFE_DIRECTORIES=", "SUDO_UID=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		r.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// TestT_004_WritableProjectFileRefused: the caller's own project file that
// every user may write, or in a workspace directory every user may write
// without the sticky bit (anyone could have replaced it), is refused; in a
// sticky one (as /tmp) it is obeyed. Runs as whoever runs the suite.
// Negative control: WTX_DISABLE=untrusted-owner.
func TestT_004_WritableProjectFileRefused(t *testing.T) {
	t.Parallel()
	r := newTrustRig(t)
	me := r.root
	for _, k := range []struct {
		name          string
		dirMode, mode fs.FileMode
		refused       bool
	}{
		{"file-0666", 0o755, 0o666, true},
		{"dir-0777", 0o777, 0o644, true},
		{"dir-1777", fs.ModeSticky | 0o777, 0o644, false},
		{"file-0664", 0o755, 0o664, false}, // the group's: counted as the owner's
	} {
		t.Run(k.name, func(t *testing.T) {
			ws := r.dir(k.name, k.dirMode, me.uid)
			file := r.file(k.name+"/.wtx.toml", plantedProject, k.mode, me.uid)
			a := decodeTrust(t, r.run(me, false, ws, nil, append([]string{"-C", ws}, outRun...)...))
			if !k.refused {
				if !a.obeyed() {
					t.Errorf("not obeyed: %+v %+v", a, a.Error)
				}
				return
			}
			a.refused(t, file, -1)
			if !strings.Contains(a.Error.Message, "writable by every user") {
				t.Errorf("the refusal does not say why: %s", a.Error.Message)
			}
			a = decodeTrust(t, r.run(me, true, ws, []string{"WTX_DISABLE=untrusted-owner"}, append([]string{"-C", ws}, outRun...)...))
			if !a.obeyed() {
				t.Errorf("negative control: with the check off the file was not obeyed: %+v", a)
			}
		})
	}
}

// TestT_004_SafeDirectoryCommand: 'wtx safe-directory add' keeps a trust
// that later commands obey (DIR, DIR/* and *), 'remove' takes it back,
// 'list' shows both sources; the file must be the caller's and writable by
// no one else, or it is refused. As root also: another user's file (a HOME
// left pointing at theirs) is refused, and root acting through sudo
// (SUDO_UID) obeys that user's files. Negative control:
// WTX_DISABLE=untrusted-owner reads a file others may write.
func TestT_004_SafeDirectoryCommand(t *testing.T) {
	t.Parallel()
	r := newTrustRig(t)
	me := r.root
	ws := r.dir("sd/ws", 0o777, me.uid)
	file := r.file("sd/ws/.wtx.toml", plantedProject, 0o644, me.uid)
	run := func(env ...string) trustAnswer {
		return decodeTrust(t, r.run(me, false, ws, env, append([]string{"-C", ws}, outRun...)...))
	}
	run().refused(t, file, -1)
	for _, entry := range []string{ws, filepath.Dir(ws) + "/*", "*"} {
		if res := r.run(me, false, ws, nil, "safe-directory", "add", entry); res.code != 0 {
			t.Fatalf("safe-directory add %s: %+v", entry, res)
		}
		if a := run(); !a.obeyed() {
			t.Errorf("trusted by %s: not obeyed: %+v", entry, a)
		}
		if res := r.run(me, false, ws, nil, "safe-directory", "remove", entry); res.code != 0 {
			t.Fatalf("safe-directory remove %s: %+v", entry, res)
		}
		run().refused(t, file, -1)
	}
	mustDo(t, os.Chmod(ws, 0o755))
	if res := r.run(me, false, ws, nil, "safe-directory", "add", ws); res.code != 0 {
		t.Fatalf("safe-directory add: %+v", res)
	}
	list := r.run(me, false, ws, []string{"WTX_SAFE_DIRECTORIES=/x:/y"}, "safe-directory", "list")
	if !strings.Contains(list.stdout, ws+"\n") || !strings.Contains(list.stdout, "/y\t(WTX_SAFE_DIRECTORIES)") {
		t.Errorf("safe-directory list: %+v", list)
	}
	mustDo(t, os.Chmod(ws, 0o777))
	trustFile := filepath.Join(r.path("home-"+strconv.Itoa(me.uid)), ".config", "wtx", "safe-directories")
	mustDo(t, os.Chmod(trustFile, 0o664))
	a := run()
	if a.Error == nil || a.Error.Code != "precondition.untrusted-owner" || !strings.Contains(a.Error.Message, trustFile) {
		t.Errorf("a safe-directories file its group may write is read: %+v", a)
	}
	if a := decodeTrust(t, r.run(me, true, ws, []string{"WTX_DISABLE=untrusted-owner"}, append([]string{"-C", ws}, outRun...)...)); !a.obeyed() {
		t.Errorf("negative control: with the check off the file's trust was not taken: %+v", a)
	}
	mustDo(t, os.Chmod(trustFile, 0o600))
	if os.Geteuid() != 0 {
		return
	}
	t.Run("foreign-file", func(t *testing.T) {
		mustDo(t, os.Chown(trustFile, victimUID, victimUID))
		if a := run(); a.Error == nil || a.Error.Code != "precondition.untrusted-owner" || !strings.Contains(a.Error.Message, "uid 4321") {
			t.Errorf("another user's safe-directories file is read: %+v", a)
		}
		mustDo(t, os.Chown(trustFile, 0, 0))
	})
	t.Run("sudo", func(t *testing.T) {
		ws := r.dir("sudo", 0o755, victimUID)
		file := r.file("sudo/.wtx.toml", plantedProject, 0o644, victimUID)
		decodeTrust(t, r.run(me, false, ws, nil, append([]string{"-C", ws}, outRun...)...)).refused(t, file, victimUID)
		if a := decodeTrust(t, r.run(me, false, ws, []string{"SUDO_UID=" + strconv.Itoa(victimUID)}, append([]string{"-C", ws}, outRun...)...)); !a.obeyed() {
			t.Errorf("root through sudo for the file's owner: not obeyed: %+v", a)
		}
	})
}
