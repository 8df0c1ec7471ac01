package stage

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Confinement of a command run in an overlay view. The supervisor (see
// NamespaceMain) builds the view in a mount namespace of its own (and,
// without root, a user namespace mapping the caller to itself), then starts
// the last step (execMain), which executes the command. For a view, that
// last step starts in a further user and mount namespace nested under the
// supervisor's own (confineAttr). The nesting is what locks the view: the
// kernel copies every mount into a mount namespace owned by a less
// privileged user namespace as locked (MNT_LOCKED, and MNT_LOCK_READONLY on
// a read-only one), so nothing inside can unmount the view, clear its
// read-only flag, or reach what lies beneath it. The user namespace is
// identity-mapped (each id the supervisor has maps to itself), so a root
// command stays root over files and an ordinary user keeps its ids. In the
// last step, confineExec limits user namespaces, empties the capability
// sets it must, sets no_new_privs and checks the result with capget and
// /proc before the command is executed. On every run the state root is
// also a read-only bind in that mount namespace (hideState), so neither
// the stage nor wtx's own records can be written by the command.
//
// What the command keeps:
//
//   - with --read-only or --no-network, as root or not: no capability in
//     any set (effective, permitted, inheritable, ambient, bounding),
//     no_new_privs, securebits locked, and no user namespace of its own;
//   - an ordinary user without them: the same, the user namespace limit
//     set where /proc/sys allows;
//   - root without them: root's capabilities in its own user namespace
//     only (over its files; not over the machine, the host's namespaces or
//     the view's mounts), none in the inheritable and ambient sets.

// confineCheckArg makes this binary check the capability state it was
// executed with (what a command would get) and exit 0 when it holds no
// capability and has no_new_privs; the overlay probe runs it through the
// last step.
const confineCheckArg = "__stage-confine-check"

// confineCheckEnv marks the environment of the confinement check; the
// last step passes it on to the command, unlike helperEnv.
const confineCheckEnv = "WTX_STAGE_CONFINE_CHECK"

// Modes of the last step.
const (
	confineAll  = "all"  // --read-only or --no-network: empty every set, no_new_privs, no user namespaces
	confineUser = "user" // an ordinary user's run: the same, user namespaces limited where /proc/sys allows
	confineRoot = "root" // root without switches: keeps root's capabilities in the nested namespace
)

// Protections a negative control may switch off (builds with the
// wtxfailpoint tag only; never in the overlay probe).
const (
	disableConfineCaps   = "confine-caps"   // keep the capability sets as they are
	disableConfineDrop   = "confine-drop"   // skip the drop, keep the check
	disableConfineState  = "confine-state"  // leave the state root writable
	disableConfineUserNS = "confine-userns" // no nested user and mount namespace
	disableConfineFDs    = "confine-fds"    // pass inherited descriptors on
)

// confineCheckMain is the entry of confineCheckArg: 0 when the process
// holds no capability and has no_new_privs, else 125.
func confineCheckMain([]string) int {
	if err := verifyCaps(confineAll); err != nil {
		fmt.Fprintf(os.Stderr, "wtx: confinement: %v\n", err)
		return 125
	}
	return 0
}

// confineDisabled reports whether a negative control switched protection p
// off for the run of s.
func confineDisabled(s *nsSpec, p string) bool { return !s.Probe && failpoint.Disabled(p) }

// confineMode is the mode of the last step for a run with these switches,
// by the caller's effective user id.
func confineMode(readOnly, noNetwork bool) string {
	switch {
	case readOnly || noNetwork:
		return confineAll
	case os.Geteuid() == 0:
		return confineRoot
	}
	return confineUser
}

// confineAttr makes the last step of a run in a view start in a user and
// mount namespace nested under the supervisor's.
func confineAttr(s *nsSpec, a *syscall.SysProcAttr) error {
	if !s.confined() {
		return nil
	}
	if !s.Probe && (s.Upper != "" || s.Keep != "") && !confineDisabled(s, disableConfineState) {
		if err := hideState(s); err != nil {
			return &ExecError{Confinement: true, Message: "stage: confinement: " + err.Error()}
		}
	}
	if !s.Probe && !confineDisabled(s, disableConfineKernel) {
		if err := protectKernel(); err != nil {
			return &ExecError{Confinement: true, Message: "stage: confinement: " + err.Error()}
		}
	}
	if confineDisabled(s, disableConfineUserNS) {
		return nil
	}
	if s.Isolate && !freshProc() {
		// A copy or clone view is contained by its PID namespace all the
		// same; without a /proc of its own the last step cannot be
		// nested (its id maps are written through /proc), so the
		// command runs in the supervisor's namespaces, where root could
		// undo its mounts: unconfined, or refused when it must be.
		if s.Confine {
			return &ExecError{Confinement: true, Message: "stage: confinement: no /proc of the command's own PID namespace, so its mounts cannot be locked"}
		}
		return nil
	}
	if err := nestAttr(a); err != nil {
		// The command is not started: its caller hears why.
		return &ExecError{Confinement: true, Message: "stage: " + err.Error()}
	}
	s.nested = true
	return nil
}

// hideState makes the state root (or, where it cannot be told, the
// stage's directory) read-only for every command run in a view, with a
// bind of it over itself that leaves out the mounts beneath it: without
// this the command could write the stage through the overlay's own mount
// point or its upper directory, the state of every stage, and plant a
// journal that the next wtx command would recover into the real
// workspace. Nothing in the view needs the state root by path once the
// overlay is mounted (the kernel reaches the upper and work directories
// through the mount). The nested namespace locks the bind.
//
// A copy or clone view lies in the state root itself (s.Keep): it is bound
// over itself again, from the writable mount beneath, once the state root
// is read-only (not for --read-only: the view is read-only then).
func hideState(s *nsSpec) error {
	dir, stateRoot := stateDirOf(s)
	keep := -1
	if s.Keep != "" && !s.ReadOnly {
		fd, err := unix.Open(s.Keep, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open the view %s: %w", s.Keep, err)
		}
		defer unix.Close(fd)
		keep = fd
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("hide the state root %s: %w", dir, err)
	}
	if err := remountReadOnly(dir); err != nil {
		return err
	}
	if stateRoot && !failpoint.Disabled("hide-keys") {
		if err := hideKeys(filepath.Join(dir, "keys")); err != nil {
			return err
		}
	}
	if keep >= 0 {
		src := "/proc/self/fd/" + strconv.Itoa(keep)
		if err := unix.Mount(src, s.Keep, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("keep the view %s writable: %w", s.Keep, err)
		}
	}
	return nil
}

// stateDirOf is the state root of the stage s runs in (or, where it
// cannot be told, the stage's directory); "" for neither. stateRoot says
// it is the state root.
func stateDirOf(s *nsSpec) (dir string, stateRoot bool) {
	dir = filepath.Dir(s.Upper) // the stage's directory
	switch {
	case s.Upper == "" && s.Keep == "":
		return "", false
	case s.Upper == "":
		dir = filepath.Dir(s.Keep)
	}
	if p := filepath.Dir(dir); filepath.Base(p) == "stages" {
		return filepath.Dir(p), true
	}
	return dir, false
}

// hideKeys puts an empty read-only directory over the state root's keys
// directory (wtx's keysDirName): the receipt key signs what the user's
// commands did, and a command in a view must not be able to sign for
// them. A keys directory that is not a directory (a link) is not mounted
// over, through it or at all: wtx refuses to use such a state root.
func hideKeys(keys string) error {
	fd, err := unix.Open(keys, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ENOENT {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hide the receipt key %s: %w", keys, err)
	}
	defer unix.Close(fd)
	target := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount("tmpfs", target, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0500"); err != nil {
		return fmt.Errorf("hide the receipt key %s: %w", keys, err)
	}
	return nil
}

// freshProc reports whether /proc is this PID namespace's.
func freshProc() bool {
	self, err := os.Readlink("/proc/self")
	return err == nil && self == strconv.Itoa(os.Getpid())
}

func nestAttr(a *syscall.SysProcAttr) error {
	// The id maps are written through /proc/PID of the new process, PID
	// as this PID namespace numbers it: /proc must be this namespace's.
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		return fmt.Errorf("confinement: /proc is not this PID namespace's (%q, %v)", self, err)
	}
	uids, err := identityMap("/proc/self/uid_map")
	if err != nil {
		return err
	}
	gids, err := identityMap("/proc/self/gid_map")
	if err != nil {
		return err
	}
	a.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	a.UidMappings, a.GidMappings = uids, gids
	a.GidMappingsEnableSetgroups = false
	if os.Geteuid() != 0 {
		// Dropping the bounding set takes CAP_SETPCAP, and limiting the
		// namespace's user namespaces CAP_SYS_RESOURCE, which a user other
		// than root has in the nested namespace only if they are handed over.
		a.AmbientCaps = []uintptr{unix.CAP_SETPCAP, unix.CAP_SYS_RESOURCE}
	}
	return nil
}

// identityMap reads one of this process's id maps and returns the map that
// gives a child user namespace the same ids: each range of ids this
// namespace has, mapped to itself.
func identityMap(file string) ([]syscall.SysProcIDMap, error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("confinement: %w", err)
	}
	var m []syscall.SysProcIDMap
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		inside, err1 := strconv.ParseUint(f[0], 10, 32)
		size, err2 := strconv.ParseUint(f[2], 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("confinement: %s: malformed line %q", file, line)
		}
		m = append(m, syscall.SysProcIDMap{ContainerID: int(inside), HostID: int(inside), Size: int(size)})
	}
	if len(m) == 0 {
		return nil, fmt.Errorf("confinement: %s maps no ids", file)
	}
	return m, nil
}

// confineExec runs in the last step of a run in a view, on the thread that
// executes the command: it drops what the mode says and checks the result.
func confineExec(s *nsSpec) error {
	if !s.confined() || confineDisabled(s, disableConfineCaps) {
		return nil
	}
	mode := confineMode(s.ReadOnly, s.NoNetwork)
	if mode != confineRoot && !confineDisabled(s, disableConfineUserNS) {
		if err := limitUserNamespaces(); err != nil && mode == confineAll {
			return fmt.Errorf("confinement: %w", err)
		}
	}
	var err error
	switch {
	case confineDisabled(s, disableConfineDrop):
	case mode == confineRoot:
		err = dropInheritable()
	default:
		err = dropAllCaps()
	}
	if err == nil {
		err = verifyCaps(mode)
	}
	if err != nil {
		return fmt.Errorf("confinement: %w", err)
	}
	return nil
}

// probeConfinement starts the last step as for a --read-only run, with
// this binary as the command, checking what it was executed with.
func probeConfinement() error {
	spec := &nsSpec{View: true, Probe: true, ReadOnly: true, Cwd: "/", Path: "/proc/self/exe",
		Args: []string{"wtx", confineCheckArg}}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	for _, h := range cmdHooks {
		if err := h(spec, attr); err != nil {
			return err
		}
	}
	var out bytes.Buffer
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{"wtx", execArg, spec.encode()},
		Env: append(os.Environ(), confineCheckEnv+"=1"), Stdout: &out, Stderr: &out, SysProcAttr: attr}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("cannot confine a command (nested user namespace, capabilities): %s", msg)
	}
	return nil
}

// initUserNSIno is the inode number of the initial user namespace
// (PROC_USER_INIT_INO), whose limits are the whole machine's.
const initUserNSIno = 0xEFFFFFFD

// limitUserNamespaces sets this user namespace's limit of user namespaces
// to 0, so the command cannot make one of its own (in which it would hold
// capabilities again, over its own mounts). The limit is this namespace's
// own (a child's sysctl does not change its parent's); it is never written
// from the initial namespace.
func limitUserNamespaces() error {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/user", &st); err != nil {
		return fmt.Errorf("limit user namespaces: %w", err)
	}
	if st.Ino == initUserNSIno {
		return fmt.Errorf("limit user namespaces: not in a nested user namespace")
	}
	const limit = "/proc/sys/user/max_user_namespaces"
	if err := os.WriteFile(limit, []byte("0\n"), 0); err != nil {
		return fmt.Errorf("limit user namespaces: %w", err)
	}
	raw, err := os.ReadFile(limit)
	if err != nil || strings.TrimSpace(string(raw)) != "0" {
		return fmt.Errorf("limit user namespaces: %s reads %q (%v)", limit, raw, err)
	}
	return nil
}

// Securebits (linux/securebits.h): root gains nothing by being root, a
// change of uid changes no capability, no capability can be raised into
// the ambient set, and none of that can be undone.
const (
	secbitNoroot              = 1 << 0
	secbitNorootLocked        = 1 << 1
	secbitNoSetuidFixup       = 1 << 2
	secbitNoSetuidFixupLocked = 1 << 3
	secbitKeepCapsLocked      = 1 << 5
	secbitNoCapAmbientRaise   = 1 << 6
	secbitNoCapAmbientLocked  = 1 << 7
)

// dropAllCaps empties every capability set of the calling thread and sets
// no_new_privs, so that no execve (of a set-user-id or file-capability
// binary, or as root) gives any back.
func dropAllCaps() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	bitsOn := secbitNoroot | secbitNorootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked | secbitNoCapAmbientRaise | secbitNoCapAmbientLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bitsOn), 0, 0, 0); err != nil {
		return fmt.Errorf("lock securebits: %w", err)
	}
	last, err := lastCap()
	if err != nil {
		return err
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop %s from the bounding set: %w", capName(c), err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear the capability sets: %w", err)
	}
	return nil
}

// dropInheritable clears the inheritable and ambient sets (a root command
// without confinement switches keeps the rest, in its own namespace).
func dropInheritable() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient set: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read the capability sets: %w", err)
	}
	data[0].Inheritable, data[1].Inheritable = 0, 0
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear the inheritable set: %w", err)
	}
	return nil
}

// verifyCaps checks, with capget and in /proc, that the calling thread
// keeps no capability mode does not allow, and names the first it keeps.
func verifyCaps(mode string) error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("read the capability sets: %w", err)
	}
	join := func(lo, hi uint32) uint64 { return uint64(hi)<<32 | uint64(lo) }
	sets := map[string]uint64{"CapInh": join(data[0].Inheritable, data[1].Inheritable)}
	if mode != confineRoot {
		sets["CapPrm"] = join(data[0].Permitted, data[1].Permitted)
		sets["CapEff"] = join(data[0].Effective, data[1].Effective)
	}
	for name, v := range sets {
		if v != 0 {
			return keptCap(name, v)
		}
	}
	raw, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		return fmt.Errorf("read the capability sets: %w", err)
	}
	want := []string{"CapInh", "CapAmb"}
	if mode != confineRoot {
		want = append(want, "CapPrm", "CapEff", "CapBnd")
	}
	seen := 0
	nnp := false
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		val = strings.TrimSpace(val)
		if key == "NoNewPrivs" {
			nnp = val == "1"
			continue
		}
		for _, w := range want {
			if key != w {
				continue
			}
			seen++
			v, err := strconv.ParseUint(val, 16, 64)
			if err != nil {
				return fmt.Errorf("read %s: %q", key, val)
			}
			if v != 0 {
				return keptCap(key, v)
			}
		}
	}
	if seen != len(want) {
		return fmt.Errorf("/proc/thread-self/status lacks capability sets")
	}
	if mode != confineRoot && !nnp {
		return fmt.Errorf("no_new_privs is not set")
	}
	return nil
}

// keptCap names the lowest capability left in set v.
func keptCap(set string, v uint64) error {
	names := map[string]string{"CapInh": "inheritable", "CapPrm": "permitted", "CapEff": "effective",
		"CapBnd": "bounding", "CapAmb": "ambient"}
	return fmt.Errorf("the command would keep %s in its %s capability set", capName(bits.TrailingZeros64(v)), names[set])
}

// lastCap is the highest capability number this kernel knows.
func lastCap() (int, error) {
	raw, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, fmt.Errorf("read the last capability: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || n < 0 || n > 63 {
		return 0, fmt.Errorf("read the last capability: %q", raw)
	}
	return n, nil
}

var capNames = [...]string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
	"CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE",
	"CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW", "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE",
	"CAP_SYS_RAWIO", "CAP_SYS_CHROOT", "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT",
	"CAP_SYS_NICE", "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
	"CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE", "CAP_MAC_ADMIN", "CAP_SYSLOG",
	"CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ", "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"}

func capName(c int) string {
	if c >= 0 && c < len(capNames) {
		return capNames[c]
	}
	return "capability " + strconv.Itoa(c)
}
