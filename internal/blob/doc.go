// Package blob is a content-addressed, write-once store for file contents.
//
// # Vocabulary
//
// An object is one stored byte sequence. Its [Digest] is "sha256:" followed by
// the 64 lowercase hex digits of the SHA-256 of its bytes; the digest is the
// object's only name. A [Store] keeps objects under one directory:
//
//	DIR/objects/ab/cdef…   one file per object, named by its hex digest,
//	                       in a directory named by the first two hex digits
//	DIR/tmp/               objects being written
//
// An object is written once and never modified: [Store.Put] writes to a
// temporary file, hashing while it writes, syncs it, and renames it into
// place, so a reader never sees a partial object and an object that exists
// survives power loss. Object files are read-only and private (mode 0400). Storing
// content that is already stored renames the fresh copy over the old file:
// a damaged object heals, and the file's mtime says when its content was
// last stored.
//
// # Verification
//
// Nothing read out of the store is trusted: [Store.ReadAll], [Store.CopyTo]
// and [Store.NewReader] hash the content as they read it and fail with
// [ErrCorrupt] when it does not hash to its name, so damaged bytes never
// reach a caller as good content. [Store.Verify] checks one object and
// [Store.Walk] lists them all, for a whole-store check.
//
// # Sparse files
//
// A regular file stored from its start keeps its holes: only its data
// regions are written (SEEK_DATA/SEEK_HOLE), and [Store.CopyTo] writes them
// back the same way. The digest is always over the logical content, holes
// read as zeros.
//
// # Concurrency
//
// A Store is safe for concurrent use by several goroutines and several
// processes sharing the directory. Two writers of the same content race only
// to rename identical bytes onto the same name, which is harmless.
//
// Digests that are not well formed are refused by every method, so a name
// such as "sha256:../../x" never reaches the file system.
//
// # Paths
//
// The store's directories are opened once, beneath the store's directory,
// and kept open; an object is reached with one call in its prefix
// directory, never by its path. A symlink, a mount point or a file of
// another type where the store keeps its own directory is reported
// ([ErrDamaged]), never followed or replaced. One in an object's place is
// reported by every read and never followed; storing that content again
// renames the object over it, as it heals any damaged object.
package blob
