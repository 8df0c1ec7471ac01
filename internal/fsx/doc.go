// Package fsx gives wtx safe, durable access to a workspace directory.
//
// Every operation on a workspace goes through a [Root] or a [Dir]. Both are
// open directory handles, and a method acts on one directory entry with a
// single-component *at system call. The package never follows a symlink and
// never crosses a mount point inside a workspace, so no input and no
// concurrent rename of a directory into a symlink can make an operation land
// outside the root.
//
// # Vocabulary
//
//   - root: the workspace directory, opened once with [OpenRoot].
//   - rel: a workspace-relative path, slash-separated and clean, checked by
//     [ValidRel]; "." denotes the root itself.
//   - name: a single path component, as taken by every [Dir] method. It holds
//     no slash and is neither "." nor "..".
//   - dev: the st_dev of the root. A directory on another device is a mount
//     point and is refused with [ErrCrossDevice].
//
// # Resolution
//
// [Root.OpenDir] resolves a rel path. On Linux it uses openat2 with
// RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_MAGICLINKS and
// RESOLVE_NO_XDEV. Where openat2 is missing or blocked, and on other systems,
// it walks the path one component at a time with openat(O_DIRECTORY|O_NOFOLLOW)
// and compares the device (and, on Linux, the mount id) of each directory it
// opens with those of the root.
//
// Once a directory is open, someone with write access can still move it
// elsewhere. Later calls then act on that directory in its new place. They never
// act on a different directory that now has the old name.
//
// # Files
//
// A [File] is a regular file held by its descriptor alone: [Dir.Open] opens
// one for reading beneath a directory handle, [Dir.CreateTempFile] and
// [CreateAt] create one, [ReadSmallFile] reads a small one whole with one
// call. Reads and writes are positioned; a read of a file under 64 KiB is
// one pread of one byte more than its size, whose short count is its end.
// The engine moves its many small files this way: an *os.File asks the
// descriptor's flags when it is made and when it is used. A command that
// never changes its umask says so with [FixUmask], and files it creates
// with bits the umask leaves whole need no fchmod ([ExactPerm]).
//
// # wtx's own directories
//
// The state root is reached the same way: opened once with [OpenRoot], and
// every path beneath it resolved by the rel-path methods of [Root]
// ([Root.OpenFile], [Root.ReadFile], [Root.ReadDir], [Root.WriteAtomic],
// [Root.MkdirAll], [Root.RemoveAll], [Root.Rename], [Root.Remove],
// [Root.Chmod], [Root.DiskUsage]). A symlink found where wtx keeps its own
// file or directory is an error, never followed and never replaced (but
// by an atomic write, whose rename replaces whatever is at its name);
// [Root.RemoveAll] removes a link, not what it points to, and stops at a
// mount point.
//
// # Durability
//
// [Dir.Sync], [SyncDir], [Root.WriteAtomic] and [WriteFileAtomic] flush data
// and directory entries to stable storage (F_FULLFSYNC on darwin).
// [WriteFileAtomic] resolves its path the ordinary way: it is for callers
// that hold no root.
//
// # Negative control
//
// A build with the tag wtxfailpoint run with WTX_DISABLE=nofollow resolves
// the ordinary way, following symlinks and crossing mount points: the tests
// of the discipline show with it what a planted link would do without it.
//
// # Errors
//
// Errors are *fs.PathError or *os.LinkError values naming the rel path. They
// wrap either the system error, so errors.Is works with fs.ErrNotExist,
// fs.ErrExist, fs.ErrPermission or syscall.ENOSPC, or one of the sentinels of
// this package.
package fsx
