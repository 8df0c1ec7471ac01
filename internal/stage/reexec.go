package stage

// Entry is one way a wtx binary re-executes itself: started with Arg as its
// first argument and Env set in its environment, the process runs Run with
// the arguments after Arg and exits with the status it returns. Both marks
// are needed, so that a program started by someone else with the same
// first argument is never taken over.
//
// Nothing runs an entry by itself: the program's main (and the TestMain of
// every test binary that starts views or commands) hands them to
// sandbox.Main first.
type Entry struct {
	Arg string
	Env string
	// LockThread keeps the entry on the thread it starts on: the
	// parent-death signal of a child it starts follows that thread.
	LockThread bool
	Run        func(args []string) int
}

// Entries lists the re-executions this package starts.
func Entries() []Entry { return entries }

// fileOpEntry performs one per-file operation inside a view that exists
// only in a namespace.
var fileOpEntry = Entry{Arg: fileOpArg, Env: fileOpEnv, Run: fileOpMain}
