package receipt

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
)

// Check names one check of a receipt.
type Check string

// The checks of a receipt, in the order they are made.
const (
	// CheckSignature: a signature over the whole statement verifies with
	// the key (VerifyOptions.PublicKey, or one of VerifyOptions.Keyring).
	CheckSignature Check = "signature"
	// CheckStatement: an in-toto Statement v1 of a wtx receipt, in a DSSE
	// envelope, with nothing unknown in either.
	CheckStatement Check = "statement"
	// CheckFields: every field C-007 requires, nothing unknown, digests
	// well formed.
	CheckFields Check = "fields"
	// CheckDigest: the receipt's digest matches its content.
	CheckDigest Check = "digest"
	// CheckSubjects: the statement's subjects are the receipt's digests.
	CheckSubjects Check = "subjects"
	// CheckDisclaimer: not_transactional holds every entry the receipt's
	// kind, backend, shared paths and containment require.
	CheckDisclaimer Check = "disclaimer"
	// CheckReadable: the readable receipt beside the envelope (a --json
	// answer's "receipt") is the signed one, field for field, and the
	// answer says nothing else about it.
	CheckReadable Check = "readable-receipt"
)

// CheckContent checks a stored or exchanged receipt body without its
// signature (the signer's key may be another machine's): the statement,
// the receipt's fields, digest, subjects and disclaimer. It returns the
// receipt the body carries.
func CheckContent(body []byte) (*Receipt, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, invalidf("", "not a receipt: %v", err)
	}
	var r *Receipt
	var err error
	if isEnvelope(raw) {
		r, err = checkEnvelope(body, nil)
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

// isEnvelope reports whether raw holds a DSSE envelope.
func isEnvelope(raw map[string]json.RawMessage) bool {
	_, ok := raw["payloadType"]
	return ok
}

// statementHead is a statement with its predicate still raw.
type statementHead struct {
	Type          string          `json:"_type"`
	Subject       []Subject       `json:"subject"`
	PredicateType string          `json:"predicateType"`
	Predicate     json.RawMessage `json:"predicate"`
}

// checkEnvelope checks the envelope data's signature with pub (none when
// pub is nil) and its statement; it returns the receipt the statement
// carries.
func checkEnvelope(data []byte, pub ed25519.PublicKey) (*Receipt, error) {
	var env Envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, invalidf(CheckStatement, "envelope does not parse: %v", err)
	}
	if env.PayloadType != PayloadTypeInToto {
		return nil, invalidf(CheckStatement, "envelope's payloadType is %q, want %q", env.PayloadType, PayloadTypeInToto)
	}
	if len(env.Signatures) == 0 {
		return nil, invalidf(CheckSignature, "envelope carries no signature")
	}
	if err := unambiguousJSON(env.Payload, CheckStatement); err != nil {
		return nil, err
	}
	if pub != nil {
		if err := env.VerifySignature(pub); err != nil && !failpoint.Disabled("receipt-signature") {
			return nil, err
		}
	}
	head, err := decodeStatement(env.Payload)
	if err != nil {
		return nil, err
	}
	r, err := checkReceiptJSON(head.Predicate)
	if err != nil {
		return nil, err
	}
	want, _ := json.Marshal(Subjects(*r))                // subjects always encode
	got, _ := json.Marshal(nonNilSubjects(head.Subject)) // as above
	if !bytes.Equal(want, got) {
		return nil, invalidf(CheckSubjects, "receipt %s: the statement's subjects %s are not its digests %s", r.ID, got, want)
	}
	return r, nil
}

// decodeStatement reads an in-toto statement of a wtx receipt, with
// nothing unknown in it.
func decodeStatement(payload []byte) (*statementHead, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(payload, &raw); err != nil {
		return nil, invalidf(CheckStatement, "statement does not parse: %v", err)
	}
	var head statementHead
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&head); err != nil {
		return nil, invalidf(CheckStatement, "statement does not parse: %v", err)
	}
	if head.Type != StatementTypeV1 || head.PredicateType != PredicateType {
		return nil, invalidf(CheckStatement, "statement is %q with predicate %q, want %q with %q", head.Type, head.PredicateType, StatementTypeV1, PredicateType)
	}
	return &head, nil
}

func nonNilSubjects(s []Subject) []Subject {
	if s == nil {
		return []Subject{}
	}
	return s
}

// checkReceiptJSON checks a bare receipt: every field C-007 requires is
// present, nothing else is, the digests are digests and its own digest
// matches its content.
func checkReceiptJSON(data []byte) (*Receipt, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, invalidf(CheckFields, "not a receipt: %v", err)
	}
	var missing []string
	for _, f := range requiredFields {
		if _, ok := raw[f]; !ok {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return nil, invalidf(CheckFields, "receipt lacks %s", strings.Join(missing, ", "))
	}
	var rj receiptJSON
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rj); err != nil {
		return nil, invalidf(CheckFields, "receipt does not parse: %v", err)
	}
	r, err := rj.receipt()
	if err != nil {
		return nil, invalidf(CheckFields, "receipt does not parse: %v", err)
	}
	for _, d := range []struct{ name, v string }{{"base_digest", r.BaseDigest}, {"result_digest", r.ResultDigest}, {"changeset_digest", r.ChangesetDigest}} {
		if r.Kind != "undo" || d.name == "changeset_digest" {
			if !IsDigest(d.v) {
				return nil, invalidf(CheckFields, "receipt %s: %s is not a digest: %q", r.ID, d.name, d.v)
			}
		}
	}
	if got := r.ComputeDigest(); got != r.Digest {
		return nil, invalidf(CheckDigest, "receipt %s: digest mismatch: it says %s, its content gives %s", r.ID, r.Digest, got)
	}
	return &r, nil
}

// requiredFields are the JSON fields every receipt must carry.
var requiredFields = []string{"schema_version", "id", "kind", "workspace", "tx", "op_id", "created_at", "backend",
	"command", "exit_code", "base_digest", "result_digest", "changeset_digest", "counts", "paths", "refusal",
	"exclusions", "protections", "protected_paths", "approved", "not_transactional", "digest"}

// requiredDisclaimer lists the not_transactional entries r must carry,
// given its kind, backend, shared paths and containment.
func requiredDisclaimer(r *Receipt) []string {
	var out []string
	for _, item := range NotTransactional {
		if item == NotOutliving && r.Kind == "run" && ContainmentComplete(r.Containment) {
			continue
		}
		out = append(out, item)
	}
	if r.Kind == "run" && (r.Backend == "copy" || r.Backend == "clone") && r.Containment != "" && r.Containment != containPIDNamespace {
		// Not in namespaces of its own, so not confined to its view.
		out = append(out, NotConfined)
	}
	for _, sh := range r.Share {
		out = append(out, SharedPath(sh))
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
		have[NotConfined] = true // the same, as older receipts said it
	}
	var missing []string
	for _, s := range requiredDisclaimer(r) {
		if !have[s] {
			missing = append(missing, strconv.Quote(s))
		}
	}
	if len(missing) > 0 && !failpoint.Disabled("receipt-disclaimer") {
		return invalidf(CheckDisclaimer, "receipt %s: not_transactional lacks %s (required by kind %s, backend %q, %d shared path(s), containment %q)",
			r.ID, strings.Join(missing, ", "), r.Kind, r.Backend, len(r.Share), r.Containment)
	}
	return nil
}
