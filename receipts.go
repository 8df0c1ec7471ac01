package wtx

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/state"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// Receipt is the durable record of a run, an apply, an undo or an export
// (package receipt has its fields, wire form, signing and verification).
type Receipt = receipt.Receipt

// Refusal is the refusal a receipt records.
type Refusal = receipt.Refusal

func (s *Stage) notTransactional() []string {
	out := append([]string(nil), receipt.NotTransactional...)
	for _, sh := range s.cfg.Share {
		out = append(out, receipt.SharedPath(sh))
	}
	if (s.row.Backend == "copy" || s.row.Backend == "clone") && !stage.CanConfineViews() {
		out = append(out, receipt.NotConfined)
	}
	return out
}

// markConfined makes a run receipt's not_transactional say whether its
// command ran confined to its view.
func markConfined(r *Receipt, confined bool) {
	r.NotTransactional = withoutItem(r.NotTransactional, receipt.NotConfined)
	if !confined {
		r.NotTransactional = append(r.NotTransactional, receipt.NotConfined)
	}
}

func (s *Stage) newReceipt(kind string, cs *ChangeSet) Receipt {
	r := Receipt{
		SchemaVersion:    1,
		ID:               newID("rc", s.ws.now()),
		Kind:             kind,
		Workspace:        s.ws.path,
		Tx:               s.ID(),
		CreatedAt:        s.ws.now().UTC(),
		Backend:          s.row.Backend,
		Command:          []string{},
		Paths:            []string{},
		Exclusions:       len(s.cfg.Exclude),
		Share:            append([]string(nil), s.cfg.Share...),
		Protections:      len(s.cfg.Protect),
		NotTransactional: s.notTransactional(),
	}
	if cs != nil {
		r.ChangesetDigest, r.Counts = cs.Digest, receipt.Counts(cs.Counts)
		r.LeftOut = len(cs.LeftOut)
		for _, l := range cs.LeftOut {
			r.LeftOutPaths = append(r.LeftOutPaths, l.Path)
		}
		if cs.base != nil {
			r.BaseDigest = tree.Digest(cs.base.Entries)
			r.ResultDigest = r.BaseDigest
		}
		r.ProtectedPaths = s.protectedCount(cs.changes)
	}
	return r
}

// viewDigest is the digest of the view cs was scanned from (special files
// left out: they are never applied). A view without special files, the
// usual one, is digested where it lies: a copy of a large tree's view costs
// more than its digest.
func viewDigest(cs *ChangeSet) string {
	special := slices.IndexFunc(cs.view, func(e tree.Entry) bool { return e.Type == tree.Special })
	if special < 0 {
		return tree.Digest(cs.view)
	}
	view := cs.view[:special:special] // full: the first append copies
	for _, e := range cs.view[special:] {
		if e.Type != tree.Special {
			view = append(view, e)
		}
	}
	return tree.Digest(view)
}

// protectedCount counts the protected paths among changes, the defaults
// (.git, the project file) included.
func (s *Stage) protectedCount(changes []tree.Change) int {
	if failpoint.Disabled("receipt-protected") {
		// Negative control: only protect selectors and the project file
		// count, as receipts once counted.
		n := 0
		for i := range changes {
			if s.protect.Match(changes[i].Path) || projectPath(changes[i].Path) {
				n++
			}
		}
		return n
	}
	return len(s.protection().writes(changes))
}

func (w *Workspace) storeReceipt(ctx context.Context, r *Receipt) error {
	r.Digest = r.ComputeDigest()
	body, err := w.receiptBody(*r)
	if err != nil {
		return AsError(err)
	}
	if err := w.db.InsertReceipt(ctx, state.Receipt{ID: r.ID, Kind: r.Kind, WorkspaceID: w.id, StageID: r.Tx, OpID: r.OpID, Body: body, CreatedAt: r.CreatedAt}); err != nil {
		return AsError(err)
	}
	return nil
}

// recordRefusal leaves a receipt for a refused apply; failing to write it
// does not hide the refusal.
func (w *Workspace) recordRefusal(ctx context.Context, s *Stage, cs *ChangeSet, opts ApplyOptions, e *Error) {
	r := s.newReceipt("apply", cs)
	who := s.applier(opts)
	r.Approved, r.Actor = approves(who, opts.Approve), who.String()
	r.Paths = append(r.Paths, opts.Paths...)
	r.Refusal = &Refusal{Code: e.Code, Message: e.Message}
	if err := w.storeReceipt(ctx, &r); err != nil {
		w.log.Warn("store refusal receipt", "tx", s.ID(), "err", err)
	}
}

// Receipts returns the stage's receipts, oldest first.
func (s *Stage) Receipts(ctx context.Context) ([]Receipt, error) {
	recs, err := s.ReceiptRecords(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Receipt, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.Receipt)
	}
	return out, nil
}

// ReceiptRecords returns the stage's receipts with their envelopes, oldest
// first: every run, checkpoint, apply, refusal and undo of the stage.
func (s *Stage) ReceiptRecords(ctx context.Context) ([]receipt.Record, error) {
	rows, err := s.ws.db.ReceiptsForStage(ctx, s.ID())
	if err != nil {
		return nil, AsError(err)
	}
	out := make([]receipt.Record, 0, len(rows))
	for _, row := range rows {
		rec, err := receipt.Decode(row.Body)
		if err != nil {
			return nil, &Error{Code: CodeInternal, Message: fmt.Sprintf("receipt %s is damaged: %v", row.ID, err)}
		}
		out = append(out, rec)
	}
	return out, nil
}

// Receipt finds a receipt by op id (the op's receipt) or stage ref (the
// stage's latest receipt).
func (w *Workspace) Receipt(ctx context.Context, ref string) (*Receipt, error) {
	rec, err := w.ReceiptRecord(ctx, ref)
	if err != nil {
		return nil, err
	}
	return &rec.Receipt, nil
}

// ReceiptRecordsOf returns every receipt of stage ref, oldest first.
func (w *Workspace) ReceiptRecordsOf(ctx context.Context, ref string) (string, []receipt.Record, error) {
	s, err := w.Stage(ctx, ref)
	if err != nil {
		return "", nil, err
	}
	if s.State() == StateOpen {
		if _, err := s.Running(ctx); err != nil {
			return "", nil, err
		}
	}
	rs, err := s.ReceiptRecords(ctx)
	return s.ID(), rs, err
}

// ReceiptRecord is Receipt with its envelope.
func (w *Workspace) ReceiptRecord(ctx context.Context, ref string) (*receipt.Record, error) {
	if strings.HasPrefix(ref, "op-") {
		op, err := w.Op(ctx, ref)
		if err != nil {
			return nil, err
		}
		s, err := w.Stage(ctx, op.Tx)
		if err != nil {
			return nil, err
		}
		rs, err := s.ReceiptRecords(ctx)
		if err != nil {
			return nil, err
		}
		for i := range rs {
			if rs[i].Receipt.OpID == op.ID {
				return &rs[i], nil
			}
		}
		return nil, errorf(CodeOpNotFound, "op %s has no receipt", op.ID)
	}
	s, err := w.Stage(ctx, ref)
	if err != nil {
		return nil, err
	}
	if s.State() == StateOpen {
		// A run its killed wtx left unfinished gets its receipt now.
		if _, err := s.Running(ctx); err != nil {
			return nil, err
		}
	}
	rs, err := s.ReceiptRecords(ctx)
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 {
		return nil, errorf(CodeStageNotFound, "stage %s has no receipt yet", s.ID())
	}
	return &rs[len(rs)-1], nil
}

// Signing: a receipt is signed with the state root's receipt key
// (receiptkey.go keeps it) before it is stored; package receipt makes the
// envelope.

// Names of the receipt key in the state root.
const (
	keysDirName       = "keys"
	receiptKeyName    = "receipt-ed25519.pem"
	receiptKeyPEMType = "PRIVATE KEY"
)

// signingKey is the state root's receipt key, for signing: a key that
// cannot be used is an error (see readReceiptKey). A key whose public
// half the keyring lacks (a state root made before it had one) is added
// to it.
func (w *Workspace) signingKey() (ed25519.PrivateKey, error) {
	priv, err := readReceiptKey(w.stateDir)
	var ke *keyError
	if errors.As(err, &ke) && ke.problem == keyMissing && failpoint.Disabled("receipt-key-create") {
		// Negative control: the old quiet way, a new key in place of a
		// lost one.
		if root, keys, oerr := openKeys(w.stateDir, true); oerr == nil {
			_ = makeKeyIn(w.stateDir, keys) // the read below says how it went
			keys.Close()
			root.Close()
		}
		priv, err = readReceiptKey(w.stateDir)
	}
	if err != nil {
		return nil, keyErrorOf(err)
	}
	root, keys, err := openKeys(w.stateDir, false)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	defer root.Close()
	defer keys.Close()
	if err := keepPublic(keys, priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, stateIOError(w.stateDir, "keep the receipt key's public half", err)
	}
	return priv, nil
}

// checkReceiptKey refuses, before a command that signs a receipt changes
// anything, a receipt key it could not sign with.
func (w *Workspace) checkReceiptKey() error {
	if _, err := w.signingKey(); err != nil && !failpoint.Disabled("receipt-key-check") {
		return err
	}
	return nil
}

// ReceiptPublicKey returns the public half of the state root's receipt
// key. A key that cannot be used is an error; none is made.
func (w *Workspace) ReceiptPublicKey() (ed25519.PublicKey, error) {
	priv, err := readReceiptKey(w.stateDir)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	return priv.Public().(ed25519.PublicKey), nil
}

// ReceiptPublicKeyOf is ReceiptPublicKey of the state root stateDir. A
// fresh state root (see makeFirstKey) gets its first key.
func ReceiptPublicKeyOf(stateDir string) (ed25519.PublicKey, error) {
	if !filepath.IsAbs(stateDir) {
		return nil, errorf(CodeUsage, "state root %q must be an absolute path", stateDir)
	}
	dir, err := canonicalMaybeMissing(stateDir)
	if err != nil {
		return nil, AsError(err)
	}
	if freshStateRoot(dir) {
		if err := prepareStateRoot(dir); err != nil {
			return nil, err
		}
		if err := makeFirstKey(dir); err != nil {
			return nil, err
		}
	}
	priv, err := readReceiptKey(dir)
	if err != nil {
		return nil, keyErrorOf(err)
	}
	return priv.Public().(ed25519.PublicKey), nil
}

// receiptBody is what the state keeps of a receipt: its signed envelope.
// A key that cannot be used is an error: a receipt is never stored
// unsigned.
func (w *Workspace) receiptBody(r Receipt) ([]byte, error) {
	priv, err := w.signingKey()
	if err != nil {
		if !failpoint.Disabled("receipt-key-check") {
			return nil, err
		}
		// Negative control: the old quiet way.
		w.log.Warn("receipt left unsigned", "receipt", r.ID, "err", err)
		return json.Marshal(r)
	}
	env, err := receipt.Sign(priv, r)
	if err != nil {
		return nil, AsError(err)
	}
	return json.Marshal(env)
}

// VerifyReceipt checks a receipt document (see receipt.Verify) with the
// keys of the state root stateDir: its current key and every older one
// its keyring keeps. To check with the signer's public key instead, call
// receipt.Verify with VerifyOptions.PublicKey. A bare receipt that passes
// the checks is reported with its Verification and an error
// (CodeReceiptInvalid) that says it is unsigned.
func VerifyReceipt(stateDir string, data []byte) (*receipt.Verification, error) {
	var kerr error
	tried := 0
	ring := func() ([]receipt.Key, error) { // called for a signed document only
		keys, err := stateRootKeys(stateDir)
		tried, kerr = len(keys), err
		return keys, err
	}
	v, err := receipt.Verify(data, receipt.VerifyOptions{Keyring: ring})
	if err == nil {
		return v, nil
	}
	if errors.Is(err, receipt.ErrNoKey) {
		if kerr == nil {
			kerr = errors.New("the state root keeps no key")
		}
		ke := AsError(kerr)
		return nil, &Error{Code: CodeReceiptInvalid, Err: kerr, Repairs: ke.Repairs,
			Message: fmt.Sprintf("no receipt key of your own to check the signature with (%s): pass the signer's public key with --key", ke.Message)}
	}
	e := AsError(err)
	var re *receipt.Error
	if kerr != nil && errors.As(err, &re) && envelopeCheck(re.Check) {
		// The keyring's keys were tried, but its current key was not
		// among them: say so beside why the envelope was refused.
		e.Message += fmt.Sprintf(" (checked with the %d key(s) the state root keeps; its current key cannot be used: %s)", tried, AsError(kerr).Message)
	}
	return v, e
}

// envelopeCheck reports whether c is one of the checks of a signed
// envelope (not of what the answer carries beside it, nor the disclaimer).
func envelopeCheck(c receipt.Check) bool {
	switch c {
	case receipt.CheckSignature, receipt.CheckStatement, receipt.CheckFields, receipt.CheckDigest, receipt.CheckSubjects:
		return true
	}
	return false
}

// stateRootKeys are the keys to check a signature with: the state root's
// current key and the older ones its keyring keeps. A current key that
// cannot be used is returned as the error beside the others.
func stateRootKeys(stateDir string) ([]receipt.Key, error) {
	if stateDir == "" {
		return nil, errorf(CodeUsage, "no public key to check the signature with")
	}
	infos, err := ReceiptKeys(stateDir)
	var out []receipt.Key
	for _, k := range infos {
		src := receipt.KeyRetired
		if k.Current {
			src = receipt.KeyCurrent
		}
		out = append(out, receipt.Key{Public: k.PublicKey, Source: src})
	}
	return out, err
}
