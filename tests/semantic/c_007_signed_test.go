package semantic

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
	"github.com/wtx-dev/wtx/receipt"
)

// dsse is a DSSE envelope as the test reads and writes it, independently
// of wtx's own types.
type dsse struct {
	PayloadType string `json:"payloadType"`
	Payload     []byte `json:"payload"`
	Signatures  []struct {
		KeyID string `json:"keyid"`
		Sig   []byte `json:"sig"`
	} `json:"signatures"`
}

// pae is DSSE's pre-authentication encoding, written from the DSSE
// specification (not wtx's).
func pae(typ string, body []byte) []byte {
	return append([]byte(fmt.Sprintf("DSSEv1 %d %s %d ", len(typ), typ, len(body))), body...)
}

// signedEnv is a workspace with a signed apply receipt.
type signedEnv struct {
	*stateEnv
	tx, op  string
	env     []byte // the apply receipt as 'wtx receipt OP' prints it
	backend string
}

// newSignedEnv runs a command that writes a file, a file under an
// excluded directory and (on overlay) sees a shared directory, applies the
// stage and keeps the apply's receipt.
func newSignedEnv(t *testing.T, e *stateEnv) *signedEnv {
	t.Helper()
	mustWrite(t, filepath.Join(e.ws, "shared", "s"), "s\n")
	s := &signedEnv{stateEnv: e, backend: "overlay"}
	args := []string{"--json", "run", "--backend", "overlay", "--share", "shared", "--exclude", "cache", "--name", "c7", "--",
		"sh", "-c", "echo b > b.txt && mkdir -p cache && echo c > cache/c"}
	r := e.run(args...)
	if r.code != 0 {
		// Without overlay (an ordinary user, no namespaces): copy, no share.
		t.Logf("overlay with --share not available (%s); the copy backend without --share is used", strings.TrimSpace(r.stdout))
		s.backend = "copy"
		args = []string{"--json", "run", "--backend", "copy", "--exclude", "cache", "--name", "c7", "--",
			"sh", "-c", "echo b > b.txt && mkdir -p cache && echo c > cache/c"}
		r = e.must(args...)
	}
	var run struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &run); err != nil {
		t.Fatalf("run --json: %v\n%s", err, r.stdout)
	}
	s.tx = run.Tx
	var ap struct {
		OpID string `json:"op_id"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "apply", s.tx).stdout), &ap); err != nil || ap.OpID == "" {
		t.Fatalf("apply --json: no op id: %v", err)
	}
	s.op = ap.OpID
	s.env = []byte(e.must("receipt", s.op).stdout)
	return s
}

// verify runs 'wtx receipt verify' on data (with extra args) and returns
// the result.
func (s *signedEnv) verify(data []byte, extra ...string) wtxResult {
	s.t.Helper()
	p := filepath.Join(s.t.TempDir(), "r.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		s.t.Fatal(err)
	}
	return s.run(append(append([]string{"receipt", "verify"}, extra...), p)...)
}

// decode splits an envelope into its statement (as a generic document, to
// change any field) and the envelope.
func decodeSigned(t *testing.T, data []byte) (dsse, map[string]any) {
	t.Helper()
	var env dsse
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatalf("not an envelope: %v\n%s", err, data)
	}
	var st map[string]any
	dec := json.NewDecoder(bytes.NewReader(env.Payload))
	dec.UseNumber()
	if err := dec.Decode(&st); err != nil {
		t.Fatalf("statement: %v", err)
	}
	return env, st
}

func encodeSigned(t *testing.T, env dsse, st map[string]any) []byte {
	t.Helper()
	p, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	env.Payload = p
	out, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// resign recomputes the receipt's digest (as anyone can) and signs the
// statement with key, as a forger would.
func resign(t *testing.T, env dsse, st map[string]any, key ed25519.PrivateKey) []byte {
	t.Helper()
	pred, _ := json.Marshal(st["predicate"]) // it came from JSON
	var r receipt.Receipt
	if err := json.Unmarshal(pred, &r); err == nil {
		// A change of a field's type cannot be digested; it is signed as is.
		r.Digest = r.ComputeDigest()
		var m map[string]any
		b, _ := json.Marshal(r) // a receipt always encodes
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		st["predicate"] = m
	}
	p, _ := json.Marshal(st) // as above
	env.Payload = p
	env.Signatures = env.Signatures[:1]
	env.Signatures[0].Sig = ed25519.Sign(key, pae(env.PayloadType, p))
	env.Signatures[0].KeyID = ""
	out, _ := json.Marshal(env) // as above
	return out
}

// mutate returns v changed, keeping its JSON type where it can.
func mutate(v any) any {
	switch x := v.(type) {
	case nil:
		return json.Number("1")
	case bool:
		return !x
	case json.Number:
		n, _ := strconv.ParseInt(string(x), 10, 64) // receipts carry integers
		return json.Number(strconv.FormatInt(n+1, 10))
	case string:
		if strings.HasPrefix(x, "sha256:") && len(x) > 8 {
			c := byte('0')
			if x[len(x)-1] == '0' {
				c = '1'
			}
			return x[:len(x)-1] + string(c)
		}
		return x + "x"
	case []any:
		if len(x) > 0 {
			return x[:len(x)-1]
		}
		return []any{"x"}
	case map[string]any:
		out := map[string]any{}
		for k, e := range x {
			out[k] = e
		}
		for k, e := range x {
			out[k] = mutate(e)
			break
		}
		if len(x) == 0 {
			out["x"] = "x"
		}
		return out
	}
	return "changed"
}

func publicPEM(t *testing.T, pub ed25519.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pub.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestC007_SignedReceiptTamper checks C-007 as extended: an apply's
// receipt is a DSSE envelope of an in-toto statement that verifies as is
// (with the local key and with the public key 'wtx receipt key' prints);
// changing any field of the receipt, of the statement or of the envelope
// makes it fail; so does any such change with the digest recomputed and
// the statement signed again by another key; removing any disclaimer entry
// fails even when the forger's own key is the one given to --key. A bare
// receipt shows as unsigned, not valid.
func TestC007_SignedReceiptTamper(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	s := newSignedEnv(t, e)
	if r := s.verify(s.env); r.code != 0 || !strings.Contains(r.stdout, "is valid") {
		t.Fatalf("the untouched receipt does not verify: %v", r)
	}
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if err := os.WriteFile(keyFile, []byte(e.must("receipt", "key").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := s.verify(s.env, "--key", keyFile); r.code != 0 {
		t.Fatalf("the untouched receipt does not verify with --key: %v", r)
	}
	env, st := decodeSigned(t, s.env)
	if st["_type"] != "https://in-toto.io/Statement/v1" || env.PayloadType != "application/vnd.in-toto+json" {
		t.Fatalf("not an in-toto statement in DSSE: %s / %v", env.PayloadType, st["_type"])
	}
	pred := st["predicate"].(map[string]any)
	if s.backend == "overlay" {
		if !slicesHas(pred["not_transactional"], "shared path shared") {
			t.Fatalf("the receipt of a run with --share does not list the shared path: %v", pred["not_transactional"])
		}
	}
	_, forger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	forgerPub := publicPEM(t, forger.Public().(ed25519.PublicKey))
	// Control of the forger: the untouched statement signed by the forger
	// verifies with the forger's key (so a failure below is the change).
	if r := s.verify(resign(t, env, st, forger), "--key", forgerPub); r.code != 0 {
		t.Fatalf("the re-signed untouched receipt does not verify with the forger's key: %v", r)
	}

	// Every field of the receipt.
	if len(pred) < 20 {
		t.Fatalf("the receipt has only %d fields: %v", len(pred), pred)
	}
	for field, v := range pred {
		_, st := decodeSigned(t, s.env)
		st["predicate"].(map[string]any)[field] = mutate(v)
		if r := s.verify(encodeSigned(t, env, st)); r.code == 0 {
			t.Errorf("receipt with %s changed (%v → %v) verifies: %s", field, v, mutate(v), r.stdout)
		}
		if field == "digest" {
			continue
		}
		_, st = decodeSigned(t, s.env)
		st["predicate"].(map[string]any)[field] = mutate(v)
		if r := s.verify(resign(t, env, st, forger)); r.code == 0 {
			t.Errorf("receipt with %s changed, digest recomputed and signed by another key verifies: %s", field, r.stdout)
		}
		_, st = decodeSigned(t, s.env)
		delete(st["predicate"].(map[string]any), field)
		if r := s.verify(encodeSigned(t, env, st)); r.code == 0 {
			t.Errorf("receipt without %s verifies: %s", field, r.stdout)
		}
	}
	// Every disclaimer entry, removed with the digest recomputed and signed
	// by the forger, fails with the forger's own key.
	nt := pred["not_transactional"].([]any)
	for i := range nt {
		_, st := decodeSigned(t, s.env)
		p := st["predicate"].(map[string]any)
		p["not_transactional"] = append(append([]any{}, nt[:i]...), nt[i+1:]...)
		r := s.verify(resign(t, env, st, forger), "--key", forgerPub)
		if r.code == 0 || !strings.Contains(r.stderr, "not_transactional lacks") {
			t.Errorf("receipt without disclaimer entry %q (digest recomputed, re-signed) verifies or fails for another reason: %v", nt[i], r)
		}
	}
	// The statement and the envelope.
	for name, change := range map[string]func(env *dsse, st map[string]any){
		"statement _type":         func(_ *dsse, st map[string]any) { st["_type"] = "https://in-toto.io/Statement/v0.1" },
		"statement predicateType": func(_ *dsse, st map[string]any) { st["predicateType"] = "https://example.org/other" },
		"statement subject":       func(_ *dsse, st map[string]any) { st["subject"] = mutate(st["subject"]) },
		"statement extra field":   func(_ *dsse, st map[string]any) { st["extra"] = "x" },
		"envelope payloadType":    func(env *dsse, _ map[string]any) { env.PayloadType = "application/json" },
		"envelope signature":      func(env *dsse, _ map[string]any) { env.Signatures[0].Sig[0] ^= 1 },
		"envelope keyid":          func(env *dsse, _ map[string]any) { env.Signatures[0].KeyID = "sha256:00" },
		"envelope no signature":   func(env *dsse, _ map[string]any) { env.Signatures = env.Signatures[:0] },
	} {
		env, st := decodeSigned(t, s.env)
		change(&env, st)
		if r := s.verify(encodeSigned(t, env, st)); r.code == 0 {
			t.Errorf("receipt with its %s changed verifies: %s", name, r.stdout)
		}
		if strings.HasPrefix(name, "statement") {
			env, st = decodeSigned(t, s.env)
			change(&env, st)
			if r := s.verify(resign(t, env, st, forger), "--key", forgerPub); r.code == 0 {
				t.Errorf("receipt with its %s changed verifies even re-signed: %s", name, r.stdout)
			}
		}
	}
	// A bare receipt (as older wtx stored them) is unsigned: not proof.
	var ans struct {
		Receipt json.RawMessage `json:"receipt"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "receipt", s.op).stdout), &ans); err != nil {
		t.Fatal(err)
	}
	if r := s.verify(ans.Receipt); r.code == 0 || !strings.Contains(r.stderr, "unsigned") {
		t.Errorf("a bare receipt verifies or does not say it is unsigned: %v", r)
	}
}

func slicesHas(v any, want string) bool {
	l, _ := v.([]any)
	for _, x := range l {
		if x == want {
			return true
		}
	}
	return false
}

// TestC007_IndependentVerifier checks the signed receipt with a tool that
// is not wtx: openssl verifies the ed25519 signature over the DSSE PAE
// with the PEM public key 'wtx receipt key' prints, exactly as the README
// says; a changed payload fails the same check.
func TestC007_IndependentVerifier(t *testing.T) {
	t.Parallel()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Skipf("openssl is not installed: %v", err)
	}
	e := newStateEnv(t)
	s := newSignedEnv(t, e)
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(key, []byte(e.must("receipt", "key").stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	check := func(data []byte) (bool, string) {
		var env dsse
		if err := json.Unmarshal(data, &env); err != nil {
			t.Fatal(err)
		}
		paeFile, sigFile := filepath.Join(dir, "pae.bin"), filepath.Join(dir, "sig.bin")
		if err := os.WriteFile(paeFile, pae(env.PayloadType, env.Payload), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(sigFile, env.Signatures[0].Sig, 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(openssl, "pkeyutl", "-verify", "-pubin", "-inkey", key, "-rawin", "-in", paeFile, "-sigfile", sigFile).CombinedOutput()
		if err != nil && bytes.Contains(out, []byte("rawin")) && !bytes.Contains(out, []byte("Verification Failure")) {
			t.Skipf("this openssl cannot verify ed25519 over raw input: %s", out)
		}
		return err == nil, string(out)
	}
	if ok, out := check(s.env); !ok {
		t.Fatalf("openssl does not verify the untouched receipt: %s", out)
	}
	// With the README's shell commands, when jq is there.
	if _, err := exec.LookPath("jq"); err == nil {
		rf := filepath.Join(dir, "r.json")
		if err := os.WriteFile(rf, s.env, 0o644); err != nil {
			t.Fatal(err)
		}
		script := `set -e; cd "$1"
jq -r .payload r.json | base64 -d > payload.json
t=$(jq -r .payloadType r.json)
{ printf 'DSSEv1 %d %s %d ' ${#t} "$t" $(wc -c < payload.json); cat payload.json; } > pae.bin
jq -r '.signatures[0].sig' r.json | base64 -d > sig.bin
openssl pkeyutl -verify -pubin -inkey key.pem -rawin -in pae.bin -sigfile sig.bin`
		if out, err := exec.Command("sh", "-c", script, "sh", dir).CombinedOutput(); err != nil {
			t.Errorf("the README's openssl commands do not verify the receipt: %v\n%s", err, out)
		}
	}
	env, st := decodeSigned(t, s.env)
	st["predicate"].(map[string]any)["approved"] = !st["predicate"].(map[string]any)["approved"].(bool)
	if ok, out := check(encodeSigned(t, env, st)); ok {
		t.Errorf("openssl verifies a changed receipt: %s", out)
	}
}

// TestC007_ReceiptAll checks 'wtx receipt T --all': every receipt of the
// stage (two runs, a refused apply, the apply), oldest first, each signed
// and each verifying.
func TestC007_ReceiptAll(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	tx := e.stage("echo one > one.txt")
	e.must("run", "--tx", tx, "--", "sh", "-c", "echo two > two.txt")
	// Drift: a.txt changes in the workspace and in the stage: refused.
	e.must("run", "--tx", tx, "--", "sh", "-c", "echo staged > a.txt")
	mustWrite(t, filepath.Join(e.ws, "a.txt"), "outside\n")
	if r := e.run("apply", tx); r.code != 2 {
		t.Fatalf("apply over drift: exit %d, want 2: %v", r.code, r)
	}
	mustWrite(t, filepath.Join(e.ws, "a.txt"), "a\n")
	e.must("apply", tx)
	var all struct {
		Tx       string `json:"tx"`
		Receipts []struct {
			Receipt struct {
				ID      string `json:"id"`
				Kind    string `json:"kind"`
				Refusal *struct {
					Code string `json:"code"`
				} `json:"refusal"`
			} `json:"receipt"`
			Envelope json.RawMessage `json:"envelope"`
			Signed   bool            `json:"signed"`
		} `json:"receipts"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "receipt", tx, "--all").stdout), &all); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, r := range all.Receipts {
		k := r.Receipt.Kind
		if r.Receipt.Refusal != nil {
			k += ":refused"
		}
		kinds = append(kinds, k)
		if !r.Signed {
			t.Errorf("receipt %s is not signed", r.Receipt.ID)
		}
		p := filepath.Join(t.TempDir(), "r.json")
		if err := os.WriteFile(p, r.Envelope, 0o644); err != nil {
			t.Fatal(err)
		}
		if v := e.run("receipt", "verify", p); v.code != 0 {
			t.Errorf("receipt %s of --all does not verify: %v", r.Receipt.ID, v)
		}
	}
	if got, want := strings.Join(kinds, ","), "run,run,run,apply:refused,apply"; got != want {
		t.Errorf("receipt --all lists %s, want %s", got, want)
	}
	text := e.must("receipt", tx, "--all").stdout
	if n := strings.Count(text, "\n"); n != 5 || strings.Count(text, " signed ") != 5 {
		t.Errorf("receipt --all text: %d lines, want 5 signed:\n%s", n, text)
	}
	// Without --all, the latest one.
	var one struct {
		Receipt struct {
			ID string `json:"id"`
		} `json:"receipt"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "receipt", tx).stdout), &one); err != nil || len(all.Receipts) == 0 ||
		one.Receipt.ID != all.Receipts[len(all.Receipts)-1].Receipt.ID {
		t.Errorf("receipt T is %s, want the last of --all", one.Receipt.ID)
	}
}

// TestC007_SignedNegativeControl switches the checks off (failpoint
// build): with WTX_DISABLE=receipt-signature a receipt whose field was
// changed verifies; with WTX_DISABLE=receipt-disclaimer a receipt whose
// disclaimer lost an entry, digest recomputed and re-signed, verifies with
// the forger's key. Each must, or the test above proves nothing.
func TestC007_SignedNegativeControl(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	s := newSignedEnv(t, e)
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fs := &signedEnv{stateEnv: &fp, env: s.env}
	env, st := decodeSigned(t, s.env)
	st["predicate"].(map[string]any)["approved"] = true
	fp.env = []string{"WTX_DISABLE=receipt-signature"}
	if r := fs.verify(resign(t, env, st, mustKey(t))); r.code != 0 {
		t.Errorf("with the signature check off, a changed receipt is still refused: %v", r)
	}
	_, forger, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	env, st = decodeSigned(t, s.env)
	p := st["predicate"].(map[string]any)
	p["not_transactional"] = p["not_transactional"].([]any)[1:]
	fp.env = []string{"WTX_DISABLE=receipt-disclaimer"}
	if r := fs.verify(resign(t, env, st, forger), "--key", publicPEM(t, forger.Public().(ed25519.PublicKey))); r.code != 0 {
		t.Errorf("with the disclaimer check off, a receipt that lost an entry is still refused: %v", r)
	}
}

func mustKey(t *testing.T) ed25519.PrivateKey {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}
