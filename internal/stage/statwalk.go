package stage

import (
	"context"
	"sync"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// parallelWalk visits the tree under root like walk, never following a
// symlink, but reads directories on several goroutines: visit may be called
// concurrently and in any order (parents still before their children).
// skip is called for every entry before visit; an entry it skips is not
// visited and nothing beneath it is read.
func parallelWalk(ctx context.Context, root *fsx.Root, workers int, skip func(rel string, st fsx.Stat) bool, visit visitFunc) error {
	d, err := root.OpenDir(".")
	if err != nil {
		return err
	}
	w := &parallelWalker{ctx: ctx, skip: skip, visit: visit, sem: make(chan struct{}, max(workers-1, 0))}
	w.dir(d, "")
	w.wg.Wait()
	return w.err
}

type parallelWalker struct {
	ctx   context.Context
	skip  func(rel string, st fsx.Stat) bool
	visit visitFunc
	sem   chan struct{}
	wg    sync.WaitGroup
	mu    sync.Mutex
	err   error
}

func (w *parallelWalker) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

func (w *parallelWalker) failed() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err != nil
}

// dir visits the entries of d (closed on return), descending into
// subdirectories on a new goroutine while one is free, inline otherwise.
func (w *parallelWalker) dir(d *fsx.Dir, prefix string) {
	defer d.Close()
	if err := w.ctx.Err(); err != nil {
		w.fail(err)
		return
	}
	names, err := d.ReadDir()
	if err != nil {
		w.fail(err)
		return
	}
	for _, name := range names {
		if w.failed() {
			return
		}
		rel := prefix + name
		st, err := d.Lstat(name)
		if err != nil {
			w.fail(err)
			return
		}
		if w.skip != nil && w.skip(rel, st) {
			continue
		}
		if err := w.visit(rel, d, name, st); err != nil {
			w.fail(err)
			return
		}
		if !st.Mode.IsDir() {
			continue
		}
		child, err := d.OpenDir(name)
		if err != nil {
			w.fail(err)
			return
		}
		select {
		case w.sem <- struct{}{}:
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				defer func() { <-w.sem }()
				w.dir(child, rel+"/")
			}()
		default:
			w.dir(child, rel+"/")
		}
	}
}
