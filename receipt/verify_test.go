package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/receipt"
)

// sample is a complete receipt of an apply, with its digest set.
func sample() receipt.Receipt {
	exit := 0
	r := receipt.Receipt{
		SchemaVersion: 1, ID: "rc-1", Kind: "apply", Workspace: "/w/\xffodd", Tx: "tx-1", OpID: "op-1",
		CreatedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Backend: "overlay",
		Command: []string{"make", "-j2"}, ExitCode: &exit, Paths: []string{"a.txt"},
		BaseDigest:       fmt.Sprintf("sha256:%064x", 1),
		ResultDigest:     fmt.Sprintf("sha256:%064x", 2),
		ChangesetDigest:  fmt.Sprintf("sha256:%064x", 3),
		Counts:           receipt.Counts{Added: 1},
		Share:            []string{"cache/"},
		NotTransactional: append(append([]string(nil), receipt.NotTransactional...), receipt.SharedPath("cache/")),
	}
	r.Digest = r.ComputeDigest()
	return r
}

// signed returns a key pair and the envelope of sample(), as JSON.
func signed(t *testing.T) (ed25519.PublicKey, ed25519.PrivateKey, *receipt.Envelope, []byte) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := receipt.Sign(priv, sample())
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return pub, priv, env, doc
}

// refused checks that Verify refuses doc with an error of class want.
func refused(t *testing.T, what string, doc []byte, opts receipt.VerifyOptions, want error) *receipt.Error {
	t.Helper()
	v, err := receipt.Verify(doc, opts)
	var re *receipt.Error
	if v != nil || !errors.As(err, &re) || !errors.Is(err, want) {
		t.Fatalf("%s: Verify = %+v, %v (%T); want a refusal of class %v", what, v, err, err, want)
	}
	return re
}

func TestVerifyGoodEnvelope(t *testing.T) {
	pub, _, _, doc := signed(t)
	v, err := receipt.Verify(doc, receipt.VerifyOptions{PublicKey: pub})
	if err != nil {
		t.Fatal(err)
	}
	want := sample()
	if v.Status != receipt.StatusValid || v.KeyID != receipt.KeyID(pub) || v.KeySource != receipt.KeyGiven ||
		v.Receipt.Digest != want.Digest || v.Receipt.Workspace != want.Workspace || len(v.Checked) != 6 {
		t.Fatalf("%+v", v)
	}
	// A keyring: the first key whose signature verifies is the one used.
	other, _, _ := ed25519.GenerateKey(nil)
	v, err = receipt.Verify(doc, receipt.VerifyOptions{Keyring: func() ([]receipt.Key, error) {
		return []receipt.Key{{Public: other, Source: receipt.KeyCurrent}, {Public: pub, Source: receipt.KeyRetired}}, nil
	}})
	if err != nil || v.KeySource != receipt.KeyRetired || v.KeyID != receipt.KeyID(pub) {
		t.Fatalf("%+v %v", v, err)
	}
}

func TestVerifyFlippedPayloadByte(t *testing.T) {
	pub, _, env, _ := signed(t)
	step := max(1, len(env.Payload)/97) // bytes all over the statement, not every one
	for i := 0; i < len(env.Payload); i += step {
		bad := *env
		bad.Payload = bytes.Clone(env.Payload)
		bad.Payload[i] ^= 0x01
		doc, _ := json.Marshal(bad)
		if _, err := receipt.Verify(doc, receipt.VerifyOptions{PublicKey: pub}); !errors.Is(err, receipt.ErrInvalid) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	// A flip that keeps the statement well formed is caught by the
	// signature: the receipt's id, changed by one letter.
	bad := *env
	bad.Payload = bytes.Replace(env.Payload, []byte(`"rc-1"`), []byte(`"rc-3"`), 1)
	doc, _ := json.Marshal(bad)
	re := refused(t, "id changed", doc, receipt.VerifyOptions{PublicKey: pub}, receipt.ErrSignature)
	if re.Check != receipt.CheckSignature || !errors.Is(re, receipt.ErrInvalid) {
		t.Fatalf("%+v", re)
	}
}

func TestVerifyWrongKey(t *testing.T) {
	_, _, _, doc := signed(t)
	stranger, _, _ := ed25519.GenerateKey(nil)
	refused(t, "another key", doc, receipt.VerifyOptions{PublicKey: stranger}, receipt.ErrSignature)
	refused(t, "no key", doc, receipt.VerifyOptions{}, receipt.ErrNoKey)
	refused(t, "an empty keyring", doc, receipt.VerifyOptions{Keyring: func() ([]receipt.Key, error) { return nil, nil }}, receipt.ErrKey)
	// A keyring without the signer's key: the first key's check says why.
	refused(t, "a keyring of others", doc, receipt.VerifyOptions{Keyring: func() ([]receipt.Key, error) {
		return []receipt.Key{{Public: stranger, Source: receipt.KeyCurrent}}, nil
	}}, receipt.ErrSignature)
}

// Negative controls: each attack below is refused, and passes with its
// protection switched off (WTX_DISABLE, only in a failpoint build:
// go test -tags wtxfailpoint).
func TestVerifyControls(t *testing.T) {
	pub, priv, env, doc := signed(t)
	stranger, _, _ := ed25519.GenerateKey(nil)
	noShare := sample()
	noShare.NotTransactional = receipt.NotTransactional
	noShare.Digest = noShare.ComputeDigest()
	e2, _ := receipt.Sign(priv, noShare)
	noShareDoc, _ := json.Marshal(e2)
	shown := sample()
	shown.Paths = []string{"other.txt"}
	answer, _ := json.Marshal(map[string]any{"schema_version": 1, "status": "ok", "command": "receipt", "signed": true, "envelope": env, "receipt": shown})
	for _, c := range []struct {
		sw   string
		doc  []byte
		key  ed25519.PublicKey
		want error
	}{
		{"receipt-signature", doc, stranger, receipt.ErrSignature},
		{"receipt-disclaimer", noShareDoc, pub, receipt.ErrInvalid},
		{"receipt-ambiguous", bytes.Replace(doc, []byte(`"payloadType"`), []byte(`"PayloadType":"x","payloadType"`), 1), pub, receipt.ErrInvalid},
		{"receipt-readable", answer, pub, receipt.ErrInvalid},
	} {
		t.Setenv("WTX_DISABLE", "")
		refused(t, c.sw, c.doc, receipt.VerifyOptions{PublicKey: c.key}, c.want)
		if !failpoint.Enabled {
			continue
		}
		t.Setenv("WTX_DISABLE", c.sw)
		if _, err := receipt.Verify(c.doc, receipt.VerifyOptions{PublicKey: c.key}); err != nil {
			t.Errorf("%s switched off: the attack is still refused: %v", c.sw, err)
		}
	}
	if !failpoint.Enabled {
		t.Skip("the attacks are refused; showing that each passes with its protection off needs -tags wtxfailpoint")
	}
}

func TestVerifyUnknownPayloadType(t *testing.T) {
	pub, priv, env, _ := signed(t)
	bad := *env
	bad.PayloadType = "application/json"
	bad.Signatures = []receipt.Signature{{KeyID: receipt.KeyID(pub), Sig: ed25519.Sign(priv, receipt.PAE(bad.PayloadType, bad.Payload))}}
	doc, _ := json.Marshal(bad)
	re := refused(t, "payload type", doc, receipt.VerifyOptions{PublicKey: pub}, receipt.ErrInvalid)
	if re.Check != receipt.CheckStatement || !strings.Contains(re.Message, "payloadType") {
		t.Fatalf("%+v", re)
	}
}

func TestVerifyRefusesGarbage(t *testing.T) {
	pub, _, _, doc := signed(t)
	opts := receipt.VerifyOptions{PublicKey: pub}
	for name, d := range map[string][]byte{
		"trailing value":   append(bytes.Clone(doc), []byte(` {}`)...),
		"trailing bytes":   append(bytes.Clone(doc), []byte(`xyz`)...),
		"truncated":        doc[:len(doc)-1],
		"empty":            {},
		"not an object":    []byte(`[1,2]`),
		"garbage":          []byte("\xff\xfe{"),
		"unknown envelope": bytes.Replace(doc, []byte(`"payloadType"`), []byte(`"extra":1,"payloadType"`), 1),
		"twin names":       bytes.Replace(doc, []byte(`"payloadType"`), []byte(`"PayloadType":"x","payloadType"`), 1),
	} {
		refused(t, name, d, opts, receipt.ErrInvalid)
	}
}

// A bare receipt is complete but proves nothing: its Verification comes
// with an ErrUnsigned.
func TestVerifyBareReceipt(t *testing.T) {
	doc, _ := json.Marshal(sample())
	v, err := receipt.Verify(doc, receipt.VerifyOptions{})
	if v == nil || v.Status != receipt.StatusUnsigned || !errors.Is(err, receipt.ErrUnsigned) || !errors.Is(err, receipt.ErrInvalid) {
		t.Fatalf("%+v %v", v, err)
	}
	// Its digest still binds its content.
	r := sample()
	r.Paths = []string{"b.txt"}
	doc, _ = json.Marshal(r)
	re := refused(t, "changed bare receipt", doc, receipt.VerifyOptions{}, receipt.ErrInvalid)
	if re.Check != receipt.CheckDigest {
		t.Fatalf("%+v", re)
	}
}

// A receipt whose not_transactional list lacks what its shared paths
// require is refused, even when properly signed.
func TestVerifyDisclaimer(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	r := sample()
	r.NotTransactional = receipt.NotTransactional
	r.Digest = r.ComputeDigest()
	env, _ := receipt.Sign(priv, r)
	doc, _ := json.Marshal(env)
	re := refused(t, "no shared-path entry", doc, receipt.VerifyOptions{PublicKey: pub}, receipt.ErrInvalid)
	if re.Check != receipt.CheckDisclaimer {
		t.Fatalf("%+v", re)
	}
	if _, err := receipt.CheckContent(doc); !errors.Is(err, receipt.ErrInvalid) {
		t.Fatalf("CheckContent: %v", err)
	}
}

func TestParsePublicKey(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(nil)
	got, err := receipt.ParsePublicKey(receipt.PublicKeyPEM(pub))
	if err != nil || !got.Equal(pub) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"} {
		if _, err := receipt.ParsePublicKey([]byte(bad)); !errors.Is(err, receipt.ErrKey) {
			t.Fatalf("%q: %v", bad, err)
		}
	}
}

// Decode reads back what Sign wrote, and a bare receipt.
func TestDecode(t *testing.T) {
	pub, _, _, doc := signed(t)
	rec, err := receipt.Decode(doc)
	if err != nil || rec.Envelope == nil || rec.Receipt.Digest != sample().Digest || rec.Envelope.VerifySignature(pub) != nil {
		t.Fatalf("%+v %v", rec, err)
	}
	bare, _ := json.Marshal(sample())
	if rec, err := receipt.Decode(bare); err != nil || rec.Envelope != nil || rec.Receipt.ID != "rc-1" {
		t.Fatalf("%+v %v", rec, err)
	}
}
