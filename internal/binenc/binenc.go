// Package binenc holds the few primitives of wtx's binary formats (the base
// manifest, the apply journal): varints and length-prefixed strings, and a
// decoder that remembers its first error so a parser can read a whole
// record and check once.
package binenc

import (
	"encoding/binary"
	"errors"
	"unsafe"
)

// AppendString appends s with its length as a uvarint before it.
func AppendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Decoder reads what the Append functions and encoding/binary wrote. After
// the first error every method returns a zero value; Err says what it was.
type Decoder struct {
	b   []byte
	err error
	// all is b as one string: every String read is a substring of it, so a
	// large record set costs one copy instead of one allocation per string.
	all   string
	total int
}

// NewDecoder reads b. Strings it returns share one copy of b.
func NewDecoder(b []byte) *Decoder { return &Decoder{b: b, all: string(b), total: len(b)} }

// NewDecoderTaking reads b and takes it: the strings it returns are b's own
// bytes, not a copy, so the caller must never change b again. It is for a
// buffer read only to be decoded (a large file's content), whose copy would
// cost as much as the read.
func NewDecoderTaking(b []byte) *Decoder {
	return &Decoder{b: b, all: unsafe.String(unsafe.SliceData(b), len(b)), total: len(b)}
}

// Err is the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Fail records err unless an error was already met.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Len is the number of bytes not read yet.
func (d *Decoder) Len() int { return len(d.b) }

// Uvarint reads a uvarint.
func (d *Decoder) Uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = errors.New("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Varint reads a varint.
func (d *Decoder) Varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errors.New("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

// Byte reads one byte.
func (d *Decoder) Byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = errors.New("unexpected end")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

// String reads a length-prefixed string.
func (d *Decoder) String() string {
	n := d.Uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("string exceeds data")
		return ""
	}
	off := d.total - len(d.b)
	d.b = d.b[n:]
	return d.all[off : off+int(n)]
}
