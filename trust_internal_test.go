package wtx

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/receipt"
)

func newPub(t *testing.T) ed25519.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return pub
}

// The trust file round-trips through add, list and remove, and a line
// that does not parse makes the whole file an error.
func TestTrustFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	a, b := newPub(t), newPub(t)
	if keys, err := LoadTrust(dir); err != nil || len(keys) != 0 {
		t.Fatalf("no trust file: %v %v", keys, err)
	}
	if _, added, err := AddTrustedKey(dir, a, "alice  at\tlaptop"); err != nil || !added {
		t.Fatalf("add: %v %v", added, err)
	}
	if _, added, err := AddTrustedKey(dir, a, ""); err != nil || added {
		t.Fatalf("add again: %v %v", added, err)
	}
	if _, _, err := AddTrustedKey(dir, b, "bob\x1b[2Jevil"); err == nil {
		t.Fatal("a name with a control character was taken")
	}
	if k, _, err := AddTrustedKey(dir, b, "bob\n"); err != nil || k.Name != "bob" {
		t.Fatalf("add bob: %+v %v", k, err)
	}
	keys, err := LoadTrust(dir)
	if err != nil || len(keys) != 2 || keys[0].Name != "alice at laptop" || keys[0].KeyID != receipt.KeyID(a) || !keys[1].PublicKey.Equal(b) {
		t.Fatalf("load: %+v %v", keys, err)
	}
	if _, err := RemoveTrustedKey(dir, strings.TrimPrefix(receipt.KeyID(b), "sha256:")[:8]); err != nil {
		t.Fatal(err)
	}
	var e *Error
	if _, err := RemoveTrustedKey(dir, "bob"); !errors.As(err, &e) || e.Code != CodeKeyNotFound {
		t.Fatalf("remove twice: %v", err)
	}
	fi, err := os.Stat(TrustFilePath(dir))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("trust file mode: %v %v", fi, err)
	}
	for _, bad := range []string{"ed25519\n", "rsa AAAA x\n", "ed25519 !!!\n", "ed25519 AAAA\n"} {
		if err := os.WriteFile(TrustFilePath(dir), []byte("# c\n\n"+bad), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTrust(dir); !errors.As(err, &e) || e.Code != CodeCorrupt {
			t.Fatalf("%q: got %v, want io.corrupt", bad, err)
		}
	}
	line := "ed25519 " + strings.Fields(string(trustLine(t, a)))[1]
	if err := os.WriteFile(TrustFilePath(dir), []byte(line+" a\n"+line+" b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadTrust(dir); err == nil {
		t.Fatal("a key listed twice was taken")
	}
}

// trustLine is the trust file's line for pub, as AddTrustedKey writes it.
func trustLine(t *testing.T, pub ed25519.PublicKey) []byte {
	dir := filepath.Join(t.TempDir(), "s")
	if _, _, err := AddTrustedKey(dir, pub, ""); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(TrustFilePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	return []byte(lines[len(lines)-1])
}

// ParseTrustKey takes the PEM 'receipt key' prints, a trust file line and
// the bare base64.
func TestParseTrustKey(t *testing.T) {
	pub := newPub(t)
	line := string(trustLine(t, pub))
	for _, in := range []string{string(receipt.PublicKeyPEM(pub)), line + " carol", strings.Fields(line)[1]} {
		got, _, err := ParseTrustKey([]byte(in))
		if err != nil || !got.Equal(pub) {
			t.Fatalf("%q: %v", in, err)
		}
	}
	if _, name, _ := ParseTrustKey([]byte(line + " carol d")); name != "carol d" {
		t.Fatalf("name %q", name)
	}
}
