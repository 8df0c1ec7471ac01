package journal

import (
	"bytes"
	"errors"
	"testing"

	"github.com/wtx-dev/wtx/internal/tree"
)

func sampleJournal() *Journal {
	return &Journal{OpID: "op-20260101-abcdef01", Kind: "apply", StageID: "tx-1", Workspace: "/w\nodd\xff",
		Body: []byte(`{"op":1}`),
		Records: []Record{
			{Step: tree.Step{Kind: tree.StepWrite, Path: "a\\..\\b", New: &tree.Entry{Path: "a\\..\\b", Type: tree.File, Perm: 0o644, Size: 3, Digest: "d1"}}, Tmp: ".wtx-tmp-1-0-"},
			{Step: tree.Step{Kind: tree.StepSymlink, Path: "dir/l\n", Old: &tree.Entry{Path: "dir/l\n", Type: tree.File, Perm: 0o755, Size: 1, Digest: "d0"},
				New: &tree.Entry{Path: "dir/l\n", Type: tree.Symlink, Target: "/etc/passwd"}}, Tmp: ".wtx-tmp-1-1-", Ident: tree.Stat{Ino: 7, Dev: 8, Size: 1, Mtime: 9, Ctime: 10}},
			{Step: tree.Step{Kind: tree.StepRemove, Path: "gone", Old: &tree.Entry{Path: "gone", Type: tree.Symlink, Target: "x"}}, Tmp: ".wtx-tmp-1-2-", Unlink: true},
		}}
}

// TestDecodeDamage truncates a sample journal at every byte offset and
// flips every single bit of it: each damaged copy must be refused with
// ErrCorrupt, never decoded into a journal.
func TestDecodeDamage(t *testing.T) {
	good := Encode(sampleJournal())
	j, err := Decode(good)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	if !bytes.Equal(Encode(j), good) {
		t.Fatal("names with odd bytes do not round-trip")
	}
	cases := 0
	for n := 0; n < len(good); n++ {
		if _, err := Decode(good[:n]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("truncated at %d: %v", n, err)
		}
		cases++
	}
	for i := range len(good) * 8 {
		bad := bytes.Clone(good)
		bad[i/8] ^= 1 << (i % 8)
		if _, err := Decode(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("bit %d flipped: %v", i, err)
		}
		cases++
	}
	for _, z := range [][]byte{nil, {}, make([]byte, 4096)} {
		if _, err := Decode(z); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%d zero bytes: %v", len(z), err)
		}
		cases++
	}
	t.Logf("%d damaged journals refused", cases)
}

// FuzzDecode feeds arbitrary bytes to Decode: it must not panic, and what
// it accepts must encode back to the same bytes and name only valid paths.
func FuzzDecode(f *testing.F) {
	f.Add(Encode(sampleJournal()))
	f.Add(Encode(&Journal{OpID: "op"}))
	f.Add([]byte("WTXJ\x01"))
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Decode(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not wrapping ErrCorrupt: %v", err)
			}
			return
		}
		if !bytes.Equal(Encode(j), data) {
			t.Fatal("accepted journal does not re-encode to its bytes")
		}
	})
}
