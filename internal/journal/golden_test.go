package journal

import (
	"bytes"
	"encoding/hex"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/tree"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// goldenJournal has one record of every step kind and an entry of every
// type a journal carries, so that renumbering any persisted enum, or
// reordering any field, changes the bytes.
func goldenJournal() *Journal {
	file := &tree.Entry{Type: tree.File, Perm: 0o644, Size: 5, Digest: "sha256:" + strings.Repeat("ab", 32)}
	exe := &tree.Entry{Type: tree.File, Perm: 0o755, Size: 5, Digest: file.Digest}
	link := &tree.Entry{Type: tree.Symlink, Perm: 0o777, Size: 3, Target: "a/b"}
	dir := &tree.Entry{Type: tree.Dir, Perm: 0o755}
	id := tree.Stat{Ino: 42, Dev: 2049, Size: 5, Mtime: 1700000000123456789, Ctime: 1700000000987654321}
	return &Journal{
		OpID: "op-20261201T164000-0123abcd", Kind: "apply", StageID: "tx-1", Workspace: "/w",
		Body: []byte(`{"op":{}}`),
		Records: []Record{
			{Step: tree.Step{Kind: tree.StepRemove, Path: "gone/f", Old: file}, Tmp: ".wtx-tmp-op-0123abcd-0-", Ident: id, Unlink: true},
			{Step: tree.Step{Kind: tree.StepRmdir, Path: "gone", Old: dir}, Tmp: ".wtx-tmp-op-0123abcd-1-", Ident: tree.Stat{Ino: 7}},
			{Step: tree.Step{Kind: tree.StepMkdir, Path: "new", New: dir}, Tmp: ".wtx-tmp-op-0123abcd-2-"},
			{Step: tree.Step{Kind: tree.StepWrite, Path: "new/f", New: file}, Tmp: ".wtx-tmp-op-0123abcd-3-"},
			{Step: tree.Step{Kind: tree.StepSymlink, Path: "l", Old: link, New: &tree.Entry{Type: tree.Symlink, Perm: 0o777, Size: 1, Target: "c"}}, Tmp: ".wtx-tmp-op-0123abcd-4-", Ident: id},
			{Step: tree.Step{Kind: tree.StepChmod, Path: "x", Old: file, New: exe}, Tmp: ".wtx-tmp-op-0123abcd-5-", Ident: id},
			{Step: tree.Step{Kind: tree.StepDirPerm, Path: "new", Old: dir, New: &tree.Entry{Type: tree.Dir, Perm: 0o700}}, Tmp: ".wtx-tmp-op-0123abcd-6-"},
		},
	}
}

// TestGoldenBytes pins format version 1 of the journal byte for byte: a
// journal written by an older wtx must still be read by recovery.
func TestGoldenBytes(t *testing.T) {
	path := filepath.Join("testdata", "journal-v1.hex")
	got := Encode(goldenJournal())
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
		t.Fatalf("journal encoding changed (a format change needs a new version):\ngot\n%s\nwant\n%s", hexLines(got), hexLines(want))
	}
	j, err := Decode(want)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(j, goldenJournal()) {
		t.Fatalf("golden journal decodes to\n%+v", j)
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
