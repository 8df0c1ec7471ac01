//go:build !linux

package wtxtest

import (
	"errors"
	"fmt"
	"testing"
)

// Shutdown would shut down the filesystem holding dir; only Linux can.
func Shutdown(dir string) error {
	return fmt.Errorf("shutdown %s: %w", dir, errors.ErrUnsupported)
}

// SyncFS would make the filesystem holding dir durable; only Linux can.
func SyncFS(dir string) error {
	return fmt.Errorf("syncfs %s: %w", dir, errors.ErrUnsupported)
}

// LoopFS is a filesystem in a loop-mounted image; only Linux has one.
type LoopFS struct {
	Type, Options, Dir string
}

// NewLoopFS skips t: loop filesystems are made on Linux only.
func NewLoopFS(t testing.TB, fstype string, sizeMiB int64, mkfsArgs []string, options string) *LoopFS {
	t.Skipf("loop filesystem %s: Linux only", fstype)
	return nil
}

// Mount is unsupported off Linux.
func (l *LoopFS) Mount() error { return errors.ErrUnsupported }

// Unmount is unsupported off Linux.
func (l *LoopFS) Unmount() error { return errors.ErrUnsupported }

// Shutdown is unsupported off Linux.
func (l *LoopFS) Shutdown() error { return errors.ErrUnsupported }

// Remount is unsupported off Linux.
func (l *LoopFS) Remount() error { return errors.ErrUnsupported }
