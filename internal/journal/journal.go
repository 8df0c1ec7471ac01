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
// (torn or damaged) is reported by [Load]; what it means for the workspace
// is for recovery to judge (it looks for traces of the apply there).
package journal

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/wtx-dev/wtx/internal/binenc"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/tree"
)

// TempPrefix starts the name of every temporary file wtx makes in a
// workspace or a view (each Record.Tmp among them), so that whoever
// finishes or rolls back a step knows its debris: walks never stage such
// names, and a change set that holds one is never applied.
const TempPrefix = ".wtx-tmp-"

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
		b = tree.AppendStat(b, r.Ident)
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
	d := binenc.NewDecoder(body[5:])
	j := &Journal{OpID: d.String(), Kind: d.String(), StageID: d.String(), Workspace: d.String()}
	j.Body = []byte(d.String())
	n := d.Uvarint()
	if d.Err() == nil && n > uint64(d.Len()) {
		d.Fail(errors.New("record count exceeds data"))
	}
	for i := uint64(0); i < n && d.Err() == nil; i++ {
		var r Record
		r.Step.Kind = tree.StepKind(d.Byte())
		r.Step.Path = d.String()
		r.Step.Old = readEntry(d)
		r.Step.New = readEntry(d)
		r.Tmp = d.String()
		r.Ident = tree.ReadStat(d)
		r.Unlink = d.Byte() == 1
		if d.Err() == nil {
			if err := fsx.ValidRel(r.Step.Path); err != nil || r.Step.Path == "." {
				d.Fail(fmt.Errorf("record %d: bad path %q", i, r.Step.Path))
			} else if r.Step.Kind < tree.StepRemove || r.Step.Kind > tree.StepDirPerm {
				d.Fail(fmt.Errorf("record %d: bad step kind %d", i, r.Step.Kind))
			}
		}
		j.Records = append(j.Records, r)
	}
	if d.Err() == nil && d.Len() != 0 {
		d.Fail(errors.New("trailing bytes"))
	}
	if d.Err() != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, d.Err())
	}
	return j, nil
}

// Dir is where the journals of one workspace live: the directory Rel
// beneath the open state root Root, made by the first Write. Every path
// beneath it is resolved as fsx resolves one: a symlink or a mount point
// on the way is an error wrapping fsx.ErrSymlink or fsx.ErrCrossDevice,
// never followed.
type Dir struct {
	Root *fsx.Root
	Rel  string
}

// rel joins names to the journal root's rel path.
func (d Dir) rel(names ...string) string {
	return path.Join(append([]string{d.Rel}, names...)...)
}

// Write makes j durable in <op-id>/journal: the op's directory is made
// (each new directory's entry synced), the journal written to a temporary
// file, synced, renamed into place, and the directory synced. Only after
// Write returns may the workspace be touched.
func (d Dir) Write(j *Journal) error {
	if err := checkOp(j.OpID); err != nil {
		return err
	}
	dir, err := d.Root.MkdirAll(d.rel(j.OpID), 0o700)
	if err != nil {
		return err
	}
	defer dir.Close()
	data := Encode(j)
	return dir.WriteAtomic(journalName, 0o600, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}

// checkOp refuses an op id that is not one path component.
func checkOp(op string) error {
	if op == "" || op == "." || op == ".." || strings.ContainsAny(op, "/\x00") {
		return fmt.Errorf("journal: %q is not an op id", op)
	}
	return nil
}

// Commit writes the committed marker of op and syncs it.
func (d Dir) Commit(op string) error {
	if err := checkOp(op); err != nil {
		return err
	}
	return d.Root.WriteFileAtomic(d.rel(op, committedName), []byte("committed\n"), 0o600)
}

// gonePrefix marks an op's directory that Remove took out of the journal
// root's list before deleting it.
const gonePrefix = ".gone-"

// Remove deletes op's journal directory: the op is finished. The directory
// leaves the list of pending journals in one step (a rename to a name
// Pending skips, synced), so that no failure or kill part way through the
// deletion can leave a journal without its commit marker (which recovery
// would roll back) or a marker without its journal. What the deletion
// leaves is deleted by a later Remove or Sweep. A symlink there is
// removed, never followed.
func (d Dir) Remove(op string) error {
	if err := checkOp(op); err != nil {
		return err
	}
	err := d.Root.Rename(d.rel(op), d.rel(gonePrefix+op))
	if errors.Is(err, fs.ErrNotExist) {
		d.Sweep()
		return nil
	}
	if err != nil {
		return err
	}
	if err := d.sync(d.Rel); err != nil {
		return err
	}
	d.Sweep()
	return nil
}

// Sweep deletes what Remove took out of the list of pending journals and
// did not finish deleting (it failed, or a crash cut it short). A failure
// leaves it for a later Sweep: it is no journal any more.
func (d Dir) Sweep() {
	names, err := d.Root.ReadDir(d.Rel)
	if err != nil {
		return
	}
	for _, name := range names {
		if strings.HasPrefix(name, gonePrefix) {
			_ = d.Root.RemoveAll(d.rel(name)) // see above
		}
	}
}

// sync syncs the directory rel beneath the state root.
func (d Dir) sync(rel string) error {
	dir, err := d.Root.OpenDir(rel)
	if err != nil {
		return err
	}
	defer dir.Close()
	return dir.Sync()
}

// SetAside moves op's journal directory to the rel path to beneath the
// state root (whose directory must exist) and syncs both directories.
func (d Dir) SetAside(op, to string) error {
	if err := checkOp(op); err != nil {
		return err
	}
	if err := d.Root.Rename(d.rel(op), to); err != nil {
		return err
	}
	if err := d.sync(path.Dir(to)); err != nil {
		return err
	}
	return d.sync(d.Rel)
}

// Pending lists the op directories of the journal root, oldest name
// first; a journal root not made yet holds none, and a directory Remove
// took out of the list is none. A symlink among them is
// an error wrapping fsx.ErrSymlink: it is no journal of wtx's, and what it
// points to is not looked at.
func (d Dir) Pending() ([]string, error) {
	dir, err := d.Root.OpenDir(d.Rel)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	names, err := dir.ReadDir()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, name := range names {
		st, err := dir.Lstat(name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // finished since the listing
		case err != nil:
			return nil, err
		case strings.HasPrefix(name, gonePrefix):
			continue // finished, being deleted
		case st.IsSymlink():
			return nil, &fs.PathError{Op: "journal", Path: d.rel(name), Err: fsx.ErrSymlink}
		case st.IsDir():
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

// Load reads op's journal. A journal that is missing or does not decode is
// returned as (nil, false, err wrapping ErrCorrupt or fs.ErrNotExist).
func (d Dir) Load(op string) (j *Journal, committed bool, err error) {
	if err := checkOp(op); err != nil {
		return nil, false, err
	}
	data, err := d.Root.ReadFile(d.rel(op, journalName))
	if err != nil {
		return nil, false, err
	}
	j, err = Decode(data)
	if err != nil {
		return nil, false, err
	}
	// A marker that cannot be looked at is an error, never "not committed":
	// rolling back a committed op would undo what was reported done.
	st, serr := d.Root.Lstat(d.rel(op, committedName))
	if serr == nil && st.IsSymlink() {
		serr = &fs.PathError{Op: "lstat", Path: d.rel(op, committedName), Err: fsx.ErrSymlink}
	}
	if serr != nil && !errors.Is(serr, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("journal %s: commit marker: %w", op, serr)
	}
	return j, serr == nil, nil
}

// Committed reports whether op's commit marker is there (and is no
// symlink).
func (d Dir) Committed(op string) bool {
	if checkOp(op) != nil {
		return false
	}
	st, err := d.Root.Lstat(d.rel(op, committedName))
	return err == nil && !st.IsSymlink()
}

// Exists reports whether op has a journal directory (or anything else of
// that name) in the journal root.
func (d Dir) Exists(op string) bool {
	if checkOp(op) != nil {
		return false
	}
	_, err := d.Root.Lstat(d.rel(op))
	return err == nil
}

// Uncommit removes op's commit marker (which may exist although writing it
// failed), so that recovery rolls the op back rather than forward.
func (d Dir) Uncommit(op string) error {
	if err := checkOp(op); err != nil {
		return err
	}
	err := d.Root.Remove(d.rel(op, committedName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return d.sync(d.rel(op))
}

// Pending is [Dir.Pending] of the journal root at path, for a caller that
// holds no handle on the state root: path itself is resolved the ordinary
// way, what lies beneath it as by [Dir].
func Pending(root string) ([]string, error) {
	d, done, err := openPath(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer done()
	return d.Pending()
}

// Load is [Dir.Load] of the journal root at path, as for [Pending].
func Load(root, op string) (*Journal, bool, error) {
	d, done, err := openPath(root)
	if err != nil {
		return nil, false, err
	}
	defer done()
	return d.Load(op)
}

// openPath opens the journal root at path as a Dir of its own.
func openPath(root string) (Dir, func(), error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return Dir{}, nil, err
	}
	r, err := fsx.OpenRoot(abs)
	if err != nil {
		return Dir{}, nil, err
	}
	return Dir{Root: r, Rel: "."}, func() { _ = r.Close() }, nil // read-only handle
}

func appendStr(b []byte, s string) []byte { return binenc.AppendString(b, s) }

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

func readEntry(d *binenc.Decoder) *tree.Entry {
	if d.Byte() == 0 || d.Err() != nil {
		return nil
	}
	e := &tree.Entry{Type: tree.Type(d.Byte())}
	e.Perm = uint32(d.Uvarint())
	e.Size = d.Varint()
	e.Digest = d.String()
	e.Target = d.String()
	if d.Err() == nil && (e.Type == tree.Absent || e.Type > tree.Special) {
		d.Fail(errors.New("bad entry type"))
	}
	return e
}
