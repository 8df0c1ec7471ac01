package receipt_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/wtx-dev/wtx/receipt"
)

// A verifier checks a signed receipt with the signer's public key alone.
func ExampleVerify() {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		panic(err)
	}
	r := receipt.Receipt{
		SchemaVersion: 1, ID: "rc-example", Kind: "apply", Workspace: "/src/app", Tx: "tx-example", OpID: "op-example",
		CreatedAt: time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC), Backend: "overlay", Command: []string{}, Paths: []string{},
		BaseDigest:       "sha256:" + fmt.Sprintf("%064x", 1),
		ResultDigest:     "sha256:" + fmt.Sprintf("%064x", 2),
		ChangesetDigest:  "sha256:" + fmt.Sprintf("%064x", 3),
		Counts:           receipt.Counts{Modified: 1},
		NotTransactional: receipt.NotTransactional,
	}
	r.Digest = r.ComputeDigest()
	env, err := receipt.Sign(priv, r)
	if err != nil {
		panic(err)
	}
	doc, _ := json.Marshal(env)

	v, err := receipt.Verify(doc, receipt.VerifyOptions{PublicKey: pub})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Status, v.Receipt.ID, v.KeySource, v.Checked)

	// A receipt changed after it was signed no longer verifies.
	env.Payload = bytes.Replace(env.Payload, []byte("/src/app"), []byte("/src/bpp"), 1)
	doc, _ = json.Marshal(env)
	_, err = receipt.Verify(doc, receipt.VerifyOptions{PublicKey: pub})
	fmt.Println(errors.Is(err, receipt.ErrSignature))
	// Output:
	// valid rc-example given [signature statement fields digest subjects disclaimer]
	// true
}
