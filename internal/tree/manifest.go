package tree

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"sort"

	"github.com/wtx-dev/wtx/internal/binenc"
)

// RacyMargin is how close (in ns) to the manifest's fence a workspace time
// must be for a matching stat tuple to prove nothing: an edit in the same
// timestamp granule as the recording leaves the tuple unchanged. Two seconds
// covers filesystems with coarse (1 s, 2 s) timestamps.
const RacyMargin = int64(2e9)

// Manifest is the base of a stage: the sorted entries of its surface as they
// were when the stage opened.
type Manifest struct {
	// Fence is a filesystem time (ns) taken after every workspace entry was
	// recorded. Workspace tuples within RacyMargin of it are racy.
	Fence int64
	// ViewFence is a time on the view's filesystem taken after every view
	// tuple was recorded and strictly after all of them; view tuples whose
	// ctime is not below it are racy.
	ViewFence int64
	// Entries are sorted by path, bytewise.
	Entries []Entry
}

// Lookup returns the entry for p, or nil.
func (m *Manifest) Lookup(p string) *Entry {
	i := sort.Search(len(m.Entries), func(i int) bool { return m.Entries[i].Path >= p })
	if i < len(m.Entries) && m.Entries[i].Path == p {
		return &m.Entries[i]
	}
	return nil
}

// WSRacy reports whether e's workspace tuple cannot prove e unchanged.
func (m *Manifest) WSRacy(e *Entry) bool {
	return e.WS.Ctime >= m.Fence-RacyMargin || e.WS.Mtime >= m.Fence-RacyMargin
}

// ViewRacy reports whether e's view tuple cannot prove e unchanged.
func (m *Manifest) ViewRacy(e *Entry) bool {
	return e.View.Ctime >= m.ViewFence || e.View.Mtime >= m.ViewFence
}

// Children returns the entries directly beneath dir ("." for the root).
func (m *Manifest) Children(dir string) []*Entry {
	var out []*Entry
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	i := sort.Search(len(m.Entries), func(i int) bool { return m.Entries[i].Path >= prefix })
	for ; i < len(m.Entries); i++ {
		p := m.Entries[i].Path
		if len(p) < len(prefix) || p[:len(prefix)] != prefix {
			break
		}
		rest := p[len(prefix):]
		if rest != "" && !bytes.ContainsRune([]byte(rest), '/') {
			out = append(out, &m.Entries[i])
		}
	}
	return out
}

// Digest is the digest of the surface's content: every path with its type,
// permission bits and digest or link target, in order. Two manifests of the
// same content have the same digest whatever their stat tuples.
func Digest(entries []Entry) string {
	d := newEntryDigest()
	for i := range entries {
		d.add(&entries[i])
	}
	return d.sum()
}

// entryDigest hashes entries one at a time, as Digest does.
type entryDigest struct {
	h   hash.Hash
	buf []byte
}

func newEntryDigest() *entryDigest { return &entryDigest{h: sha256.New()} }

func (d *entryDigest) add(e *Entry) {
	b := appendContent(appendString(d.buf[:0], e.Path), e)
	d.h.Write(b)
	d.buf = b
}

// appendContent appends what the digests of a tree and of a change set
// take of an entry: its type, permission bits and content (digest or link
// target), never its stat tuples.
func appendContent(b []byte, e *Entry) []byte {
	b = append(b, byte(e.Type))
	b = binary.AppendUvarint(b, uint64(e.Perm))
	switch e.Type {
	case File:
		b = appendString(b, e.Digest)
	case Symlink:
		b = appendString(b, e.Target)
	}
	return b
}

func (d *entryDigest) sum() string { return fmt.Sprintf("sha256:%x", d.h.Sum(nil)) }

const (
	manifestMagic   = "WTXM"
	manifestVersion = 1
)

// ErrCorrupt is returned by Decode for a manifest that fails its checksum or
// does not parse.
var ErrCorrupt = errors.New("manifest is corrupt")

// Encode writes m in wtx's manifest format: a magic and version, the fences,
// length-prefixed entries, and a SHA-256 trailer over everything before it.
func Encode(w io.Writer, m *Manifest) error {
	h := sha256.New()
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 1<<16)
	var buf []byte
	buf = append(buf, manifestMagic...)
	buf = append(buf, manifestVersion)
	buf = binary.AppendVarint(buf, m.Fence)
	buf = binary.AppendVarint(buf, m.ViewFence)
	buf = binary.AppendUvarint(buf, uint64(len(m.Entries)))
	if _, err := bw.Write(buf); err != nil {
		return err
	}
	for i := range m.Entries {
		e := &m.Entries[i]
		buf = buf[:0]
		buf = appendString(buf, e.Path)
		buf = append(buf, byte(e.Type))
		buf = binary.AppendUvarint(buf, uint64(e.Perm))
		buf = binary.AppendVarint(buf, e.Size)
		buf = appendString(buf, e.Digest)
		buf = appendString(buf, e.Target)
		buf = AppendStat(buf, e.WS)
		buf = AppendStat(buf, e.View)
		if _, err := bw.Write(buf); err != nil {
			return err
		}
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(h.Sum(nil))
	return err
}

// Decode reads a manifest written by Encode. Any damage yields an error
// wrapping ErrCorrupt; entries must be strictly sorted.
func Decode(data []byte) (*Manifest, error) { return decode(data, false) }

// DecodeTaking is Decode of a buffer the caller gives up: the manifest's
// strings are data's own bytes, not a copy of them, so data must never be
// changed again.
func DecodeTaking(data []byte) (*Manifest, error) { return decode(data, true) }

func decode(data []byte, take bool) (*Manifest, error) {
	if len(data) < len(manifestMagic)+1+sha256.Size {
		return nil, fmt.Errorf("%w: too short", ErrCorrupt)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if string(body[:4]) != manifestMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	if body[4] != manifestVersion {
		return nil, fmt.Errorf("%w: unknown version %d", ErrCorrupt, body[4])
	}
	var d *binenc.Decoder
	if take {
		d = binenc.NewDecoderTaking(body[5:])
	} else {
		d = binenc.NewDecoder(body[5:])
	}
	m := &Manifest{Fence: d.Varint(), ViewFence: d.Varint()}
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(d.Len()) {
		d.Fail(errors.New("entry count exceeds data"))
	}
	if d.Err() == nil {
		m.Entries = make([]Entry, 0, n)
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		var e Entry
		e.Path = d.String()
		e.Type = Type(d.Byte())
		e.Perm = uint32(d.Uvarint())
		e.Size = d.Varint()
		e.Digest = d.String()
		e.Target = d.String()
		e.WS = ReadStat(d)
		e.View = ReadStat(d)
		if d.Err() == nil {
			if e.Path == "" || e.Type == Absent || e.Type > Special {
				d.Fail(fmt.Errorf("entry %d invalid", i))
			} else if len(m.Entries) > 0 && m.Entries[len(m.Entries)-1].Path >= e.Path {
				d.Fail(fmt.Errorf("entry %q out of order", e.Path))
			}
		}
		m.Entries = append(m.Entries, e)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail(errors.New("trailing bytes"))
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, d.Err())
	}
	return m, nil
}

func appendString(b []byte, s string) []byte { return binenc.AppendString(b, s) }

// AppendStat appends a stat tuple in the manifest's encoding (the journal
// uses it too).
func AppendStat(b []byte, s Stat) []byte {
	b = binary.AppendUvarint(b, s.Ino)
	b = binary.AppendUvarint(b, s.Dev)
	b = binary.AppendVarint(b, s.Size)
	b = binary.AppendVarint(b, s.Mtime)
	return binary.AppendVarint(b, s.Ctime)
}

// ReadStat reads a stat tuple written by AppendStat.
func ReadStat(d *binenc.Decoder) Stat {
	return Stat{Ino: d.Uvarint(), Dev: d.Uvarint(), Size: d.Varint(), Mtime: d.Varint(), Ctime: d.Varint()}
}
