package sandbox

import (
	"os"
	"runtime"

	"github.com/wtx-dev/wtx/internal/stage"
)

// Main runs the re-execution this process was started for, if any, and
// exits the process with its status; otherwise it returns false at once
// and the program goes on. A re-execution is known by two marks, the
// first argument and a variable in the environment (see stage.Entry):
// wtx sets both when it starts itself, so a program that merely imports
// wtx is never taken over by its arguments.
//
// wtx's main calls it first, as does the TestMain of every test binary
// that starts views or runs commands in them: those start the binary
// they run in (/proc/self/exe) to supervise and confine a command.
func Main() bool {
	if len(os.Args) < 2 {
		return false
	}
	for _, e := range entries() {
		if os.Args[1] != e.Arg || os.Getenv(e.Env) == "" {
			continue
		}
		if e.LockThread {
			runtime.LockOSThread()
		}
		os.Exit(e.Run(os.Args[2:]))
	}
	return false
}

// entries is the dispatch table: every re-execution a wtx binary may be
// started for.
func entries() []stage.Entry { return stage.Entries() }
