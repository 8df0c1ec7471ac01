package wtx

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/flowlink"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/receipt"
)

// fsck's checks of what proves and drives history (T-006): the receipt
// key and its keyring, every stored receipt (its content, its signature,
// its record), every flow run (its definition and step records), and the
// objects an open stage's per-file ops need.

// fsckStage is a stage record fsck read, with its workspace.
type fsckStage struct {
	ws state.Workspace
	s  state.Stage
}

// needOfTxOp marks as required the contents a per-file op of the open
// stage s names: its files' contents before it (drop-op and rebase put
// them back) and after it (what it staged, or what a read saw). A run
// keeps its contents only where it could read them (checkpoint.go), so
// its are not required.
func (fk *fsck) needOfTxOp(s state.Stage, o state.TxOp) {
	if o.Kind == "run" {
		return
	}
	var op TxOp
	if err := decodeTxOp(o.Body, &op); err != nil {
		return // digestsIn read it; what it names is referenced, not required
	}
	for _, f := range op.Files {
		for _, sd := range []*Side{f.Before, f.After} {
			if sd != nil && sd.Type == "file" && sd.Digest != "" {
				fk.required[sd.Digest] = true
			}
		}
	}
}

// receiptKey checks the receipt key and the keyring of a state root that
// has been used: the key is there, private to its owner, an ed25519 key
// the keyring knows, and each keyring entry is the public key its name
// says. --repair makes a key that is only too open private again, and
// puts a readable key's public half into the keyring.
func (fk *fsck) receiptKey() {
	if freshStateRoot(fk.dir) {
		return
	}
	keys, err := ReceiptKeys(fk.dir)
	fk.keys = keys
	fk.rep.Checked.Keys = len(keys)
	if failpoint.Disabled("fsck-key") {
		return // negative control: the keys are read for the receipts' check, nothing more
	}
	if err != nil {
		fk.keyFinding(err)
	}
	root, kd, err := openKeys(fk.dir, false)
	if err != nil {
		return // the key's own finding says it
	}
	defer root.Close()
	defer kd.Close()
	ring, err := readKeyring(kd)
	if err != nil {
		fk.add(Finding{Kind: FindKeyCorrupt, Code: CodeIO, Path: filepath.Join(fk.dir, keysDirName, keyringDirName),
			Detail: "the keyring cannot be read: " + err.Error(), Repair: "make it readable by its owner (chmod u+rwx)"})
		return
	}
	names := make([]string, 0, len(ring.bad))
	for n := range ring.bad {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(fk.dir, keysDirName, keyringDirName, n)
		r := Repair{Action: RepairRestoreKey, Paths: []string{p},
			Detail: "put back the public key its name says from a backup (receipts signed with that key verify only with it), or remove the entry if no receipt needs it"}
		fk.add(Finding{Kind: FindKeyCorrupt, Code: CodeCorrupt, Path: p,
			Detail: "a keyring entry " + ring.bad[n] + ": receipts signed with the key it should hold cannot be verified here",
			Repair: r.Detail, Repairs: []Repair{r}})
	}
	if len(keys) > 0 && keys[0].Current && !ring.has(keys[0].PublicKey) {
		f := Finding{Kind: FindKeyNotKept, Code: CodeStateLost, Path: filepath.Join(fk.dir, keysDirName, keyringDirName), Object: keys[0].KeyID,
			Detail: "the keyring lacks the public half of the current receipt key: if the key is lost, receipts signed with it cannot be verified here",
			Repair: "wtx fsck --repair (writes it; the next signed receipt does too)"}
		if fk.opts.Repair {
			if err := keepPublic(kd, keys[0].PublicKey); err == nil {
				f.Repaired = true
			} else {
				f.Detail += "; writing it failed: " + err.Error()
			}
		}
		fk.add(f)
	}
}

// keyFinding reports a receipt key that cannot be used.
func (fk *fsck) keyFinding(err error) {
	var ke *keyError
	if !errors.As(err, &ke) {
		fk.add(Finding{Kind: FindKeyCorrupt, Code: AsError(err).Code, Path: receiptKeyPath(fk.dir),
			Detail: "the receipt key cannot be read: " + err.Error(), Repair: "make it readable by its owner"})
		return
	}
	e := ke.asError()
	f := Finding{Kind: FindKeyCorrupt, Code: e.Code, Path: ke.path, Detail: e.Message + ": every command that signs a receipt (run, apply, undo, flow steps) fails until it is repaired",
		Repairs: e.Repairs, Repair: e.Repairs[0].Detail}
	switch ke.problem {
	case keyMissing:
		f.Kind = FindKeyMissing
	case keyUnsafe:
		f.Kind = FindKeyUnsafe
	case keyOpen:
		f.Kind = FindKeyUnsafe
		if fk.opts.Repair {
			if err := fk.privateKey(); err == nil {
				f.Repaired = true
				f.Detail += "; made private again (chmod 600): if anyone else could have read it, make a new key"
			} else {
				f.Detail += "; chmod failed: " + err.Error()
			}
		}
	}
	fk.add(f)
}

// privateKey makes the key file private again (its owner's alone).
func (fk *fsck) privateKey() error {
	root, kd, err := openKeys(fk.dir, false)
	if err != nil {
		return err
	}
	defer root.Close()
	defer kd.Close()
	return kd.Chmod(receiptKeyName, privateFilePerm)
}

// receiptRepairs are the repairs of a damaged receipt.
var receiptRepairs = []Repair{{Action: "restore",
	Detail: "restore the database from a backup of the state root: a receipt is signed when its op happens and cannot be made again; the op and what it changed are not affected"}}

// receipts checks every receipt of every stage read: it decodes, its
// content passes verification (fields, digest, subjects, disclaimer), a
// signature verifies with a key the state root keeps, and it is the
// receipt its record says (id, kind, stage, op). A bare receipt that
// passes is counted as unsigned: an older wtx stored it so.
func (fk *fsck) receipts(db *state.DB) {
	if db == nil || failpoint.Disabled("fsck-receipts") {
		return
	}
	for _, st := range fk.stages {
		rows, err := db.ReceiptsForStage(fk.ctx, st.s.ID)
		if err != nil {
			fk.add(Finding{Kind: FindDBCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: st.s.ID, Detail: "receipts cannot be read: " + err.Error(), Repair: "wtx fsck --reinit"})
			continue
		}
		for _, row := range rows {
			fk.rep.Checked.Receipts++
			fk.receipt(db, st, row)
		}
	}
}

// receipt checks one stored receipt.
func (fk *fsck) receipt(db *state.DB, st fsckStage, row state.Receipt) {
	bad := func(kind FindingKind, code, what string) {
		fk.add(Finding{Kind: kind, Code: code, Path: db.Path(), Object: row.ID, Workspace: st.ws.Path,
			Detail:  fmt.Sprintf("receipt %s (%s) of stage %s in %s: %s", row.ID, row.Kind, st.s.ID, quotedName(st.ws.Path), what),
			Repairs: receiptRepairs, Repair: receiptRepairs[0].Detail})
	}
	rec, err := receipt.Decode(row.Body)
	if err != nil {
		bad(FindReceiptCorrupt, CodeCorrupt, "it does not decode: "+err.Error())
		return
	}
	if _, err := receipt.CheckContent(row.Body); err != nil {
		bad(FindReceiptCorrupt, CodeCorrupt, "it fails its checks: "+AsError(err).Message)
		return
	}
	r := rec.Receipt
	if r.ID != row.ID || r.Kind != row.Kind || r.Tx != row.StageID || r.OpID != row.OpID {
		bad(FindReceiptCorrupt, CodeCorrupt, fmt.Sprintf("its record names id %s, kind %s, stage %s, op %q, but the receipt says %s, %s, %s, %q",
			row.ID, row.Kind, row.StageID, row.OpID, r.ID, r.Kind, r.Tx, r.OpID))
		return
	}
	if rec.Envelope == nil {
		fk.rep.Checked.Unsigned++
		return
	}
	for _, k := range fk.keys {
		if rec.Envelope.VerifySignature(k.PublicKey) == nil {
			return
		}
	}
	named := ""
	if len(rec.Envelope.Signatures) > 0 {
		named = " (it names key " + rec.Envelope.Signatures[0].KeyID + ")"
	}
	bad(FindReceiptSignature, CodeReceiptInvalid, fmt.Sprintf("its signature verifies with none of the %d key(s) the state root keeps%s: it was changed after it was signed, or signed with a key the state root no longer keeps", len(fk.keys), named))
}

// flowRepairs are the repairs of a damaged flow run.
var flowRepairs = []Repair{{Action: "restore",
	Detail: "restore the database from a backup of the state root; until then the run cannot be listed, shown or resumed (what its steps applied stays in the workspace and in its log)"}}

// flows checks every flow run of every workspace: its definition parses
// and matches its digest, and each step record is of a step the
// definition has, with a known status, a result that decodes and an op
// the history holds.
func (fk *fsck) flows(db *state.DB) {
	if db == nil || failpoint.Disabled("fsck-flows") {
		return
	}
	ids := make([]string, 0, len(fk.wsPaths))
	for id := range fk.wsPaths {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		runs, err := db.ListFlowRuns(fk.ctx, id)
		if err != nil {
			fk.add(Finding{Kind: FindFlowCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: id, Workspace: fk.wsPaths[id],
				Detail: "the flow runs of " + quotedName(fk.wsPaths[id]) + " cannot be read: " + err.Error(), Repairs: flowRepairs, Repair: flowRepairs[0].Detail})
			continue
		}
		for _, run := range runs {
			fk.rep.Checked.FlowRuns++
			if why := fk.flowRunProblem(db, run); why != "" {
				fk.add(Finding{Kind: FindFlowCorrupt, Code: CodeCorrupt, Path: db.Path(), Object: run.ID, Workspace: fk.wsPaths[id],
					Detail: fmt.Sprintf("flow run %s of %s: %s", run.ID, quotedName(fk.wsPaths[id]), why), Repairs: flowRepairs, Repair: flowRepairs[0].Detail})
			}
		}
	}
}

// flowRunProblem says what is wrong with a flow run ("" when nothing).
func (fk *fsck) flowRunProblem(db *state.DB, run state.FlowRun) string {
	steps, err := db.FlowSteps(fk.ctx, run.ID)
	if err != nil {
		return "its step records cannot be read: " + err.Error()
	}
	if flowlink.CheckRun != nil {
		// Set when package flow is linked in (the wtx command always is).
		if err := flowlink.CheckRun(run, steps); err != nil {
			return AsError(err).Message
		}
	}
	for _, s := range steps {
		if s.OpID == "" {
			continue
		}
		if _, err := db.GetOp(fk.ctx, s.OpID); errors.Is(err, state.ErrNotFound) {
			return fmt.Sprintf("step %d names op %s, which the history lacks", s.Step+1, s.OpID)
		} else if err != nil {
			return fmt.Sprintf("step %d: its op %s cannot be read: %v", s.Step+1, s.OpID, err)
		}
	}
	return ""
}
