package stage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Terminal input injection. A command that shares the caller's terminal
// (it stays in wtx's process group so that interactive programs work) could
// push characters into that terminal's input queue with the TIOCSTI ioctl
// (or paste a selection with TIOCLINUX): once wtx exits, the caller's shell
// reads them as if typed, and runs them outside the stage, unconfined. The
// last step therefore installs a seccomp filter that refuses those two
// ioctls with EPERM on every thread, inherited by the command and by
// everything it starts. Other ioctls and system calls are untouched.
//
// Installing a filter takes no_new_privs or CAP_SYS_ADMIN in the current
// user namespace. Runs in a view have one or the other (see confineExec);
// an ordinary user's run on the copy or clone backend has neither, and
// gets no filter: those backends confine nothing.

// disableTTYInject is the negative control's switch (failpoint builds).
const disableTTYInject = "tty-inject"

// ttyInjectExec is the hook of the last step.
func ttyInjectExec(s *nsSpec) error {
	if !s.Probe && failpoint.Disabled(disableTTYInject) {
		return nil
	}
	prog, ok := ttyInjectFilter()
	if !ok {
		return nil // an architecture without a filter here
	}
	err := installFilter(prog)
	if errors.Is(err, unix.EACCES) && s.confined() && confineMode(s.ReadOnly, s.NoNetwork) != confineRoot {
		// confineExec sets no_new_privs for these runs; set it now if this
		// hook runs first.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("confinement: set no_new_privs: %w", err)
		}
		err = installFilter(prog)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, unix.EACCES) && !s.confined():
		return nil // no privilege for it, and nothing promised (see above)
	}
	return fmt.Errorf("confinement: filter terminal input injection: %w", err)
}

func installFilter(prog []unix.SockFilter) error {
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&fp)))
	runtime.KeepAlive(prog)
	switch {
	case errno != 0:
		return errno
	case r != 0:
		return fmt.Errorf("thread %d could not take the filter", r)
	}
	return nil
}

// ioctlABI is one system call convention a process of this architecture may
// use: its audit arch and its ioctl number.
type ioctlABI struct {
	arch uint32
	nr   uint32
}

// ttyInjectABIs lists the conventions of GOARCH (native first, then the
// 32-bit compat ones and, on amd64, x32's two ioctl entries).
func ttyInjectABIs() []ioctlABI {
	const x32 = 0x40000000
	switch runtime.GOARCH {
	case "amd64":
		return []ioctlABI{{unix.AUDIT_ARCH_X86_64, 16}, {unix.AUDIT_ARCH_X86_64, x32 | 16}, {unix.AUDIT_ARCH_X86_64, x32 | 514}, {unix.AUDIT_ARCH_I386, 54}}
	case "arm64":
		return []ioctlABI{{unix.AUDIT_ARCH_AARCH64, 29}, {unix.AUDIT_ARCH_ARM, 54}}
	}
	return nil
}

// ttyInjectFilter builds the BPF program: for an ioctl of a known
// convention whose request (the low 32 bits of its second argument, which is
// all the kernel reads) is TIOCSTI or TIOCLINUX, EPERM; anything else is
// allowed.
func ttyInjectFilter() ([]unix.SockFilter, bool) {
	abis := ttyInjectABIs()
	if len(abis) == 0 {
		return nil, false
	}
	const (
		offNr   = 0
		offArch = 4
		offArgs = 16
	)
	// The low word of args[1]: first on a little-endian machine.
	offReq := uint32(offArgs + 8)
	if binary.NativeEndian.Uint16([]byte{0, 1}) == 1 {
		offReq += 4
	}
	ld := func(off uint32) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: off}
	}
	jeq := func(k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, K: k, Jt: jt, Jf: jf}
	}
	ret := func(k uint32) unix.SockFilter { return unix.SockFilter{Code: unix.BPF_RET | unix.BPF_K, K: k} }
	// Per ABI: load arch, compare, load nr, compare; a match jumps to the
	// request check at the end, a miss falls through to the next ABI.
	var prog []unix.SockFilter
	n := len(abis)
	for i, a := range abis {
		// Instructions left after this block's 4: (n-1-i) blocks of 4, then
		// "ret allow", then the request check.
		after := uint8(4*(n-1-i) + 1)
		prog = append(prog,
			ld(offArch),
			jeq(a.arch, 0, 2), // not this arch: skip the nr test
			ld(offNr),
			jeq(a.nr, after, 0),
		)
	}
	prog = append(prog,
		ret(unix.SECCOMP_RET_ALLOW),
		ld(offReq),
		jeq(uint32(unix.TIOCSTI), 1, 0),
		jeq(uint32(unix.TIOCLINUX), 0, 1),
		ret(unix.SECCOMP_RET_ERRNO|uint32(unix.EPERM)),
		ret(unix.SECCOMP_RET_ALLOW),
	)
	return prog, true
}
