//go:build unix

package fsx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCopySparse copies files with holes at the start, the middle and the
// end, a dense file and an empty one, with and without a hash: the copy
// and the hash are the logical content, and the copy of a file with large
// holes takes no more room than its data.
func TestCopySparse(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name string
		size int64
		data map[int64]string
	}{
		{"empty", 0, nil},
		{"dense", 3000, map[int64]string{0: string(bytes.Repeat([]byte("d"), 3000))}},
		{"hole first", 8 * mib, map[int64]string{8*mib - 3: "end"}},
		{"hole between", 8 * mib, map[int64]string{0: "head", 4 * mib: "middle", 8*mib - 4: "tail"}},
		{"hole last", 8 * mib, map[int64]string{0: "head"}},
	}
	for _, c := range cases {
		for _, hashed := range []bool{false, true} {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			want := make([]byte, c.size)
			f, err := os.Create(src)
			if err != nil {
				t.Fatal(err)
			}
			for off, s := range c.data {
				copy(want[off:], s)
				if _, err := f.WriteAt([]byte(s), off); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Truncate(c.size); err != nil {
				t.Fatal(err)
			}
			f.Close()
			in, err := os.Open(src)
			if err != nil {
				t.Fatal(err)
			}
			out, err := os.Create(dst)
			if err != nil {
				t.Fatal(err)
			}
			h := sha256.New()
			var n int64
			if hashed {
				n, err = CopySparse(context.Background(), out, in, h)
			} else {
				n, err = CopySparse(context.Background(), out, in, nil)
			}
			in.Close()
			out.Close()
			if err != nil || n != c.size {
				t.Fatalf("%s: CopySparse = %d, %v; want %d", c.name, n, err, c.size)
			}
			got, err := os.ReadFile(dst)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%s: the copy differs from the source (%v)", c.name, err)
			}
			if sum := sha256.Sum256(want); hashed && !bytes.Equal(h.Sum(nil), sum[:]) {
				t.Errorf("%s: the hash is not the content's", c.name)
			}
			if c.size >= mib && allocated(t, src) < mib && allocated(t, dst) >= mib {
				t.Errorf("%s (hash %v): the copy takes %d bytes, the source %d", c.name, hashed, allocated(t, dst), allocated(t, src))
			}
		}
	}
}

func allocated(t *testing.T, p string) int64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Stat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Blocks * 512
}
