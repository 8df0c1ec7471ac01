// Package engine is wtx's write-ahead apply engine: it writes a change set
// into a workspace all or nothing, and finishes or rolls back what a crash
// interrupted.
//
// One op runs in this order:
//
//   - Check compares every path of the change set with the workspace (the
//     compare half of the compare-and-swap) and splits it into what to
//     write, what is in place already, and conflicts, each of a typed
//     ConflictKind. It remembers the object it saw at each path.
//   - KeepPreimages puts the content every change displaces into the blob
//     store, so that the op can be undone.
//   - Store.Commit journals the whole plan durably, runs it (the swap half:
//     each step checks once more that the object it displaces is the one
//     Check saw), syncs, writes the commit marker, cleans up, and runs the
//     caller's Finish: Record, then Settle. The journal goes last.
//   - After a crash, Store.RollBack undoes an op without a commit marker,
//     one function per step kind; Store.RollForward finishes the
//     workspace's side of one with a marker, and the caller records and
//     settles it again.
//
// The engine knows nothing of stages, receipts or flows: the caller's op
// record travels through the journal as an opaque body. It returns an
// *Error whose Kind says what the caller tells its user.
package engine
