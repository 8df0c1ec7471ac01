package wtx

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strings"
	"unicode"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// VerifyCheck names one check VerifyReceipt made, and passed.
type VerifyCheck string

// The checks of a receipt, in the order they are made.
const (
	// CheckSignature: a signature over the whole statement verifies with
	// the key (VerifyOptions.PublicKey, or one the state root keeps).
	CheckSignature VerifyCheck = "signature"
	// CheckStatement: an in-toto Statement v1 of a wtx receipt, in a DSSE
	// envelope, with nothing unknown in either.
	CheckStatement VerifyCheck = "statement"
	// CheckFields: every field C-007 requires, nothing unknown, digests
	// well formed.
	CheckFields VerifyCheck = "fields"
	// CheckDigest: the receipt's digest matches its content.
	CheckDigest VerifyCheck = "digest"
	// CheckSubjects: the statement's subjects are the receipt's digests.
	CheckSubjects VerifyCheck = "subjects"
	// CheckDisclaimer: not_transactional holds every entry the receipt's
	// kind, backend, shared paths and containment require.
	CheckDisclaimer VerifyCheck = "disclaimer"
	// CheckReadable: the readable receipt beside the envelope (a --json
	// answer's "receipt") is the signed one, field for field, and the
	// answer says nothing else about it.
	CheckReadable VerifyCheck = "readable-receipt"
)

// KeySource says which key verified a signature.
type KeySource string

// Key sources.
const (
	KeyGiven   KeySource = "given"   // VerifyOptions.PublicKey
	KeyCurrent KeySource = "current" // the state root's receipt key
	KeyRetired KeySource = "retired" // an older key whose public half the state root keeps
)

// VerifyReceipt checks a receipt document: a signed envelope (as 'wtx
// receipt' prints it), a --json answer carrying one, or a bare receipt.
// A signed receipt is valid when a signature verifies with the key, the
// statement carries the receipt with every field C-007 requires, its
// digest and subjects match its content, and its not_transactional list
// holds every entry its kind, backend, shared paths and containment
// require; in a --json answer, the readable receipt beside the envelope
// must be the signed one (nothing outside the envelope is signed, so a
// document that says otherwise beside it is refused). Without
// VerifyOptions.PublicKey the keys are the state root's: its current key
// and every older one its keyring keeps. Checked lists what was checked. A
// bare receipt that passes the same checks is only "unsigned": anyone can
// recompute its digest, so VerifyReceipt reports it with an error
// (CodeReceiptInvalid) that says so.
func VerifyReceipt(data []byte, opts VerifyOptions) (*ReceiptVerification, error) {
	if err := unambiguousJSON(data); err != nil {
		return nil, err
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
	}
	doc, beside, err := answerParts(data, raw)
	if err != nil {
		return nil, err
	}
	raw = nil
	if err := json.Unmarshal(doc, &raw); err != nil {
		return nil, errorf(CodeReceiptInvalid, "not a receipt or an envelope: %v", err)
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
	v := &ReceiptVerification{Receipt: r, Status: ReceiptUnsigned, Checked: []VerifyCheck{CheckFields, CheckDigest, CheckDisclaimer}}
	return v, &Error{Code: CodeReceiptInvalid, Message: fmt.Sprintf("receipt %s is unsigned: it is complete and its digest matches, but anyone can recompute that digest; it is not valid as proof", r.ID)}
}

// verifySigned checks the envelope env and, when beside is not nil, that
// the readable receipt beside it is the signed one.
func verifySigned(env, beside []byte, opts VerifyOptions) (*ReceiptVerification, error) {
	keys, kerr := verifyKeys(opts)
	if len(keys) == 0 {
		if kerr == nil {
			kerr = errors.New("the state root keeps no key")
		}
		ke := AsError(kerr)
		return nil, &Error{Code: CodeReceiptInvalid, Err: kerr, Repairs: ke.Repairs,
			Message: fmt.Sprintf("no receipt key of your own to check the signature with (%s): pass the signer's public key with --key", ke.Message)}
	}
	k := pickKey(env, keys)
	r, id, err := verifyEnvelope(env, k.pub)
	if err != nil {
		if e := AsError(err); kerr != nil {
			e.Message += fmt.Sprintf(" (checked with the %d key(s) the state root keeps; its current key cannot be used: %s)", len(keys), AsError(kerr).Message)
		}
		return nil, err
	}
	if err := checkDisclaimer(r); err != nil {
		return nil, err
	}
	v := &ReceiptVerification{Receipt: r, Status: ReceiptValid, KeyID: id, KeySource: k.source,
		Checked: []VerifyCheck{CheckSignature, CheckStatement, CheckFields, CheckDigest, CheckSubjects, CheckDisclaimer}}
	if beside != nil && !failpoint.Disabled("receipt-readable") {
		if err := sameAsSigned(beside, env, r.ID); err != nil {
			return nil, err
		}
		v.Checked = append(v.Checked, CheckReadable)
	}
	return v, nil
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
			return nil, nil, errorf(CodeReceiptInvalid, "the answer carries neither an envelope nor a receipt")
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
			return nil, nil, errorf(CodeReceiptInvalid, "the answer carries %q beside the envelope, which no signature covers: refused, so that nothing unsigned passes for part of the receipt", k)
		}
	}
	for k, want := range map[string]string{"status": `"ok"`, "command": `"receipt"`, "signed": `true`} {
		if v, ok := raw[k]; ok && strings.TrimSpace(string(v)) != want {
			return nil, nil, errorf(CodeReceiptInvalid, "the answer beside the envelope says %s is %s, not %s: refused", k, v, want)
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
		return errorf(CodeReceiptInvalid, "envelope does not parse: %v", err)
	}
	var st struct {
		Predicate json.RawMessage `json:"predicate"`
	}
	if err := json.Unmarshal(e.Payload, &st); err != nil {
		return errorf(CodeReceiptInvalid, "statement does not parse: %v", err)
	}
	signed, err := genericJSON(st.Predicate)
	if err != nil {
		return errorf(CodeReceiptInvalid, "the signed receipt does not parse: %v", err)
	}
	shown, err := genericJSON(beside)
	if err != nil {
		return errorf(CodeReceiptInvalid, "the readable receipt beside the envelope does not parse: %v", err)
	}
	sm, sok := signed.(map[string]any)
	hm, hok := shown.(map[string]any)
	if !sok || !hok {
		return errorf(CodeReceiptInvalid, "the readable receipt beside the envelope of %s is not an object", id)
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
	return errorf(CodeReceiptInvalid, "the readable receipt beside the envelope is not the signed receipt %s: it differs in %s; only the envelope is signed, and what is shown beside it must say the same",
		id, strings.Join(differ, ", "))
}

// unambiguousJSON refuses a document in which an object holds two names
// that Go's decoder takes for one (equal under Unicode case folding):
// readers disagree on which one counts (Go takes the last and ignores
// case; jq and others take the exact name), so what wtx checked need not
// be what its reader sees.
func unambiguousJSON(data []byte) error {
	if failpoint.Disabled("receipt-ambiguous") {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct {
		object bool
		names  map[string]string
		key    bool // the next string token is a name
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return errorf(CodeReceiptInvalid, "not a JSON document: %v", err)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.object && top.key {
			if prev, ok := top.names[foldName(name)]; ok {
				return errorf(CodeReceiptInvalid, "the document names %q and %q in one object: readers differ on which counts, so it is refused", prev, name)
			}
			top.names[foldName(name)] = name
			top.key = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{object: true, names: map[string]string{}, key: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
		if len(stack) > 0 && stack[len(stack)-1].object {
			stack[len(stack)-1].key = true // a value ended: a name or the end comes next
		}
	}
}

// foldName is name with each letter replaced by the smallest of its
// Unicode simple case folding orbit: two names fold equal exactly when
// strings.EqualFold says so, which is how Go's decoder matches them.
func foldName(name string) string {
	var b strings.Builder
	for _, r := range name {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b.WriteRune(m)
	}
	return b.String()
}

// genericJSON decodes one JSON value, numbers as written.
func genericJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one value")
	}
	return v, nil
}

// verifyKey is a key a signature may be checked with.
type verifyKey struct {
	pub    ed25519.PublicKey
	source KeySource
}

// verifyKeys are the keys to check a signature with: the one given, or
// the state root's current key and the older ones its keyring keeps. A
// current key that cannot be used is returned as the error beside the
// others.
func verifyKeys(opts VerifyOptions) ([]verifyKey, error) {
	if opts.PublicKey != nil {
		return []verifyKey{{opts.PublicKey, KeyGiven}}, nil
	}
	if opts.StateDir == "" {
		return nil, errorf(CodeUsage, "no public key to check the signature with")
	}
	infos, err := ReceiptKeys(opts.StateDir)
	var out []verifyKey
	for _, k := range infos {
		src := KeyRetired
		if k.Current {
			src = KeyCurrent
		}
		out = append(out, verifyKey{k.PublicKey, src})
	}
	return out, err
}

// pickKey returns the key of keys a signature of env verifies with, or
// the first key when none does (its check then says why).
func pickKey(env []byte, keys []verifyKey) verifyKey {
	var e Envelope
	if err := json.Unmarshal(env, &e); err == nil {
		for _, k := range keys {
			if checkSignature(&e, k.pub) == nil {
				return k
			}
		}
	}
	return keys[0]
}

// checkReceiptJSON checks a bare receipt: every field C-007 requires is
// present, nothing else is, the digests are digests and its own digest
// matches its content.
func checkReceiptJSON(data []byte) (*Receipt, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
	}
	var missing []string
	for _, f := range receiptFields {
		if _, ok := raw[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, errorf(CodeReceiptInvalid, "receipt lacks %s", strings.Join(missing, ", "))
	}
	var rj receiptJSON
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return nil, errorf(CodeReceiptInvalid, "receipt does not parse: %v", err)
	}
	r, err := rj.receipt()
	if err != nil {
		return nil, errorf(CodeReceiptInvalid, "receipt does not parse: %v", err)
	}
	for _, d := range []struct{ name, v string }{{"base_digest", r.BaseDigest}, {"result_digest", r.ResultDigest}, {"changeset_digest", r.ChangesetDigest}} {
		if r.Kind != "undo" || d.name == "changeset_digest" {
			if !hexDigest(d.v) {
				return nil, errorf(CodeReceiptInvalid, "receipt %s: %s is not a digest: %q", r.ID, d.name, d.v)
			}
		}
	}
	if got := r.ComputeDigest(); got != r.Digest {
		return nil, errorf(CodeReceiptInvalid, "receipt %s: digest mismatch: it says %s, its content gives %s", r.ID, r.Digest, got)
	}
	return &r, nil
}

// receiptFields are the JSON fields every receipt must carry.
var receiptFields = []string{"schema_version", "id", "kind", "workspace", "tx", "op_id", "created_at", "backend",
	"command", "exit_code", "base_digest", "result_digest", "changeset_digest", "counts", "paths", "refusal",
	"exclusions", "protections", "protected_paths", "approved", "not_transactional", "digest"}
