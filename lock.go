package wtx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/failpoint"
)

// lockWait bounds how long a command waits for another wtx process to
// finish with the workspace.
const lockWait = 60 * time.Second

// lock takes the workspace lock: a kernel flock on a file in the state root
// that is never deleted, so a killed holder never leaves it stale. It
// returns a function that releases it. With the workspace lock it takes
// the blob store's lock shared: whatever runs under the workspace lock may
// write blobs that no record names yet (an apply's payloads and
// pre-images, a per-file op's contents), and the shared lock keeps a
// collection (gc, of any workspace of the state root) from sweeping them
// until their record is written or they are abandoned.
func (w *Workspace) lock(ctx context.Context) (func(), error) {
	unlock, err := w.lockWorkspace(ctx)
	if err != nil {
		return nil, err
	}
	if failpoint.Disabled("store-lock") {
		return unlock, nil // negative control: gc may sweep what is in flight
	}
	release, err := w.blobs.Lock(ctx, blob.Shared, time.Now().Add(lockWait))
	if err != nil {
		unlock()
		return nil, storeLockError(err)
	}
	return func() { release(); unlock() }, nil
}

// storeLockError reports a failure to take the blob store lock.
func storeLockError(err error) error {
	if errors.Is(err, blob.ErrLockTimeout) {
		return &Error{Code: CodeLocked, Message: "the blob store shared by every workspace of this state root is busy (a gc or an apply of another workspace)", Err: err}
	}
	return AsError(err)
}

// lockWorkspace takes the workspace lock alone.
func (w *Workspace) lockWorkspace(ctx context.Context) (func(), error) {
	f, err := w.state.OpenFile(w.workspaceRel()+"/lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, stateIOError(w.stateDir, "open the workspace lock", err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) && !errors.Is(err, unix.EINTR) {
			f.Close()
			return nil, AsError(fmt.Errorf("lock workspace: %w", err))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			f.Close()
			return nil, errorf(CodeLocked, "workspace %s is locked by another wtx process", w.path)
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
	}
}
