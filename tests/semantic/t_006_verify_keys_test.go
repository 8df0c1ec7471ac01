package semantic

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/receipt"
)

// T-006: receipt verify with the state root's keys when its current key
// cannot be used: the keyring's keys still verify what they signed, a
// refusal says the current key was not among them, and with no key left
// the refusal says so and how to repair it. The signer's public key alone
// (--key, or package receipt) verifies without the state root.
func TestT_006_VerifyWithoutAUsableKey(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	tx := e.stage("echo one > one.txt")
	envDoc := []byte(e.must("receipt", tx).stdout)
	own := writeTemp(t, []byte(e.must("receipt", "key").stdout))
	var env receipt.Envelope
	if err := json.Unmarshal(envDoc, &env); err != nil {
		t.Fatal(err)
	}
	id := []byte(`"id":"rc-`)
	if !bytes.Contains(env.Payload, id) {
		t.Fatalf("no receipt id in %s", env.Payload)
	}
	env.Payload = bytes.Replace(env.Payload, id, []byte(`"id":"rx-`), 1)
	forged, _ := json.Marshal(env)

	if err := os.WriteFile(keyPath(e.st), []byte("broken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ok struct {
		Valid     bool   `json:"valid"`
		KeySource string `json:"key_source"`
	}
	if err := json.Unmarshal([]byte(verifyDoc(e, envDoc, "--json").stdout), &ok); err != nil || !ok.Valid || ok.KeySource != string(receipt.KeyRetired) {
		t.Fatalf("a receipt the damaged key signed, checked with the keyring: %+v %v", ok, err)
	}
	r := verifyDoc(e, forged, "--json")
	got := wantCode(t, r, 1, "precondition.receipt-invalid")
	if !strings.Contains(got.Error.Message, "no signature of the envelope verifies") ||
		!strings.Contains(got.Error.Message, "(checked with the 1 key(s) the state root keeps; its current key cannot be used:") {
		t.Errorf("a forged receipt with a damaged current key: %q", got.Error.Message)
	}

	if err := os.RemoveAll(filepath.Join(e.st, "keys", "public")); err != nil {
		t.Fatal(err)
	}
	r = verifyDoc(e, envDoc, "--json")
	got = wantCode(t, r, 1, "precondition.receipt-invalid")
	if !strings.Contains(got.Error.Message, "no receipt key of your own to check the signature with") || !hasRepair(got, "new-key", "wtx receipt key new") {
		t.Errorf("no usable key at all: %q %+v", got.Error.Message, got.Error.Repairs)
	}
	if r := verifyDoc(e, envDoc, "--key", own); r.code != 0 {
		t.Errorf("--key with the signer's public key: exit %d: %s", r.code, r.stderr)
	}
	if r := verifyDoc(e, forged, "--key", own); r.code != 1 || !strings.Contains(r.stderr, "no signature of the envelope verifies") {
		t.Errorf("--key on the forged receipt: exit %d: %s", r.code, r.stderr)
	}
}
