// Package bundle is the wire format of a change set that travels between
// machines (wtx export / wtx import): every changed path with its base
// entry (the drift baseline) and its new entry, the new content of every
// file, the receipts of the stage and where it was made.
//
// A bundle is
//
//	"WTXB" | version (1 byte) | flags (1 byte) | deflate(body) | sha256 (32 bytes)
//
// where the digest covers every byte before it. That digest proves a bundle
// whole, not who made it: anyone can recompute it. What proves the change
// set is a signed receipt that names its change-set digest; the bundle
// carries the public keys of its receipts' signers (FlagKeys) so that the
// importer can check each signature and then decide whether it trusts the
// key. The body is a sequence of
// varints and length-prefixed strings (internal/binenc). Decode checks the
// digest over the raw bytes first, so one byte changed anywhere, appended
// or cut is refused before anything is decompressed; then it checks every
// length, every content digest, the order of the entries (sorted, no
// duplicates) and their shape (no path that leaves the tree or goes through
// .git or through a symlink of the bundle, no size past the limits).
package bundle

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Magic starts every bundle.
const Magic = "WTXB"

// Version is the format version this package writes and reads. // persisted
const Version = 1

// Flags of a bundle. // persisted
type Flags byte

// FlagContentElsewhere marks a bundle that carries no file content: it
// travels inside a git commit whose tree holds the content (wtx export
// --git). Each new file's content is then looked up by path and checked
// against the entry's digest by the reader.
const FlagContentElsewhere Flags = 1 // persisted

// FlagKeys marks a bundle that carries the ed25519 public keys of its
// receipts' signers (after the receipts). Encode sets it exactly when Keys
// is not empty.
const FlagKeys Flags = 2 // persisted

// knownFlags are the flags this package reads.
const knownFlags = FlagContentElsewhere | FlagKeys

// KeySize is the size of a public key the bundle carries (ed25519).
const KeySize = 32

// maxKeys bounds the keys a bundle carries.
const maxKeys = 256

// ErrCorrupt is wrapped by every Decode error.
var ErrCorrupt = errors.New("bundle is damaged or altered")

// ErrTooLarge is wrapped (with ErrCorrupt) when a bundle exceeds Limits.
var ErrTooLarge = errors.New("bundle exceeds the size limits")

// Origin says where and from what a change set was made.
type Origin struct {
	Stage     string // the stage id on the exporting machine
	Name      string // its name, or ""
	Workspace string // the exporting workspace's path (informative)
	// GitHead is the commit the exporting workspace's repository had
	// checked out ("" when it is not a git repository); GitDirty is a
	// digest of its uncommitted files ("" when clean).
	GitHead  string
	GitDirty string
	// BaseDigest is the digest of the stage's base (its whole surface at
	// open); ChangesetDigest is tree.ChangesetDigest of the entries.
	BaseDigest      string
	ChangesetDigest string
	ExportedAt      int64 // unix nanoseconds
}

// Entry is one changed path: Old is its base (nil: it did not exist), New
// what the stage made of it (nil: deleted). Content is New's content when
// New is a file and the bundle carries content. Base is Old's content when
// the exporter knew it and both sides are text files (nil otherwise): the
// original a three-way merge (wtx rebase --merge) needs on the importing
// side. It compresses against Content, which follows it.
type Entry struct {
	Path    string
	Old     *tree.Entry
	New     *tree.Entry
	Base    []byte
	Content []byte
}

// Change returns e as a tree.Change.
func (e *Entry) Change() tree.Change {
	c := tree.Change{Path: e.Path, Old: e.Old, New: e.New, Action: tree.Modified}
	switch {
	case e.Old == nil:
		c.Action = tree.Added
	case e.New == nil:
		c.Action = tree.Deleted
	}
	return c
}

// Bundle is one change set.
type Bundle struct {
	Flags    Flags
	Origin   Origin
	Receipts [][]byte // JSON bodies, oldest first
	// Keys are the ed25519 public keys (KeySize bytes each, no two
	// alike) that signed the receipts: what lets the importer check a
	// signature. Whether a key is trusted is the importer's to say.
	Keys    [][]byte
	Entries []Entry // sorted by path, bytewise
}

// Changes returns the entries as a change set.
func (b *Bundle) Changes() []tree.Change {
	out := make([]tree.Change, len(b.Entries))
	for i := range b.Entries {
		out[i] = b.Entries[i].Change()
	}
	return out
}

// Limits bound what Decode accepts.
type Limits struct {
	Compressed int64 // bytes of the whole bundle
	Expanded   int64 // bytes of the decompressed body
	Entries    int
}

// DefaultLimits fit change sets far larger than any review would cover,
// and bound what a hostile bundle can make an import hold in memory: the
// body is decompressed whole, and deflate expands a few kilobytes of
// zeros a thousandfold.
var DefaultLimits = Limits{Compressed: 1 << 30, Expanded: 1 << 30, Entries: 1 << 22}

// Encode writes b to w, streaming.
func Encode(w io.Writer, b *Bundle) error {
	if err := b.check(true); err != nil {
		return err
	}
	h := sha256.New()
	out := io.MultiWriter(w, h)
	flags := b.Flags &^ FlagKeys
	if len(b.Keys) > 0 {
		flags |= FlagKeys
	}
	if _, err := out.Write([]byte{Magic[0], Magic[1], Magic[2], Magic[3], Version, byte(flags)}); err != nil {
		return err
	}
	fw, err := flate.NewWriter(out, flate.DefaultCompression)
	if err != nil {
		return err
	}
	var buf []byte
	o := &b.Origin
	for _, s := range []string{o.Stage, o.Name, o.Workspace, o.GitHead, o.GitDirty, o.BaseDigest, o.ChangesetDigest} {
		buf = binenc.AppendString(buf, s)
	}
	buf = binary.AppendVarint(buf, o.ExportedAt)
	buf = binary.AppendUvarint(buf, uint64(len(b.Receipts)))
	for _, r := range b.Receipts {
		buf = binenc.AppendString(buf, string(r))
	}
	if len(b.Keys) > 0 {
		buf = binary.AppendUvarint(buf, uint64(len(b.Keys)))
		for _, k := range b.Keys {
			buf = binenc.AppendString(buf, string(k))
		}
	}
	buf = binary.AppendUvarint(buf, uint64(len(b.Entries)))
	if _, err := fw.Write(buf); err != nil {
		return err
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		buf = binenc.AppendString(buf[:0], e.Path)
		buf = appendSide(buf, e.Old)
		buf = appendSide(buf, e.New)
		content := e.Content
		if e.Base == nil {
			buf = append(buf, 0)
		} else {
			// The content as the bytes between the longest prefix and
			// suffix it shares with the base: one edited region costs
			// its own bytes, not a second copy of the file.
			pre, suf := commonEnds(e.Base, e.Content)
			buf = append(buf, 1)
			buf = binary.AppendUvarint(buf, uint64(len(e.Base)))
			if _, err := fw.Write(buf); err != nil {
				return err
			}
			if _, err := fw.Write(e.Base); err != nil {
				return err
			}
			buf = binary.AppendUvarint(buf[:0], uint64(pre))
			buf = binary.AppendUvarint(buf, uint64(suf))
			content = e.Content[pre : len(e.Content)-suf]
		}
		buf = binary.AppendUvarint(buf, uint64(len(content)))
		if _, err := fw.Write(buf); err != nil {
			return err
		}
		if _, err := fw.Write(content); err != nil {
			return err
		}
	}
	if err := fw.Close(); err != nil {
		return err
	}
	_, err = w.Write(h.Sum(nil))
	return err
}

func appendSide(b []byte, e *tree.Entry) []byte {
	if e == nil {
		return append(b, byte(tree.Absent))
	}
	b = append(b, byte(e.Type))
	b = binary.AppendUvarint(b, uint64(e.Perm))
	b = binary.AppendVarint(b, e.Size)
	b = binenc.AppendString(b, e.Digest)
	return binenc.AppendString(b, e.Target)
}

func readSide(d *binenc.Decoder, path string) *tree.Entry {
	t := tree.Type(d.Byte())
	if t == tree.Absent {
		return nil
	}
	e := &tree.Entry{Path: path, Type: t}
	perm := d.Uvarint()
	e.Size = d.Varint()
	e.Digest = d.String()
	e.Target = d.String()
	if perm > tree.PermMask {
		d.Fail(fmt.Errorf("%q: bad permission bits %o", path, perm))
	}
	e.Perm = uint32(perm)
	return e
}

// Decode reads a whole bundle, refusing (with an error wrapping ErrCorrupt)
// anything that is not exactly what Encode writes.
func Decode(data []byte, lim Limits) (*Bundle, error) {
	return decode(data, lim, true)
}

// DecodeUnverified is Decode without the digest checks (the bundle's own,
// each content's, the change set's): the negative control of the tests
// that show those checks matter. wtx never uses it otherwise.
func DecodeUnverified(data []byte, lim Limits) (*Bundle, error) {
	return decode(data, lim, false)
}

func decode(data []byte, lim Limits, verify bool) (*Bundle, error) {
	if int64(len(data)) > lim.Compressed {
		return nil, fmt.Errorf("%w: %w: %d bytes, more than %d", ErrCorrupt, ErrTooLarge, len(data), lim.Compressed)
	}
	if len(data) < 6+sha256.Size {
		return nil, fmt.Errorf("%w: too short to be a bundle", ErrCorrupt)
	}
	if string(data[:4]) != Magic {
		return nil, fmt.Errorf("%w: not a wtx bundle (bad magic)", ErrCorrupt)
	}
	raw, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(raw); verify && !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: digest mismatch (altered, cut short or with bytes appended)", ErrCorrupt)
	}
	if data[4] != Version {
		return nil, fmt.Errorf("%w: format version %d, this wtx reads version %d", ErrCorrupt, data[4], Version)
	}
	b := &Bundle{Flags: Flags(data[5])}
	if b.Flags&^knownFlags != 0 {
		return nil, fmt.Errorf("%w: unknown flags %#x", ErrCorrupt, data[5])
	}
	src := bytes.NewReader(raw[6:])
	fr := flate.NewReader(src)
	body, err := io.ReadAll(io.LimitReader(fr, lim.Expanded+1))
	if err != nil {
		return nil, fmt.Errorf("%w: decompress: %v", ErrCorrupt, err)
	}
	if int64(len(body)) > lim.Expanded {
		return nil, fmt.Errorf("%w: %w: expands past %d bytes", ErrCorrupt, ErrTooLarge, lim.Expanded)
	}
	if src.Len() != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the compressed body", ErrCorrupt, src.Len())
	}
	d := binenc.NewDecoder(body)
	o := &b.Origin
	for _, p := range []*string{&o.Stage, &o.Name, &o.Workspace, &o.GitHead, &o.GitDirty, &o.BaseDigest, &o.ChangesetDigest} {
		*p = d.String()
	}
	o.ExportedAt = d.Varint()
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(d.Len()) {
		d.Fail(errors.New("receipt count exceeds data"))
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		b.Receipts = append(b.Receipts, []byte(d.String()))
	}
	if b.Flags&FlagKeys != 0 {
		n = d.Uvarint()
		if d.Err() == nil && (n == 0 || n > maxKeys || n > uint64(d.Len())) {
			d.Fail(fmt.Errorf("key count %d is out of range", n))
		}
		for i := uint64(0); i < n && d.Err() == nil; i++ {
			b.Keys = append(b.Keys, []byte(d.String()))
		}
	}
	n = d.Uvarint()
	if d.Err() == nil && (n > uint64(d.Len()) || n > uint64(lim.Entries)) {
		d.Fail(fmt.Errorf("entry count %d exceeds data or limit", n))
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		e := Entry{Path: d.String()}
		e.Old = readSide(d, e.Path)
		e.New = readSide(d, e.Path)
		switch d.Byte() {
		case 0:
			if c := d.String(); c != "" {
				e.Content = []byte(c)
			}
		case 1:
			e.Base = []byte(d.String())
			pre, suf := d.Uvarint(), d.Uvarint()
			mid := d.String()
			if d.Err() == nil && (pre > uint64(len(e.Base)) || suf > uint64(len(e.Base))-pre) {
				d.Fail(fmt.Errorf("%q: shared prefix and suffix longer than the base", e.Path))
			}
			if d.Err() == nil {
				e.Content = make([]byte, 0, int(pre)+len(mid)+int(suf))
				e.Content = append(append(append(e.Content, e.Base[:pre]...), mid...), e.Base[uint64(len(e.Base))-suf:]...)
				if int64(len(e.Content)) > lim.Expanded {
					d.Fail(fmt.Errorf("%w: %q expands past the limit", ErrTooLarge, e.Path))
				}
			}
		default:
			d.Fail(fmt.Errorf("%q: bad base marker", e.Path))
		}
		b.Entries = append(b.Entries, e)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail(errors.New("trailing bytes in the body"))
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, d.Err())
	}
	if err := b.check(verify); err != nil {
		return nil, err
	}
	return b, nil
}

// check verifies the shape of b: what Decode refuses, Encode never writes.
func (b *Bundle) check(verify bool) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
	}
	if b.Flags&^knownFlags != 0 {
		return fail("unknown flags %#x", byte(b.Flags))
	}
	if len(b.Keys) > maxKeys {
		return fail("%d keys, more than %d", len(b.Keys), maxKeys)
	}
	seen := make(map[string]bool, len(b.Keys))
	for i, k := range b.Keys {
		if len(k) != KeySize || seen[string(k)] {
			return fail("key %d: %d bytes or a duplicate, want %d bytes once", i+1, len(k), KeySize)
		}
		seen[string(k)] = true
	}
	o := &b.Origin
	for _, dg := range []string{o.BaseDigest, o.ChangesetDigest} {
		if !blob.Digest(dg).Valid() {
			return fail("origin digest %q is not a digest", dg)
		}
	}
	if o.GitDirty != "" && !blob.Digest(o.GitDirty).Valid() {
		return fail("dirty-tree digest %q is not a digest", o.GitDirty)
	}
	byPath := make(map[string]*Entry, len(b.Entries))
	for i := range b.Entries {
		e := &b.Entries[i]
		if err := fsx.ValidRel(e.Path); err != nil || e.Path == "." {
			return fail("entry %d: bad path %q", i, e.Path)
		}
		if gitComponent(e.Path) {
			return fail("entry %q lies in a .git directory", e.Path)
		}
		if i > 0 && b.Entries[i-1].Path >= e.Path {
			return fail("entries out of order or duplicated at %q", e.Path)
		}
		if e.Old == nil && e.New == nil {
			return fail("entry %q has neither a base nor a new side", e.Path)
		}
		for _, s := range []*tree.Entry{e.Old, e.New} {
			if err := checkSide(s); err != nil {
				return fail("entry %q: %v", e.Path, err)
			}
		}
		if tree.SameContent(e.Old, e.New) {
			return fail("entry %q does not change anything", e.Path)
		}
		switch {
		case e.New != nil && e.New.Type == tree.File && b.Flags&FlagContentElsewhere == 0:
			if int64(len(e.Content)) != e.New.Size {
				return fail("entry %q: %d bytes of content, the entry says %d", e.Path, len(e.Content), e.New.Size)
			}
			if verify && blob.Sum(e.Content) != blob.Digest(e.New.Digest) {
				return fail("entry %q: content does not match its digest", e.Path)
			}
		case len(e.Content) != 0:
			return fail("entry %q carries content it should not", e.Path)
		}
		if e.Base != nil {
			switch {
			case b.Flags&FlagContentElsewhere != 0 || e.Old == nil || e.New == nil || e.Old.Type != tree.File || e.New.Type != tree.File:
				return fail("entry %q carries a base content it should not", e.Path)
			case int64(len(e.Base)) != e.Old.Size:
				return fail("entry %q: %d bytes of base content, the entry says %d", e.Path, len(e.Base), e.Old.Size)
			case verify && blob.Sum(e.Base) != blob.Digest(e.Old.Digest):
				return fail("entry %q: base content does not match its digest", e.Path)
			}
		}
		// No entry may lie beneath an entry of the bundle that is not a
		// directory on the same side: a symlink of the bundle must never
		// lead a later entry out of the tree.
		for p := tree.Parent(e.Path); p != "."; p = tree.Parent(p) {
			a, ok := byPath[p]
			if !ok {
				continue
			}
			if e.New != nil && (a.New == nil || a.New.Type != tree.Dir) {
				return fail("entry %q lies beneath %q, which is no directory after the change", e.Path, p)
			}
			if e.Old != nil && (a.Old == nil || a.Old.Type != tree.Dir) {
				return fail("entry %q lies beneath %q, which was no directory before the change", e.Path, p)
			}
		}
		byPath[e.Path] = e
	}
	if got := tree.ChangesetDigest(b.Changes()); verify && got != o.ChangesetDigest {
		return fail("change-set digest %s does not match the entries (%s)", o.ChangesetDigest, got)
	}
	return nil
}

func checkSide(e *tree.Entry) error {
	if e == nil {
		return nil
	}
	if e.Perm&^tree.PermMask != 0 {
		return fmt.Errorf("bad permission bits %o", e.Perm)
	}
	switch e.Type {
	case tree.File:
		if !blob.Digest(e.Digest).Valid() || e.Size < 0 || e.Target != "" {
			return errors.New("bad file entry")
		}
	case tree.Dir:
		if e.Digest != "" || e.Size != 0 || e.Target != "" {
			return errors.New("bad directory entry")
		}
	case tree.Symlink:
		if e.Target == "" || strings.IndexByte(e.Target, 0) >= 0 || e.Size != int64(len(e.Target)) || e.Digest != "" || e.Perm != 0 {
			return errors.New("bad symlink entry")
		}
	default:
		return fmt.Errorf("bad entry type %d", e.Type)
	}
	return nil
}

// commonEnds returns the lengths of the longest prefix and the longest
// suffix a and b share, not overlapping in either.
func commonEnds(a, b []byte) (pre, suf int) {
	n := min(len(a), len(b))
	for pre < n && a[pre] == b[pre] {
		pre++
	}
	for suf < n-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	return pre, suf
}

// gitComponent reports whether p has a ".git" component in any letter case.
func gitComponent(p string) bool {
	for c := range strings.SplitSeq(p, "/") {
		if strings.EqualFold(c, ".git") {
			return true
		}
	}
	return false
}
