package stage

import (
	"os/exec"
	"runtime"
	"syscall"
)

// tieToCaller makes the helper cmd, started next, die with the wtx process
// that starts it: a helper that outlived a killed wtx could change the view
// after the next command had found it and settled what was half done. The
// kernel sends the signal when the thread that forked the helper ends
// (golang/go#27505), so the calling goroutine stays on its thread until the
// returned function is called, after Wait.
func tieToCaller(cmd *exec.Cmd) (untie func()) {
	runtime.LockOSThread()
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return runtime.UnlockOSThread
}
