package stage

var entries = []Entry{
	// The supervisor of a command run in a view (for the overlay backend
	// it also builds the view, in new namespaces).
	{Arg: HelperArg, Env: helperEnv, LockThread: true, Run: NamespaceMain},
	// The last step, which executes the command itself.
	{Arg: execArg, Env: helperEnv, LockThread: true, Run: execMain},
	// The confinement check the overlay probe runs as its command.
	{Arg: confineCheckArg, Env: confineCheckEnv, Run: confineCheckMain},
	fileOpEntry,
}
