package semantic

import (
	"os"
	"path/filepath"
	"testing"
)

// TestX001_ExportImportApply: a change set made on machine A, exported to
// a file and imported on machine B (its own state root, the same git
// base), carries the same change set (same digest) and applies there to
// the very tree A gets by applying it at home: contents, exec bits,
// symlinks, deletions of whole directories and non-UTF-8 names.
func TestX001_ExportImportApply(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"copy", "auto"} {
		t.Run(backend, func(t *testing.T) {
			a, b, _ := twoMachines(t, false)
			tx := a.runAgent("fix")
			bundle := filepath.Join(t.TempDir(), "fix.wtxb")
			a.ok(nil, "export", tx, "-o", bundle)

			var imp struct {
				Tx              string `json:"tx"`
				ChangesetDigest string `json:"changeset_digest"`
				SameGitHead     bool   `json:"same_git_head"`
				Drift           []any  `json:"drift"`
				Origin          struct {
					FromTx   string `json:"from_tx"`
					Receipts []any  `json:"receipts"`
				} `json:"origin"`
			}
			b.answer(b.ok(nil, "--json", "import", bundle, "--name", "fix", "--backend", backend), &imp)
			if imp.ChangesetDigest != a.digest(tx) || b.digest(imp.Tx) != a.digest(tx) {
				t.Fatalf("B's imported change set %s differs from A's %s", imp.ChangesetDigest, a.digest(tx))
			}
			if imp.Origin.FromTx != tx || len(imp.Origin.Receipts) == 0 || !imp.SameGitHead || len(imp.Drift) != 0 {
				t.Fatalf("import answer: from %q, %d receipts, same HEAD %v, drift %v", imp.Origin.FromTx, len(imp.Origin.Receipts), imp.SameGitHead, imp.Drift)
			}
			// B's diff is A's diff, byte for byte.
			if da, db := a.ok(nil, "diff", tx).stdout, b.ok(nil, "diff", imp.Tx).stdout; da != db {
				t.Fatalf("diff on B differs from diff on A:\nA:\n%s\nB:\n%s", da, db)
			}
			b.ok(nil, "apply", imp.Tx)
			a.ok(nil, "apply", tx)
			if d := diffSnapshots(a.tree(), b.tree()); len(d) > 0 {
				t.Fatalf("B after apply differs from A after apply:\n%s", formatDiff(d, 20))
			}
			if _, err := os.Lstat(filepath.Join(b.ws, "f\xff\tresh")); err != nil {
				t.Fatalf("the non-UTF-8 name did not arrive byte for byte: %v", err)
			}
		})
	}
}

// x001Drift makes B drift from the change set's base at five of its
// paths (content, creation and a non-UTF-8 name before the import; a
// deletion and a mode after it) and returns the paths whose apply B
// refused with B left exactly as it was. A path that did not drift
// (src/new) applies all the same.
func x001Drift(t *testing.T, failpoints bool, env []string) (refused []string) {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	tx := a.runAgent("fix")
	bundle := a.ok(nil, "export", tx).stdout
	mustWrite(t, filepath.Join(b.ws, "src/main.go"), "package main // edited on B\n")
	mustWrite(t, filepath.Join(b.ws, "blob.bin"), "made on B\n")
	mustWrite(t, filepath.Join(b.ws, oddName), "B's own\n")
	var imp struct {
		Tx    string `json:"tx"`
		Drift []struct {
			Path string `json:"path"`
		} `json:"drift"`
	}
	b.answer(b.ok([]byte(bundle), "--json", "import", "-"), &imp)
	if err := os.Remove(filepath.Join(b.ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(b.ws, "run.sh"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"src/main.go", "blob.bin", oddName, "link", "run.sh", "."} {
		before := b.tree()
		args := []string{"--json", "apply", imp.Tx}
		if p != "." {
			args = append(args, "--path", p)
		}
		r := b.wtx(nil, args...)
		if r.code == 0 {
			continue
		}
		if r.code != 2 || errCode(t, r) != "refusal.target-changed" {
			t.Fatalf("apply --path %q on a drifted B: exit %d, code %q, want 2 refusal.target-changed\n%s", p, r.code, errCode(t, r), r.stdout)
		}
		if d := diffSnapshots(before, b.tree()); len(d) > 0 {
			t.Fatalf("a refused apply of %q changed B:\n%s", p, formatDiff(d, 20))
		}
		refused = append(refused, p)
	}
	b.ok(nil, "apply", imp.Tx, "--path", "src/new")
	if got := readWS(t, b.ws, "src/new/a.go"); got != "package new\n" {
		t.Fatalf("src/new/a.go on B = %q after its apply", got)
	}
	return refused
}

// TestX001_DriftOnTargetRefused: wherever B no longer holds the base the
// change set was made on (content, creation, mode, deletion, a non-UTF-8
// name; before or after the import), B's apply is refused like any drift,
// path by path and as a whole, and B stays as it was.
func TestX001_DriftOnTargetRefused(t *testing.T) {
	t.Parallel()
	refused := x001Drift(t, false, nil)
	if len(refused) != 6 {
		t.Fatalf("B refused the apply of only %q; every drifted path and the whole apply must be refused", refused)
	}
}

// TestX001_NegativeControl: with the imported base replaced by B's own
// (WTX_DISABLE=import-base), the harness sees the drifts made before the
// import land: the bundle's base digests are what refuses them.
func TestX001_NegativeControl(t *testing.T) {
	t.Parallel()
	if refused := x001Drift(t, true, []string{"WTX_DISABLE=import-base"}); len(refused) == 6 {
		t.Fatal("negative control: every apply was still refused with the imported base switched off")
	}
}

// TestX001_RebaseMergeOnImported: the bundle carries the original of a
// modified text file, so an imported stage refused for drift is rebased
// three-way on B (rebase --merge) and then applies both changes.
func TestX001_RebaseMergeOnImported(t *testing.T) {
	t.Parallel()
	a, b, _ := twoMachines(t, false)
	a.ok(nil, "run", "--name", "top", "--", "sh", "-c", "sed -i 1s/1/one/ lines.txt")
	bundle := a.ok(nil, "export", "top").stdout
	mustWrite(t, filepath.Join(b.ws, "lines.txt"), "1\n2\n3\n4\n5\n6\n7\n8\nnine\n")
	tx := b.ok([]byte(bundle), "import", "-").stdout[:len("tx-20060102T150405Z-01234567")]
	if r := b.wtx(nil, "apply", tx); r.code != 2 {
		t.Fatalf("apply over drift: exit %d, want 2\n%s", r.code, r.stderr)
	}
	b.ok(nil, "rebase", tx, "--merge")
	b.ok(nil, "apply", tx)
	if got := readWS(t, b.ws, "lines.txt"); got != "one\n2\n3\n4\n5\n6\n7\n8\nnine\n" {
		t.Fatalf("lines.txt after rebase --merge and apply: %q", got)
	}
}
