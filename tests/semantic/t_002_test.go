//go:build linux

package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// T-002: confinement is the same on every backend. A command run in a
// stage cannot write the real workspace by any path (its own absolute path,
// another mount of it), nor the state root; --read-only covers every mount
// of the view; a flow's agent step and every MCP run are confined on every
// backend; where a backend cannot confine, a run that needs it is refused
// as precondition.confinement, and a person's plain run says it ran
// unconfined.

// unconfinedItem is the not_transactional entry of an unconfined run.
const unconfinedItem = "writes through the workspace's own path (the command ran unconfined: no namespaces of its own here)"

// t002ID is who runs wtx: root, or an ordinary user (wtxci when it
// exists, else nobody) given the supplementary group 4242 by setpriv when
// the test runs as root; the test's own user otherwise.
type t002ID struct {
	name     string
	uid, gid int
	prefix   []string
}

func t002IDs(t *testing.T) []t002ID {
	if os.Geteuid() != 0 {
		return []t002ID{{name: "user", uid: os.Geteuid(), gid: os.Getegid()}}
	}
	ids := []t002ID{{name: "root"}}
	p, err := exec.LookPath("setpriv")
	if err != nil {
		t.Logf("no setpriv: the ordinary-user case runs only in the unprivileged pass")
		return ids
	}
	uid, gid := 65534, 65534
	if u, err := user.Lookup("wtxci"); err == nil {
		uid, _ = strconv.Atoi(u.Uid)
		gid, _ = strconv.Atoi(u.Gid)
	}
	return append(ids, t002ID{name: "user", uid: uid, gid: gid,
		prefix: []string{p, "--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(gid), "--groups=4242"}})
}

// t002Rig is a workspace (a.txt, src/main.go, build/out.o), a state root
// and copies of wtx that the identity can run, all under base.
type t002Rig struct {
	base, ws, state, wtx, wtxFP string
	id                          t002ID
}

func newT002Rig(t *testing.T, id t002ID, parent string) *t002Rig {
	return newT002RigNamed(t, id, parent, "ws")
}

// newT002RigNamed is newT002Rig with the workspace directory named name.
func newT002RigNamed(t *testing.T, id t002ID, parent, name string) *t002Rig {
	t.Helper()
	if parent == "" {
		parent = os.TempDir()
	}
	base, err := os.MkdirTemp(parent, "wtx-t002-")
	mustDo(t, err)
	t.Cleanup(func() { removeUnmounted(t, base) })
	mustDo(t, os.Chmod(base, 0o755))
	r := &t002Rig{base: base, ws: filepath.Join(base, name), state: filepath.Join(base, "state"), id: id}
	for _, d := range []string{r.ws, r.state, filepath.Join(r.ws, "src"), filepath.Join(r.ws, "build")} {
		mustDo(t, os.Mkdir(d, 0o755))
	}
	mustDo(t, os.Chmod(r.state, 0o700))
	mustWrite(t, filepath.Join(r.ws, "a.txt"), "one\n")
	mustWrite(t, filepath.Join(r.ws, "src", "main.go"), "package main\n")
	mustWrite(t, filepath.Join(r.ws, "build", "out.o"), "obj\n")
	r.wtx, r.wtxFP = filepath.Join(base, "wtx"), filepath.Join(base, "wtx-fp")
	copyExec(t, wtxtest.Binary(t, false), r.wtx)
	copyExec(t, wtxtest.Binary(t, true), r.wtxFP)
	if id.uid != os.Geteuid() {
		for _, p := range []string{r.ws, r.state} {
			mustDo(t, filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, id.uid, id.gid)
			}))
		}
	}
	return r
}

// groupFile gives the workspace a file of the identity's supplementary
// group 4242 (root pass only), which "auto" cannot stage on overlay.
func (r *t002Rig) groupFile(t *testing.T) {
	p := filepath.Join(r.ws, "shared.txt")
	mustWrite(t, p, "shared\n")
	mustDo(t, os.Lchown(p, r.id.uid, 4242))
	mustDo(t, os.Chmod(p, 0o664))
}

// run runs wtx (the failpoint build when fp) as the rig's identity.
func (r *t002Rig) run(t *testing.T, fp bool, env []string, args ...string) wtxResult {
	t.Helper()
	bin := r.wtx
	if fp {
		bin = r.wtxFP
	}
	argv := append(append(append([]string(nil), r.id.prefix...), bin, "-C", r.ws), args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+r.state, "HOME="+r.base, "WS="+r.ws, "STATE="+r.state), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// t002Answer is what the tests read of a run --json answer.
type t002Answer struct {
	Tx      string `json:"tx"`
	Backend string `json:"backend"`
	Counts  struct {
		Added, Modified, Deleted int
	} `json:"counts"`
	Changes []struct {
		Path string `json:"path"`
	} `json:"changes"`
	NotTransactional []string `json:"not_transactional"`
	Error            *struct {
		Code, Message string
	} `json:"error"`
}

func decodeT002(t *testing.T, res wtxResult) t002Answer {
	t.Helper()
	var a t002Answer
	if err := json.Unmarshal([]byte(res.stdout), &a); err != nil {
		t.Fatalf("run --json: %v\nstdout: %s\nstderr: %s", err, res.stdout, res.stderr)
	}
	return a
}

func (a t002Answer) staged() []string {
	var out []string
	for _, c := range a.Changes {
		out = append(out, c.Path)
	}
	return out
}

func (a t002Answer) unconfined() bool {
	for _, s := range a.NotTransactional {
		if s == unconfinedItem {
			return true
		}
	}
	return false
}

// outcomes reads NAME=held / NAME=ESCAPED lines.
func outcomes(stderr string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(stderr, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && (v == "held" || v == "ESCAPED") {
			out[k] = v
		}
	}
	return out
}

// t002Backends lists the backends to try for an identity: overlay, copy,
// clone on an XFS image when the test runs as root (xfs is the filesystem
// that holds the rig then), and auto for an ordinary user with a file of
// a supplementary group (it must take copy).
type t002Backend struct {
	name, want string // want: the backend the run must report
	xfs        bool
	group      bool
}

func t002Backends(id t002ID) []t002Backend {
	bs := []t002Backend{{name: "overlay", want: "overlay"}, {name: "copy", want: "copy"}}
	if os.Geteuid() == 0 {
		bs = append(bs, t002Backend{name: "clone", want: "clone", xfs: true})
		if id.uid != 0 {
			bs = append(bs, t002Backend{name: "auto", want: "copy", group: true})
		}
	}
	return bs
}

// xfsParent returns a directory on a small XFS filesystem (root only),
// made once per test.
func xfsParent(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"losetup", "mkfs.xfs"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Logf("the clone backend is not tried: %s is not installed", tool)
			return ""
		}
	}
	fsys := wtxtest.NewLoopFS(t, "xfs", 320, []string{"-f", "-m", "reflink=1"}, "")
	// An ordinary user reaches it through the test's temporary directories.
	for d := fsys.Dir; d != filepath.Dir(d) && strings.HasPrefix(d, os.TempDir()+"/"); d = filepath.Dir(d) {
		mustDo(t, os.Chmod(d, 0o755))
	}
	return fsys.Dir
}

// xfsOnce makes the XFS filesystem of a test once, when a backend needs it.
type xfsOnce struct {
	dir   string
	tried bool
}

// parent is the directory a rig for backend b is made in ("" for the
// default), and whether b can be tried at all.
func (x *xfsOnce) parent(t *testing.T, b t002Backend) (string, bool) {
	if !b.xfs {
		return "", true
	}
	if !x.tried {
		x.tried, x.dir = true, xfsParent(t)
	}
	return x.dir, x.dir != ""
}

// ownPathScript writes through every name of the workspace the command
// has: its directory ($PWD, also after cd), $WTX_WORKSPACE, and the
// workspace's absolute path as the caller knows it ($WS).
const ownPathScript = `echo own > "$PWD/own.txt"; echo env > "$WTX_WORKSPACE/env.txt"; echo abs > "$WS/abs.txt"; cd src && echo sub > "$PWD/sub.txt"`

// TestT_002_OwnPathIsTheView checks T-002 on every backend (overlay, copy,
// clone; auto where it takes copy for an ordinary user with a file of a
// supplementary group), as root and as an ordinary user: a command that
// writes through the workspace's own absolute path ($PWD, $WTX_WORKSPACE,
// the path itself) writes its view, so the workspace is unchanged, the
// four files are staged, and the receipt does not call the run
// unconfined. Negative control (copy, clone): WTX_DISABLE=confine-view
// leaves the workspace's path as it is, and the writes land in it.
func TestT_002_OwnPathIsTheView(t *testing.T) {
	t.Parallel()
	var xfs xfsOnce
	for _, id := range t002IDs(t) {
		for _, b := range t002Backends(id) {
			parent, ok := xfs.parent(t, b)
			if !ok {
				continue
			}
			t.Run(id.name+"/"+b.name, func(t *testing.T) {
				r := newT002Rig(t, id, parent)
				if b.group {
					r.groupFile(t)
				}
				before := mustSnapshot(t, r.ws)
				a := decodeT002(t, r.run(t, false, nil, "run", "--json", "--backend", b.name, "--", "sh", "-c", ownPathScript))
				if a.Error != nil {
					t.Fatalf("run: %+v", a.Error)
				}
				if a.Backend != b.want {
					t.Errorf("backend %s, want %s", a.Backend, b.want)
				}
				if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
					t.Errorf("the workspace changed (as %s, %s):\n%s", id.name, b.name, formatDiff(d, 20))
				}
				if got := strings.Join(a.staged(), " "); got != "abs.txt env.txt own.txt src/sub.txt" {
					t.Errorf("staged %q, want the four writes", got)
				}
				if a.unconfined() {
					t.Errorf("the receipt says the run was unconfined: %q", a.NotTransactional)
				}
				if b.name == "overlay" {
					return
				}
				// Negative control: the protection off, the writes land.
				nc := decodeT002(t, r.run(t, true, []string{"WTX_DISABLE=confine-view"}, "run", "--json", "--backend", b.name, "--", "sh", "-c", ownPathScript))
				if nc.Error != nil {
					t.Fatalf("negative control: %+v", nc.Error)
				}
				if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) == 0 {
					t.Errorf("with confine-view off the workspace is unchanged: the check cannot fail")
				}
			})
		}
	}
}

// aliasScript writes the workspace and the state root through their other
// mounts: a bind of the workspace, of its parent (which shows the state
// root too), of a directory in it, and of the state root.
const aliasScript = `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ESCAPED"; else echo "$name=held"; fi; }
try alias-ws sh -c 'echo x > "$A_WS/alias-ws.txt"'
try alias-parent sh -c 'echo x > "$A_PARENT/$WSNAME/alias-parent.txt"'
try alias-sub sh -c 'echo x > "$A_SUB/alias-sub.txt"'
try alias-state sh -c 'echo x > "$A_STATE/planted"'
try alias-stage sh -c 'for d in "$A_STATE"/stages/*/; do echo x > "$d/escape-stage" && exit 0; done; exit 1'
try alias-parent-state sh -c 'echo x > "$A_PARENT/state/planted"'
echo staged > "$WS/staged.txt"
`

// bindAliases makes the other mounts aliasScript writes through, in a
// directory of their own, unmounted when t ends.
func (r *t002Rig) bindAliases(t *testing.T) []string {
	t.Helper()
	mnt, err := os.MkdirTemp("", "wtx-t002-alias-")
	mustDo(t, err)
	mustDo(t, os.Chmod(mnt, 0o755))
	env := []string{"WSNAME=" + filepath.Base(r.ws)}
	var points []string
	for _, a := range []struct{ name, src string }{{"A_WS", r.ws}, {"A_PARENT", r.base}, {"A_SUB", filepath.Join(r.ws, "src")}, {"A_STATE", r.state}} {
		p := filepath.Join(mnt, strings.ToLower(a.name))
		mustDo(t, os.Mkdir(p, 0o755))
		if err := unix.Mount(a.src, p, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind %s at %s: %v", a.src, p, err)
		}
		points = append(points, p)
		env = append(env, a.name+"="+p)
	}
	t.Cleanup(func() {
		for _, p := range points {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", p, err)
			}
		}
		os.RemoveAll(mnt)
	})
	return env
}

// TestT_002_OtherMountsReadOnly checks T-002 against the workspace's
// other mounts (root sets them up; the runs are as root and as an
// ordinary user, on every backend; the workspace's name holds a
// no-break space, a newline and a byte that is not UTF-8, which
// mountinfo shows escaped or raw): through a bind of the workspace, of
// its parent, of a directory in it, and of the state root, the command
// writes nothing (EROFS), the workspace is unchanged and nothing is
// planted in the state root, while its write through the workspace's own
// path is staged. Negative control: WTX_DISABLE=confine-alias leaves them
// writable, and the workspace and state root are written.
func TestT_002_OtherMountsReadOnly(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("making the other mounts of a workspace needs root (the ordinary-user runs happen in the root pass)")
	}
	var xfs xfsOnce
	for _, id := range t002IDs(t) {
		for _, b := range t002Backends(id) {
			parent, ok := xfs.parent(t, b)
			if !ok {
				continue
			}
			t.Run(id.name+"/"+b.name, func(t *testing.T) {
				r := newT002RigNamed(t, id, parent, "w\u00a0s\nx\xff")
				if b.group {
					r.groupFile(t)
				}
				env := r.bindAliases(t)
				before := mustSnapshot(t, r.ws)
				res := r.run(t, false, env, "run", "--json", "--backend", b.name, "--", "sh", "-c", aliasScript)
				a := decodeT002(t, res)
				if a.Error != nil {
					t.Fatalf("run: %+v", a.Error)
				}
				got := outcomes(res.stderr)
				if len(got) != 6 {
					t.Fatalf("the script reported %v\n%s", got, res.stderr)
				}
				for name, v := range got {
					if v != "held" {
						t.Errorf("%s got through (as %s, %s)", name, id.name, b.name)
					}
				}
				if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
					t.Errorf("the workspace changed:\n%s", formatDiff(d, 20))
				}
				if p := planted(t, r.state); len(p) > 0 {
					t.Errorf("the state root was written: %v", p)
				}
				if strings.Join(a.staged(), " ") != "staged.txt" {
					t.Errorf("staged %v, want staged.txt", a.staged())
				}
				nres := r.run(t, true, append(env, "WTX_DISABLE=confine-alias"), "run", "--json", "--backend", b.name, "--", "sh", "-c", aliasScript)
				nc := outcomes(nres.stderr)
				for _, name := range []string{"alias-ws", "alias-parent", "alias-sub", "alias-state"} {
					if nc[name] != "ESCAPED" {
						t.Errorf("with confine-alias off, %s was still stopped (as %s, %s)\n%s", name, id.name, b.name, nres.stderr)
					}
				}
				if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) == 0 {
					t.Errorf("with confine-alias off the workspace is unchanged: the check cannot fail")
				}
			})
		}
	}
}

// readOnlyScript tries every way into a --read-only view.
const readOnlyScript = `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ESCAPED"; else echo "$name=held"; fi; }
try view sh -c 'echo x > a.txt'
try own-path sh -c 'echo x > "$WS/abs.txt"'
try excluded sh -c 'mkdir -p build && echo x > build/escape-excluded'
try excluded-new sh -c 'mkdir -p build/new && echo x > build/new/escape-excluded'
`

// TestT_002_ReadOnlyCoversEveryMount checks T-002 for --read-only on every
// backend, as root and as an ordinary user: the view, the workspace's own
// path and an excluded directory (which the overlay backend backs in the
// state root) cannot be written; nothing lands in the workspace or the
// state root. Negative control (overlay): WTX_DISABLE=confine-beneath
// makes only the view's top mount read-only, and the excluded directory
// is written (into the state root).
func TestT_002_ReadOnlyCoversEveryMount(t *testing.T) {
	t.Parallel()
	var xfs xfsOnce
	for _, id := range t002IDs(t) {
		for _, b := range t002Backends(id) {
			parent, ok := xfs.parent(t, b)
			if !ok {
				continue
			}
			t.Run(id.name+"/"+b.name, func(t *testing.T) {
				r := newT002Rig(t, id, parent)
				if b.group {
					r.groupFile(t)
				}
				before := mustSnapshot(t, r.ws)
				args := []string{"run", "--json", "--keep", "--read-only", "--exclude", "build", "--backend", b.name, "--", "sh", "-c", readOnlyScript}
				res := r.run(t, false, nil, args...)
				a := decodeT002(t, res)
				if a.Error != nil {
					t.Fatalf("run: %+v", a.Error)
				}
				got := outcomes(res.stderr)
				if len(got) != 4 {
					t.Fatalf("the script reported %v\n%s", got, res.stderr)
				}
				for name, v := range got {
					if v != "held" {
						t.Errorf("%s got through --read-only (as %s, %s)", name, id.name, b.name)
					}
				}
				if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
					t.Errorf("the workspace changed:\n%s", formatDiff(d, 20))
				}
				if p := planted(t, r.state); len(p) > 0 {
					t.Errorf("a read-only run wrote the state root: %v", p)
				}
				if b.name != "overlay" {
					return
				}
				nres := r.run(t, true, []string{"WTX_DISABLE=confine-beneath"}, args...)
				if nc := outcomes(nres.stderr); nc["excluded"] != "ESCAPED" || nc["view"] != "held" {
					t.Errorf("with confine-beneath off: %v, want the excluded directory written and the view not\n%s", nc, nres.stderr)
				}
				if len(planted(t, r.state)) == 0 {
					t.Errorf("with confine-beneath off nothing landed in the state root: the check cannot fail")
				}
			})
		}
	}
}

// TestT_002_AgentStepReadOnly checks T-002 with W-005: a flow's agent step
// runs read-only on every backend, so what the agent writes itself, in its
// view or through the workspace's own path, never lands, and its proposal
// is applied. Negative control (copy): WTX_DISABLE=confine-view, and the
// agent's write through the workspace's path lands in it.
func TestT_002_AgentStepReadOnly(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"overlay", "copy"} {
		t.Run(backend, func(t *testing.T) {
			for _, off := range []bool{false, true} {
				if off && backend == "overlay" {
					continue
				}
				var env []string
				if off {
					env = []string{"WTX_DISABLE=confine-view"}
				}
				e := newFlowEnv(t, true, env...)
				mustDo(t, os.MkdirAll(filepath.Join(e.ws, "docs"), 0o755))
				mustWrite(t, filepath.Join(e.ws, "docs", "keep.md"), "keep\n")
				agent := e.script("agent.sh", `(echo mine > "$WTX_WORKSPACE/docs/own.md") 2>/dev/null || true; (echo mine > docs/view.md) 2>/dev/null || true
printf '%s\n' '{"command":"write","path":"docs/a.md","content":"A\n"}'
`)
				f := e.file("t002.toml", fmt.Sprintf("version = 1\n[[steps]]\nname = \"agent\"\nkind = \"agent\"\nbackend = %q\ncommand = [%q]\n[steps.allow]\npaths = [\"docs/**\"]\n", backend, agent))
				out, r := e.flowJSON(nil, "flow", "run", f)
				_, ownErr := os.Lstat(filepath.Join(e.ws, "docs", "own.md"))
				_, viewErr := os.Lstat(filepath.Join(e.ws, "docs", "view.md"))
				if off {
					if ownErr != nil {
						t.Errorf("with confine-view off the agent's write did not land: the check cannot fail\n%s%s", r.stdout, r.stderr)
					}
					continue
				}
				if ownErr == nil || viewErr == nil {
					t.Errorf("what the agent wrote itself landed in the workspace (own.md: %v, view.md: %v)", ownErr, viewErr)
				}
				if out.Run.Status != "done" {
					t.Errorf("flow %s, want done\n%s%s", out.Run.Status, r.stdout, r.stderr)
				}
				if data, err := os.ReadFile(filepath.Join(e.ws, "docs", "a.md")); err != nil || string(data) != "A\n" {
					t.Errorf("the proposal was not applied: %q %v", data, err)
				}
			}
		})
	}
}

// TestT_002_MCPRunEveryBackend checks T-002 with L-005: an MCP agent on a
// --propose-only server that begins a stage on the copy (or overlay)
// backend and runs a command writing through the workspace's own path
// changes nothing in the workspace; the write is staged. Negative control
// (copy): WTX_DISABLE=confine-view, and it lands in the workspace.
func TestT_002_MCPRunEveryBackend(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"overlay", "copy"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			for _, off := range []bool{false, true} {
				if off && backend == "overlay" {
					continue
				}
				ws, state := mcpWorkspace(t, map[string]string{"a.txt": "one\n"})
				var env []string
				if off {
					env = []string{"WTX_DISABLE=confine-view"}
				}
				s := startMCP(t, wtxtest.Binary(t, off), ws, state, env, "--propose-only")
				tx := s.beginStage(map[string]any{"backend": backend})
				script := `echo x > "$WTX_WORKSPACE/mcp.txt"; echo y > "$0/abs.txt"; echo z > "$PWD/own.txt"`
				r := s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c", script, ws}})
				if r.IsError {
					t.Fatalf("run: %s", r.text())
				}
				_, err := os.Lstat(filepath.Join(ws, "mcp.txt"))
				switch {
				case off && err != nil:
					t.Errorf("with confine-view off the MCP run did not write the workspace: the check cannot fail")
				case !off && err == nil:
					t.Errorf("an MCP run on %s wrote the workspace through its own path", backend)
				}
				if !off {
					entries, _ := os.ReadDir(ws)
					if len(entries) != 1 {
						t.Errorf("the workspace holds %d entries after the run, want a.txt alone", len(entries))
					}
				}
			}
		})
	}
}

// TestT_002_RefusedWhereItCannotConfine checks T-002 where copy and clone
// cannot make namespaces (failpoint build, WTX_DISABLE=contain-ns, as on a
// system that forbids them): --read-only, --no-network, an MCP run and a
// flow's agent step are refused as precondition.confinement before the
// command runs; a person's plain run goes ahead, and its answer and
// receipt say it ran unconfined. Negative control:
// WTX_DISABLE=contain-ns,confine-required runs the MCP command
// unconfined, and it writes the workspace.
func TestT_002_RefusedWhereItCannotConfine(t *testing.T) {
	t.Parallel()
	noNS := []string{"WTX_DISABLE=contain-ns"}
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "one\n"})
	marker := filepath.Join(t.TempDir(), "ran")
	for _, flag := range []string{"--read-only", "--no-network"} {
		res := wtxWith(t, true, noNS, ws, state, "run", "--json", "--backend", "copy", flag, "--", "touch", marker)
		a := decodeT002(t, res)
		if a.Error == nil || a.Error.Code != "precondition.confinement" {
			t.Errorf("%s without namespaces: %+v, want precondition.confinement", flag, a.Error)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s without namespaces ran the command", flag)
		}
	}
	// MCP: refused, then (negative control) run unconfined.
	for _, off := range []bool{false, true} {
		env := noNS
		if off {
			env = []string{"WTX_DISABLE=contain-ns,confine-required"}
		}
		s := startMCP(t, wtxtest.Binary(t, true), ws, state, env, "--propose-only")
		tx := s.beginStage(map[string]any{"backend": "copy"})
		r := s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c", `echo x > "$WTX_WORKSPACE/mcp.txt"`}})
		_, err := os.Lstat(filepath.Join(ws, "mcp.txt"))
		switch {
		case !off && r.errorCode() != "precondition.confinement":
			t.Errorf("an MCP run without namespaces: %s, want precondition.confinement", r.text())
		case !off && err == nil:
			t.Errorf("a refused MCP run wrote the workspace")
		case off && err != nil:
			t.Errorf("with confine-required off the unconfined MCP run did not write the workspace: the check cannot fail (%s)", r.text())
		}
	}
	mustDo(t, os.Remove(filepath.Join(ws, "mcp.txt")))
	// A flow's agent step.
	e := newFlowEnv(t, true, noNS...)
	agent := e.script("agent.sh", "touch "+marker+"\n")
	f := e.file("t002.toml", fmt.Sprintf("version = 1\n[[steps]]\nname = \"agent\"\nkind = \"agent\"\nbackend = \"copy\"\ncommand = [%q]\n[steps.allow]\npaths = [\"docs/**\"]\n", agent))
	out, fr := e.flowJSON(nil, "flow", "run", f)
	if out.Run.Status == "done" || !strings.Contains(fr.stdout+fr.stderr, "precondition.confinement") {
		t.Errorf("an agent step without namespaces: flow %s, want refused as precondition.confinement\n%s%s", out.Run.Status, fr.stdout, fr.stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a refused agent step ran its command")
	}
	// A person's plain run: it runs, and says so.
	res := wtxWith(t, true, noNS, ws, state, "run", "--json", "--backend", "copy", "--", "sh", "-c", `echo x > "$WTX_WORKSPACE/plain.txt"`)
	a := decodeT002(t, res)
	if a.Error != nil {
		t.Fatalf("a plain run without namespaces: %+v", a.Error)
	}
	if !a.unconfined() {
		t.Errorf("a plain unconfined run's not_transactional %q lacks %q", a.NotTransactional, unconfinedItem)
	}
	if _, err := os.Stat(filepath.Join(ws, "plain.txt")); err != nil {
		t.Errorf("the unconfined run's write through the workspace's path did not land, as its receipt says it may: %v", err)
	}
	var rc struct {
		Envelope json.RawMessage `json:"envelope"`
	}
	rr := runWtx(t, ws, state, "--json", "receipt", a.Tx)
	if err := json.Unmarshal([]byte(rr.stdout), &rc); err != nil || len(rc.Envelope) == 0 {
		t.Fatalf("wtx receipt %s: %v\n%s%s", a.Tx, err, rr.stdout, rr.stderr)
	}
	p := filepath.Join(t.TempDir(), "r.json")
	mustDo(t, os.WriteFile(p, rc.Envelope, 0o644))
	if v := runWtx(t, ws, state, "receipt", "verify", p); v.code != 0 {
		t.Errorf("the unconfined run's receipt does not verify: %s %s", v.stdout, v.stderr)
	}
}

// TestT_002_RefusedInUserNamespaceWithoutNested repeats the refusal where
// the system itself forbids namespaces: wtx runs in a user namespace whose
// limit of user namespaces is 0 (unshare), ordinary build, no switch.
func TestT_002_RefusedInUserNamespaceWithoutNested(t *testing.T) {
	t.Parallel()
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare")
	}
	if out, err := exec.Command(unshare, "--user", "--map-root-user", "true").CombinedOutput(); err != nil {
		t.Skipf("this system gives no user namespace to try in: %v %s", err, out)
	}
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "one\n"})
	bin := wtxtest.Binary(t, false)
	script := `echo 0 > /proc/sys/user/max_user_namespaces || exit 99
"$0" -C "$1" run --json --backend copy --read-only -- sh -c 'echo x > "$WTX_WORKSPACE/ro.txt"'
"$0" -C "$1" run --json --backend copy -- sh -c 'echo x > "$WTX_WORKSPACE/plain.txt"'`
	cmd := exec.Command(unshare, "--user", "--map-root-user", "sh", "-c", script, bin, ws)
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
	raw, err := cmd.Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 99 {
		t.Skip("cannot limit user namespaces inside one here")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var ro, plain t002Answer
	if err := dec.Decode(&ro); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if err := dec.Decode(&plain); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if ro.Error == nil || ro.Error.Code != "precondition.confinement" {
		t.Errorf("--read-only without namespaces: %+v, want precondition.confinement", ro.Error)
	}
	if _, err := os.Stat(filepath.Join(ws, "ro.txt")); err == nil {
		t.Errorf("a refused run wrote the workspace")
	}
	if plain.Error != nil || !plain.unconfined() {
		t.Errorf("a plain run without namespaces: %+v, not_transactional %q; want it run and called unconfined", plain.Error, plain.NotTransactional)
	}
}

// TestT_002_EscapesHoldOnCopy runs L-006's escape script on the copy
// backend: with --read-only --no-network nothing gets through, as root and
// as an ordinary user, exactly as on overlay; without switches the view
// cannot be unmounted and descriptors are closed.
func TestT_002_EscapesHoldOnCopy(t *testing.T) {
	t.Parallel()
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, false)
			r.backend = "copy"
			r.addFileCapTools(t)
			before := mustSnapshot(t, r.ws)
			res := r.run(t, nil, "--read-only", "--no-network")
			if errObj, ok := res.json["error"].(map[string]any); ok {
				t.Fatalf("run on copy: %v\n%s", errObj, res.stderr)
			}
			r.checkHeld(t, before, res, escapesAlways)
			res = r.run(t, nil)
			for _, name := range []string{"umount-syscall", "fd3", "fd9", "setns-ppid", "setns-pid1"} {
				if v, ok := res.outcomes[name]; ok && v != "held" {
					t.Errorf("escape %s got through on copy without switches (as %s)", name, id.name)
				}
			}
			if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
				t.Errorf("the workspace changed:\n%s", formatDiff(d, 20))
			}
		})
	}
}

// recordsScript tries to rewrite the stage's own records and plant a
// journal from inside a run; it also writes the view, which must stay
// writable.
const recordsScript = `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ESCAPED"; else echo "$name=held"; fi; }
try own-manifest sh -c 'for d in "$STATE"/stages/*/; do echo x >> "$d/base.manifest" && exit 0; done; exit 1'
try own-digests sh -c 'for d in "$STATE"/stages/*/; do echo x > "$d/digests" && exit 0; done; exit 1'
try own-escape sh -c 'for d in "$STATE"/stages/*/; do echo x > "$d/escape-record" && exit 0; done; exit 1'
try state-journal sh -c 'for d in "$STATE"/workspaces/*/; do mkdir -p "$d/journal/op-planted" && exit 0; done; exit 1'
echo staged > "$WS/staged.txt"
`

// TestT_002_StageRecordsReadOnlyOnCopy checks that a command run on the
// copy backend (as root and as an ordinary user) cannot rewrite its own
// stage's records (base manifest, digests) or plant a journal, while its
// write through the workspace's path is staged. Negative control:
// WTX_DISABLE=confine-state, and the records are written.
func TestT_002_StageRecordsReadOnlyOnCopy(t *testing.T) {
	t.Parallel()
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			for _, off := range []bool{false, true} {
				r := newEscapeRig(t, id, off)
				r.backend = "copy"
				var env []string
				if off {
					env = []string{"WTX_DISABLE=confine-state"}
				}
				res := r.runScript(t, recordsScript, env)
				if errObj, ok := res.json["error"].(map[string]any); ok && !off {
					t.Fatalf("run on copy: %v\n%s", errObj, res.stderr)
				}
				if len(res.outcomes) != 4 {
					t.Fatalf("the script reported %v\n%s", res.outcomes, res.stderr)
				}
				for name, v := range res.outcomes {
					if off != (v == "ESCAPED") {
						t.Errorf("confine-state off %v: %s %s (as %s)", off, name, v, id.name)
					}
				}
				// (With the records rewritten, wtx refuses the stage.)
				if counts, _ := res.json["counts"].(map[string]any); !off && counts["added"] != 1.0 {
					t.Errorf("the write through the workspace's path was not staged: %v\n%s", res.json["counts"], res.stderr)
				}
			}
		})
	}
}
