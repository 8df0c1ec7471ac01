package receipt

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strconv"
	"strings"
)

// A signed receipt is an in-toto Statement v1 whose predicate is the
// receipt, in a DSSE envelope signed with the user's receipt key.
const (
	// PayloadTypeInToto is the DSSE payload type of an in-toto statement.
	PayloadTypeInToto = "application/vnd.in-toto+json"
	// StatementTypeV1 is the in-toto Statement's _type.
	StatementTypeV1 = "https://in-toto.io/Statement/v1"
	// PredicateType names wtx's receipt as an in-toto predicate.
	PredicateType = "https://wtx.dev/attestation/receipt/v1"
)

// publicKeyPEMType is the PEM block type of a public key (PKIX).
const publicKeyPEMType = "PUBLIC KEY"

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

// Subjects are a statement's subjects for r: the digests a receipt attests
// (the tree it left, the change set, the tree it started from).
func Subjects(r Receipt) []Subject {
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

// ParsePublicKey reads an ed25519 public key in PEM (PKIX) form. A key
// that does not parse is an ErrKey.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(data)
	if blk == nil || blk.Type != publicKeyPEMType {
		return nil, &Error{class: ErrKey, Message: "not a PEM public key (want -----BEGIN PUBLIC KEY-----, as 'wtx receipt key' prints)"}
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, &Error{class: ErrKey, Err: err, Message: fmt.Sprintf("public key does not parse: %v", err)}
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, &Error{class: ErrKey, Message: fmt.Sprintf("public key is %T, want ed25519", k)}
	}
	return pub, nil
}

// Sign wraps r in an envelope signed with priv. r's Digest is signed as
// it is: set it first (r.Digest = r.ComputeDigest()).
func Sign(priv ed25519.PrivateKey, r Receipt) (*Envelope, error) {
	st := Statement{Type: StatementTypeV1, Subject: Subjects(r), PredicateType: PredicateType, Predicate: r}
	payload, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	sig := ed25519.Sign(priv, PAE(PayloadTypeInToto, payload))
	return &Envelope{PayloadType: PayloadTypeInToto, Payload: payload,
		Signatures: []Signature{{KeyID: KeyID(priv.Public().(ed25519.PublicKey)), Sig: sig}}}, nil
}

// VerifySignature checks that a signature of e verifies with pub: one
// that names pub's KeyID, or names none. It checks nothing else (see
// Verify); a signature that does not verify is an ErrSignature.
func (e *Envelope) VerifySignature(pub ed25519.PublicKey) error {
	id := KeyID(pub)
	pae := PAE(e.PayloadType, e.Payload)
	for _, s := range e.Signatures {
		if (s.KeyID == "" || s.KeyID == id) && ed25519.Verify(pub, pae, s.Sig) {
			return nil
		}
	}
	return &Error{Check: CheckSignature, class: ErrSignature,
		Message: fmt.Sprintf("no signature of the envelope verifies with key %s: the receipt was changed or signed by another key", id)}
}

// Record is a stored receipt: the receipt and, when signed, its envelope
// (the document to hand to someone else).
type Record struct {
	Receipt  Receipt
	Envelope *Envelope
}

// Decode reads a stored receipt body: an envelope or a bare (older,
// unsigned) receipt. It checks nothing (see CheckContent and Verify).
func Decode(body []byte) (Record, error) {
	var probe struct {
		PayloadType *string `json:"payloadType"`
	}
	if err := json.Unmarshal(body, &probe); err != nil {
		return Record{}, err
	}
	if probe.PayloadType == nil {
		var r Receipt
		err := json.Unmarshal(body, &r)
		return Record{Receipt: r}, err
	}
	var env Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Record{}, err
	}
	var st Statement
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		return Record{}, err
	}
	return Record{Receipt: st.Predicate, Envelope: &env}, nil
}

// IsDigest reports whether s is a digest as receipts write them:
// "sha256:" and 64 hex digits.
func IsDigest(s string) bool {
	h, ok := strings.CutPrefix(s, "sha256:")
	if !ok || len(h) != 64 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}
