// Package tree describes directory trees as sorted lists of entries and
// computes, without doing any I/O, what changed between two of them.
//
// # Vocabulary
//
// An [Entry] is one path of a tree: its type, permission bits, size, content
// digest or link target, and the stat tuple (inode, times) seen when it was
// recorded. A [Manifest] is the sorted list of entries of a workspace taken
// when a stage opens: the base every later decision is judged against. A
// [Change] says that a path was added, modified or deleted between the base and
// a stage's view; a change set is a sorted slice of them. A [Selector] picks
// paths by slash-separated glob patterns. A [Plan] is the ordered list of steps
// that turns the base into the result for a selected change set.
//
// Paths are workspace-relative, slash-separated and sorted bytewise. The
// workspace root itself is never an entry.
package tree
