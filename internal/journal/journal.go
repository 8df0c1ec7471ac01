// Package journal is the write-ahead journal of an apply: the whole batch,
// with the state every path must hold before (pre-image) and after
// (post-image) each step and the temporary names each step uses, made
// durable before the first workspace path is touched.
//
// # Vocabulary
//
// A [Journal] describes one op: its id, its kind (apply or undo), and its
// [Record]s, one per plan step, in plan order. It lives in its own directory
// under the journal root:
//
//	ROOT/<op-id>/journal     the encoded journal: magic, version, length-prefixed
//	                         fields and records, SHA-256 trailer
//	ROOT/<op-id>/committed   present once every step is done and synced
//
// A journal without the committed marker is rolled back by recovery; one with
// it is rolled forward (only cleanup is left). A journal that does not decode
// (torn or damaged) was never complete, and so nothing in the workspace was
// touched under it: recovery removes it.
package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Record is one plan step as journaled.
type Record struct {
	Step tree.Step
	// Tmp is the temporary name (in the step's directory) the step moves the
	// displaced pre-image to, or the prefix of the temporary file it writes
	// the post-image to.
	Tmp string
	// Ident is the workspace object the check phase saw at Step.Path (zero
	// when the path was absent): recovery only moves back what is this object.
	Ident tree.Stat
	// Unlink is set when a moved-aside pre-image is removed at once (its
	// directory is removed by a later step); its content is in the blob
	// store.
	Unlink bool
}

// Journal is one op's write-ahead record.
type Journal struct {
	OpID      string
	Kind      string // "apply" or "undo"
	StageID   string
	Workspace string
	// Body is what the op's database row will hold (JSON), so that recovery
	// can record an op that committed before it was recorded.
	Body    []byte
	Records []Record
}

const (
	magic   = "WTXJ"
	version = 1
	// File names inside an op's directory.
	journalName   = "journal"
	committedName = "committed"
)

// ErrCorrupt is wrapped by Decode errors.
var ErrCorrupt = errors.New("journal is corrupt")

// Encode serialises j.
func Encode(j *Journal) []byte {
	var b []byte
	b = append(b, magic...)
	b = append(b, version)
	b = appendStr(b, j.OpID)
	b = appendStr(b, j.Kind)
	b = appendStr(b, j.StageID)
	b = appendStr(b, j.Workspace)
	b = appendStr(b, string(j.Body))
	b = binary.AppendUvarint(b, uint64(len(j.Records)))
	for _, r := range j.Records {
		b = append(b, byte(r.Step.Kind))
		b = appendStr(b, r.Step.Path)
		b = appendEntry(b, r.Step.Old)
		b = appendEntry(b, r.Step.New)
		b = appendStr(b, r.Tmp)
		b = appendStat(b, r.Ident)
		if r.Unlink {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	sum := sha256.Sum256(b)
	return append(b, sum[:]...)
}

// Decode parses an encoded journal; any damage wraps ErrCorrupt.
func Decode(data []byte) (*Journal, error) {
	if len(data) < len(magic)+1+sha256.Size {
		return nil, fmt.Errorf("%w: too short", ErrCorrupt)
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	if got := sha256.Sum256(body); !bytes.Equal(got[:], sum) {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if string(body[:4]) != magic || body[4] != version {
		return nil, fmt.Errorf("%w: bad magic or version", ErrCorrupt)
	}
	d := &dec{b: body[5:]}
	j := &Journal{OpID: d.str(), Kind: d.str(), StageID: d.str(), Workspace: d.str()}
	j.Body = []byte(d.str())
	n := d.uvarint()
	if d.err == nil && n > uint64(len(d.b)) {
		d.err = errors.New("record count exceeds data")
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		var r Record
		r.Step.Kind = tree.StepKind(d.byte())
		r.Step.Path = d.str()
		r.Step.Old = d.entry()
		r.Step.New = d.entry()
		r.Tmp = d.str()
		r.Ident = d.stat()
		r.Unlink = d.byte() == 1
		if d.err == nil {
			if err := fsx.ValidRel(r.Step.Path); err != nil || r.Step.Path == "." {
				d.err = fmt.Errorf("record %d: bad path %q", i, r.Step.Path)
			} else if r.Step.Kind < tree.StepRemove || r.Step.Kind > tree.StepDirPerm {
				d.err = fmt.Errorf("record %d: bad step kind %d", i, r.Step.Kind)
			}
		}
		j.Records = append(j.Records, r)
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, d.err)
	}
	return j, nil
}

// Write makes j durable in root/<op-id>/journal: written to a temporary
// file, synced, renamed into place, and the directories synced. Only after
// Write returns may the workspace be touched.
func Write(root string, j *Journal) error {
	dir := filepath.Join(root, j.OpID)
	_, err := os.Lstat(root)
	fresh := errors.Is(err, fs.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if fresh {
		// The journal root is new: its own entry must be durable too, or a
		// power cut could lose the whole journal after the workspace changed.
		if err := fsx.SyncDir(filepath.Dir(root)); err != nil {
			return err
		}
	}
	if err := fsx.SyncDir(root); err != nil {
		return err
	}
	return fsx.WriteFileAtomic(filepath.Join(dir, journalName), Encode(j), 0o600)
}

// Commit writes the committed marker of op and syncs it.
func Commit(root, op string) error {
	return fsx.WriteFileAtomic(filepath.Join(root, op, committedName), []byte("committed\n"), 0o600)
}

// Remove deletes op's journal directory: the op is finished.
func Remove(root, op string) error {
	if err := os.RemoveAll(filepath.Join(root, op)); err != nil {
		return err
	}
	return fsx.SyncDir(root)
}

// Pending lists the op directories under root, oldest name first.
func Pending(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out, nil
}

// Load reads op's journal. A journal that is missing or does not decode is
// returned as (nil, false, err wrapping ErrCorrupt or fs.ErrNotExist).
func Load(root, op string) (j *Journal, committed bool, err error) {
	data, err := os.ReadFile(filepath.Join(root, op, journalName))
	if err != nil {
		return nil, false, err
	}
	j, err = Decode(data)
	if err != nil {
		return nil, false, err
	}
	_, serr := os.Stat(filepath.Join(root, op, committedName))
	return j, serr == nil, nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendStat(b []byte, s tree.Stat) []byte {
	b = binary.AppendUvarint(b, s.Ino)
	b = binary.AppendUvarint(b, s.Dev)
	b = binary.AppendVarint(b, s.Size)
	b = binary.AppendVarint(b, s.Mtime)
	return binary.AppendVarint(b, s.Ctime)
}

func appendEntry(b []byte, e *tree.Entry) []byte {
	if e == nil {
		return append(b, 0)
	}
	b = append(b, 1, byte(e.Type))
	b = binary.AppendUvarint(b, uint64(e.Perm))
	b = binary.AppendVarint(b, e.Size)
	b = appendStr(b, e.Digest)
	return appendStr(b, e.Target)
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) uvarint() uint64 {
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

func (d *dec) varint() int64 {
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

func (d *dec) byte() byte {
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

func (d *dec) str() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errors.New("string exceeds data")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *dec) stat() tree.Stat {
	return tree.Stat{Ino: d.uvarint(), Dev: d.uvarint(), Size: d.varint(), Mtime: d.varint(), Ctime: d.varint()}
}

func (d *dec) entry() *tree.Entry {
	if d.byte() == 0 || d.err != nil {
		return nil
	}
	e := &tree.Entry{Type: tree.Type(d.byte())}
	e.Perm = uint32(d.uvarint())
	e.Size = d.varint()
	e.Digest = d.str()
	e.Target = d.str()
	if d.err == nil && (e.Type == tree.Absent || e.Type > tree.Special) {
		d.err = errors.New("bad entry type")
	}
	return e
}

// Uncommit removes op's commit marker (which may exist although writing it
// failed), so that recovery rolls the op back rather than forward.
func Uncommit(root, op string) error {
	err := os.Remove(filepath.Join(root, op, committedName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return fsx.SyncDir(filepath.Join(root, op))
}
