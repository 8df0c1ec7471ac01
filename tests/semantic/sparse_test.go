package semantic

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// allocated is the disk space p takes, in bytes.
func allocated(t *testing.T, p string) int64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Skip("no block counts on this system")
	}
	return st.Blocks * 512
}

// treeAllocated is the disk space of every regular file under dir.
func treeAllocated(t *testing.T, dir string) int64 {
	t.Helper()
	var sum int64
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			sum += allocated(t, p)
		}
		return nil
	})
	return sum
}

// TestSparseFilesKeepHoles: a 64 MiB file holding a few KiB of data gets
// a 2-byte append through the copy backend; staging, the blob store, apply
// and undo all keep its holes (8 MiB at most, where filling them would
// take 64 MiB each), and the content is exact.
func TestSparseFilesKeepHoles(t *testing.T) {
	t.Parallel()
	const size = 64 << 20
	const limit = 8 << 20
	base := t.TempDir()
	ws, state := filepath.Join(base, "ws"), filepath.Join(base, "state")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, "disk.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, off := range []int64{0, 40 << 20, size - 5} {
		if _, err := f.WriteAt([]byte("data!"), off); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if got := allocated(t, p); got > limit {
		t.Skipf("this file system does not keep holes (%d bytes allocated for a sparse file)", got)
	}
	tx := jsonField(t, mustWtx(t, ws, state, "--json", "run", "--backend", "copy", "--", "sh", "-c", "printf xy >> disk.img"), "tx")
	if got := treeAllocated(t, filepath.Join(state, "stages")); got > limit {
		t.Errorf("staging filled the holes: the stage takes %d bytes", got)
	}
	op := jsonField(t, mustWtx(t, ws, state, "--json", "apply", tx), "op_id")
	if got := allocated(t, p); got > limit {
		t.Errorf("apply filled the holes: the file takes %d bytes", got)
	}
	if got := treeAllocated(t, filepath.Join(state, "objects")); got > 2*limit {
		t.Errorf("the blob store filled the holes: its objects take %d bytes", got)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != size+2 {
		t.Fatalf("after apply: %v, size %d, want %d", err, fi.Size(), size+2)
	}
	checkSparseContent(t, p, size, "xy")
	mustWtx(t, ws, state, "undo", op)
	if got := allocated(t, p); got > limit {
		t.Errorf("undo filled the holes: the file takes %d bytes", got)
	}
	checkSparseContent(t, p, size, "")
}

// checkSparseContent checks that p is the test's sparse file of size bytes
// followed by tail.
func checkSparseContent(t *testing.T, p string, size int64, tail string) {
	t.Helper()
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != size+int64(len(tail)) {
		t.Fatalf("%s: %d bytes, want %d", p, len(data), size+int64(len(tail)))
	}
	want := map[int64]string{0: "data!", 40 << 20: "data!", size - 5: "data!"}
	for off, s := range want {
		if string(data[off:off+5]) != s {
			t.Errorf("%s at %d: %q, want %q", p, off, data[off:off+5], s)
		}
		for i := range 5 {
			data[off+int64(i)] = 0
		}
	}
	if string(data[size:]) != tail {
		t.Errorf("%s ends with %q, want %q", p, data[size:], tail)
	}
	for i, b := range data[:size] {
		if b != 0 {
			t.Fatalf("%s: byte %d is %d, want 0", p, i, b)
		}
	}
}
