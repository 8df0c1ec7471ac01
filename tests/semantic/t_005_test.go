package semantic

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/bundle"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// importAnswer is what the tests read of an import's --json answer.
type importAnswer struct {
	Tx              string `json:"tx"`
	ChangesetDigest string `json:"changeset_digest"`
	Origin          struct {
		FromTx          string `json:"from_tx"`
		ChangesetDigest string `json:"changeset_digest"`
	} `json:"origin"`
	Proof struct {
		Status  string `json:"status"`
		Receipt string `json:"receipt"`
		KeyID   string `json:"key_id"`
		KeyName string `json:"key_name"`
		Trusted bool   `json:"trusted"`
	} `json:"proof"`
	LeftOut []struct {
		Path    string `json:"path"`
		PathB64 string `json:"path_b64"`
		Type    string `json:"type"`
	} `json:"left_out"`
}

func decodeBundle(t *testing.T, data []byte) *bundle.Bundle {
	t.Helper()
	b, err := bundle.Decode(data, bundle.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reencode writes b as a forger does: every inner digest recomputed, the
// bundle's own digest too (Encode checks what Decode checks).
func reencode(t *testing.T, b *bundle.Bundle) []byte {
	t.Helper()
	b.Origin.ChangesetDigest = tree.ChangesetDigest(b.Changes())
	var out bytes.Buffer
	if err := bundle.Encode(&out, b); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// swapContent gives path other content, as a man in the middle who knows
// the format would: the receipts stay as they were signed.
func swapContent(t *testing.T, b *bundle.Bundle, path, content string) {
	t.Helper()
	for i := range b.Entries {
		if e := &b.Entries[i]; e.Path == path {
			ne := *e.New
			ne.Size, ne.Digest = int64(len(content)), string(blob.Sum([]byte(content)))
			e.New, e.Content, e.Base = &ne, []byte(content), nil
			return
		}
	}
	t.Fatalf("the bundle has no entry %q", path)
}

// lastReceipt is the bundle's last receipt (the export's) as a receipt.
func lastReceipt(t *testing.T, b *bundle.Bundle) receipt.Receipt {
	t.Helper()
	var env receipt.Envelope
	if err := json.Unmarshal(b.Receipts[len(b.Receipts)-1], &env); err != nil {
		t.Fatal(err)
	}
	var st receipt.Statement
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		t.Fatal(err)
	}
	return st.Predicate
}

// forgedReceipt is r made to name b's (altered) change set: bare, or
// signed with priv (whose public key the bundle then carries).
func forgedReceipt(t *testing.T, b *bundle.Bundle, r receipt.Receipt, priv ed25519.PrivateKey) []byte {
	t.Helper()
	r.ID, r.ChangesetDigest = r.ID+"f", b.Origin.ChangesetDigest
	r.Digest = r.ComputeDigest()
	if priv == nil {
		body, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	var subj []receipt.Subject
	for _, s := range []struct{ name, d string }{{"result", r.ResultDigest}, {"changeset", r.ChangesetDigest}, {"base", r.BaseDigest}} {
		subj = append(subj, receipt.Subject{Name: s.name, Digest: map[string]string{"sha256": strings.TrimPrefix(s.d, "sha256:")}})
	}
	payload, err := json.Marshal(receipt.Statement{Type: receipt.StatementTypeV1, Subject: subj, PredicateType: receipt.PredicateType, Predicate: r})
	if err != nil {
		t.Fatal(err)
	}
	pub := priv.Public().(ed25519.PublicKey)
	env := receipt.Envelope{PayloadType: receipt.PayloadTypeInToto, Payload: payload,
		Signatures: []receipt.Signature{{KeyID: receipt.KeyID(pub), Sig: ed25519.Sign(priv, receipt.PAE(receipt.PayloadTypeInToto, payload))}}}
	body, err := json.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	b.Keys = append(b.Keys, pub)
	return body
}

// t005Swapped makes A's genuine bundle and the forgeries of it, and
// imports each on B; it returns the forgeries B took.
func t005Swapped(t *testing.T, failpoints bool, env []string) (taken []string) {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	tx := a.runAgent("fix")
	genuine := []byte(a.ok(nil, "export", tx).stdout)
	var imp importAnswer
	b.answer(b.ok(genuine, "--json", "import", "-"), &imp)
	if imp.Proof.Status != "signed" || imp.Proof.KeyID == "" || imp.ChangesetDigest != a.digest(tx) {
		t.Fatalf("the genuine bundle imported with proof %+v, change set %s (A's %s)", imp.Proof, imp.ChangesetDigest, a.digest(tx))
	}
	b.ok(nil, "drop", "--all")
	stages, before := len(b.stages()), b.tree()

	forge := func(mutate func(*bundle.Bundle)) []byte {
		fb := decodeBundle(t, genuine)
		swapContent(t, fb, "src/main.go", "package main\n\nfunc main() { println(\"owned\") }\n")
		swapContent(t, fb, oddName, "odd, and owned\n") // a name that is not UTF-8
		fb.Origin.ChangesetDigest = tree.ChangesetDigest(fb.Changes())
		if mutate != nil {
			mutate(fb)
		}
		return reencode(t, fb)
	}
	forgeries := []alteration{
		{"content swapped, receipts kept", forge(nil)},
		{"content swapped, a bare receipt forged to name it", forge(func(fb *bundle.Bundle) {
			fb.Receipts = append(fb.Receipts, forgedReceipt(t, fb, lastReceipt(t, fb), nil))
		})},
		{"content kept, the signer's key changed", func() []byte {
			fb := decodeBundle(t, genuine)
			fb.Keys[0] = bytes.Clone(fb.Keys[0])
			fb.Keys[0][7] ^= 0x20
			return reencode(t, fb)
		}()},
	}
	for _, f := range forgeries {
		r := b.wtx(f.data, "--json", "import", "-")
		if r.code == 0 {
			taken = append(taken, f.class)
			continue
		}
		if code := errCode(t, r); r.code != 1 || code != "io.corrupt" {
			t.Fatalf("%s: exit %d code %q, want 1 io.corrupt\n%s%s", f.class, r.code, code, r.stdout, r.stderr)
		}
	}
	if len(taken) == 0 {
		if n := len(b.stages()); n != stages {
			t.Fatalf("refused imports left %d stages", n-stages)
		}
		if d := diffSnapshots(before, b.tree()); len(d) > 0 {
			t.Fatalf("refused imports changed B:\n%s", formatDiff(d, 20))
		}
	}
	return taken
}

// TestT_005_SwappedContentRefused: a bundle whose content was changed and
// resealed (every digest the bundle holds recomputed), with the genuine
// signed receipts still attached, is refused as io.corrupt: none of its
// signed receipts names what it carries. A bare receipt forged to name
// the new content does not help, nor does changing the signer's key it
// carries (so that the signatures go unchecked). Nothing is made on B.
func TestT_005_SwappedContentRefused(t *testing.T) {
	t.Parallel()
	if taken := t005Swapped(t, false, nil); len(taken) > 0 {
		t.Fatalf("B imported forgeries: %q", taken)
	}
}

// TestT_005_SwappedContentNegativeControl: without the check that the
// receipts name the content (WTX_DISABLE=receipt-binding), every forgery
// imports as the change set of A's stage.
func TestT_005_SwappedContentNegativeControl(t *testing.T) {
	t.Parallel()
	if taken := t005Swapped(t, true, []string{"WTX_DISABLE=receipt-binding"}); len(taken) != 3 {
		t.Fatalf("negative control: with the binding check off only %q got through", taken)
	}
}

// t005Trust imports, on B, A's genuine bundle, the same content with its
// receipts stripped, and the same content re-signed by a stranger's key,
// with and without --require-signed / --require-trusted and A's key in
// B's trust file. It returns the imports that got through a requirement
// they should not have.
func t005Trust(t *testing.T, failpoints bool, env []string) (wrong []string) {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	tx := a.runAgent("fix")
	genuine := []byte(a.ok(nil, "export", tx).stdout)
	var key struct {
		KeyID     string `json:"key_id"`
		PublicKey string `json:"public_key"`
	}
	a.answer(a.ok(nil, "--json", "receipt", "key"), &key)
	stripped := decodeBundle(t, genuine)
	stripped.Receipts, stripped.Keys = nil, nil
	unsigned := reencode(t, stripped)
	_, stranger, _ := ed25519.GenerateKey(rand.Reader)
	resigned := decodeBundle(t, genuine)
	swapContent(t, resigned, "src/main.go", "package main\n// theirs\n")
	resigned.Origin.ChangesetDigest = tree.ChangesetDigest(resigned.Changes())
	r := lastReceipt(t, resigned)
	resigned.Keys = nil // the stranger carries only their own key
	resigned.Receipts = [][]byte{forgedReceipt(t, resigned, r, stranger)}
	strangers := reencode(t, resigned)

	try := func(name string, data []byte, flag, wantStatus, wantKey string, ok bool) {
		t.Helper()
		args := []string{"--json", "import", "-"}
		if flag != "" {
			args = append(args, flag)
		}
		r := b.wtx(data, args...)
		switch {
		case r.code == 0 && !ok:
			wrong = append(wrong, name)
		case r.code != 0 && ok:
			t.Fatalf("%s: exit %d\n%s%s", name, r.code, r.stdout, r.stderr)
		case r.code != 0:
			if code := errCode(t, r); r.code != 2 || code != "refusal.unverified" {
				t.Fatalf("%s: exit %d code %q, want 2 refusal.unverified\n%s", name, r.code, code, r.stdout)
			}
			return
		}
		var imp importAnswer
		b.answer(r, &imp)
		if ok && (imp.Proof.Status != wantStatus || imp.Proof.KeyID != wantKey) {
			t.Fatalf("%s: proof %+v, want status %s by %q", name, imp.Proof, wantStatus, wantKey)
		}
		b.ok(nil, "drop", "--all")
	}
	strangerID := receipt.KeyID(stranger.Public().(ed25519.PublicKey))
	try("genuine", genuine, "", "signed", key.KeyID, true)
	try("genuine, signed required", genuine, "--require-signed", "signed", key.KeyID, true)
	try("genuine, trusted required, key not in the trust file", genuine, "--require-trusted", "", "", false)
	try("stripped", unsigned, "", "unsigned", "", true)
	try("stripped, signed required", unsigned, "--require-signed", "", "", false)
	try("stranger's key", strangers, "", "signed", strangerID, true)
	try("stranger's key, trusted required", strangers, "--require-trusted", "", "", false)

	pem := filepath.Join(t.TempDir(), "a.pem")
	if err := os.WriteFile(pem, []byte(key.PublicKey), 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok(nil, "receipt", "trust", "add", pem, "--name", "alice at A")
	var list struct {
		Keys []struct {
			KeyID string `json:"key_id"`
			Name  string `json:"name"`
		} `json:"keys"`
	}
	b.answer(b.ok(nil, "--json", "receipt", "trust", "list"), &list)
	if len(list.Keys) != 1 || list.Keys[0].KeyID != key.KeyID || list.Keys[0].Name != "alice at A" {
		t.Fatalf("trust list: %+v", list.Keys)
	}
	try("genuine, trusted required, key in the trust file", genuine, "--require-trusted", "trusted", key.KeyID, true)
	try("stranger's key, trusted required, A's key in the trust file", strangers, "--require-trusted", "", "", false)
	b.ok(nil, "receipt", "trust", "remove", "alice at A")
	try("genuine, trusted required, key removed", genuine, "--require-trusted", "", "", false)

	// On A, its own key is trusted without a line.
	var own importAnswer
	a.answer(a.ok(genuine, "--json", "import", "-", "--require-trusted"), &own)
	if own.Proof.Status != "trusted" || own.Proof.KeyID != key.KeyID || own.Proof.KeyName == "" {
		t.Fatalf("own key: proof %+v", own.Proof)
	}
	a.ok(nil, "drop", own.Tx)
	return wrong
}

// t005Replaced exports a change set from A, gives A a new receipt key
// and imports the change set back on A: the answers with and without
// --require-trusted.
func t005Replaced(t *testing.T, env []string) (plain importAnswer, required wtxResult, oldKey string) {
	a, _, _ := twoMachines(t, len(env) > 0)
	a.env = env
	tx := a.runAgent("fix")
	genuine := []byte(a.ok(nil, "export", tx).stdout)
	var key struct {
		KeyID string `json:"key_id"`
	}
	a.answer(a.ok(nil, "--json", "receipt", "key"), &key)
	a.ok(nil, "receipt", "key", "new")
	a.answer(a.ok(genuine, "--json", "import", "-"), &plain)
	a.ok(nil, "drop", plain.Tx)
	return plain, a.wtx(genuine, "--json", "import", "-", "--require-trusted"), key.KeyID
}

// TestT_005_ReplacedKeyIsNotTrusted: once 'receipt key new' replaced a
// key (perhaps because it leaked), what the old key signed still verifies
// on the same state root, named as a replaced key of its own, but is
// trusted only by a line in the trust file: --require-trusted refuses it.
func TestT_005_ReplacedKeyIsNotTrusted(t *testing.T) {
	t.Parallel()
	plain, required, old := t005Replaced(t, nil)
	if plain.Proof.Status != "signed" || plain.Proof.Trusted || plain.Proof.KeyID != old || plain.Proof.KeyName != wtx.RetiredKeyName {
		t.Errorf("import of a change set signed by a replaced key: proof %+v, want signed, not trusted, by %s named %q", plain.Proof, old, wtx.RetiredKeyName)
	}
	if code := errCode(t, required); required.code != 2 || code != "refusal.unverified" {
		t.Errorf("--require-trusted with a replaced key: exit %d code %q, want 2 refusal.unverified\n%s", required.code, code, required.stdout)
	}
}

// TestT_005_ReplacedKeyIsNotTrustedNegativeControl: with the rule off
// (WTX_DISABLE=retired-key-trust) the replaced key is trusted and
// --require-trusted lets its change set in.
func TestT_005_ReplacedKeyIsNotTrustedNegativeControl(t *testing.T) {
	t.Parallel()
	plain, required, _ := t005Replaced(t, []string{"WTX_DISABLE=retired-key-trust"})
	if plain.Proof.Status != "trusted" || required.code != 0 {
		t.Errorf("with the rule off a replaced key was not trusted: proof %+v, --require-trusted exit %d", plain.Proof, required.code)
	}
}

// TestT_005_SignerAndTrust: an import says which key signed the receipt
// that names its change set and whether this side trusts it: A's key is
// "signed" until B adds it to its trust file ('receipt trust add'), then
// "trusted"; --require-trusted takes only that; a bundle whose receipts
// were stripped is "unsigned" and --require-signed refuses it; content
// re-signed by a stranger's key says so and --require-trusted refuses it.
// On A, its own key is trusted without a line.
func TestT_005_SignerAndTrust(t *testing.T) {
	t.Parallel()
	if wrong := t005Trust(t, false, nil); len(wrong) > 0 {
		t.Fatalf("imports got through what they require: %q", wrong)
	}
}

// TestT_005_SignerAndTrustNegativeControl: with the requirement check off
// (WTX_DISABLE=import-require), unsigned and untrusted change sets get
// through --require-signed and --require-trusted.
func TestT_005_SignerAndTrustNegativeControl(t *testing.T) {
	t.Parallel()
	if wrong := t005Trust(t, true, []string{"WTX_DISABLE=import-require"}); len(wrong) != 5 {
		t.Fatalf("negative control: with the check off only %q got through", wrong)
	}
}

// TestT_005_DamagedTrustFile: a trust file that does not parse, or that
// is a symlink, is an error for the import and for trust list: never read
// as "trusts nobody" or "trusts what parsed".
func TestT_005_DamagedTrustFile(t *testing.T) {
	t.Parallel()
	a, b, _ := twoMachines(t, false)
	genuine := []byte(a.ok(nil, "export", a.runAgent("fix")).stdout)
	pem := filepath.Join(t.TempDir(), "a.pem")
	if err := os.WriteFile(pem, []byte(a.ok(nil, "receipt", "key").stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	b.ok(nil, "receipt", "trust", "add", pem)
	file := filepath.Join(b.state, "trusted-keys")
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, append(bytes.Clone(good), "ed25519 bm90IGEga2V5 bob\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--json", "import", "-"}, {"--json", "receipt", "trust", "list"}} {
		if r := b.wtx(genuine, args...); r.code == 0 || errCode(t, r) != "io.corrupt" {
			t.Fatalf("%q with a damaged trust file: exit %d code %q, want io.corrupt\n%s", args, r.code, errCode(t, r), r.stdout)
		}
	}
	elsewhere := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(elsewhere, good, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, file); err != nil {
		t.Fatal(err)
	}
	if r := b.wtx(genuine, "--json", "import", "-", "--require-trusted"); r.code == 0 || errCode(t, r) != "precondition.state-unsafe" {
		t.Fatalf("import with a trust file that is a symlink: exit %d code %q\n%s", r.code, errCode(t, r), r.stdout)
	}
	if n := len(b.stages()); n != 0 {
		t.Fatalf("refused imports left %d stages", n)
	}
}

// t005LeftOut imports A's change set on B, whose project file excludes
// two paths it changes (an added binary file and a modified file whose
// name is not UTF-8), applies it, and reports whether the import listed
// both as left out with the two digests told apart, and B kept its own
// copy of the excluded file.
func t005LeftOut(t *testing.T, failpoints bool, env []string) bool {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	mustWrite(t, filepath.Join(b.ws, ".wtx.toml"), "exclude = [\"blob.bin\", \"n*name\"]\n")
	bundle := []byte(a.ok(nil, "export", a.runAgent("fix")).stdout)
	r := b.wtx(bundle, "--json", "import", "-")
	if r.code != 0 {
		t.Logf("import: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		return false
	}
	var imp importAnswer
	b.answer(r, &imp)
	listed := map[string]bool{}
	for _, l := range imp.LeftOut {
		p := l.Path
		if l.PathB64 != "" {
			raw, _ := base64.StdEncoding.DecodeString(l.PathB64) // a bad one fails the match below
			p = string(raw)
		}
		listed[p+" "+l.Type] = true
	}
	ok := len(imp.LeftOut) == 2 && listed["blob.bin file"] && listed[oddName+" file"] &&
		imp.ChangesetDigest != imp.Origin.ChangesetDigest && imp.Origin.ChangesetDigest == a.digest(imp.Origin.FromTx)
	if !ok {
		t.Logf("left_out %+v; change set here %s, origin's %s", imp.LeftOut, imp.ChangesetDigest, imp.Origin.ChangesetDigest)
	}
	// The notice on stderr says so too.
	text := b.wtx(bundle, "import", "-")
	if !strings.Contains(text.stderr, "left out") || !strings.Contains(text.stderr, imp.Origin.ChangesetDigest) {
		t.Logf("the import says nothing of what it left out:\n%s", text.stderr)
		ok = false
	}
	b.ok(nil, "drop", text.stdout[:len(text.stdout)-1])
	b.ok(nil, "apply", imp.Tx)
	if got, err := os.ReadFile(filepath.Join(b.ws, oddName)); err != nil || string(got) != "odd\n" {
		t.Logf("after apply, B's excluded %q holds %q (%v), want its own \"odd\\n\"", oddName, got, err)
		ok = false
	}
	if _, err := os.Lstat(filepath.Join(b.ws, "blob.bin")); !os.IsNotExist(err) {
		t.Logf("after apply, the excluded blob.bin is in B (%v)", err)
		ok = false
	}
	return ok
}

// TestT_005_ImportLeftOut: entries a change set brings under the
// importer's excludes are left out of the stage, listed in the answer
// (left_out, byte-exact names) and on stderr, with the stage's change-set
// digest told apart from the origin's; the apply leaves B's own copies as
// they are (a modification is never turned into a deletion).
func TestT_005_ImportLeftOut(t *testing.T) {
	t.Parallel()
	if !t005LeftOut(t, false, nil) {
		t.Fatal("an import under excludes did not leave out and list what they cover")
	}
}

// TestT_005_ImportLeftOutNegativeControl: with the split off
// (WTX_DISABLE=import-left-out) nothing is listed and B loses its copy.
func TestT_005_ImportLeftOutNegativeControl(t *testing.T) {
	t.Parallel()
	if t005LeftOut(t, true, []string{"WTX_DISABLE=import-left-out"}) {
		t.Fatal("negative control: the import under excludes held with the split off")
	}
}

// t005Protected imports on B a change set that writes the project file
// (protected by default) and reports whether B's apply without --approve
// went through; with --approve it must.
func t005Protected(t *testing.T, failpoints bool, env []string) bool {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	var run struct {
		Tx string `json:"tx"`
	}
	a.answer(a.ok(nil, "--json", "run", "--", "sh", "-c", `printf 'exclude = ["src"]\n' > .wtx.toml; echo x >> README`), &run)
	var imp importAnswer
	b.answer(b.ok([]byte(a.ok(nil, "export", run.Tx).stdout), "--json", "import", "-"), &imp)
	r := b.wtx(nil, "--json", "apply", imp.Tx)
	if r.code == 0 {
		return true
	}
	if code := errCode(t, r); r.code != 2 || code != "refusal.protected" {
		t.Fatalf("apply of an imported change to .wtx.toml: exit %d code %q\n%s", r.code, code, r.stdout)
	}
	if _, err := os.Lstat(filepath.Join(b.ws, ".wtx.toml")); !os.IsNotExist(err) {
		t.Fatal("a refused apply wrote .wtx.toml")
	}
	b.ok(nil, "apply", imp.Tx, "--approve")
	return false
}

// TestT_005_ImportedApplyIsGated: a received change set is applied by the
// importer like any stage: one that touches a protected path (the project
// file, protected by default) needs --approve (the authority table's
// "received change set" column).
func TestT_005_ImportedApplyIsGated(t *testing.T) {
	t.Parallel()
	if t005Protected(t, false, nil) {
		t.Fatal("an imported change to .wtx.toml applied without --approve")
	}
}

// TestT_005_ImportedApplyIsGatedNegativeControl: with the project file's
// default protection off (WTX_DISABLE=project-protect) it applies.
func TestT_005_ImportedApplyIsGatedNegativeControl(t *testing.T) {
	t.Parallel()
	if !t005Protected(t, true, []string{"WTX_DISABLE=project-protect"}) {
		t.Fatal("negative control: the apply was still refused with the protection off")
	}
}
