//go:build !linux

package fsx

import "os"

// nextExtent cannot find holes here: everything is copied densely.
func nextExtent(f *os.File, off, size int64) (data, hole int64, ok bool) { return 0, 0, false }

// offloadRange has no kernel copy here.
func offloadRange(dst, src *os.File, off, end int64) (int64, bool) { return 0, false }
