package tree

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// side is one named variant of an entry for the kind matrix.
type side struct {
	name string
	e    *Entry // nil: absent
}

func TestCompareKindMatrix(t *testing.T) {
	file := &Entry{Type: File, Perm: 0o644, Digest: "sha256:aa", Size: 1}
	dir := &Entry{Type: Dir, Perm: 0o755}
	link := &Entry{Type: Symlink, Target: "t"}
	special := &Entry{Type: Special}
	with := func(e *Entry, f func(*Entry)) *Entry {
		c := *e
		c.WS, c.View = Stat{Ino: 9, Mtime: 9, Ctime: 9, Size: 9}, Stat{Ino: 8, Mtime: 8}
		f(&c)
		return &c
	}
	same := func(*Entry) {}
	bases := []side{{"absent", nil}, {"file", file}, {"dir", dir}, {"symlink", link}, {"special", special}}
	views := []side{
		{"absent", nil},
		{"file", with(file, same)},
		{"file+content", with(file, func(e *Entry) { e.Digest = "sha256:bb" })},
		{"file+perm", with(file, func(e *Entry) { e.Perm = 0o755 })},
		{"file+size", with(file, func(e *Entry) { e.Size = 99 })},
		{"dir", with(dir, same)},
		{"dir+perm", with(dir, func(e *Entry) { e.Perm = 0o700 })},
		{"symlink", with(link, same)},
		{"symlink+target", with(link, func(e *Entry) { e.Target = "u" })},
		{"special", with(special, same)},
	}
	// want[base] holds one letter per view column: - no change, a added,
	// m modified, d deleted. A size that differs with the same digest is no
	// change: the digest is the content.
	want := map[string]string{
		"absent":  "-aaaaaaaa-",
		"file":    "d-mm-mmmmd",
		"dir":     "dmmmm-mmmd",
		"symlink": "dmmmmmm-md",
		"special": "-aaaaaaaa-",
	}
	for _, b := range bases {
		for j, v := range views {
			var base, view []Entry
			if b.e != nil {
				e := *b.e
				e.Path = "p"
				base = []Entry{{Path: "o", Type: File, Digest: "sha256:o"}, e}
			} else {
				base = []Entry{{Path: "o", Type: File, Digest: "sha256:o"}}
			}
			view = []Entry{{Path: "o", Type: File, Digest: "sha256:o"}}
			if v.e != nil {
				e := *v.e
				e.Path = "p"
				view = append(view, e)
			}
			got := Compare(base, view)
			letter := want[b.name][j]
			if letter == '-' {
				if len(got) != 0 {
					t.Errorf("%s -> %s: got %+v, want no change", b.name, v.name, got)
				}
				continue
			}
			if len(got) != 1 {
				t.Errorf("%s -> %s: got %d changes, want 1", b.name, v.name, len(got))
				continue
			}
			c := got[0]
			wantAction := map[byte]Action{'a': Added, 'm': Modified, 'd': Deleted}[letter]
			if c.Path != "p" || c.Action != wantAction {
				t.Errorf("%s -> %s: got %s %s, want %s", b.name, v.name, c.Path, c.Action, wantAction)
			}
			wantOld, wantNew := c.Action != Added, c.Action != Deleted
			if (c.Old != nil) != wantOld || (c.New != nil) != wantNew {
				t.Errorf("%s -> %s: Old=%v New=%v", b.name, v.name, c.Old, c.New)
			}
			if c.Old != nil && c.Old != &base[1] {
				t.Errorf("%s -> %s: Old does not point at the base entry", b.name, v.name)
			}
			if c.New != nil && c.New != &view[1] {
				t.Errorf("%s -> %s: New does not point at the view entry", b.name, v.name)
			}
		}
	}
}

func TestCompareUnknownDigestIsModified(t *testing.T) {
	base := []Entry{{Path: "f", Type: File, Perm: 0o644}}
	view := []Entry{{Path: "f", Type: File, Perm: 0o644}}
	if got := Compare(base, view); len(got) != 1 || got[0].Action != Modified {
		t.Errorf("files without digests compare as %+v, want modified", got)
	}
}

func TestCompareCreatedThenDeletedIsAbsent(t *testing.T) {
	// The view saw "tmp" and "tmp/x" come and go; only "keep" is new.
	base := []Entry{{Path: "a", Type: File, Perm: 0o644, Digest: "sha256:1"}}
	view := []Entry{
		{Path: "a", Type: File, Perm: 0o644, Digest: "sha256:1", View: Stat{Ino: 5}},
		{Path: "keep", Type: File, Perm: 0o644, Digest: "sha256:2"},
	}
	got := Compare(base, view)
	if len(got) != 1 || got[0].Path != "keep" || got[0].Action != Added {
		t.Fatalf("got %+v, want only keep added", got)
	}
}

func TestCompareRandomSortedAndConsistent(t *testing.T) {
	seeds(t, 2000, func(t *testing.T, r *rand.Rand) {
		base := randTree(r)
		view := mutate(r, base)
		cs := Compare(base.entries(), view.entries())
		for i := range cs {
			c := &cs[i]
			if i > 0 && cs[i-1].Path >= c.Path {
				t.Errorf("changes not strictly sorted: %q then %q", cs[i-1].Path, c.Path)
			}
			b, inBase := base[c.Path]
			v, inView := view[c.Path]
			switch c.Action {
			case Added:
				if inBase || !inView || c.Old != nil || c.New == nil {
					t.Errorf("%s added, but base %v view %v", c.Path, inBase, inView)
				}
			case Deleted:
				if !inBase || inView || c.New != nil || c.Old == nil {
					t.Errorf("%s deleted, but base %v view %v", c.Path, inBase, inView)
				}
			case Modified:
				if !inBase || !inView || SameContent(&b, &v) {
					t.Errorf("%s modified, but base %+v view %+v", c.Path, b, v)
				}
			default:
				t.Errorf("%s: action %v", c.Path, c.Action)
			}
		}
		// Every path whose content differs is in the change set.
		changed := map[string]bool{}
		for _, c := range cs {
			changed[c.Path] = true
		}
		for p, b := range base {
			if v, ok := view[p]; (!ok || !SameContent(&b, &v)) && !changed[p] {
				t.Errorf("%s differs but is not in the change set", p)
			}
		}
		for p := range view {
			if _, ok := base[p]; !ok && !changed[p] {
				t.Errorf("%s was added but is not in the change set", p)
			}
		}
	})
}

func TestResultEqualsView(t *testing.T) {
	seeds(t, 2000, func(t *testing.T, r *rand.Rand) {
		base := randTree(r)
		view := mutate(r, base)
		be, ve := base.entries(), view.entries()
		cs := Compare(be, ve)
		res := Result(be, cs)
		if d := sameTree(res, ve); d != "" {
			t.Errorf("Result differs from the view: %s", d)
		}
		changed := map[string]bool{}
		for _, c := range cs {
			changed[c.Path] = true
		}
		for _, e := range res {
			want := base[e.Path]
			if changed[e.Path] {
				want = view[e.Path]
			}
			if e != want {
				t.Errorf("Result entry %s = %+v, want %+v", e.Path, e, want)
			}
		}
	})
}

// chg builds a change from short descriptions for Select tests.
func chg(p string, a Action, old, nw Type) Change {
	c := Change{Path: p, Action: a}
	mk := func(t Type) *Entry {
		if t == Absent {
			return nil
		}
		return &Entry{Path: p, Type: t, Perm: 0o755, Digest: "sha256:" + p}
	}
	c.Old, c.New = mk(old), mk(nw)
	return c
}

func TestSelect(t *testing.T) {
	changes := []Change{
		chg("del", Deleted, Dir, Absent),
		chg("del/1", Deleted, File, Absent),
		chg("del/sub", Deleted, Dir, Absent),
		chg("del/sub/2", Deleted, File, Absent),
		chg("exist/f", Modified, File, File),
		chg("new", Added, Absent, Dir),
		chg("new/deep", Added, Absent, Dir),
		chg("new/deep/f", Added, Absent, File),
		chg("new/g", Added, Absent, File),
		chg("perm", Modified, Dir, Dir),
		chg("perm/f", Added, Absent, File),
		chg("top", Added, Absent, File),
		chg("typed", Modified, File, Dir),
		chg("typed/f", Added, Absent, File),
		chg("wasdir", Modified, Dir, File),
		chg("wasdir/x", Deleted, File, Absent),
	}
	for _, tc := range []struct {
		sels []string
		want []string
	}{
		{nil, []string{"del", "del/1", "del/sub", "del/sub/2", "exist/f", "new", "new/deep", "new/deep/f", "new/g",
			"perm", "perm/f", "top", "typed", "typed/f", "wasdir", "wasdir/x"}},
		{[]string{"new/deep/f"}, []string{"new", "new/deep", "new/deep/f"}},
		{[]string{"new/g"}, []string{"new", "new/g"}},
		{[]string{"typed/f"}, []string{"typed", "typed/f"}},
		{[]string{"del"}, []string{"del", "del/1", "del/sub", "del/sub/2"}},
		{[]string{"del/sub/2"}, []string{"del/sub/2"}},
		{[]string{"exist/f"}, []string{"exist/f"}},
		{[]string{"exist"}, []string{"exist/f"}},
		// A directory whose permission bits changed already exists: it is
		// not pulled in.
		{[]string{"perm/f"}, []string{"perm/f"}},
		{[]string{"wasdir/x"}, []string{"wasdir/x"}},
		{[]string{"wasdir"}, []string{"wasdir", "wasdir/x"}},
		{[]string{"**/f"}, []string{"exist/f", "new", "new/deep", "new/deep/f", "perm/f", "typed", "typed/f"}},
		{[]string{"nothing"}, nil},
		{[]string{"top", "del/1"}, []string{"del/1", "top"}},
	} {
		sels, err := ParseSelectors(tc.sels)
		if err != nil {
			t.Fatal(err)
		}
		got := Select(changes, sels)
		var gotPaths []string
		for _, c := range got {
			gotPaths = append(gotPaths, c.Path)
		}
		if len(gotPaths) != len(tc.want) {
			t.Errorf("Select(%q) = %q, want %q", tc.sels, gotPaths, tc.want)
			continue
		}
		for i := range gotPaths {
			if gotPaths[i] != tc.want[i] {
				t.Errorf("Select(%q) = %q, want %q", tc.sels, gotPaths, tc.want)
				break
			}
		}
	}
}

func TestCount(t *testing.T) {
	cs := []Change{chg("a", Added, Absent, File), chg("b", Added, Absent, Dir), chg("c", Deleted, File, Absent), chg("d", Modified, File, File)}
	if got := Count(cs); got != (Counts{Added: 2, Modified: 1, Deleted: 1}) {
		t.Errorf("Count = %+v", got)
	}
}

func TestChangesetDigest(t *testing.T) {
	base := func() []Change {
		return []Change{
			{Path: "a", Action: Modified,
				Old: &Entry{Path: "a", Type: File, Perm: 0o644, Digest: "sha256:1", Size: 1},
				New: &Entry{Path: "a", Type: File, Perm: 0o644, Digest: "sha256:2", Size: 1}},
			{Path: "l", Action: Modified,
				Old: &Entry{Path: "l", Type: Symlink, Target: "x"},
				New: &Entry{Path: "l", Type: Symlink, Target: "y"}},
			{Path: "n", Action: Added, New: &Entry{Path: "n", Type: Dir, Perm: 0o755}},
		}
	}
	ref := ChangesetDigest(base())
	for _, tc := range []struct {
		name    string
		edit    func(cs []Change) []Change
		changes bool
	}{
		{"path", func(cs []Change) []Change { cs[0].Path = "b"; return cs }, true},
		{"action", func(cs []Change) []Change { cs[2].Action = Modified; return cs }, true},
		{"old type", func(cs []Change) []Change { cs[0].Old.Type = Dir; return cs }, true},
		{"new type", func(cs []Change) []Change { cs[2].New.Type = File; return cs }, true},
		{"old perm", func(cs []Change) []Change { cs[0].Old.Perm = 0o600; return cs }, true},
		{"new perm", func(cs []Change) []Change { cs[2].New.Perm = 0o700; return cs }, true},
		{"old digest", func(cs []Change) []Change { cs[0].Old.Digest = "sha256:3"; return cs }, true},
		{"new digest", func(cs []Change) []Change { cs[0].New.Digest = "sha256:3"; return cs }, true},
		{"old target", func(cs []Change) []Change { cs[1].Old.Target = "z"; return cs }, true},
		{"new target", func(cs []Change) []Change { cs[1].New.Target = "z"; return cs }, true},
		{"old side dropped", func(cs []Change) []Change { cs[0].Old = nil; return cs }, true},
		{"old side added", func(cs []Change) []Change {
			cs[2].Old = &Entry{Path: "n", Type: Dir, Perm: 0o755}
			return cs
		}, true},
		{"change dropped", func(cs []Change) []Change { return cs[:2] }, true},
		{"order", func(cs []Change) []Change { cs[0], cs[1] = cs[1], cs[0]; return cs }, true},
		{"stat tuples", func(cs []Change) []Change {
			cs[0].Old.WS = Stat{Ino: 1, Mtime: 2}
			cs[0].New.View = Stat{Ino: 3, Ctime: 4}
			return cs
		}, false},
		{"size", func(cs []Change) []Change { cs[0].New.Size = 77; return cs }, false},
		{"entry path field", func(cs []Change) []Change { cs[0].New.Path = "other"; return cs }, false},
	} {
		got := ChangesetDigest(tc.edit(base()))
		if (got != ref) != tc.changes {
			t.Errorf("%s: digest changed = %v, want %v", tc.name, got != ref, tc.changes)
		}
	}
	if ChangesetDigest(nil) == ref {
		t.Error("empty change set has the reference digest")
	}
	if ChangesetDigest(nil) != ChangesetDigest([]Change{}) {
		t.Error("nil and empty change sets differ")
	}
}

// Result, the model ResultDigest is checked against, returns the entries of base with changes folded in: what the
// surface holds after the change set is applied. Stat tuples of changed
// entries are those of the view.
func Result(base []Entry, changes []Change) []Entry {
	byPath := make(map[string]*Change, len(changes))
	for i := range changes {
		byPath[changes[i].Path] = &changes[i]
	}
	out := make([]Entry, 0, len(base)+len(changes))
	for _, e := range base {
		if c, ok := byPath[e.Path]; ok {
			if c.New != nil {
				out = append(out, *c.New)
			}
			delete(byPath, e.Path)
			continue
		}
		out = append(out, e)
	}
	for _, c := range byPath {
		if c.New != nil {
			out = append(out, *c.New)
		}
	}
	SortEntries(out)
	return out
}

// ResultDigest agrees with the digest of Result over random bases and
// change sets: additions, modifications, removals, paths changed twice.
func TestResultDigestIsDigestOfResult(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	name := func() string { return fmt.Sprintf("d%d/f%02d", rng.IntN(4), rng.IntN(30)) }
	file := func(p string) *Entry {
		return &Entry{Path: p, Type: File, Perm: 0o644, Digest: fmt.Sprintf("sha256:%d", rng.IntN(5))}
	}
	for round := range 2000 {
		seen := map[string]bool{}
		var base []Entry
		for range rng.IntN(40) {
			if p := name(); !seen[p] {
				seen[p] = true
				base = append(base, *file(p))
			}
		}
		SortEntries(base)
		var changes []Change
		for range rng.IntN(12) {
			p := name()
			c := Change{Path: p}
			if rng.IntN(3) > 0 {
				c.New = file(p)
			}
			changes = append(changes, c)
		}
		want := Digest(Result(base, changes))
		if got := ResultDigest(base, changes); got != want {
			t.Fatalf("round %d: ResultDigest %s, Digest(Result) %s\nbase %v\nchanges %v", round, got, want, base, changes)
		}
	}
}
