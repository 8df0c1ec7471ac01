package receipt

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Status says what a verification found.
type Status string

// Verification statuses.
const (
	// StatusValid: signed by the key, complete, digests and disclaimer hold.
	StatusValid Status = "valid"
	// StatusUnsigned: complete and its digest matches, but anyone can
	// recompute that digest: not valid as proof.
	StatusUnsigned Status = "unsigned"
)

// KeySource says which key verified a signature.
type KeySource string

// Key sources.
const (
	KeyGiven   KeySource = "given"   // VerifyOptions.PublicKey
	KeyCurrent KeySource = "current" // a keyring's current key
	KeyRetired KeySource = "retired" // an older key a keyring keeps
)

// Key is a key a signature may be checked with, and where it came from.
type Key struct {
	Public ed25519.PublicKey
	Source KeySource
}

// VerifyOptions say which keys check a signature.
type VerifyOptions struct {
	// PublicKey checks the signature (source KeyGiven).
	PublicKey ed25519.PublicKey
	// Keyring, when PublicKey is nil, gives the keys to try, in order
	// (the first whose signature verifies is used). Verify calls it only
	// for a signed document. Keys it returns beside an error are still
	// tried.
	Keyring func() ([]Key, error)
}

// Verification is what Verify found.
type Verification struct {
	Receipt *Receipt
	Status  Status
	// KeyID names the key whose signature verified ("" when unsigned),
	// KeySource where that key came from.
	KeyID     string
	KeySource KeySource
	// Checked lists the checks made, all passed.
	Checked []Check
}

// Verify checks a receipt document: a signed envelope (as 'wtx receipt'
// prints it), a --json answer carrying one, or a bare receipt. A signed
// receipt is valid when a signature verifies with the key, the statement
// carries the receipt with every field C-007 requires, its digest and
// subjects match its content, and its not_transactional list holds every
// entry its kind, backend, shared paths and containment require; in a
// --json answer, the readable receipt beside the envelope must be the
// signed one (nothing outside the envelope is signed, so a document that
// says otherwise beside it is refused). Checked lists what was checked.
//
// A refusal is an *Error of class ErrInvalid (ErrSignature when no
// signature verifies); a signed document and no key is an ErrNoKey. A
// bare receipt that passes the same checks is only StatusUnsigned: anyone
// can recompute its digest, so Verify returns its Verification with an
// ErrUnsigned that says so.
func Verify(data []byte, opts VerifyOptions) (*Verification, error) {
	if err := unambiguousJSON(data, ""); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, invalidf("", "not a receipt: %v", err)
	}
	doc, beside, err := answerParts(data, raw)
	if err != nil {
		return nil, err
	}
	raw = nil
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, invalidf("", "not a receipt or an envelope: %v", err)
	}
	if isEnvelope(raw) {
		return verifySigned(doc, beside, opts)
	}
	r, err := checkReceiptJSON(doc)
	if err != nil {
		return nil, err
	}
	if err := checkDisclaimer(r); err != nil {
		return nil, err
	}
	v := &Verification{Receipt: r, Status: StatusUnsigned, Checked: []Check{CheckFields, CheckDigest, CheckDisclaimer}}
	return v, &Error{Check: CheckSignature, class: ErrUnsigned,
		Message: fmt.Sprintf("receipt %s is unsigned: it is complete and its digest matches, but anyone can recompute that digest; it is not valid as proof", r.ID)}
}

// verifySigned checks the envelope env and, when beside is not nil, that
// the readable receipt beside it is the signed one.
func verifySigned(env, beside []byte, opts VerifyOptions) (*Verification, error) {
	keys, kerr := opts.keys()
	if len(keys) == 0 {
		return nil, &Error{class: ErrNoKey, Err: kerr, Message: "no public key to check the signature with"}
	}
	k := pickKey(env, keys)
	r, err := checkEnvelope(env, k.Public)
	if err != nil {
		return nil, err
	}
	if err := checkDisclaimer(r); err != nil {
		return nil, err
	}
	v := &Verification{Receipt: r, Status: StatusValid, KeyID: KeyID(k.Public), KeySource: k.Source,
		Checked: []Check{CheckSignature, CheckStatement, CheckFields, CheckDigest, CheckSubjects, CheckDisclaimer}}
	if beside != nil && !failpoint.Disabled("receipt-readable") {
		if err := sameAsSigned(beside, env, r.ID); err != nil {
			return nil, err
		}
		v.Checked = append(v.Checked, CheckReadable)
	}
	return v, nil
}

// keys are the keys to check a signature with.
func (o VerifyOptions) keys() ([]Key, error) {
	if o.PublicKey != nil {
		return []Key{{o.PublicKey, KeyGiven}}, nil
	}
	if o.Keyring == nil {
		return nil, nil
	}
	return o.Keyring()
}

// pickKey returns the key of keys a signature of env verifies with, or
// the first key when none does (its check then says why).
func pickKey(env []byte, keys []Key) Key {
	var e Envelope
	if err := json.Unmarshal(env, &e); err == nil {
		for _, k := range keys {
			if e.VerifySignature(k.Public) == nil {
				return k
			}
		}
	}
	return keys[0]
}

// answerFields are the members a --json answer of 'receipt' (or an
// element of 'receipt --all') may carry beside its envelope.
var answerFields = map[string]bool{"schema_version": true, "status": true, "command": true, "receipt": true, "envelope": true, "signed": true}

// answerParts splits a receipt document. A --json answer (or an element
// of 'receipt --all') gives its envelope and the readable receipt beside
// it (beside: nil when there is none), or, without an envelope, its bare
// receipt. Anything else is the document itself. An answer that carries
// anything beside its envelope that no signature covers and that is not
// the readable receipt, or that calls itself what it is not, is refused.
func answerParts(data []byte, raw map[string]json.RawMessage) (doc, beside []byte, err error) {
	env, hasEnv := raw["envelope"]
	rec, hasRec := raw["receipt"]
	switch {
	case !hasEnv && !hasRec:
		return data, nil, nil
	case !hasEnv || string(env) == "null":
		if !hasRec || string(rec) == "null" {
			return nil, nil, invalidf("", "the answer carries neither an envelope nor a receipt")
		}
		return rec, nil, nil
	}
	if failpoint.Disabled("receipt-readable") {
		return env, nil, nil
	}
	var names []string
	for k := range raw {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !answerFields[k] {
			return nil, nil, invalidf(CheckReadable, "the answer carries %q beside the envelope, which no signature covers: refused, so that nothing unsigned passes for part of the receipt", k)
		}
	}
	for k, want := range map[string]string{"status": `"ok"`, "command": `"receipt"`, "signed": `true`} {
		if v, ok := raw[k]; ok && strings.TrimSpace(string(v)) != want {
			return nil, nil, invalidf(CheckReadable, "the answer beside the envelope says %s is %s, not %s: refused", k, v, want)
		}
	}
	if hasRec && string(rec) != "null" {
		beside = rec
	}
	return env, beside, nil
}

// sameAsSigned checks that the readable receipt beside an envelope is the
// receipt its statement signs, field for field.
func sameAsSigned(beside, env []byte, id string) error {
	var e Envelope
	if err := json.Unmarshal(env, &e); err != nil {
		return invalidf(CheckReadable, "envelope does not parse: %v", err)
	}
	var st struct {
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(e.Payload, &st); err != nil {
		return invalidf(CheckReadable, "statement does not parse: %v", err)
	}
	signed, err := genericJSON(st.Predicate)
	if err != nil {
		return invalidf(CheckReadable, "the signed receipt does not parse: %v", err)
	}
	shown, err := genericJSON(beside)
	if err != nil {
		return invalidf(CheckReadable, "the readable receipt beside the envelope does not parse: %v", err)
	}
	sm, sok := signed.(map[string]any)
	hm, hok := shown.(map[string]any)
	if !sok || !hok {
		return invalidf(CheckReadable, "the readable receipt beside the envelope of %s is not an object", id)
	}
	var differ []string
	for k := range sm {
		if v, ok := hm[k]; !ok || !reflect.DeepEqual(sm[k], v) {
			differ = append(differ, k)
		}
	}
	for k := range hm {
		if _, ok := sm[k]; !ok {
			differ = append(differ, k)
		}
	}
	if len(differ) == 0 {
		return nil
	}
	sort.Strings(differ)
	return invalidf(CheckReadable, "the readable receipt beside the envelope is not the signed receipt %s: it differs in %s; only the envelope is signed, and what is shown beside it must say the same",
		id, strings.Join(differ, ", "))
}
