// Package hardening holds the tests that try hard to make wtx write outside
// its workspace, follow a link it should not, or lose data when the disk
// fails: a table of hostile inputs (the bad-input classes A to H of the
// design notes), a symlink-exchange race with a naive control writer, a
// syscall audit of an apply under strace, I/O errors injected at every
// mutating call, a real ENOSPC on a small tmpfs, and stage-side traps such
// as files rewritten while wtx reads them.
//
// Everything runs in a plain `go test` within a few minutes. WTX_SOAK=1 runs
// the long variants: more race attempts and more tiny files.
package hardening
