package engine

import (
	"errors"
	"io/fs"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// syncDirs makes the entries of dirs durable (see syncAll).
func syncDirs(root *fsx.Root, dirs []string) error { return syncAll(root, nil, dirs) }

// syncFiles makes the content of files durable (see syncAll).
func syncFiles(root *fsx.Root, files []string) error { return syncAll(root, files, nil) }

// syncAll makes the content of files (each "dir\x00name") and the entries
// of dirs durable: one syncfs of the workspace's filesystem while little
// else is dirty (fsx.BulkSync), else an fsync of each file, then of each
// directory, a few at a time.
func syncAll(root *fsx.Root, files, dirs []string) error {
	if len(files) == 0 && len(dirs) == 0 {
		return nil
	}
	if fsx.BulkSync(len(files) + len(dirs)) {
		if done, err := syncFS(root); done {
			return err
		}
	}
	// An object whose mode denies this process reading it cannot be
	// opened to be synced: the whole file system is, once, instead.
	var closed atomic.Bool
	denied := func(err error) error {
		if errors.Is(err, fs.ErrPermission) {
			closed.Store(true)
			return nil
		}
		return err
	}
	err := fsx.Each(len(files), fsx.SyncInFlight, func(i int) error {
		dir, name, _ := cutNUL(files[i])
		return denied(syncFileIn(root, dir, name))
	})
	if err != nil {
		return err
	}
	err = fsx.Each(len(dirs), fsx.SyncInFlight, func(i int) error {
		d, err := root.OpenDir(dirs[i])
		if err != nil {
			return denied(err)
		}
		defer d.Close()
		return d.Sync()
	})
	if err != nil || !closed.Load() {
		return err
	}
	return syncEverything(root)
}

// syncEverything makes everything written on the workspace's file system
// durable: syncfs where there is one, else sync(2), which on some systems
// only starts the writes (there, an object this process cannot open is
// synced as well as the system allows).
func syncEverything(root *fsx.Root) error {
	if done, err := syncFS(root); done {
		return err
	}
	unix.Sync()
	return nil
}

func cutNUL(s string) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func syncFileIn(root *fsx.Root, dir, name string) error {
	d, err := root.OpenDir(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return syncEntry(d, name, false)
}

// syncEntry fsyncs the file, or with dir the directory, name in d.
func syncEntry(d *fsx.Dir, name string, dir bool) error {
	if dir {
		sub, err := d.OpenDir(name)
		if err != nil {
			return err
		}
		defer sub.Close()
		return sub.Sync()
	}
	f, err := d.OpenFile(name)
	if err != nil {
		return err
	}
	defer f.Close() // read-only
	return fsx.SyncFile(f)
}

// syncFS flushes the workspace's whole filesystem; done is false where
// syncfs is not supported.
func syncFS(root *fsx.Root) (done bool, err error) {
	rd, err := root.OpenDir(".")
	if err != nil {
		return true, err
	}
	err = rd.SyncFS()
	rd.Close()
	if errors.Is(err, errors.ErrUnsupported) {
		return false, nil
	}
	return true, err
}
