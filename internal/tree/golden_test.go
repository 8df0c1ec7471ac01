package tree

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func goldenManifest() *Manifest {
	dg := "sha256:" + strings.Repeat("cd", 32)
	ws := Stat{Ino: 42, Dev: 2049, Size: 5, Mtime: 1700000000123456789, Ctime: 1700000000987654321}
	return &Manifest{Fence: 1700000000000000000, ViewFence: -1, Entries: []Entry{
		{Path: "a", Type: Dir, Perm: 0o755, WS: Stat{Ino: 3, Dev: 2049}},
		{Path: "a/f", Type: File, Perm: 0o644, Size: 5, Digest: dg, WS: ws, View: Stat{Ino: 9, Dev: 50, Size: 5, Mtime: 1, Ctime: 2}},
		{Path: "fifo", Type: Special, Perm: 0o600},
		{Path: "l", Type: Symlink, Perm: 0o777, Size: 3, Target: "a/f"},
	}}
}

// TestManifestGoldenBytes pins manifest format version 1 byte for byte,
// with the persisted numbers of Type inside it.
func TestManifestGoldenBytes(t *testing.T) {
	path := filepath.Join("testdata", "manifest-v1.hex")
	var buf bytes.Buffer
	if err := Encode(&buf, goldenManifest()); err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	if *update {
		if err := os.WriteFile(path, []byte(hexLines(got)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := hex.DecodeString(strings.Join(strings.Fields(string(data)), ""))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("manifest encoding changed (a format change needs a new version):\ngot\n%s\nwant\n%s", hexLines(got), hexLines(want))
	}
	m, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, goldenManifest()) {
		t.Fatalf("golden manifest decodes to\n%+v", m)
	}
}

// TestPersistedDigests pins the content and change-set digests: receipts
// and reviewed digests (apply --expect) keep them, so the persisted numbers
// of Type and Action they hash must never move.
func TestPersistedDigests(t *testing.T) {
	m := goldenManifest()
	if got, want := Digest(m.Entries), "sha256:f39207d73d5cd386e8ff8442de2949191f2a110c5a0d665add96ebefc8f7a6dd"; got != want {
		t.Errorf("Digest = %s, want %s", got, want)
	}
	cs := []Change{
		{Path: "a/f", Action: Modified, Old: &m.Entries[1], New: &Entry{Path: "a/f", Type: File, Perm: 0o755, Digest: m.Entries[1].Digest}},
		{Path: "l", Action: Deleted, Old: &m.Entries[3]},
		{Path: "n", Action: Added, New: &Entry{Path: "n", Type: Dir, Perm: 0o700}},
	}
	if got, want := ChangesetDigest(cs), "sha256:8a84ef1612aeb02b24404af776932972888c71c562fa411d792657655f82144a"; got != want {
		t.Errorf("ChangesetDigest = %s, want %s", got, want)
	}
}

func hexLines(b []byte) string {
	var sb strings.Builder
	for len(b) > 0 {
		n := min(32, len(b))
		sb.WriteString(hex.EncodeToString(b[:n]))
		sb.WriteByte('\n')
		b = b[n:]
	}
	return sb.String()
}
