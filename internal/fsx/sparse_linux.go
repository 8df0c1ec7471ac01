package fsx

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// nextExtent returns the data region of f at or after off: [data, hole),
// with data == size when only a hole is left. ok is false when the file
// system cannot tell (the caller copies densely).
func nextExtent(f *os.File, off, size int64) (data, hole int64, ok bool) {
	fd := int(f.Fd())
	data, err := unix.Seek(fd, off, unix.SEEK_DATA)
	if errors.Is(err, unix.ENXIO) {
		return size, size, true
	}
	if err != nil {
		return 0, 0, false
	}
	if data >= size {
		return size, size, true
	}
	hole, err = unix.Seek(fd, data, unix.SEEK_HOLE)
	if err != nil {
		return 0, 0, false
	}
	return data, min(hole, size), true
}

// offloadRange copies [off, end) with copy_file_range. It returns the bytes
// copied and whether the whole range was; on false the caller copies the
// rest itself.
func offloadRange(dst, src *os.File, off, end int64) (int64, bool) {
	start := off
	for off < end {
		roff, woff := off, off
		n, err := unix.CopyFileRange(int(src.Fd()), &roff, int(dst.Fd()), &woff, int(min(end-off, 1<<30)), 0)
		if err != nil || n == 0 {
			return off - start, false
		}
		off += int64(n)
	}
	return off - start, true
}
