package wtx

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/stage"
)

// A signed receipt is an in-toto Statement v1 whose predicate is the
// receipt, in a DSSE envelope signed with the user's receipt key.
const (
	// PayloadTypeInToto is the DSSE payload type of an in-toto statement.
	PayloadTypeInToto = "application/vnd.in-toto+json"
	// StatementTypeV1 is the in-toto Statement's _type.
	StatementTypeV1 = "https://in-toto.io/Statement/v1"
	// ReceiptPredicateType names wtx's receipt as an in-toto predicate.
	ReceiptPredicateType = "https://wtx.dev/attestation/receipt/v1"
)

// Names of the receipt key in the state root.
const (
	keysDirName       = "keys"
	receiptKeyName    = "receipt-ed25519.pem"
	receiptKeyPEMType = "PRIVATE KEY"
	publicKeyPEMType  = "PUBLIC KEY"
)

// Envelope is a DSSE envelope. Payload and Sig are bytes: JSON carries them
// in standard base64, as DSSE does.
type Envelope struct {
	PayloadType string      `json:"payloadType"`
	Payload     []byte      `json:"payload"`
	Signatures  []Signature `json:"signatures"`
}

// Signature is one signature of an Envelope.
type Signature struct {
	KeyID string `json:"keyid"`
	Sig   []byte `json:"sig"`
}

// Statement is an in-toto Statement v1 carrying a receipt.
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Receipt   `json:"predicate"`
}

// Subject is an in-toto resource descriptor: a name and its digests by
// algorithm.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// PAE is DSSE's pre-authentication encoding of a payload: what is signed.
func PAE(payloadType string, payload []byte) []byte {
	var b bytes.Buffer
	b.WriteString("DSSEv1 ")
	b.WriteString(strconv.Itoa(len(payloadType)))
	b.WriteByte(' ')
	b.WriteString(payloadType)
	b.WriteByte(' ')
	b.WriteString(strconv.Itoa(len(payload)))
	b.WriteByte(' ')
	b.Write(payload)
	return b.Bytes()
}

// receiptSubjects are the statement's subjects: the digests a receipt
// attests (the tree it left, the change set, the tree it started from).
func receiptSubjects(r Receipt) []Subject {
	out := []Subject{}
	for _, s := range []struct{ name, d string }{
		{"result", r.ResultDigest}, {"changeset", r.ChangesetDigest}, {"base", r.BaseDigest},
	} {
		if hexd, ok := strings.CutPrefix(s.d, "sha256:"); ok && hexd != "" {
			out = append(out, Subject{Name: s.name, Digest: map[string]string{"sha256": hexd}})
		}
	}
	return out
}

// KeyID names a public key: the SHA-256 of its PKIX encoding.
func KeyID(pub ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil { // an ed25519 key always encodes
		return ""
	}
	return fmt.Sprintf("sha256:%x", sha256.Sum256(der))
}

// PublicKeyPEM encodes pub as a PEM "PUBLIC KEY" (PKIX), which openssl
// reads.
func PublicKeyPEM(pub ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub) // an ed25519 key always encodes
	return pem.EncodeToMemory(&pem.Block{Type: publicKeyPEMType, Bytes: der})
}

// ParsePublicKey reads an ed25519 public key in PEM (PKIX) form.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != publicKeyPEMType {
		return nil, errorf(CodeUsage, "not a PEM public key (want -----BEGIN PUBLIC KEY-----, as 'wtx receipt key' prints)")
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, errorf(CodeUsage, "public key does not parse: %v", err)
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, errorf(CodeUsage, "public key is %T, want ed25519", k)
	}
	return pub, nil
}

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

// signReceipt wraps r in a signed envelope.
func signReceipt(priv ed25519.PrivateKey, r Receipt) (*Envelope, error) {
	st := Statement{Type: StatementTypeV1, Subject: receiptSubjects(r), PredicateType: ReceiptPredicateType, Predicate: r}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(priv, PAE(PayloadTypeInToto, payload))
	return &Envelope{PayloadType: PayloadTypeInToto, Payload: payload,
		Signatures: []Signature{{KeyID: KeyID(priv.Public().(ed25519.PublicKey)), Sig: sig}}}, nil
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
	env, err := signReceipt(priv, r)
	if err != nil {
		return nil, AsError(err)
	}
	return json.Marshal(env)
}

// ReceiptRecord is a stored receipt: the receipt and, when signed, its
// envelope (the document to hand to someone else).
type ReceiptRecord struct {
	Receipt  Receipt
	Envelope *Envelope
}

// decodeReceiptBody reads a stored receipt body: an envelope or a bare
// (older, unsigned) receipt.
func decodeReceiptBody(body []byte) (ReceiptRecord, error) {
	var probe struct {
		PayloadType *string `json:"payloadType"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return ReceiptRecord{}, err
	}
	if probe.PayloadType == nil {
		var r Receipt
		err := json.Unmarshal(body, &r)
		return ReceiptRecord{Receipt: r}, err
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return ReceiptRecord{}, err
	}
	var st Statement
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		return ReceiptRecord{}, err
	}
	return ReceiptRecord{Receipt: st.Predicate, Envelope: &env}, nil
}

// VerifyOptions say how to check a receipt.
type VerifyOptions struct {
	// PublicKey checks the signature; nil: the state root's own key
	// (StateDir must then be set).
	PublicKey ed25519.PublicKey
	StateDir  string
}

// ReceiptStatus says what a verification found.
type ReceiptStatus string

// Receipt statuses.
const (
	// ReceiptValid: signed by the key, complete, digests and disclaimer hold.
	ReceiptValid ReceiptStatus = "valid"
	// ReceiptUnsigned: complete and its digest matches, but anyone can
	// recompute that digest: not valid as proof.
	ReceiptUnsigned ReceiptStatus = "unsigned"
)

// ReceiptVerification is what VerifyReceipt found.
type ReceiptVerification struct {
	Receipt *Receipt
	Status  ReceiptStatus
	// KeyID names the key whose signature verified ("" when unsigned),
	// KeySource where that key came from.
	KeyID     string
	KeySource KeySource
	// Checked lists the checks made, all passed.
	Checked []VerifyCheck
}

// isEnvelope reports whether raw holds a DSSE envelope.
func isEnvelope(raw map[string]json.RawMessage) bool {
	_, ok := raw["payloadType"]
	return ok
}

// verifyEnvelope checks env's signature with pub (none when pub is nil)
// and its statement; it returns the receipt the statement carries.
func verifyEnvelope(data []byte, pub ed25519.PublicKey) (*Receipt, string, error) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, "", errorf(CodeReceiptInvalid, "envelope does not parse: %v", err)
	}
	if env.PayloadType != PayloadTypeInToto {
		return nil, "", errorf(CodeReceiptInvalid, "envelope's payloadType is %q, want %q", env.PayloadType, PayloadTypeInToto)
	}
	if len(env.Signatures) == 0 {
		return nil, "", errorf(CodeReceiptInvalid, "envelope carries no signature")
	}
	if err := unambiguousJSON(env.Payload); err != nil {
		return nil, "", err
	}
	id := ""
	if pub != nil {
		id = KeyID(pub)
		if err := checkSignature(&env, pub); err != nil && !failpoint.Disabled("receipt-signature") {
			return nil, "", err
		}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(env.Payload, &raw); err != nil {
		return nil, "", errorf(CodeReceiptInvalid, "statement does not parse: %v", err)
	}
	var head struct {
		Type          string          `json:"_type"`
		Subject       []Subject       `json:"subject"`
		PredicateType string          `json:"predicateType"`
		Predicate     json.RawMessage `json:"predicate"`
	}
	dec = json.NewDecoder(bytes.NewReader(env.Payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&head); err != nil {
		return nil, "", errorf(CodeReceiptInvalid, "statement does not parse: %v", err)
	}
	if head.Type != StatementTypeV1 || head.PredicateType != ReceiptPredicateType {
		return nil, "", errorf(CodeReceiptInvalid, "statement is %q with predicate %q, want %q with %q", head.Type, head.PredicateType, StatementTypeV1, ReceiptPredicateType)
	}
	r, err := checkReceiptJSON(head.Predicate)
	if err != nil {
		return nil, "", err
	}
	want, _ := json.Marshal(receiptSubjects(*r))         // subjects always encode
	got, _ := json.Marshal(nonNilSubjects(head.Subject)) // as above
	if !bytes.Equal(want, got) {
		return nil, "", errorf(CodeReceiptInvalid, "receipt %s: the statement's subjects %s are not its digests %s", r.ID, got, want)
	}
	return r, id, nil
}

// checkSignature checks that a signature of env verifies with pub.
func checkSignature(env *Envelope, pub ed25519.PublicKey) error {
	id := KeyID(pub)
	pae := PAE(env.PayloadType, env.Payload)
	ok := false
	for _, s := range env.Signatures {
		if (s.KeyID == "" || s.KeyID == id) && ed25519.Verify(pub, pae, s.Sig) {
			ok = true
			break
		}
	}
	if !ok {
		return errorf(CodeReceiptInvalid, "no signature of the envelope verifies with key %s: the receipt was changed or signed by another key", id)
	}
	return nil
}

// receiptContent checks a stored or exchanged receipt body without its
// signature (the signer's key may be another machine's): the statement,
// the receipt's fields, digest, subjects and disclaimer.
func receiptContent(body []byte) (*Receipt, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
	}
	var r *Receipt
	var err error
	if isEnvelope(raw) {
		r, _, err = verifyEnvelope(body, nil)
	} else {
		r, err = checkReceiptJSON(body)
	}
	if err != nil {
		return nil, err
	}
	if err := checkDisclaimer(r); err != nil {
		return nil, err
	}
	return r, nil
}

func nonNilSubjects(s []Subject) []Subject {
	if s == nil {
		return []Subject{}
	}
	return s
}

// requiredDisclaimer lists the not_transactional entries r must carry,
// given its kind, backend, shared paths and containment.
func requiredDisclaimer(r *Receipt) []string {
	var out []string
	for _, item := range NotTransactional {
		if item == NotOutliving && r.Kind == "run" && containmentComplete(r.Containment) {
			continue
		}
		out = append(out, item)
	}
	if r.Kind == "run" && (r.Backend == "copy" || r.Backend == "clone") && r.Containment != "" && r.Containment != string(stage.ContainPIDNamespace) {
		// Not in namespaces of its own, so not confined to its view.
		out = append(out, unconfinedDisclaimer)
	}
	for _, sh := range r.Share {
		out = append(out, sharedDisclaimer(sh))
	}
	return out
}

// checkDisclaimer refuses a receipt whose not_transactional list lacks an
// entry its backend and flags require.
func checkDisclaimer(r *Receipt) error {
	have := map[string]bool{}
	for _, s := range r.NotTransactional {
		have[s] = true
	}
	if have[legacyCopyDisclaimer] {
		have[unconfinedDisclaimer] = true // the same, as older receipts said it
	}
	var missing []string
	for _, s := range requiredDisclaimer(r) {
		if !have[s] {
			missing = append(missing, strconv.Quote(s))
		}
	}
	if len(missing) > 0 && !failpoint.Disabled("receipt-disclaimer") {
		return errorf(CodeReceiptInvalid, "receipt %s: not_transactional lacks %s (required by kind %s, backend %q, %d shared path(s), containment %q)",
			r.ID, strings.Join(missing, ", "), r.Kind, r.Backend, len(r.Share), r.Containment)
	}
	return nil
}

// hexDigest reports whether s is "sha256:" and 64 hex digits.
func hexDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
