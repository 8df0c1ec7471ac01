package wtx

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/wtx-dev/wtx/internal/bundle"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/receipt"
)

// What proves a received change set (T-005). The bundle's own digest only
// says it arrived whole; anyone can recompute it. A change set proves
// itself through a signed receipt that names it: the receipt's
// change-set digest, base digest, stage and workspace equal the ones the
// change set carries, and its signature verifies. The exporter signs such
// a receipt (kind "export") for every export; the receipts of the stage's
// runs name the change set as it was after each run.

// ProofStatus says what proves an imported change set.
type ProofStatus string

// Proof statuses, strongest first.
const (
	// ProofTrusted: a receipt that names the change set is signed by a
	// key of the trust file, or by this state root's own key.
	ProofTrusted ProofStatus = "trusted"
	// ProofSigned: a receipt that names the change set is signed, and the
	// signature verifies, but with a key this side does not trust: the
	// change set is as that key's holder made it, whoever they are.
	ProofSigned ProofStatus = "signed"
	// ProofUnsigned: no receipt that names the change set carries a
	// signature that verifies: nothing proves where it was made.
	ProofUnsigned ProofStatus = "unsigned"
)

func (p ProofStatus) rank() int {
	switch p {
	case ProofTrusted:
		return 2
	case ProofSigned:
		return 1
	}
	return 0
}

// ProofRequirement is what an import requires of the proof.
type ProofRequirement int

// Requirements, weakest first.
const (
	RequireNothing ProofRequirement = 0
	RequireSigned  ProofRequirement = 1 // a signature that verifies
	RequireTrusted ProofRequirement = 2 // by a trusted key
)

// ImportProof is what an import found about who made the change set.
type ImportProof struct {
	Status ProofStatus `json:"status"`
	// Receipt is the receipt that proves the change set best ("" when
	// none names it); KeyID the key that signed it, KeyName its name in
	// the trust file (or OwnKeyName).
	Receipt string `json:"receipt,omitempty"`
	KeyID   string `json:"key_id,omitempty"`
	KeyName string `json:"key_name,omitempty"`
	Trusted bool   `json:"trusted"`
	// Receipts says, for every receipt the change set carries, whether it
	// names this change set and who signed it.
	Receipts []ReceiptProof `json:"receipts"`
}

// ReceiptProof is what an import found about one receipt.
type ReceiptProof struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// ChangesetDigest is the change set the receipt names;
	// NamesChangeset whether that is the imported one (with its base,
	// stage and workspace).
	ChangesetDigest string `json:"changeset_digest"`
	NamesChangeset  bool   `json:"names_changeset"`
	// Signed: a signature verified with KeyID. When a signature names a
	// key the change set does not carry and this side does not know,
	// KeyID names it and Signed is false.
	Signed  bool   `json:"signed"`
	KeyID   string `json:"key_id,omitempty"`
	Trusted bool   `json:"trusted"`
	KeyName string `json:"key_name,omitempty"`
}

// proveBundle checks the receipts b carries against its content and
// against the keys this side knows, and refuses as io.corrupt a change
// set its receipts do not name, or that only unsigned receipts name while
// signed ones name another; then it applies req (refusal.unverified).
func (w *Workspace) proveBundle(b *bundle.Bundle, req ProofRequirement) (*ImportProof, error) {
	ring, err := w.keyRing(b.Keys)
	if err != nil {
		return nil, err
	}
	o := &b.Origin
	p := &ImportProof{Status: ProofUnsigned, Receipts: []ReceiptProof{}}
	named, signedOther := false, false
	for i, body := range b.Receipts {
		r, err := receipt.CheckContent(body)
		if err != nil {
			if failpoint.Disabled("bundle-digest") {
				continue // negative control of X-002
			}
			return nil, &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing the change set: receipt %d: %v", i+1, err), Err: err}
		}
		rp, err := ring.check(body, r)
		if err != nil {
			return nil, err
		}
		rp.NamesChangeset = r.ChangesetDigest == o.ChangesetDigest && r.BaseDigest == o.BaseDigest &&
			r.Tx == o.Stage && r.Workspace == o.Workspace
		switch {
		case rp.NamesChangeset:
			named = true
			if st := rp.status(); st.rank() >= p.Status.rank() {
				p.Status, p.Receipt, p.KeyID, p.KeyName, p.Trusted = st, rp.ID, rp.KeyID, rp.KeyName, rp.Trusted
			}
		case rp.Signed:
			signedOther = true
		}
		p.Receipts = append(p.Receipts, rp)
	}
	if err := p.bound(len(b.Receipts), named, signedOther, o.ChangesetDigest); err != nil {
		return nil, err
	}
	if err := p.keysUsed(b.Keys); err != nil {
		return nil, err
	}
	return p, p.meets(req)
}

// keysUsed refuses a change set that carries a key none of its receipts'
// signatures verified with: the exporter carries only the keys that
// signed, so such a key was put there or changed on the way.
func (p *ImportProof) keysUsed(keys [][]byte) error {
	if failpoint.Disabled("receipt-binding") {
		return nil // negative control of T-005
	}
	for _, k := range keys {
		id := receipt.KeyID(ed25519.PublicKey(k))
		if !slices.ContainsFunc(p.Receipts, func(rp ReceiptProof) bool { return rp.Signed && rp.KeyID == id }) {
			return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing the change set: it carries key %s, which signed none of its receipts: the key was changed or added on the way", id)}
		}
	}
	return nil
}

// status is what one receipt proves.
func (rp *ReceiptProof) status() ProofStatus {
	switch {
	case rp.Signed && rp.Trusted:
		return ProofTrusted
	case rp.Signed:
		return ProofSigned
	}
	return ProofUnsigned
}

// bound refuses a change set whose receipts do not vouch for it: it
// carries receipts but none names it, or only unsigned ones name it while
// a signed one names another change set (content changed after it was
// signed, with a receipt forged to match).
func (p *ImportProof) bound(receipts int, named, signedOther bool, digest string) error {
	if failpoint.Disabled("receipt-binding") {
		return nil // negative control of T-005
	}
	switch {
	case receipts > 0 && !named:
		return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing the change set: none of its %d receipts names its content (change set %s): it was changed after its receipts were made", receipts, digest)}
	case p.Status == ProofUnsigned && signedOther:
		return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing the change set: its signed receipts name another change set than its content (%s), and only an unsigned receipt names this one: it was changed after it was signed", digest)}
	}
	return nil
}

// meets refuses a proof weaker than req.
func (p *ImportProof) meets(req ProofRequirement) error {
	if int(req) <= p.Status.rank() || failpoint.Disabled("import-require") {
		return nil
	}
	want := "signed"
	if req == RequireTrusted {
		want = "signed by a key you trust"
	}
	e := &Error{Code: CodeUnverified}
	switch p.Status {
	case ProofSigned:
		e.Message = fmt.Sprintf("refusing the change set: it must be %s, and receipt %s is signed by key %s, which your trust file does not list", want, p.Receipt, p.KeyID)
		e.Repairs = []Repair{{Action: RepairTrustKey, Detail: fmt.Sprintf("once you know key %s is the signer's, add its public key to your trust file", p.KeyID)}}
	default:
		e.Message = fmt.Sprintf("refusing the change set: it must be %s, and no receipt that names it carries a signature that verifies", want)
	}
	return e
}

// check verifies the signatures of one receipt body with the ring. Only
// a signature that names its key (as wtx writes them) and whose key the
// ring holds is checked: the best one decides (a trusted key over an
// untrusted one). A signature that names a key the ring holds and does
// not verify is an altered receipt (io.corrupt). r is the receipt the
// body carries.
func (k *keyRing) check(body []byte, r *Receipt) (ReceiptProof, error) {
	rp := ReceiptProof{ID: r.ID, Kind: r.Kind, ChangesetDigest: r.ChangesetDigest}
	var env receipt.Envelope
	if err := json.Unmarshal(body, &env); err != nil || env.PayloadType == "" {
		return rp, nil // a bare receipt: unsigned
	}
	for _, sig := range env.Signatures {
		key, ok := k.byID[sig.KeyID]
		if !ok {
			if rp.KeyID == "" && receipt.IsDigest(sig.KeyID) {
				rp.KeyID = sig.KeyID // a key nobody here knows: named, not checked
			}
			continue
		}
		one := receipt.Envelope{PayloadType: env.PayloadType, Payload: env.Payload, Signatures: []receipt.Signature{sig}}
		data, _ := json.Marshal(one) // an envelope always encodes
		if _, err := receipt.Verify(data, receipt.VerifyOptions{PublicKey: key.pub}); err != nil {
			return rp, &Error{Code: CodeCorrupt, Err: err, Message: fmt.Sprintf("refusing the change set: receipt %s's signature does not verify with key %s it names: the receipt was altered", r.ID, sig.KeyID)}
		}
		if !rp.Signed || (key.trusted && !rp.Trusted) {
			rp.Signed, rp.KeyID, rp.Trusted, rp.KeyName = true, sig.KeyID, key.trusted, key.name
		}
	}
	return rp, nil
}

// encodeKeys and decodeKeys carry an imported stage's signer keys in its
// configuration, so that a later export carries them on.
func encodeKeys(keys [][]byte) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, base64.StdEncoding.EncodeToString(k))
	}
	return out
}

func decodeKeys(keys []string) [][]byte {
	var out [][]byte
	for _, s := range keys {
		if k, err := base64.StdEncoding.DecodeString(s); err == nil && len(k) == ed25519.PublicKeySize {
			out = append(out, k)
		}
	}
	return out
}
