// Package powerloss approximates power cuts during an apply on real
// filesystems. A small XFS and a small ext4 (mounted noauto_da_alloc, so
// ext4 does not flush renamed-over files on its own) each hold both a
// workspace and the wtx state root. Each cycle stages a random change to a
// random tree, then crashes the apply at a random failpoint after shutting
// the filesystem down without a log flush (or lets it finish and shuts the
// filesystem down right after the acknowledgement), mounts it again so
// that its journal replays, and lets the next wtx command recover.
//
// Vocabulary: the before-image and after-image are the workspace's
// snapshots before the apply and after the change script ran on a scratch
// copy; a cycle is acknowledged when the apply exited 0 before the
// shutdown; a violation is a cycle whose recovered workspace is neither
// image, is not the after-image although acknowledged, or holds debris.
//
// The tests need root, losetup, mkfs.xfs and mkfs.ext4 and skip otherwise.
// WTX_SOAK=1 raises the cycle counts.
package powerloss
