//go:build unix

package blob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockName is the store lock's file in the store directory. It is never
// deleted, so a killed holder never leaves it stale (the kernel drops a
// flock with its last descriptor).
const lockName = "blobs.lock"

// ErrLockTimeout is wrapped by errors from [Store.Lock] when the lock was
// not free before the deadline.
var ErrLockTimeout = errors.New("the blob store is locked")

// A LockMode says how the store lock is taken.
type LockMode int

const (
	// Shared is taken by every writer that holds objects nothing records
	// yet: from before the first object is written until the record that
	// names them (or the rollback that drops them) is durable. Any number
	// of writers share it.
	Shared LockMode = iota
	// Exclusive is taken by a collector while it computes what is
	// referenced and removes the rest: no writer holds unrecorded objects
	// meanwhile.
	Exclusive
)

// Lock takes the store lock in mode, waiting until deadline (or ctx is
// done), and returns a function that releases it.
func (s *Store) Lock(ctx context.Context, mode LockMode, deadline time.Time) (func(), error) {
	f, err := s.root.OpenFileFlags(lockName, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the blob store lock %s: %w", filepath.Join(s.path, lockName), s.damaged(err))
	}
	how := unix.LOCK_SH
	if mode == Exclusive {
		how = unix.LOCK_EX
	}
	for {
		err := unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock the blob store: %w", err)
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			f.Close()
			return nil, fmt.Errorf("%s: %w", s.path, ErrLockTimeout)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}
