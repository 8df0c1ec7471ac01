//go:build linux

package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// The escape tool: this test binary, started with L006_TOOL set, does one
// escape with raw system calls and exits 0 only when it got through.
func init() {
	if os.Getenv("L006_TOOL") != "" && len(os.Args) > 1 {
		os.Exit(escapeTool(os.Args[1], os.Args[2:]))
	}
}

// escapeTool runs one escape; 0 means it got through, anything else that
// it was stopped (the reason on stderr).
func escapeTool(what string, args []string) int {
	fail := func(err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 1
	}
	write := func(dir, name string) int {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("escaped\n"), 0o644); err != nil {
			return fail(err)
		}
		return 0
	}
	switch what {
	case "umount": // WS: detach the view, write beneath it
		if err := unix.Unmount(args[0], unix.MNT_DETACH); err != nil {
			return fail(err)
		}
		return write(args[0], "escape-umount")
	case "remount": // WS: clear the view's read-only flag
		if err := unix.Mount("", args[0], "", unix.MS_REMOUNT|unix.MS_BIND, ""); err != nil {
			return fail(err)
		}
		return write(args[0], "escape-remount")
	case "bind": // SRC WS: cover the view with a writable directory
		if err := unix.Mount(args[0], args[1], "", unix.MS_BIND, ""); err != nil {
			return fail(err)
		}
		return write(args[1], "escape-bind")
	case "connect": // PORT: reach the host's loopback listener
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+args[0], 2*time.Second)
		if err != nil {
			return fail(err)
		}
		c.Close()
		return 0
	case "setns": // NSFILE PORT: join another network namespace, connect
		runtime.LockOSThread()
		f, err := os.Open(args[0])
		if err != nil {
			return fail(err)
		}
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			return fail(err)
		}
		return escapeTool("connect", args[1:])
	case "openw": // PATH: open a kernel setting for writing (nothing is written)
		f, err := os.OpenFile(args[0], os.O_WRONLY, 0)
		if err != nil {
			return fail(err)
		}
		f.Close()
		return 0
	case "read": // PATH: read anything from a file that should show empty
		raw, err := os.ReadFile(args[0])
		if err != nil {
			return fail(err)
		}
		if len(raw) == 0 {
			return fail(errors.New("empty"))
		}
		return 0
	case "caps": // any capability or no no_new_privs is an escape
		raw, err := os.ReadFile("/proc/self/status")
		if err != nil {
			return fail(err)
		}
		kept := false
		for _, line := range strings.Split(string(raw), "\n") {
			k, v, _ := strings.Cut(line, ":")
			v = strings.TrimSpace(v)
			switch {
			case strings.HasPrefix(k, "Cap") && strings.Trim(v, "0") != "":
				fmt.Fprintf(os.Stderr, "caps: %s %s\n", k, v)
				kept = true
			case k == "NoNewPrivs" && v != "1":
				fmt.Fprintf(os.Stderr, "caps: NoNewPrivs %s\n", v)
				kept = true
			}
		}
		if kept {
			return 0
		}
		return 1
	}
	return fail(errors.New("unknown escape"))
}

// identity is who runs wtx: the test process itself, or (when the test
// runs as root) an ordinary user through setpriv.
type identity struct {
	name   string
	uid    int
	prefix []string
}

func identities(t *testing.T) []identity {
	ids := []identity{{name: "user", uid: os.Geteuid()}}
	if os.Geteuid() != 0 {
		return ids
	}
	ids[0].name = "root"
	if p, err := exec.LookPath("setpriv"); err == nil {
		ids = append(ids, identity{name: "user", uid: 65534,
			prefix: []string{p, "--reuid=65534", "--regid=65534", "--clear-groups"}})
	} else {
		t.Logf("no setpriv: the ordinary-user case runs only in the unprivileged pass")
	}
	return ids
}

// escapeRig is a workspace with a copy of wtx and of the escape tool that
// the identity can run, a host listener on 127.0.0.1, and a state root.
type escapeRig struct {
	base, ws, state, elsewhere string
	wtx, tool                  string
	port                       int
	accepted                   *atomic.Int32
	id                         identity
	backend                    string // "" is overlay
}

func newEscapeRig(t *testing.T, id identity, failpoints bool) *escapeRig {
	t.Helper()
	base, err := os.MkdirTemp("", "wtx-l006-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeUnmounted(t, base) })
	mustDo(t, os.Chmod(base, 0o755))
	r := &escapeRig{base: base, ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state"),
		elsewhere: filepath.Join(base, "elsewhere"), id: id}
	for _, d := range []string{r.ws, r.state, r.elsewhere, filepath.Join(r.ws, "src")} {
		mustDo(t, os.Mkdir(d, 0o755))
	}
	mustDo(t, os.WriteFile(filepath.Join(r.ws, "src", "main.go"), []byte("package main\n"), 0o644))
	mustDo(t, os.WriteFile(filepath.Join(r.ws, "README"), []byte("hello\n"), 0o644))
	r.wtx = filepath.Join(base, "wtx")
	copyExec(t, wtxtest.Binary(t, failpoints), r.wtx)
	self, err := os.Executable()
	mustDo(t, err)
	r.tool = filepath.Join(base, "tool")
	copyExec(t, self, r.tool)
	if id.uid != os.Geteuid() {
		for _, p := range []string{r.ws, r.state, r.elsewhere} {
			mustDo(t, filepath.Walk(p, func(p string, _ os.FileInfo, err error) error {
				if err != nil {
					return err
				}
				return os.Lchown(p, id.uid, id.uid)
			}))
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	mustDo(t, err)
	t.Cleanup(func() { ln.Close() })
	r.port = ln.Addr().(*net.TCPAddr).Port
	r.accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			r.accepted.Add(1)
			c.Close()
		}
	}()
	return r
}

// removeUnmounted removes dir after detaching anything mounted beneath it
// in this mount namespace, so that an escape that got through can never
// make the removal reach into what it mounted.
func removeUnmounted(t *testing.T, dir string) {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Errorf("not removing %s: %v", dir, err)
		return
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			t.Errorf("%s was mounted in the test's own mount namespace: an escape reached the host", f[4])
			if err := unix.Unmount(f[4], unix.MNT_DETACH); err != nil {
				t.Errorf("not removing %s: unmount %s: %v", dir, f[4], err)
				return
			}
		}
	}
	os.RemoveAll(dir)
}

func copyExec(t *testing.T, src, dst string) {
	t.Helper()
	in, err := os.Open(src)
	mustDo(t, err)
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	mustDo(t, err)
	_, err = io.Copy(out, in)
	mustDo(t, err)
	mustDo(t, out.Close())
}

// escapeScript runs each escape in turn and prints NAME=held or
// NAME=ESCAPED. Escapes through the system's own tools run when they are
// installed; the escape tool's run always.
const escapeScript = `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ESCAPED"; else echo "$name=held"; fi; }
have() { command -v "$1" >/dev/null 2>&1; }
T="$L006_TOOL_PATH"
try umount-syscall "$T" umount "$WS"
try remount-syscall "$T" remount "$WS"
try bind-syscall "$T" bind "$ELSEWHERE" "$WS"
try write-view sh -c 'echo x > "$WS/escape-write"'
try connect-host "$T" connect "$PORT"
try setns-ppid "$T" setns /proc/$PPID/ns/net "$PORT"
try setns-pid1 "$T" setns /proc/1/ns/net "$PORT"
try state-merged sh -c 'for d in "$STATE"/stages/*/; do echo x > "$d/merged/escape-merged" && exit 0; done; exit 1'
try state-upper sh -c 'for d in "$STATE"/stages/*/; do echo x > "$d/upper/escape-upper" && exit 0; done; exit 1'
try fd3 sh -c 'echo x > /proc/self/fd/3/escape-fd'
try fd9 sh -c 'echo x > /proc/self/fd/9/escape-fd'
try caps "$T" caps
if have umount; then try umount-l sh -c 'umount -l "$WS" && echo x > "$WS/escape-umount-l"'; fi
if have mount; then
	try remount-rw sh -c 'mount -o remount,bind,rw "$WS" && echo x > "$WS/escape-remount-rw"'
	try bind-dir sh -c 'mount --bind "$ELSEWHERE" "$WS" && echo x > "$WS/escape-bind-dir"'
fi
if have nsenter; then
	try nsenter-ppid nsenter --net=/proc/$PPID/ns/net "$T" connect "$PORT"
	try nsenter-t1 nsenter -t 1 -n "$T" connect "$PORT"
fi
if have unshare; then
	try unshare-Urn unshare -Urn sh -c '"$0" umount "$WS" || "$0" remount "$WS" || echo x > "$WS/escape-unshare"' "$T"
	try unshare-Urm unshare -Urm sh -c '"$0" umount "$WS" || "$0" remount "$WS" || "$0" bind "$ELSEWHERE" "$WS"' "$T"
	try unshare-nsenter unshare -Ur "$T" setns /proc/1/ns/net "$PORT"
fi
for c in "$L006_TOOL_PATH"-cap*; do
	[ -x "$c" ] || continue
	try "filecap-umount-${c##*-}" "$c" umount "$WS"
	try "filecap-remount-${c##*-}" "$c" remount "$WS"
	try "filecap-bind-${c##*-}" "$c" bind "$ELSEWHERE" "$WS"
done
`

// escapeRun is the outcome of one run of the escape script.
type escapeRun struct {
	code     int
	json     map[string]any
	outcomes map[string]string // escape name → "held" or "ESCAPED"
	stderr   string
}

// run runs the escape script through wtx run with flags, the workspace
// holding descriptors 3 (the workspace) and 9 (its src directory) open
// without close-on-exec, as a caller may pass them.
func (r *escapeRig) run(t *testing.T, env []string, flags ...string) escapeRun {
	t.Helper()
	return r.runScript(t, escapeScript, env, flags...)
}

// runScript is run with another script.
func (r *escapeRig) runScript(t *testing.T, script string, env []string, flags ...string) escapeRun {
	t.Helper()
	// Only ever a backend that confines (or refuses): the script must
	// never run unconfined.
	backend := r.backend
	if backend == "" {
		backend = "overlay"
	}
	args := append(append([]string{"-C", r.ws, "run", "--json", "--backend", backend}, flags...), "--", "sh", "-c", script)
	argv := append(append([]string(nil), r.id.prefix...), r.wtx)
	cmd := exec.Command(argv[0], append(argv[1:], args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+r.state, "HOME="+r.base, "L006_TOOL=1",
		"L006_TOOL_PATH="+r.tool, "WS="+r.ws, "STATE="+r.state, "ELSEWHERE="+r.elsewhere, "PORT="+strconv.Itoa(r.port)), env...)
	wsDir, err := os.Open(r.ws)
	mustDo(t, err)
	defer wsDir.Close()
	srcDir, err := os.Open(filepath.Join(r.ws, "src"))
	mustDo(t, err)
	defer srcDir.Close()
	// ExtraFiles[i] is descriptor 3+i of wtx, passed without close-on-exec.
	cmd.ExtraFiles = []*os.File{wsDir, nil, nil, nil, nil, nil, srcDir}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx run: %v", err)
	}
	res := escapeRun{code: cmd.ProcessState.ExitCode(), outcomes: map[string]string{}, stderr: errb.String()}
	if err := json.Unmarshal(out.Bytes(), &res.json); err != nil {
		t.Fatalf("wtx run --json: %v\nstdout: %s\nstderr: %s", err, out.String(), errb.String())
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && (v == "held" || v == "ESCAPED") {
			res.outcomes[k] = v
		}
	}
	return res
}

// overlayOrRefused skips the rest of a test, with the reason, when wtx
// refused the confinement (a conforming outcome that exercises no escape);
// it fails on any other error.
func overlayOrRefused(t *testing.T, res escapeRun) {
	t.Helper()
	if errObj, ok := res.json["error"].(map[string]any); ok {
		switch errObj["code"] {
		case "precondition.confinement":
			t.Skipf("confinement refused here, as L-006 allows (%v); no escape to try", errObj["message"])
		case "precondition.unsupported":
			t.Skipf("no overlay backend here (%v); no escape to try", errObj["message"])
		}
		t.Fatalf("wtx run failed: %v\n%s", errObj, res.stderr)
	}
	if res.json["backend"] != "overlay" {
		t.Fatalf("backend %v without a refusal", res.json["backend"])
	}
}

// addFileCapTools makes copies of the escape tool with file capabilities
// (root only): one with cap_sys_admin in the effective and inheritable
// sets, one also permitted.
func (r *escapeRig) addFileCapTools(t *testing.T) {
	setcap, err := exec.LookPath("setcap")
	if err != nil || os.Geteuid() != 0 {
		t.Logf("file-capability escapes not tried: setting file capabilities needs root and setcap")
		return
	}
	for suffix, caps := range map[string]string{"cap-ei": "cap_sys_admin,cap_dac_override+ei", "cap-eip": "cap_sys_admin,cap_dac_override+eip"} {
		p := r.tool + "-" + suffix
		copyExec(t, r.tool, p)
		if out, err := exec.Command(setcap, caps, p).CombinedOutput(); err != nil {
			t.Logf("setcap %s: %v %s", caps, err, out)
			os.Remove(p)
		}
	}
}

// checkHeld asserts that every escape was stopped inside and that the
// workspace and the host's loopback listener saw nothing of it.
func (r *escapeRig) checkHeld(t *testing.T, before map[string]node, res escapeRun, want []string) {
	t.Helper()
	if len(res.outcomes) == 0 {
		t.Fatalf("the escape script reported nothing:\n%s", res.stderr)
	}
	for _, name := range want {
		if _, ok := res.outcomes[name]; !ok {
			t.Errorf("escape %s did not run", name)
		}
	}
	for name, v := range res.outcomes {
		if v != "held" {
			t.Errorf("escape %s got through (as %s)", name, r.id.name)
		}
	}
	if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
		t.Errorf("the workspace changed during the run (as %s):\n%s", r.id.name, formatDiff(d, 20))
	}
	if n := r.accepted.Load(); n != 0 {
		t.Errorf("the host listener on 127.0.0.1 accepted %d connections from the command", n)
	}
	if t.Failed() {
		t.Logf("stderr:\n%s", res.stderr)
	}
}

var escapesAlways = []string{"umount-syscall", "remount-syscall", "bind-syscall", "write-view",
	"state-merged", "state-upper", "connect-host", "setns-ppid", "setns-pid1", "fd3", "fd9", "caps"}

// TestL006_ReadOnlyNoNetworkHold checks L-006: with --read-only and
// --no-network, no escape gets through, as root and as an ordinary user:
// unmounting, remounting read-write or covering the view (raw system calls
// and umount/mount), joining another network namespace (setns, nsenter on
// the parent and on pid 1), a nested user namespace (unshare -Urn, -Urm),
// file capabilities (cap_sys_admin+ei, +eip; root pass), inherited
// descriptors 3 and 9; the command keeps no capability and has
// no_new_privs. Outside, the workspace is unchanged and the host listener
// on 127.0.0.1 saw no connection; the stage's change set is empty.
func TestL006_ReadOnlyNoNetworkHold(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, false)
			r.addFileCapTools(t)
			before := mustSnapshot(t, r.ws)
			res := r.run(t, nil, "--read-only", "--no-network")
			overlayOrRefused(t, res)
			r.checkHeld(t, before, res, escapesAlways)
			if counts, _ := res.json["counts"].(map[string]any); counts["added"] != 0.0 || counts["modified"] != 0.0 || counts["deleted"] != 0.0 {
				t.Errorf("a read-only run left changes in its stage: %v", res.json["counts"])
			}
		})
	}
}

// TestL006_NoNetworkAlone checks that --no-network without --read-only
// holds the network and the workspace too: the command's writes are staged,
// never written through to the workspace.
func TestL006_NoNetworkAlone(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, false)
			before := mustSnapshot(t, r.ws)
			res := r.run(t, nil, "--no-network")
			overlayOrRefused(t, res)
			for _, name := range []string{"connect-host", "setns-ppid", "setns-pid1", "nsenter-ppid", "nsenter-t1", "unshare-nsenter", "caps", "fd3", "fd9"} {
				if v, ok := res.outcomes[name]; ok && v != "held" {
					t.Errorf("escape %s got through with --no-network (as %s)", name, id.name)
				}
			}
			if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
				t.Errorf("the workspace changed during the run:\n%s", formatDiff(d, 20))
			}
			if n := r.accepted.Load(); n != 0 {
				t.Errorf("the host listener accepted %d connections", n)
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", res.stderr)
			}
		})
	}
}

// TestL006_EveryRunLocksTheView checks the choice that every overlay run
// is confined in a nested user namespace: even without --read-only, a
// command (root keeping its capabilities there) cannot unmount the view and
// write the workspace beneath it, and inherited descriptors are closed.
func TestL006_EveryRunLocksTheView(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, false)
			before := mustSnapshot(t, r.ws)
			res := r.run(t, nil)
			overlayOrRefused(t, res)
			// (umount -l runs after the bind escapes, which a root command
			// may do over the view without --read-only: it then unmounts
			// its own bind, not the view.)
			for _, name := range []string{"umount-syscall", "fd3", "fd9", "setns-ppid", "setns-pid1"} {
				if v, ok := res.outcomes[name]; ok && v != "held" {
					t.Errorf("escape %s got through without confinement switches (as %s)", name, id.name)
				}
			}
			if id.uid != 0 && res.outcomes["caps"] != "held" {
				t.Errorf("an ordinary user's command keeps capabilities")
			}
			if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) > 0 {
				t.Errorf("the workspace changed during the run:\n%s", formatDiff(d, 20))
			}
			if t.Failed() {
				t.Logf("stderr:\n%s", res.stderr)
			}
		})
	}
}

// TestL006_NegativeControl switches the protections off (failpoint build):
// without the capability drop and the nested namespace, a root command
// unmounts the view and writes the workspace, and so does an ordinary
// user's command through a copy of a binary with cap_sys_admin+ei (root
// pass; the unprivileged pass sees the capabilities it keeps); without
// closing descriptors, descriptor 9 reaches the workspace; with the state
// root left writable, the stage is written through the overlay's own mount
// point; without the
// capability drop alone, capabilities remain. Each must be seen, or the
// escape suite could not fail.
func TestL006_NegativeControl(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, true)
			r.addFileCapTools(t)
			before := mustSnapshot(t, r.ws)
			res := r.run(t, []string{"WTX_DISABLE=confine-caps,confine-userns,confine-fds,confine-state"}, "--read-only", "--no-network")
			overlayOrRefused(t, res)
			escape := "umount-syscall"
			if id.uid != 0 {
				escape = "filecap-umount-ei"
				if _, ok := res.outcomes[escape]; !ok {
					escape = "caps"
				}
			}
			t.Logf("negative control: %s", escape)
			if res.outcomes[escape] != "ESCAPED" {
				t.Errorf("with confinement off, %s was still stopped: the suite cannot fail\n%s", escape, res.stderr)
			}
			if d := diffSnapshots(before, mustSnapshot(t, r.ws)); len(d) == 0 && escape != "caps" {
				t.Errorf("with confinement off, the workspace did not change: the outside check cannot fail")
			}
			if res.outcomes["state-merged"] != "ESCAPED" {
				t.Errorf("with the state root left writable, the overlay's mount point was not writable\n%s", res.stderr)
			}
			if res.outcomes["fd9"] != "ESCAPED" {
				t.Errorf("with descriptors passed on, fd 9 did not reach the workspace\n%s", res.stderr)
			}
			res = r.run(t, []string{"WTX_DISABLE=confine-caps"}, "--read-only", "--no-network")
			if res.outcomes["caps"] != "ESCAPED" {
				t.Errorf("with the capability drop off, the command still had none\n%s", res.stderr)
			}
		})
	}
}

// TestL006_RefusedWithoutNamespace checks that a backend without namespaces
// (copy where they cannot be made: failpoint build, WTX_DISABLE=contain-ns)
// refuses --read-only and --no-network as precondition.confinement, saying
// which, and runs nothing.
func TestL006_RefusedWithoutNamespace(t *testing.T) {
	ws, state := t.TempDir(), t.TempDir()
	marker := filepath.Join(t.TempDir(), "ran")
	for flag, says := range map[string]string{"--read-only": "read-only", "--no-network": "network"} {
		res := wtxWith(t, true, []string{"WTX_DISABLE=contain-ns"}, ws, state, "run", "--json", "--backend", "copy", flag, "--", "touch", marker)
		var out struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
			t.Fatalf("%s: %v: %s %s", flag, err, res.stdout, res.stderr)
		}
		if out.Error.Code != "precondition.confinement" || !strings.Contains(out.Error.Message, says) {
			t.Errorf("%s with copy: %+v, want precondition.confinement naming %q", flag, out.Error, says)
		}
		if res.code == 0 {
			t.Errorf("%s with copy exited 0", flag)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatalf("%s with copy ran the command", flag)
		}
	}
}

// TestL006_CheckFailsClosed runs wtx's confinement check (what the overlay
// probe runs as the command) outside any confinement: it must refuse with
// 125, naming a capability the test process holds or the missing
// no_new_privs.
func TestL006_CheckFailsClosed(t *testing.T) {
	cmd := exec.Command(wtxtest.Binary(t, false), "__stage-confine-check")
	cmd.Env = append(os.Environ(), "WTX_STAGE_CONFINE_CHECK=1")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 125 {
		t.Fatalf("confinement check outside confinement: %v, want exit 125\n%s", err, out)
	}
	// An ordinary user still has a full bounding set; root has every set.
	if !strings.Contains(string(out), "would keep CAP_") && !strings.Contains(string(out), "no_new_privs is not set") {
		t.Errorf("output %q, want it to name a capability kept or no_new_privs", out)
	}
}

// TestL006_VerifyCatchesKeptCapability skips the capability drop but not
// its check (failpoint build): the run must be refused as
// precondition.confinement before the command, naming a capability the
// command would keep.
func TestL006_VerifyCatchesKeptCapability(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, true)
			res := r.run(t, []string{"WTX_DISABLE=confine-drop"}, "--read-only")
			errObj, _ := res.json["error"].(map[string]any)
			if errObj == nil || errObj["code"] != "precondition.confinement" || len(res.outcomes) != 0 {
				t.Fatalf("run with the drop skipped: %v, %d escapes ran; want precondition.confinement and none\n%s", res.json, len(res.outcomes), res.stderr)
			}
			if msg, _ := errObj["message"].(string); !strings.Contains(msg, "would keep CAP_") {
				t.Errorf("no capability named: %q", msg)
			}
		})
	}
}
