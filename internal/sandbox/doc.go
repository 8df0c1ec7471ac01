// Package sandbox is the one entry of the processes wtx starts from its own
// binary (/proc/self/exe) to supervise, confine and reach a view.
//
// A process is one of them only when both marks of a stage.Entry are
// there: its first argument and a variable in its environment. [Main]
// dispatches on them and exits with the entry's status; otherwise it
// returns false and the program goes on. Nothing runs before main: a
// program that imports wtx runs none of it unless it calls Main (or
// wtx.Reexec) itself. cmd/wtx calls it first, and so does the TestMain of
// every test binary that runs commands in views.
//
// The entries, by platform:
//   - Linux: the supervisor of a command run in a view (it builds an
//     overlay view in new namespaces, holds the command's processes in a
//     PID namespace or as a subreaper, and stops what the command leaves);
//     the last step, which drops inherited descriptors and capabilities
//     and confines the command before it executes it; the confinement
//     check the overlay probe runs as its command; and the per-file
//     operation run inside an overlay view.
//   - Elsewhere: the per-file operation only. Commands run in a process
//     group of their own, with no supervisor process.
//
// The code of the entries still lives in internal/stage; it moves here
// when the views and the sandbox are split apart.
package sandbox
