package fsx

import (
	"context"
	"errors"
	"io"
	"os"
)

// copyChunk is the largest piece CopySparse reads, writes or hashes at once.
const copyChunk = 1 << 20

// denseBelow is the size under which a file is copied densely, without
// asking where its holes are: a hole there saves next to nothing, and the
// asking costs two system calls per file.
const denseBelow = 64 << 10

// zeros stands in for the bytes of a hole when they are hashed.
var zeros = make([]byte, copyChunk)

// CopySparse copies src, from offset 0 to its end, into dst, a new empty
// file, at the same offsets, and writes the same bytes to h when h is not
// nil. Where the system reports holes (SEEK_DATA and SEEK_HOLE), a region
// src does not store is not written: dst has a hole there too, and h gets
// the zeros the hole reads as. Without h, the data regions are copied with
// the kernel's copy offload where there is one (a clone on btrfs and XFS).
// It returns the number of bytes copied: src's length when it was read to
// its end. ctx is checked between chunks.
func CopySparse(ctx context.Context, dst, src *os.File, h io.Writer) (int64, error) {
	fi, err := src.Stat()
	if err != nil {
		return 0, err
	}
	size := fi.Size()
	buf := make([]byte, min(copyChunk, max(size, 4096)))
	var off, wrote int64
	for off < size && size >= denseBelow {
		if err := ctx.Err(); err != nil {
			return off, err
		}
		data, hole, ok := nextExtent(src, off, size)
		if !ok {
			break // no hole reporting here: the rest is copied densely
		}
		if data > off {
			if err := hashZeros(h, data-off); err != nil {
				return off, err
			}
			off = data
		}
		if off >= size {
			break
		}
		n, err := copyRange(ctx, dst, src, h, off, hole, buf)
		off += n
		wrote = off
		if err != nil {
			return off, err
		}
		if off < hole {
			break // src shrank while it was read
		}
	}
	// Densely from here: a system without hole reporting, or bytes src
	// gained since its length was taken.
	for {
		if err := ctx.Err(); err != nil {
			return off, err
		}
		n, err := src.ReadAt(buf, off)
		if n > 0 {
			if _, werr := dst.WriteAt(buf[:n], off); werr != nil {
				return off, werr
			}
			if h != nil {
				h.Write(buf[:n])
			}
			off += int64(n)
			wrote = off
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return off, err
		}
	}
	// A hole at the end is made by the length alone.
	if off > wrote {
		dfi, err := dst.Stat()
		if err != nil {
			return off, err
		}
		if dfi.Size() < off {
			if err := dst.Truncate(off); err != nil {
				return off, err
			}
		}
	}
	return off, nil
}

// copyRange copies [off, end) of src to dst and h. It returns the bytes
// copied, fewer than asked when src ended first.
func copyRange(ctx context.Context, dst, src *os.File, h io.Writer, off, end int64, buf []byte) (int64, error) {
	start := off
	if h == nil {
		n, ok := offloadRange(dst, src, off, end)
		off += n
		if ok || off >= end {
			return off - start, nil
		}
	}
	for off < end {
		if err := ctx.Err(); err != nil {
			return off - start, err
		}
		n, err := src.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if n > 0 {
			if _, werr := dst.WriteAt(buf[:n], off); werr != nil {
				return off - start, werr
			}
			if h != nil {
				h.Write(buf[:n])
			}
			off += int64(n)
		}
		if errors.Is(err, io.EOF) {
			return off - start, nil
		}
		if err != nil {
			return off - start, err
		}
	}
	return off - start, nil
}

func hashZeros(h io.Writer, n int64) error {
	if h == nil {
		return nil
	}
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := h.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
