package pathlint

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// moduleRoot finds the directory holding go.mod above the test's own.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.mod above the test directory (the package was copied out of its module)")
		}
		dir = parent
	}
}

// TestT_001_PathCallsStayInThePathLayer fails when code outside the path
// layer names a path-based file system call that the allowlist does not
// give a reason for, and when an allowlist entry no longer matches any
// call.
func TestT_001_PathCallsStayInThePathLayer(t *testing.T) {
	root := moduleRoot(t)
	found, err := Scan(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("the scan found no path-based call at all, not even in the path layer: it does not read the code")
	}
	unallowed, stale := Check(found, Allowlist)
	for _, f := range unallowed {
		t.Errorf("%s: path-based call outside the path layer; use internal/fsx (a Root or Dir and *at calls), or add an entry with its reason to internal/pathlint/allowlist.go", f)
	}
	for _, a := range stale {
		t.Errorf("allowlist entry %s %s %v matches no call any more: remove it", a.Path, a.Func, a.Calls)
	}
	for _, a := range Allowlist {
		if strings.TrimSpace(a.Why) == "" {
			t.Errorf("allowlist entry %s %s has no reason", a.Path, a.Func)
		}
	}
}

// TestPathLintFindsEveryShape is the check's own negative control: each
// way of naming a forbidden call must be found, and the allowed *at calls
// must not.
func TestPathLintFindsEveryShape(t *testing.T) {
	src := `package p

import (
	"os"
	sys "syscall"
	u "golang.org/x/sys/unix"
)

type T struct{}

func (*T) m(p string) { _ = os.Remove(p) }

func f(dirfd int, p string) {
	rm := os.RemoveAll
	_ = rm(p)
	_ = sys.Rename(p, p+"x")
	_ = u.Mount(p, p, "", 0, "")
	_ = u.Unlinkat(dirfd, "name", 0) // beneath a descriptor: allowed
	_, _ = os.Lstat(p)                // no change, no open: allowed
	func() { _ = os.WriteFile(p, nil, 0o600) }()
}

var g = os.Chmod
`
	got, err := ScanFile("p/p.go", "p.go", src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"p/p.go:11: os.Remove in T.m",
		"p/p.go:14: os.RemoveAll in f",
		"p/p.go:16: syscall.Rename in f",
		"p/p.go:17: unix.Mount in f",
		"p/p.go:20: os.WriteFile in f",
		"p/p.go:23: os.Chmod in package scope",
	}
	if len(got) != len(want) {
		t.Fatalf("found %d, want %d: %v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].String() != want[i] {
			t.Errorf("finding %d = %q, want %q", i, got[i], want[i])
		}
	}
	// An allowlist entry covers only what it names.
	allow := []Allowed{{Path: "p/p.go", Func: "f", Calls: []string{"os.RemoveAll"}, Why: "test"}, {Path: "q/", Why: "test"}}
	un, stale := Check(got, allow)
	if len(un) != len(want)-1 || len(stale) != 1 || stale[0].Path != "q/" {
		t.Errorf("Check = %v unallowed, %v stale; want all but one unallowed and q/ stale", un, stale)
	}
	if _, err := ScanFile("p/d.go", "d.go", "package p\nimport . \"os\"\nvar _ = Remove\n"); err == nil {
		t.Error("a dot-import of os was not refused")
	}
}
