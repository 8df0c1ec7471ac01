package concurrency

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestTX_003_SecondWriterOfAPathIsRefused opens two stages on one
// workspace; whichever applies second is refused when both wrote the same
// path, and both land when they wrote disjoint paths.
func TestTX_003_SecondWriterOfAPathIsRefused(t *testing.T) {
	bin := wtxtest.Binary(t, false)
	tests := []struct {
		name         string
		a, b         string // the stages' scripts
		bFirst       bool   // apply b before a
		conflictPath string // "" when both must land
		want         map[string]string
	}{
		{name: "same file, a first", a: "echo a >> f", b: "echo b >> f", conflictPath: "f",
			want: map[string]string{"f": "base\na\n"}},
		{name: "same file, b first", a: "echo a >> f", b: "echo b >> f", bFirst: true, conflictPath: "f",
			want: map[string]string{"f": "base\nb\n"}},
		{name: "one deletes what the other edits", a: "rm f", b: "echo b >> f", conflictPath: "f",
			want: map[string]string{"f": ""}},
		{name: "both create the same new file", a: "echo a > n", b: "echo b > n", bFirst: true, conflictPath: "n",
			want: map[string]string{"n": "b\n", "f": "base\n"}},
		{name: "disjoint files", a: "echo a >> f", b: "echo b > g",
			want: map[string]string{"f": "base\na\n", "g": "b\n"}},
		{name: "disjoint, b first", a: "echo a > sub/x", b: "echo b >> f", bFirst: true,
			want: map[string]string{"f": "base\nb\n", "sub/x": "a\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			e := env{bin: bin, ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state")}
			if err := os.MkdirAll(filepath.Join(e.ws, "sub"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(e.ws, "f"), []byte("base\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			ta, r := e.stage(t, tt.a)
			if ta == "" {
				t.Fatalf("stage a: exit %d: %s", r.code, r.stderr)
			}
			tb, r := e.stage(t, tt.b)
			if tb == "" {
				t.Fatalf("stage b: exit %d: %s", r.code, r.stderr)
			}
			first, second := ta, tb
			if tt.bFirst {
				first, second = tb, ta
			}
			if r := e.wtx(t, nil, "--json", "apply", first); r.code != 0 {
				t.Fatalf("first apply: exit %d: %s%s", r.code, r.stdout, r.stderr)
			}
			before := wtxtest.MustSnapshot(t, e.ws)
			r = e.wtx(t, nil, "--json", "apply", second)
			if tt.conflictPath == "" {
				if r.code != 0 {
					t.Fatalf("second apply of disjoint stages: exit %d: %s%s", r.code, r.stdout, r.stderr)
				}
			} else {
				checkRefusal(t, r, tt.conflictPath)
				if after := wtxtest.MustSnapshot(t, e.ws); after != before {
					t.Errorf("the refused apply changed the workspace:\nbefore:\n%s\nafter:\n%s", before, after)
				}
			}
			for p, want := range tt.want {
				got, err := os.ReadFile(filepath.Join(e.ws, p))
				if want == "" {
					if err == nil {
						t.Errorf("%s exists, want it deleted", p)
					}
					continue
				}
				if string(got) != want {
					t.Errorf("%s = %q, want %q (%v)", p, got, want, err)
				}
			}
		})
	}
}

// checkRefusal asserts that r is a target-changed refusal naming path,
// with repairs that each give a command.
func checkRefusal(t *testing.T, r result, path string) {
	t.Helper()
	if r.code != 2 {
		t.Fatalf("second apply: exit %d, want 2 (refused)\n%s%s", r.code, r.stdout, r.stderr)
	}
	rep := parse(t, r)
	if rep.Error == nil {
		t.Fatalf("refusal without an error object: %s", r.stdout)
	}
	if rep.Error.Code != "refusal.target-changed" {
		t.Errorf("error.code = %q, want refusal.target-changed", rep.Error.Code)
	}
	if len(rep.Error.Repairs) == 0 {
		t.Errorf("refusal offers no repairs: %s", r.stdout)
	}
	for _, rp := range rep.Error.Repairs {
		if !strings.HasPrefix(rp.Command, "wtx ") {
			t.Errorf("repair %q has no wtx command: %q", rp.Action, rp.Command)
		}
	}
	var paths []string
	for _, c := range rep.Error.Conflicts {
		paths = append(paths, c.Path)
	}
	if !slices.Contains(paths, path) {
		t.Errorf("conflicts %v do not name %s", paths, path)
	}
}
