package crash

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// promiseSeeds are the change sets the promise tests run on besides their
// hand-written ones.
func promiseSeeds() []uint64 {
	if soak() {
		s := make([]uint64, 100)
		for i := range s {
			s[i] = uint64(1000 + i)
		}
		return s
	}
	return []uint64{301, 302, 303, 304, 305, 306}
}

// mixedTree is a hand-written workspace with one of every kind of path.
func mixedTree(t testing.TB) func(ws string) {
	return func(ws string) {
		for _, d := range []string{"dir", "dir/sub", "gone/deep"} {
			mustDo(t, os.MkdirAll(filepath.Join(ws, d), 0o755))
		}
		for p, c := range map[string]string{"a": "alpha\n", "b": "bravo\n", "exe": "#!/bin/sh\n", "dir/c": "charlie\n",
			"dir/sub/d": "delta\n", "gone/deep/e": "echo\n", "tofile": "x\n", "todir": "y\n"} {
			mustDo(t, os.WriteFile(filepath.Join(ws, p), []byte(c), 0o644))
		}
		mustDo(t, os.Symlink("a", filepath.Join(ws, "link")))
		mustDo(t, os.Symlink("nowhere", filepath.Join(ws, "dangling")))
	}
}

// mixedScript changes every kind of path of mixedTree.
const mixedScript = `set -e
printf 'ALPHA\n' > a
rm -f b
chmod 755 exe
printf 'new\n' > dir/new
rm -rf gone
mkdir -p deep/er/est
printf 'deepest\n' > deep/er/est/f
rm -f link
printf 'was a link\n' > link
rm -f dangling
ln -s elsewhere dangling
rm -f tofile
ln -s dir/c tofile
rm -f todir
mkdir todir
printf 'inside\n' > todir/in
rm -rf dir/sub
printf 'sub is a file\n' > dir/sub
ln -s missing-target dl
chmod 700 dir
`

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// promiseFixtures returns the hand-written fixture and the seeded ones.
func promiseFixtures(t *testing.T) []*fixture {
	fs := []*fixture{newFixedFixture(t, mixedTree(t), mixedScript)}
	for _, s := range promiseSeeds() {
		fs = append(fs, newFixture(t, s, 14, 6))
	}
	return fs
}

// TestS_STAGE_013_SuccessLeavesExactlyTheReportedEffect: an apply that
// reports success leaves the after-image, and the paths it reports written
// are exactly the paths that differ from the before-image.
func TestS_STAGE_013_SuccessLeavesExactlyTheReportedEffect(t *testing.T) {
	for _, f := range promiseFixtures(t) {
		r := f.wtx(nil, "--json", "apply", f.stage)
		if r.code != 0 {
			t.Fatalf("apply: %v", r)
		}
		var out struct {
			Written []string `json:"written"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
			t.Fatalf("apply --json: %v", err)
		}
		if got := f.snapshot(); got != f.after {
			t.Fatalf("reported success, workspace is not the after-image:\n%s\nscript:\n%s", diffLines(f.after, got), f.script)
		}
		sort.Strings(out.Written)
		if want := changedPaths(f.before, f.after); !reflect.DeepEqual(out.Written, want) {
			t.Errorf("reported written %v, changed %v\nscript:\n%s", out.Written, want, f.script)
		}
		if d := f.settled("after a successful apply", f.after); len(d) > 0 {
			t.Error(strings.Join(d, "\n"))
		}
	}
}

// TestS_STAGE_013_FailureLeavesNone: a refused apply changes nothing, and
// an apply killed at any point before its commit marker leaves, once
// recovered, exactly the before-image (killed after it, exactly the
// after-image).
func TestS_STAGE_013_FailureLeavesNone(t *testing.T) {
	t.Run("refusal", func(t *testing.T) {
		f := newFixedFixture(t, mixedTree(t), mixedScript)
		// An edit outside the stage to one path it changes.
		mustDo(t, os.WriteFile(filepath.Join(f.ws, "a"), []byte("edited outside\n"), 0o644))
		edited := f.snapshot()
		r := f.wtx(nil, "--json", "apply", f.stage)
		if r.code != 2 || !strings.Contains(r.stdout, `"refusal.`) {
			t.Fatalf("apply over an external edit: want a refusal (exit 2), got %v", r)
		}
		if got := f.snapshot(); got != edited {
			t.Fatalf("a refused apply changed the workspace:\n%s", diffLines(edited, got))
		}
		if d := wtxtest.Debris(f.ws); len(d) > 0 {
			t.Fatalf("a refused apply left debris: %v", d)
		}
	})
	t.Run("kill", func(t *testing.T) {
		f := newFixedFixture(t, mixedTree(t), mixedScript)
		names := countApply(t, f, nil)
		commit := committedAt(names, "apply:committed")
		if commit > len(names) {
			t.Fatalf("no apply:committed point among %v", names)
		}
		for k := 1; k <= len(names); k++ {
			r, v := crashApply(f, names, k, nil)
			if !r.killed {
				t.Fatalf("point %d (%s) did not kill the apply: %v", k, names[k-1], r)
			}
			want, side := f.before, "before"
			if k >= commit {
				want, side = f.after, "after"
			}
			if rr := f.wtx(nil, "list"); rr.code != 0 {
				v = append(v, fmt.Sprintf("recovery: %v", rr))
			}
			v = append(v, f.settled(fmt.Sprintf("killed at %d (%s), want the %s-image", k, names[k-1], side), want)...)
			if len(v) > 0 {
				t.Error(strings.Join(v, "\n"))
			}
		}
	})
}

// digestOf gives the content digest wtx uses for data.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// matchesLine reports whether the journal image e describes the snapshot
// line (type, permission bits of files, link target); nil matches "".
func matchesLine(e *tree.Entry, line string) bool {
	if e == nil {
		return line == ""
	}
	if line == "" {
		return false
	}
	_, rest, _ := strings.Cut(line, " ")
	mode, _, _ := strings.Cut(rest, " ")
	switch e.Type {
	case tree.Dir:
		return strings.HasPrefix(mode, "d")
	case tree.Symlink:
		return strings.HasPrefix(mode, "L") && strings.HasSuffix(line, " -> "+e.Target)
	case tree.File:
		return strings.HasPrefix(mode, "-") && fmt.Sprintf("%v", os.FileMode(e.Perm)) == mode
	}
	return false
}

// TestC_004_JournalIsDurableBeforeTheWorkspaceIsTouched kills the apply at
// the point right after the journal was written: the journal is there, it
// decodes, it is not committed, it holds one record per plan step with the
// pre- and post-images of each changed path, and the workspace is
// untouched. Killed right before the journal, the workspace is untouched
// and nothing waits for recovery.
func TestC_004_JournalIsDurableBeforeTheWorkspaceIsTouched(t *testing.T) {
	for _, f := range promiseFixtures(t) {
		names := countApply(t, f, nil)
		steps := 0
		for _, n := range names {
			if n == "apply:step" {
				steps++
			}
		}

		f.restore()
		r := f.wtx([]string{"WTX_FAILPOINT=apply:before-journal"}, "apply", f.stage)
		if !r.killed {
			t.Fatalf("apply:before-journal did not kill the apply: %v", r)
		}
		if got := f.snapshot(); got != f.before {
			t.Fatalf("killed before the journal, the workspace changed:\n%s", diffLines(f.before, got))
		}
		if p := f.pending(); len(p) > 0 {
			t.Fatalf("killed before the journal, journals wait for recovery: %v", p)
		}

		f.restore()
		r = f.wtx([]string{"WTX_FAILPOINT=apply:journaled"}, "apply", f.stage)
		if !r.killed {
			t.Fatalf("apply:journaled did not kill the apply: %v", r)
		}
		if got := f.snapshot(); got != f.before {
			t.Fatalf("killed right after the journal, the workspace changed:\n%s", diffLines(f.before, got))
		}
		if d := wtxtest.Debris(f.ws); len(d) > 0 {
			t.Fatalf("killed right after the journal, debris in the workspace: %v", d)
		}
		ops := f.pending()
		if len(ops) != 1 {
			t.Fatalf("want one pending journal, found %v", ops)
		}
		j, committed, err := journal.Load(f.journalDir(), ops[0])
		if err != nil {
			t.Fatalf("the journal does not load: %v", err)
		}
		if committed {
			t.Fatal("the journal is marked committed before any step ran")
		}
		if len(j.Records) != steps {
			t.Fatalf("journal holds %d records, the apply runs %d steps", len(j.Records), steps)
		}
		before, after := byPath(f.before), byPath(f.after)
		paths := map[string]bool{}
		for _, rec := range j.Records {
			st := rec.Step
			paths[st.Path] = true
			switch st.Kind {
			case tree.StepRemove, tree.StepRmdir:
				if st.Old == nil || !matchesLine(st.Old, before[st.Path]) {
					t.Errorf("%v %s: pre-image %+v does not describe %q", st.Kind, st.Path, st.Old, before[st.Path])
				}
			case tree.StepWrite, tree.StepSymlink, tree.StepMkdir:
				if st.New == nil || !matchesLine(st.New, after[st.Path]) {
					t.Errorf("%v %s: post-image %+v does not describe %q", st.Kind, st.Path, st.New, after[st.Path])
				}
				if st.Old != nil && !matchesLine(st.Old, before[st.Path]) {
					t.Errorf("%v %s: pre-image %+v does not describe %q", st.Kind, st.Path, st.Old, before[st.Path])
				}
			case tree.StepChmod, tree.StepDirPerm:
				if st.Old == nil || st.New == nil {
					t.Errorf("%v %s: missing an image", st.Kind, st.Path)
				}
			}
			// File images name their content exactly.
			for _, side := range []struct {
				e    *tree.Entry
				line string
			}{{st.Old, before[st.Path]}, {st.New, after[st.Path]}} {
				if side.e != nil && side.e.Type == tree.File && side.line != "" && (st.Kind != tree.StepMkdir) {
					_, q, _ := strings.Cut(side.line, "\"")
					var content string
					if _, err := fmt.Sscanf("\""+q, "%q", &content); err == nil && digestOf([]byte(content)) != side.e.Digest {
						t.Errorf("%v %s: image digest %s is not the content %q", st.Kind, st.Path, side.e.Digest, content)
					}
				}
			}
		}
		for _, p := range changedPaths(f.before, f.after) {
			if !paths[p] {
				t.Errorf("changed path %s has no journal record", p)
			}
		}
		// The next command rolls the journaled apply back.
		if rr := f.wtx(nil, "list"); rr.code != 0 {
			t.Fatalf("recovery: %v", rr)
		}
		if v := f.settled("recovered from a kill after the journal", f.before); len(v) > 0 {
			t.Fatal(strings.Join(v, "\n"))
		}
	}
}
