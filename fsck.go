package wtx

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/wtx-dev/wtx/internal/jsonname"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/engine"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
)

// FindingKind names one kind of damage Fsck reports.
type FindingKind string

// The kinds of finding, with the error code each carries.
const (
	FindStateUnsafe     FindingKind = "state-unsafe"      // precondition.state-unsafe: owned by another user
	FindNotPrivate      FindingKind = "not-private"       // precondition.state-unsafe: group or others may read or write it
	FindDBMissing       FindingKind = "database-missing"  // io.state-missing: the database is gone, its leftovers are not
	FindDBCorrupt       FindingKind = "database-corrupt"  // io.corrupt: empty, not a wtx database, or failing its integrity check
	FindDBSchema        FindingKind = "database-schema"   // precondition.unsupported: written by a newer wtx
	FindBlobMissing     FindingKind = "blob-missing"      // io.state-missing: a record needs an object the store lacks
	FindBlobCorrupt     FindingKind = "blob-corrupt"      // io.corrupt: an object does not hash to its name
	FindJournalCorrupt  FindingKind = "journal-corrupt"   // io.corrupt: a journal does not decode
	FindJournalPending  FindingKind = "journal-pending"   // refusal.interrupted-apply: an interrupted apply waits for recovery
	FindStageOrphan     FindingKind = "stage-orphan"      // io.state-missing: a stage directory no record names
	FindStageDirMissing FindingKind = "stage-dir-missing" // io.state-missing: an open stage whose directory is gone
	FindManifestCorrupt FindingKind = "manifest-corrupt"  // io.corrupt: a stage's base manifest does not decode
	FindViewInDoubt     FindingKind = "view-in-doubt"     // io.state-missing: an overlay view written when the system stopped

	// Receipts, flows and the receipt key (T-006).
	FindReceiptCorrupt   FindingKind = "receipt-corrupt"   // io.corrupt: a receipt does not decode, fails its checks or is not its record's
	FindReceiptSignature FindingKind = "receipt-signature" // precondition.receipt-invalid: a signature verifies with no key the state root keeps
	FindFlowCorrupt      FindingKind = "flow-corrupt"      // io.corrupt: a flow run's definition or step records do not hold together
	FindKeyMissing       FindingKind = "key-missing"       // io.state-missing: the receipt key is gone
	FindKeyCorrupt       FindingKind = "key-corrupt"       // io.corrupt: the receipt key, or a keyring entry, is not what it should be
	FindKeyUnsafe        FindingKind = "key-unsafe"        // precondition.state-unsafe: the receipt key is a link, another user's, or not private
	FindKeyNotKept       FindingKind = "key-not-kept"      // io.state-missing: the keyring lacks the current key's public half
)

// A Finding is one problem Fsck found.
type Finding struct {
	Kind FindingKind `json:"kind"`
	Code string      `json:"code"`
	// Path is the file or directory concerned; Object the object, stage,
	// op or workspace, when the finding is about one.
	Path   string `json:"path,omitempty" jsonname:"b64"`
	Object string `json:"object,omitempty"`
	// Detail says what was found and what is lost with it.
	Detail string `json:"detail"`
	// Repair says how to repair it (a command when there is one).
	Repair string `json:"repair"`
	// Repaired is set when fsck --repair (or --reinit) repaired it.
	Repaired bool `json:"repaired,omitempty"`
	// Workspace is the workspace the finding is about, when it is about
	// one; Repairs are its repairs as data (Repair then says the first in
	// words), which the command line renders as commands in Workspace.
	Workspace string   `json:"workspace,omitempty" jsonname:"b64"`
	Repairs   []Repair `json:"repairs,omitempty"`
}

// MarshalJSON writes the finding with a byte-safe path.
func (f Finding) MarshalJSON() ([]byte, error) { return jsonname.Marshal(f) }

// FsckOptions configure Fsck.
type FsckOptions struct {
	// Repair makes entries private again (I-004) and sets orphaned stage
	// directories aside into lost+found. Nothing is ever deleted.
	Repair bool
	// Reinit replaces a missing or damaged database with an empty one:
	// the damaged file and the stage directories that depended on it are
	// set aside into lost+found first. It refuses a sound database.
	Reinit bool
}

// FsckChecked counts what Fsck looked at.
type FsckChecked struct {
	Workspaces int `json:"workspaces"`
	Stages     int `json:"stages"`
	Ops        int `json:"ops"`
	Objects    int `json:"objects"`
	Journals   int `json:"journals"`
	Entries    int `json:"entries"` // state root entries whose owner and mode were checked
	Receipts   int `json:"receipts"`
	Unsigned   int `json:"unsigned"` // receipts stored bare (by a wtx that did not sign): sound, but no proof
	FlowRuns   int `json:"flow_runs"`
	Keys       int `json:"keys"` // keys receipts verify with: the current one and those the keyring keeps
}

// FsckReport is what Fsck found.
type FsckReport struct {
	StateDir string      `json:"state_dir" jsonname:"b64"`
	Findings []Finding   `json:"findings"`
	Checked  FsckChecked `json:"checked"`
	// SetAside is where --reinit or --repair moved what they replaced.
	SetAside string `json:"set_aside,omitempty" jsonname:"b64"`
}

// MarshalJSON writes the report with byte-safe paths.
func (r FsckReport) MarshalJSON() ([]byte, error) { return jsonname.Marshal(r) }

// Damaged reports whether a finding is left unrepaired.
func (r *FsckReport) Damaged() bool {
	for _, f := range r.Findings {
		if !f.Repaired {
			return true
		}
	}
	return false
}

// Fsck verifies the whole state root (I-005): the database (SQLite
// integrity, application id, schema version), every object a record needs
// (present, and hashing to its name; every stored object is hashed), the
// journals (they decode; a pending one is an apply waiting for recovery),
// stage directories against stage records (orphans both ways, base
// manifests decode), and the owner and mode of every entry (I-004). It
// creates nothing and changes nothing unless opts asks for a repair. Run it
// while no other wtx command runs: an apply or a begin in progress can look
// like a pending journal or an orphan.
func Fsck(ctx context.Context, stateDir string, opts FsckOptions) (*FsckReport, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, errorf(CodeUsage, "state root %q must be an absolute path", stateDir)
	}
	stateDir, err := canonicalMaybeMissing(stateDir)
	if err != nil {
		return nil, AsError(err)
	}
	fk := &fsck{ctx: ctx, dir: stateDir, opts: opts, rep: &FsckReport{StateDir: stateDir, Findings: []Finding{}}}
	fi, err := os.Lstat(stateDir)
	if errors.Is(err, fs.ErrNotExist) {
		if opts.Reinit {
			return nil, errorf(CodeUsage, "state root %s does not exist: there is no database to replace", stateDir)
		}
		return fk.rep, nil // never used: nothing to check
	}
	if err != nil {
		return nil, stateIOError(stateDir, "inspect the state root", err)
	}
	if !fi.IsDir() {
		return nil, errorf(CodeNotDir, "state root %s is not a directory", stateDir)
	}
	fk.modes()
	for _, f := range fk.rep.Findings {
		if f.Kind == FindStateUnsafe && f.Path == stateDir {
			return fk.rep, nil // someone else's: nothing of it is read further
		}
	}
	db := fk.database()
	if db != nil {
		defer db.Close()
	}
	if fk.err != nil {
		return nil, fk.err
	}
	fk.records(db)
	fk.receiptKey()
	fk.receipts(db)
	fk.flows(db)
	fk.journals()
	fk.objects()
	return fk.rep, nil
}

type fsck struct {
	ctx  context.Context
	dir  string
	opts FsckOptions
	rep  *FsckReport
	// refs maps every digest a record needs to who needs it.
	refs map[string][]string
	// required holds the digests that must be stored: pre- and
	// post-images of ops and journals. Others (a stage's base, a read) may
	// never have been stored.
	required map[string]bool
	// wsPaths maps workspace ids to their paths.
	wsPaths map[string]string
	// stages are the stage records read, with their workspaces.
	stages []fsckStage
	// keys are the public keys receipts verify with (receiptKey reads
	// them).
	keys []ReceiptKeyInfo
	// err ends the check early (a repair asked for what is not there).
	err error
}

func (fk *fsck) add(f Finding) { fk.rep.Findings = append(fk.rep.Findings, f) }

// need records that the object d must be in the store, for who.
func (fk *fsck) need(d, who string) {
	fk.refs[d] = append(fk.refs[d], who)
	fk.required[d] = true
}

// setAside moves p into the state root's lost+found/<time>/ under the name
// rel and returns where it went.
func (fk *fsck) setAside(p, rel string) (string, error) {
	if fk.rep.SetAside == "" {
		lf := filepath.Join(fk.dir, lostFoundName)
		if err := ensurePrivateDir(fk.dir, lf); err != nil {
			return "", err
		}
		d := filepath.Join(lf, time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := os.Mkdir(d, privateDirPerm); err != nil {
			return "", stateIOError(fk.dir, "set aside", err)
		}
		fk.rep.SetAside = d
	}
	dst := filepath.Join(fk.rep.SetAside, rel)
	if err := os.MkdirAll(filepath.Dir(dst), privateDirPerm); err != nil {
		return "", stateIOError(fk.dir, "set aside", err)
	}
	if err := os.Rename(p, dst); err != nil {
		return "", stateIOError(fk.dir, "set aside "+p, err)
	}
	return dst, nil
}

// modes checks the owner and mode of the state root and of everything in
// it, down to each stage's directory (what a stage holds keeps the
// workspace's modes behind that directory's 0700).
func (fk *fsck) modes() {
	uid := os.Geteuid()
	// The callback reports every error as a finding and goes on, so the
	// walk itself returns none.
	_ = filepath.WalkDir(fk.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			fk.add(Finding{Kind: FindNotPrivate, Code: CodeIO, Path: p, Detail: "cannot be read: " + err.Error(),
				Repair: "make it readable by its owner (chmod u+rwx)"})
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return nil // gone since the listing
		}
		fk.rep.Checked.Entries++
		if p == receiptKeyPath(fk.dir) {
			return nil // the key check says more of it (receiptKey)
		}
		rel, _ := filepath.Rel(fk.dir, p)
		skip := d.IsDir() && (strings.Count(rel, "/") == 1 && strings.HasPrefix(rel, stagesName+"/") ||
			strings.HasPrefix(rel, lostFoundName+"/") && strings.Count(rel, "/") >= 1)
		if owner, desc := ownerOf(fi); owner >= 0 && owner != uid {
			fk.add(Finding{Kind: FindStateUnsafe, Code: CodeStateUnsafe, Path: p,
				Detail: fmt.Sprintf("owned by %s, mode %s, not by you (uid %d): its owner can read and change your records", desc, unixMode(fi), uid),
				Repair: "give it back to its owner (chown), or use a state root of your own"})
			if p == fk.dir {
				return filepath.SkipAll
			}
		} else if fi.Mode()&fs.ModeSymlink == 0 && (fi.Mode().Perm()&0o077 != 0 || fi.Mode()&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky) != 0) {
			want := privateFilePerm
			switch {
			case fi.IsDir():
				want = privateDirPerm
			case strings.HasPrefix(rel, objectsName+"/"):
				want = 0o400 // objects are written once
			}
			f := Finding{Kind: FindNotPrivate, Code: CodeStateUnsafe, Path: p,
				Detail: fmt.Sprintf("mode %s: group or others may use it; the state root is private to its owner", unixMode(fi)),
				Repair: "wtx fsck --repair (chmod go-rwx)"}
			if fk.opts.Repair {
				if err := os.Chmod(p, fi.Mode().Perm()&want); err == nil {
					f.Repaired = true
				} else {
					f.Detail += "; chmod failed: " + err.Error()
				}
			}
			fk.add(f)
		}
		if skip {
			return filepath.SkipDir
		}
		return nil
	})
}

// database opens the state database if it is there and sound, and reports
// it otherwise. With Reinit, a missing or damaged database is set aside
// with the stage directories and replaced by an empty one.
func (fk *fsck) database() *state.DB {
	p := filepath.Join(fk.dir, dbName)
	var bad *Finding
	fi, err := os.Lstat(p)
	l := countLeftovers(fk.dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !l.any() {
			if fk.opts.Reinit {
				fk.err = errorf(CodeUsage, "the state root %s holds no database and nothing that needed one: there is nothing to reinitialise", fk.dir)
			}
			return nil // a state root never used
		}
		bad = &Finding{Kind: FindDBMissing, Code: CodeStateLost, Path: p,
			Detail: fmt.Sprintf("the database is missing but the state root holds %s: the records of stages, ops and receipts are lost", l)}
	case err != nil:
		bad = &Finding{Kind: FindDBCorrupt, Code: CodeIO, Path: p, Detail: "cannot be inspected: " + err.Error()}
	case fi.Size() == 0:
		if wal, werr := os.Lstat(p + "-wal"); werr != nil || wal.Size() == 0 {
			bad = &Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: p,
				Detail: fmt.Sprintf("the database is empty (zero length); the state root holds %s: the records of stages, ops and receipts are lost", l)}
		}
	}
	var db *state.DB
	if bad == nil {
		db, err = state.Open(fk.ctx, p)
		switch {
		case errors.Is(err, state.ErrTooNew):
			fk.add(Finding{Kind: FindDBSchema, Code: CodeUnsupported, Path: p, Detail: err.Error(), Repair: "use a newer wtx"})
			return nil
		case errors.Is(err, state.ErrCantOpen), errors.Is(err, state.ErrReadOnly):
			// Not damage: the file system does not let it open (a
			// read-only mount, permissions). Saying "corrupt" would offer
			// --reinit for a sound history.
			fk.err = stateDBError(fk.dir, err)
			return nil
		case err != nil:
			bad = &Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: p, Detail: "cannot be opened as a wtx database: " + err.Error()}
		default:
			problems, err := db.IntegrityCheck(fk.ctx)
			if err != nil {
				problems = append(problems, err.Error())
			}
			if len(problems) > 0 {
				if len(problems) > 5 {
					problems = append(problems[:5], fmt.Sprintf("and %d more", len(problems)-5))
				}
				db.Close()
				db = nil
				bad = &Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: p,
					Detail: "fails SQLite's integrity check: " + strings.Join(problems, "; ")}
			}
		}
	}
	if bad == nil {
		if fk.opts.Reinit {
			fk.err = errorf(CodeUsage, "the database %s is sound: reinitialising replaces only a missing or damaged one", p)
		}
		return db
	}
	bad.Repair = fmt.Sprintf("restore %s (with its -wal file) from a backup; or 'wtx fsck --reinit' to set it and the stage directories aside into %s and start an empty history", p, lostFoundName)
	if fk.opts.Reinit {
		if err := fk.reinit(); err != nil {
			bad.Detail += "; --reinit failed: " + err.Error()
		} else {
			bad.Repaired = true
			bad.Detail += "; set aside into " + fk.rep.SetAside + " with the stage directories, and replaced by an empty database"
		}
	}
	fk.add(*bad)
	if bad.Repaired {
		if db, err := state.Open(fk.ctx, p); err == nil {
			return db
		}
	}
	return nil
}

// reinit sets the database files and the stage directories aside and
// creates an empty database. Objects stay (content-addressed, harmless),
// and so do the workspaces' locks and journals: an interrupted apply is
// still recovered.
func (fk *fsck) reinit() error {
	for _, n := range []string{dbName, dbName + "-wal", dbName + "-shm", stagesName} {
		p := filepath.Join(fk.dir, n)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if _, err := fk.setAside(p, n); err != nil {
			return err
		}
	}
	if err := ensurePrivateDir(fk.dir, filepath.Join(fk.dir, stagesName)); err != nil {
		return err
	}
	if err := createPrivateFile(fk.dir, filepath.Join(fk.dir, dbName)); err != nil {
		return err
	}
	db, err := state.Open(fk.ctx, filepath.Join(fk.dir, dbName))
	if err != nil {
		return err
	}
	return db.Close()
}

// records checks stage directories against stage records and collects
// what every record needs from the blob store.
func (fk *fsck) records(db *state.DB) {
	fk.refs = map[string][]string{}
	fk.required = map[string]bool{}
	fk.wsPaths = map[string]string{}
	known := map[string]bool{}
	if db != nil {
		wss, err := db.ListWorkspaces(fk.ctx)
		if err != nil {
			fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Detail: "workspaces cannot be read: " + err.Error(), Repair: "wtx fsck --reinit"})
			return
		}
		for _, ws := range wss {
			fk.rep.Checked.Workspaces++
			fk.wsPaths[ws.ID] = ws.Path
			stages, err := db.ListStages(fk.ctx, ws.ID)
			if err != nil {
				fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: ws.ID, Detail: "stages cannot be read: " + err.Error(), Repair: "wtx fsck --reinit"})
				continue
			}
			for _, s := range stages {
				fk.rep.Checked.Stages++
				known[s.ID] = true
				fk.stages = append(fk.stages, fsckStage{ws, s})
				fk.stage(db, ws, s)
				fk.fileOps(db, ws, s)
			}
			ops, err := db.ListOps(fk.ctx, ws.ID)
			if err != nil {
				fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: ws.ID, Detail: "ops cannot be read: " + err.Error(), Repair: "wtx fsck --reinit"})
				continue
			}
			for _, o := range ops {
				fk.rep.Checked.Ops++
				var b opBody
				if err := json.Unmarshal(o.Body, &b); err != nil {
					fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: o.ID,
						Detail: fmt.Sprintf("op %s of %s: its record does not decode (%v): it cannot be shown or undone", o.ID, quotedName(ws.Path), err), Repair: "restore the database from a backup"})
					continue
				}
				for _, c := range b.Changes {
					for _, e := range []*entryJSON{c.Old, c.New} {
						if e != nil && e.Type == tree.File.String() && e.Digest != "" {
							fk.need(e.Digest, "op "+o.ID+" ("+quotedName(c.Path)+", for wtx undo and wtx show)")
						}
					}
				}
			}
		}
	}
	// Stage directories no record names.
	ents, err := os.ReadDir(filepath.Join(fk.dir, stagesName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		fk.add(Finding{Kind: FindStageOrphan, Code: CodeIO, Path: filepath.Join(fk.dir, stagesName), Detail: "cannot be listed: " + err.Error(), Repair: "make it readable by its owner"})
	}
	if db == nil {
		return // without records every directory would look orphaned
	}
	for _, e := range ents {
		if known[e.Name()] {
			continue
		}
		p := filepath.Join(fk.dir, stagesName, e.Name())
		f := Finding{Kind: FindStageOrphan, Code: CodeStateLost, Path: p, Object: e.Name(),
			Detail: "a stage directory no record names: its staged changes cannot be listed, applied or collected",
			Repair: "wtx fsck --repair (sets it aside into " + lostFoundName + "; copy out what you need)"}
		if fi, err := os.Lstat(p); err == nil && time.Since(fi.ModTime()) < 10*time.Minute {
			f.Detail += "; it changed in the last 10 minutes and may be a stage being opened right now"
		} else if fk.opts.Repair {
			if dst, err := fk.setAside(p, filepath.Join(stagesName, e.Name())); err == nil {
				f.Repaired = true
				f.Detail += "; set aside into " + dst
			} else {
				f.Detail += "; could not be set aside: " + err.Error()
			}
		}
		fk.add(f)
	}
}

// stage checks one stage record against its directory and collects its
// references.
func (fk *fsck) stage(db *state.DB, ws state.Workspace, s state.Stage) {
	dir := filepath.Join(fk.dir, stagesName, s.ID)
	data, err := os.ReadFile(manifestPath(dir))
	switch {
	case err == nil:
		m, err := tree.Decode(data)
		if err != nil {
			fk.add(Finding{Kind: FindManifestCorrupt, Code: CodeCorrupt, Path: manifestPath(dir), Object: s.ID,
				Detail: fmt.Sprintf("stage %s (%s) of %s: its base manifest does not decode (%v): its change set cannot be computed", s.ID, s.State, quotedName(ws.Path), err),
				Repair: fmt.Sprintf("wtx -C %s drop %s (the staged changes are lost)", shellQuote(ws.Path), s.ID)})
			break
		}
		for _, e := range m.Entries {
			if e.Digest != "" {
				fk.refs[e.Digest] = append(fk.refs[e.Digest], "stage "+s.ID+" (base of "+quotedName(e.Path)+")")
			}
		}
	case s.State == StateOpen:
		fk.add(Finding{Kind: FindStageDirMissing, Code: CodeStateLost, Path: dir, Object: s.ID,
			Detail: fmt.Sprintf("open stage %s of %s: its directory or base manifest is gone (%v): its staged changes are lost", s.ID, quotedName(ws.Path), err),
			Repair: fmt.Sprintf("wtx -C %s drop %s", shellQuote(ws.Path), s.ID)})
	}
	if s.State == StateOpen && errors.Is(stage.InDoubt(dir), stage.ErrViewInDoubt) {
		fk.add(Finding{Kind: FindViewInDoubt, Code: CodeStateLost, Path: dir, Object: s.ID,
			Detail: fmt.Sprintf("open stage %s of %s: %v", s.ID, quotedName(ws.Path), stage.ErrViewInDoubt),
			Repair: fmt.Sprintf("wtx -C %s drop %s (run the command again in a new stage)", shellQuote(ws.Path), s.ID)})
	}
	if txops, err := db.ListTxOps(fk.ctx, s.ID); err == nil {
		for _, o := range txops {
			ds, err := digestsIn(o.Body)
			if err != nil {
				fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: s.ID,
					Detail: fmt.Sprintf("per-file op %d cannot be read (%v): the objects it needs are unknown", o.Seq, err), Repair: "wtx fsck --reinit"})
				continue
			}
			for _, d := range ds {
				fk.refs[d] = append(fk.refs[d], fmt.Sprintf("stage %s op %d", s.ID, o.Seq))
			}
			if s.State == StateOpen && !failpoint.Disabled("fsck-op-blobs") {
				fk.needOfTxOp(s, o)
			}
		}
	} else {
		fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: s.ID, Detail: "per-file ops cannot be read: " + err.Error(), Repair: "wtx fsck --reinit"})
	}
	if reads, err := db.ReadSet(fk.ctx, s.ID); err == nil {
		for _, r := range reads {
			fk.refs[r.Digest] = append(fk.refs[r.Digest], "stage "+s.ID+" (read of "+quotedName(r.Path)+")")
		}
	}
}

// journals checks every workspace's journals.
func (fk *fsck) journals() {
	root := filepath.Join(fk.dir, workspaceDirs)
	wss, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, w := range wss {
		jdir := filepath.Join(root, w.Name(), "journal")
		// A workspace whose lock another wtx holds may be in the middle of
		// an apply: its journal is not a finding.
		release, busy := tryWorkspaceLock(filepath.Join(root, w.Name(), "lock"))
		if busy {
			continue
		}
		ops, err := journal.Pending(jdir)
		if err != nil {
			release()
			fk.add(Finding{Kind: FindJournalCorrupt, Code: CodeIO, Path: jdir, Detail: "cannot be listed: " + err.Error(), Repair: "make it readable by its owner"})
			continue
		}
		fk.journalsOf(w.Name(), jdir, ops)
		release()
	}
}

// journalsOf checks the pending journals ops of the workspace id.
func (fk *fsck) journalsOf(id, jdir string, ops []string) {
	wsPath := fk.wsPaths[id]
	for _, op := range ops {
		fk.rep.Checked.Journals++
		p := filepath.Join(jdir, op)
		j, _, err := journal.Load(jdir, op)
		wtxIn := "wtx"
		if wsPath != "" {
			wtxIn = "wtx -C " + shellQuote(wsPath)
		}
		recover := wtxIn + " recover"
		if wsPath == "" {
			recover += " (in the workspace)"
		}
		if err != nil {
			detail := fmt.Sprintf("the journal of %s is damaged or missing (%v)", op, err)
			if wsPath != "" {
				if temps := engine.FindTemps(wsPath, 5); len(temps) > 0 {
					detail += fmt.Sprintf("; the workspace %s holds wtx's temporary files (%s): the apply was interrupted after it touched the workspace", quotedName(wsPath), strings.Join(quotedNames(temps), ", "))
				}
			}
			fk.add(Finding{Kind: FindJournalCorrupt, Code: CodeCorrupt, Path: p, Object: op, Detail: detail,
				Repair: "put the workspace right by hand (wtx's temporary files there hold old or new contents), then " + wtxIn + " recover --set-aside " + op})
			continue
		}
		for _, r := range j.Records {
			for _, e := range []*tree.Entry{r.Step.Old, r.Step.New} {
				if e != nil && e.Type == tree.File && e.Digest != "" {
					fk.need(e.Digest, "journal "+op+" ("+quotedName(r.Step.Path)+", for its recovery)")
				}
			}
		}
		fk.add(Finding{Kind: FindJournalPending, Code: CodeInterruptedApply, Path: p, Object: op,
			Detail: fmt.Sprintf("an apply to %s was interrupted and waits for recovery", quotedName(j.Workspace)),
			Repair: recover})
	}
}

// tryWorkspaceLock takes the workspace lock file p shared without waiting.
// busy reports another wtx holds it; release lets it go.
func tryWorkspaceLock(p string) (release func(), busy bool) {
	f, err := os.Open(p)
	if err != nil {
		return func() {}, false // no lock file: no wtx has worked here
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		f.Close()
		return func() {}, errors.Is(err, unix.EWOULDBLOCK)
	}
	return func() { f.Close() }, false
}

// objects checks that every needed object is stored and that every stored
// object hashes to its name.
func (fk *fsck) objects() {
	store, err := openStoreNoCreate(fk.dir)
	if err != nil {
		if len(fk.required) > 0 {
			fk.add(Finding{Kind: FindBlobMissing, Code: CodeStateLost, Path: filepath.Join(fk.dir, objectsName),
				Detail: fmt.Sprintf("the object store cannot be read (%v); %d objects are needed", err, len(fk.required)), Repair: "restore the objects directory from a backup"})
		}
		return
	}
	needed := make([]string, 0, len(fk.refs))
	for d := range fk.required {
		needed = append(needed, d)
	}
	sort.Strings(needed)
	for _, d := range needed {
		if !blob.Digest(d).Valid() {
			continue
		}
		if !store.Has(blob.Digest(d)) {
			fk.add(Finding{Kind: FindBlobMissing, Code: CodeStateLost, Path: store.Path(blob.Digest(d)), Object: d,
				Detail: "needed by " + whoNeeds(fk.refs[d]) + ", but not in the store: that content cannot be restored",
				Repair: "restore the object file from a backup of the state root; without it, drop the stage that needs it (an op that needs it cannot be undone)"})
		}
	}
	err = store.Walk(fk.ctx, func(d blob.Digest, size int64) error {
		fk.rep.Checked.Objects++
		verr := store.Verify(d)
		if verr == nil {
			return nil
		}
		who := "nothing (unreferenced)"
		if r := fk.refs[string(d)]; len(r) > 0 {
			who = whoNeeds(r)
		}
		code := CodeCorrupt
		if !errors.Is(verr, blob.ErrCorrupt) {
			code = AsError(verr).Code
		}
		fk.add(Finding{Kind: FindBlobCorrupt, Code: code, Path: store.Path(d), Object: string(d),
			Detail: fmt.Sprintf("%v; needed by %s", verr, who),
			Repair: "restore the object from a backup; storing the same content again (an apply or run that holds it) replaces it"})
		return nil
	})
	if err != nil {
		fk.add(Finding{Kind: FindBlobCorrupt, Code: AsError(err).Code, Path: filepath.Join(fk.dir, objectsName), Detail: "cannot be walked: " + err.Error(), Repair: "make it readable by its owner"})
	}
}

// openStoreNoCreate opens the blob store of stateDir only if it exists.
func openStoreNoCreate(stateDir string) (*blob.Store, error) {
	if _, err := os.Stat(filepath.Join(stateDir, objectsName)); err != nil {
		return nil, err
	}
	if err := unix.Access(filepath.Join(stateDir, objectsName), unix.R_OK|unix.X_OK); err != nil {
		return nil, err
	}
	return blob.Open(stateDir)
}

func whoNeeds(refs []string) string {
	sort.Strings(refs)
	if len(refs) > 3 {
		return strings.Join(refs[:3], ", ") + fmt.Sprintf(" and %d more", len(refs)-3)
	}
	return strings.Join(refs, ", ")
}

// quotedName writes a name as listings do.
func quotedName(name string) string { return quote.Path(name) }

func quotedNames(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = quote.Path(n)
	}
	return out
}
