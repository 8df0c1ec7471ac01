// Package semantic holds wtx's semantic suite: one test per promise of the
// contract (SPEC.md §6), named after the promise's id, each driving the real
// wtx binary against real directories.
//
// Vocabulary used by the tests:
//
//   - workspace: the directory a test hands to wtx with -C;
//   - direct run: the same command run straight in a second copy of the
//     starting tree, the reference the staged result is compared with;
//   - snapshot: a map from each path under a root to its type, permission
//     bits, content digest (files) or link target (symlinks); mtimes, owners
//     and inodes are left out on purpose.
//
// The binary is built once per test run from the module containing the
// tests (internal/wtxtest); set WTX_BIN to test a prebuilt binary instead.
package semantic
