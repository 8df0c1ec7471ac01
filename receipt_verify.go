package wtx

import (
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"strings"
)

// VerifyReceipt checks a receipt document: a signed envelope (as 'wtx
// receipt' prints it), a --json answer carrying one, or a bare receipt.
// A signed receipt is valid when a signature verifies with the key, the
// statement carries the receipt with every field C-007 requires, its
// digest and subjects match its content, and its not_transactional list
// holds every entry its kind, backend, shared paths and containment
// require. A bare receipt that passes the same checks is only "unsigned":
// anyone can recompute its digest, so VerifyReceipt reports it with an
// error (CodeReceiptInvalid) that says so.
func VerifyReceipt(data []byte, opts VerifyOptions) (*ReceiptVerification, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
	}
	if inner, ok := raw["envelope"]; ok && string(inner) != "null" { // a whole --json answer
		data = inner
		raw = nil
		if err := json.Unmarshal(inner, &raw); err != nil {
			return nil, errorf(CodeReceiptInvalid, "not an envelope: %v", err)
		}
	} else if inner, ok := raw["receipt"]; ok {
		data = inner
		raw = nil
		if err := json.Unmarshal(inner, &raw); err != nil {
			return nil, errorf(CodeReceiptInvalid, "not a receipt: %v", err)
		}
	}
	if isEnvelope(raw) {
		pub := opts.PublicKey
		if pub == nil {
			if opts.StateDir == "" {
				return nil, errorf(CodeUsage, "no public key to check the signature with")
			}
			priv, err := loadReceiptKey(opts.StateDir, false)
			if err != nil {
				return nil, errorf(CodeReceiptInvalid, "no receipt key of your own to check the signature with (%v): pass the signer's public key with --key", err)
			}
			pub = priv.Public().(ed25519.PublicKey)
		}
		r, id, err := verifyEnvelope(data, pub)
		if err != nil {
			return nil, err
		}
		if err := checkDisclaimer(r); err != nil {
			return nil, err
		}
		return &ReceiptVerification{Receipt: r, Status: ReceiptValid, KeyID: id}, nil
	}
	r, err := checkReceiptJSON(data)
	if err != nil {
		return nil, err
	}
	if err := checkDisclaimer(r); err != nil {
		return nil, err
	}
	v := &ReceiptVerification{Receipt: r, Status: ReceiptUnsigned}
	return v, &Error{Code: CodeReceiptInvalid, Message: fmt.Sprintf("receipt %s is unsigned: it is complete and its digest matches, but anyone can recompute that digest; it is not valid as proof", r.ID)}
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
