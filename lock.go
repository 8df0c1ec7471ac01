package wtx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// lockWait bounds how long a command waits for another wtx process to
// finish with the workspace.
const lockWait = 60 * time.Second

// lock takes the workspace lock: a kernel flock on a file in the state root
// that is never deleted, so a killed holder never leaves it stale. It
// returns a function that releases it.
func (w *Workspace) lock(ctx context.Context) (func(), error) {
	p := filepath.Join(w.workspaceStateDir(), "lock")
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, AsError(fmt.Errorf("open workspace lock: %w", err))
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
