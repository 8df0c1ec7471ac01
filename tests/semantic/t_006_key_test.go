package semantic

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// T-006: receipt verify covers everything it shows as verified; a damaged
// or missing signing key is an error, never a silent unsigned receipt or a
// silent new key.

// keyPath is the receipt key of the state root st.
func keyPath(st string) string { return filepath.Join(st, "keys", "receipt-ed25519.pem") }

// appliedOp applies a stage that adds name and returns the apply's op id.
func appliedOp(e *stateEnv, name string) string {
	e.t.Helper()
	tx := e.stage("echo x > " + name)
	var ap struct {
		OpID string `json:"op_id"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "apply", tx).stdout), &ap); err != nil || ap.OpID == "" {
		e.t.Fatalf("apply --json: no op id: %v", err)
	}
	return ap.OpID
}

// verifyDoc runs 'wtx receipt verify' on data (with extra args).
func verifyDoc(e *stateEnv, data []byte, extra ...string) wtxResult {
	e.t.Helper()
	p := filepath.Join(e.t.TempDir(), "r.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return e.run(append(append([]string{"receipt", "verify"}, extra...), p)...)
}

// genericDoc decodes a JSON document, numbers as written.
func genericDoc(t *testing.T, data []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, data)
	}
	return m
}

func encodeDoc(t *testing.T, m map[string]any) []byte {
	t.Helper()
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestT_006_ReadableReceiptMatchesEnvelope: a --json receipt answer
// verifies as is, says it checked the readable receipt beside the
// envelope, and is refused when that readable receipt says anything the
// signed one does not (each named field, every field, a field removed or
// added) or the answer adds a claim beside the envelope. A receipt whose
// command holds a newline and a byte that is not UTF-8 verifies too.
func TestT_006_ReadableReceiptMatchesEnvelope(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	op := appliedOp(e, "b.txt")
	ans := []byte(e.must("--json", "receipt", op).stdout)
	r := verifyDoc(e, ans)
	if r.code != 0 || !strings.Contains(r.stdout, "readable receipt beside the envelope is the signed one") || !strings.Contains(r.stdout, "your current key") {
		t.Fatalf("the untouched answer does not verify, or does not say what it checked: %v", r)
	}
	var v struct {
		Checked   []string `json:"checked"`
		KeySource string   `json:"key_source"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "receipt", "verify", writeTemp(t, ans)).stdout), &v); err != nil ||
		!strings.Contains(strings.Join(v.Checked, ","), "readable-receipt") || v.KeySource != "current" {
		t.Fatalf("verify --json does not list the readable receipt among its checks: %+v (%v)", v, err)
	}
	named := map[string]func(rec map[string]any){
		"command":                 func(rec map[string]any) { rec["command"] = []any{"rm", "-rf", "/"} },
		"counts":                  func(rec map[string]any) { rec["counts"].(map[string]any)["added"] = json.Number("7") },
		"approved":                func(rec map[string]any) { rec["approved"] = !rec["approved"].(bool) },
		"empty not_transactional": func(rec map[string]any) { rec["not_transactional"] = []any{} },
		"base_digest":             func(rec map[string]any) { rec["base_digest"] = mutate(rec["base_digest"]) },
		"result_digest":           func(rec map[string]any) { rec["result_digest"] = mutate(rec["result_digest"]) },
		"changeset_digest":        func(rec map[string]any) { rec["changeset_digest"] = mutate(rec["changeset_digest"]) },
		"digest":                  func(rec map[string]any) { rec["digest"] = mutate(rec["digest"]) },
		"added field":             func(rec map[string]any) { rec["verified_by"] = "auditor" },
		"removed field":           func(rec map[string]any) { delete(rec, "refusal") },
	}
	for field := range genericDoc(t, ans)["receipt"].(map[string]any) {
		named["every field: "+field] = func(rec map[string]any) { rec[field] = mutate(rec[field]) }
	}
	for name, change := range named {
		doc := genericDoc(t, ans)
		change(doc["receipt"].(map[string]any))
		if r := verifyDoc(e, encodeDoc(t, doc)); r.code == 0 || !strings.Contains(r.stderr, "readable receipt beside the envelope") {
			t.Errorf("readable receipt with %s changed: exit %d, want a refusal that names the readable receipt:\n%s%s", name, r.code, r.stdout, r.stderr)
		}
	}
	for name, change := range map[string]func(doc map[string]any){
		"a claim beside the envelope": func(doc map[string]any) { doc["approved"] = true },
		"signed false":                func(doc map[string]any) { doc["signed"] = false },
		"status error":                func(doc map[string]any) { doc["status"] = "error" },
		"another command":             func(doc map[string]any) { doc["command"] = "apply" },
	} {
		doc := genericDoc(t, ans)
		change(doc)
		if r := verifyDoc(e, encodeDoc(t, doc)); r.code == 0 {
			t.Errorf("answer with %s verifies: %s", name, r.stdout)
		}
	}
	// The envelope alone, with no readable receipt beside it, verifies
	// and does not claim the readable check.
	doc := genericDoc(t, ans)
	delete(doc, "receipt")
	if r := verifyDoc(e, encodeDoc(t, doc)); r.code != 0 || strings.Contains(r.stdout, "readable receipt") {
		t.Errorf("the answer without its readable receipt: %v", r)
	}
	// Names that are not text: the readable receipt carries them byte-safe
	// and still equals the signed one.
	out := e.must("--json", "run", "--backend", "copy", "--", "sh", "-c", `printf x > "$1"`, "sh", "odd\nname\xff")
	var run struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(out.stdout), &run); err != nil {
		t.Fatal(err)
	}
	if r := verifyDoc(e, []byte(e.must("--json", "receipt", run.Tx).stdout)); r.code != 0 {
		t.Errorf("the receipt of a command with a newline and a non-UTF-8 byte does not verify: %v", r)
	}

	// Negative control: with the readable check off, a changed readable
	// receipt passes as valid.
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fp.env = []string{"WTX_DISABLE=receipt-readable"}
	doc = genericDoc(t, ans)
	doc["receipt"].(map[string]any)["approved"] = true
	if r := verifyDoc(&fp, encodeDoc(t, doc)); r.code != 0 {
		t.Errorf("with WTX_DISABLE=receipt-readable, a changed readable receipt is still refused: %v", r)
	}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "doc.json")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// keyDamage is one way to damage the receipt key: what it does to the key
// file, the error code signing then gives, and whether it needs root.
type keyDamage struct {
	name   string
	code   string
	root   bool
	damage func(t *testing.T, p string)
}

func pemFile(t *testing.T, p, typ string, der []byte, mode os.FileMode) {
	t.Helper()
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		t.Fatal(err)
	}
}

var keyDamages = []keyDamage{
	{"truncated", "io.corrupt", false, func(t *testing.T, p string) {
		if err := os.Truncate(p, 40); err != nil {
			t.Fatal(err)
		}
	}},
	{"a flipped byte", "io.corrupt", false, func(t *testing.T, p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(data)
		blk.Bytes[len(blk.Bytes)-5] ^= 0x20 // inside the seed: still a key, another one
		pemFile(t, p, blk.Type, blk.Bytes, 0o600)
	}},
	{"a flipped byte of its text", "io.corrupt", false, func(t *testing.T, p string) {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		data[len("-----BEGIN PRIVATE KEY-----\n")+3] = '*'
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}},
	{"another ed25519 key", "io.corrupt", false, func(t *testing.T, p string) {
		_, k, _ := ed25519.GenerateKey(rand.Reader)
		der, _ := x509.MarshalPKCS8PrivateKey(k) // an ed25519 key always encodes
		pemFile(t, p, "PRIVATE KEY", der, 0o600)
	}},
	{"the wrong type of key", "io.corrupt", false, func(t *testing.T, p string) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		der, _ := x509.MarshalPKCS8PrivateKey(k) // a P-256 key always encodes
		pemFile(t, p, "PRIVATE KEY", der, 0o600)
	}},
	{"empty", "io.corrupt", false, func(t *testing.T, p string) {
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
	}},
	{"readable by others", "precondition.state-unsafe", false, func(t *testing.T, p string) {
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}},
	{"a symlink to a copy of it", "precondition.state-unsafe", false, func(t *testing.T, p string) {
		cp := filepath.Join(t.TempDir(), "key.pem")
		if err := os.Rename(p, cp); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(cp, p); err != nil {
			t.Fatal(err)
		}
	}},
	{"a directory", "io.corrupt", false, func(t *testing.T, p string) {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(p, 0o700); err != nil {
			t.Fatal(err)
		}
	}},
	{"another user's", "precondition.state-unsafe", true, func(t *testing.T, p string) {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}},
}

// TestT_006_DamagedKeyFailsLoudly: with the receipt key damaged in any of
// the ways above, a run refuses before its command starts (and leaves no
// stage), an apply refuses and writes nothing, each with the damage's
// code and the repairs (restore the key, or 'wtx receipt key new'); no
// receipt is stored unsigned. The negative control shows the old quiet
// way: the run goes through and leaves an unsigned receipt.
func TestT_006_DamagedKeyFailsLoudly(t *testing.T) {
	t.Parallel()
	for _, d := range keyDamages {
		t.Run(d.name, func(t *testing.T) {
			if d.root && os.Geteuid() != 0 {
				t.Skip("giving the key to another user needs root")
			}
			e := newStateEnv(t)
			tx := e.stage("echo one > one.txt")
			d.damage(t, keyPath(e.st))
			marker := filepath.Join(t.TempDir(), "ran")
			r := e.run("--json", "run", "--backend", "copy", "--", "sh", "-c", "touch "+marker+"; echo x > x.txt")
			got := wantCode(t, r, r.code, d.code)
			if r.code == 0 || !strings.Contains(got.Error.Message, "receipt key") {
				t.Errorf("run with a key %s: exit %d, %q", d.name, r.code, got.Error.Message)
			}
			if !hasRepair(got, "new-key", "wtx receipt key new") {
				t.Errorf("run with a key %s: no repair 'wtx receipt key new': %+v", d.name, got.Error.Repairs)
			}
			if _, err := os.Lstat(marker); err == nil {
				t.Errorf("run with a key %s: the command ran", d.name)
			}
			if n := openStages(t, e); n != 1 {
				t.Errorf("run with a key %s: %d open stages, want only the one from before", d.name, n)
			}
			r = e.run("--json", "apply", tx)
			wantCode(t, r, 1, d.code)
			if _, err := os.Lstat(filepath.Join(e.ws, "one.txt")); err == nil {
				t.Errorf("apply with a key %s wrote the workspace", d.name)
			}
			if strings.Contains(e.must("receipt", tx, "--all").stdout, "UNSIGNED") {
				t.Errorf("a receipt was stored unsigned with a key %s", d.name)
			}
		})
	}
	t.Run("negative control", func(t *testing.T) {
		e := newStateEnv(t)
		e.stage("echo one > one.txt")
		keyDamages[0].damage(t, keyPath(e.st))
		fp := *e
		fp.bin = wtxtest.Binary(t, true)
		fp.env = []string{"WTX_DISABLE=receipt-key-check"}
		tx := fp.stage("echo x > x.txt")
		if !strings.Contains(fp.must("receipt", tx, "--all").stdout, "UNSIGNED") {
			t.Errorf("with WTX_DISABLE=receipt-key-check the run's receipt is not left unsigned")
		}
	})
}

func hasRepair(got wtxJSON, action, command string) bool {
	for _, r := range got.Error.Repairs {
		if r.Action == action && r.Command == command {
			return true
		}
	}
	return false
}

// openStages counts the workspace's open stages.
func openStages(t *testing.T, e *stateEnv) int {
	t.Helper()
	var l struct {
		Stages []struct {
			State string `json:"state"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "list").stdout), &l); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range l.Stages {
		if s.State == "open" {
			n++
		}
	}
	return n
}

// TestT_006_MissingKeyNotRecreated: a deleted key (or keys directory)
// stays deleted: run and 'receipt key' fail with io.state-missing and
// name 'wtx receipt key new'; a receipt signed before still verifies
// against the state root (its key's public half is kept). The negative
// control shows the old quiet way: a new key appears.
func TestT_006_MissingKeyNotRecreated(t *testing.T) {
	t.Parallel()
	for _, what := range []string{"key", "keys directory"} {
		t.Run(what, func(t *testing.T) {
			e := newStateEnv(t)
			op := appliedOp(e, "b.txt")
			env := []byte(e.must("receipt", op).stdout)
			gone := keyPath(e.st)
			if what == "keys directory" {
				gone = filepath.Dir(gone)
				// The public halves go with it: the receipt is then
				// checked with the key given.
				pub := writeTemp(t, []byte(e.must("receipt", "key").stdout))
				defer func() {
					if r := verifyDoc(e, env, "--key", pub); r.code != 0 {
						t.Errorf("the old receipt does not verify with its public key: %v", r)
					}
				}()
			}
			if err := os.RemoveAll(gone); err != nil {
				t.Fatal(err)
			}
			r := e.run("--json", "run", "--backend", "copy", "--", "sh", "-c", "echo x > x.txt")
			got := wantCode(t, r, r.code, "io.state-missing")
			if r.code == 0 || !hasRepair(got, "new-key", "wtx receipt key new") {
				t.Errorf("run without its key: exit %d, repairs %+v", r.code, got.Error.Repairs)
			}
			wantCode(t, e.run("--json", "receipt", "key"), 1, "io.state-missing")
			if _, err := os.Lstat(gone); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the %s was made again (%v)", what, err)
			}
			if what == "key" {
				if r := verifyDoc(e, env); r.code != 0 || !strings.Contains(r.stdout, "an older key of yours") {
					t.Errorf("a receipt signed before the key was lost does not verify against the state root: %v", r)
				}
			}
		})
	}
	t.Run("negative control", func(t *testing.T) {
		e := newStateEnv(t)
		e.stage("echo x > x.txt")
		if err := os.Remove(keyPath(e.st)); err != nil {
			t.Fatal(err)
		}
		fp := *e
		fp.bin = wtxtest.Binary(t, true)
		fp.env = []string{"WTX_DISABLE=receipt-key-create"}
		fp.stage("echo y > y.txt")
		if _, err := os.Lstat(keyPath(e.st)); err != nil {
			t.Errorf("with WTX_DISABLE=receipt-key-create no new key was made: %v", err)
		}
	})
}

// TestT_006_KeyRotation: 'wtx receipt key new' makes a new key and says
// that old receipts need the old public key; receipts signed before and
// after both verify against the state root (the old one as signed by an
// older key), each with its own public key and not with the other's, and
// 'receipt key --all' lists both. The same holds when the old key was
// damaged: it is set aside, not deleted. The negative control drops the
// kept public halves: the old receipt no longer verifies.
func TestT_006_KeyRotation(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	oldEnv := []byte(e.must("receipt", appliedOp(e, "a1.txt")).stdout)
	oldPub := writeTemp(t, []byte(e.must("receipt", "key").stdout))
	out := e.must("receipt", "key", "new").stdout
	if !strings.Contains(out, "it replaces sha256:") || !strings.Contains(out, "needs that old public key") {
		t.Errorf("receipt key new does not say old receipts need the old public key:\n%s", out)
	}
	newEnv := []byte(e.must("receipt", appliedOp(e, "a2.txt")).stdout)
	newPub := writeTemp(t, []byte(e.must("receipt", "key").stdout))
	check := func(name string, env []byte, extra []string, ok bool, says string) {
		t.Helper()
		r := verifyDoc(e, env, extra...)
		if (r.code == 0) != ok || ok && !strings.Contains(r.stdout, says) {
			t.Errorf("%s: exit %d, want ok=%v saying %q: %s%s", name, r.code, ok, says, r.stdout, r.stderr)
		}
	}
	check("old receipt, state root", oldEnv, nil, true, "an older key of yours")
	check("new receipt, state root", newEnv, nil, true, "your current key")
	check("old receipt, old key", oldEnv, []string{"--key", oldPub}, true, "the key given")
	check("new receipt, new key", newEnv, []string{"--key", newPub}, true, "the key given")
	check("old receipt, new key", oldEnv, []string{"--key", newPub}, false, "")
	check("new receipt, old key", newEnv, []string{"--key", oldPub}, false, "")
	if all := e.must("receipt", "key", "--all").stdout; strings.Count(all, "BEGIN PUBLIC KEY") != 2 || !strings.Contains(all, "(current)") || !strings.Contains(all, "(retired)") {
		t.Errorf("receipt key --all does not list the current and the retired key:\n%s", all)
	}
	// A damaged key is set aside by 'key new', and what it signed still
	// verifies.
	if err := os.Truncate(keyPath(e.st), 10); err != nil {
		t.Fatal(err)
	}
	var ch struct {
		SetAside string `json:"set_aside"`
		Replaced string `json:"replaced"`
		Kept     []string
	}
	if err := json.Unmarshal([]byte(e.must("--json", "receipt", "key", "new").stdout), &ch); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(ch.SetAside); err != nil || fi.Size() != 10 || ch.Replaced != "" || len(ch.Kept) != 3 {
		t.Errorf("receipt key new over a damaged key: set aside %q (%v), replaced %q, kept %v", ch.SetAside, err, ch.Replaced, ch.Kept)
	}
	check("newer receipt after a second new key", newEnv, nil, true, "an older key of yours")
	appliedOp(e, "a3.txt")

	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fp.env = []string{"WTX_DISABLE=receipt-keyring"}
	if r := verifyDoc(&fp, oldEnv); r.code == 0 {
		t.Errorf("with WTX_DISABLE=receipt-keyring a receipt of a replaced key still verifies: %s", r.stdout)
	}
}

// TestT_006_KeyHiddenFromStagedCommands: a command run in a stage's
// namespaces cannot read the receipt key (nor an old one set aside): it
// could otherwise sign receipts for the user. Where the command does not
// run in namespaces (no user namespaces here) there is nothing to hide
// it from: the same user's processes read their own files. Negative
// control: WTX_DISABLE=hide-keys lets the command read it.
func TestT_006_KeyHiddenFromStagedCommands(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.stage("echo x > x.txt")
	e.must("receipt", "key", "new") // an old key in keys/set-aside too
	read := func(e *stateEnv, backend string) (int, string) {
		t.Helper()
		script := `for f in "$1"/keys/receipt-ed25519.pem "$1"/keys/set-aside/*; do cat "$f" || exit 9; done >/dev/null`
		r := e.run("--json", "run", "--backend", backend, "--", "sh", "-c", script, "sh", e.st)
		var out struct {
			ExitCode    int    `json:"exit_code"`
			Containment string `json:"containment"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("run --json: %v\n%s%s", err, r.stdout, r.stderr)
		}
		return out.ExitCode, out.Containment
	}
	backends := []string{"copy"}
	if e.run("run", "--backend", "overlay", "--", "true").code == 0 {
		backends = append(backends, "overlay")
	}
	for _, b := range backends {
		code, cont := read(e, b)
		if cont != "pid-namespace" {
			t.Logf("%s: the command runs under %q, not in namespaces: nothing hides the key from the user's own processes", b, cont)
			continue
		}
		if code == 0 {
			t.Errorf("%s: a command in the stage read the receipt key", b)
		}
		if code, _ := read(failpointEnv(t, e, "hide-keys"), b); code != 0 {
			t.Errorf("%s: with WTX_DISABLE=hide-keys the command still cannot read the key (exit %d): the test proves nothing", b, code)
		}
	}
}

// TestT_006_AmbiguousNames: a document in which one object names a field
// twice, or twice up to case (Go's decoder matches names ignoring case
// and takes the last; other readers take another), is refused: in the
// answer beside the envelope, and inside a statement signed by the key
// given. Negative control: WTX_DISABLE=receipt-ambiguous lets the signed
// one through as valid.
func TestT_006_AmbiguousNames(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	op := appliedOp(e, "b.txt")
	ans := e.must("--json", "receipt", op).stdout
	doc := genericDoc(t, []byte(ans))
	rec := doc["receipt"].(map[string]any)
	rec["approved"] = true
	altered := string(encodeDoc(t, rec))
	for name, d := range map[string]string{
		"receipt twice":        `{"receipt":` + altered + `,` + ans[1:],
		"Receipt and receipt":  `{"Receipt":` + altered + `,` + ans[1:],
		"a name twice in it":   strings.Replace(ans, `"approved":false`, `"approved":true,"approved":false`, 1),
		"a name twice by case": strings.Replace(ans, `"approved":false`, `"Approved":true,"approved":false`, 1),
	} {
		if d == ans {
			t.Fatalf("%s: the answer was not changed", name)
		}
		if r := verifyDoc(e, []byte(d)); r.code == 0 {
			t.Errorf("an answer with %s verifies: %s", name, r.stdout)
		}
	}
	// Signed by the forger's own key, with the name twice in the statement.
	_, forger, _ := ed25519.GenerateKey(rand.Reader)
	pub := publicPEM(t, forger.Public().(ed25519.PublicKey))
	env, _ := decodeSigned(t, []byte(e.must("receipt", op).stdout))
	p := strings.Replace(string(env.Payload), `"approved":false`, `"approved":true,"approved":false`, 1)
	if p == string(env.Payload) {
		t.Fatalf("the statement holds no \"approved\":false")
	}
	env.Payload = []byte(p)
	env.Signatures = env.Signatures[:1]
	env.Signatures[0].KeyID = ""
	env.Signatures[0].Sig = ed25519.Sign(forger, pae(env.PayloadType, env.Payload))
	signed, _ := json.Marshal(env) // it came from JSON
	if r := verifyDoc(e, signed, "--key", pub); r.code == 0 {
		t.Errorf("a signed statement naming approved twice verifies: %s", r.stdout)
	}
	if r := verifyDoc(failpointEnv(t, e, "receipt-ambiguous"), signed, "--key", pub); r.code != 0 {
		t.Errorf("with WTX_DISABLE=receipt-ambiguous the statement naming approved twice is still refused: %v", r)
	}
}
