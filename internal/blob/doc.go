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
// survives power loss. Object files are read-only and private (mode 0400).
//
// # Concurrency
//
// A Store is safe for concurrent use by several goroutines and several
// processes sharing the directory. Two writers of the same content race only
// to rename identical bytes onto the same name, which is harmless.
//
// Digests that are not well formed are refused by every method, so a name
// such as "sha256:../../x" never reaches the file system.
package blob
