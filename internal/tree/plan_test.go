package tree

import (
	"math/rand/v2"
	"testing"
)

func phase(s Step) int {
	switch {
	case s.Opens():
		return -1
	case s.Kind == StepRemove, s.Kind == StepRmdir:
		return 0
	case s.Kind == StepDirPerm:
		return 2
	}
	return 1
}

func isCreation(k StepKind) bool { return k == StepMkdir || k == StepWrite || k == StepSymlink }

// checkPlanOrder checks the ordering invariants of a plan.
func checkPlanOrder(t *testing.T, steps []Step) {
	t.Helper()
	mkdir := map[string]int{}
	for i, s := range steps {
		if s.Kind == StepMkdir {
			mkdir[s.Path] = i
		}
	}
	for i, s := range steps {
		if i > 0 && phase(steps[i-1]) > phase(s) {
			t.Errorf("step %d %s %s comes after %s %s", i, s.Kind, s.Path, steps[i-1].Kind, steps[i-1].Path)
		}
		for j := i + 1; j < len(steps); j++ {
			l := steps[j]
			if phase(s) == 0 && phase(l) == 0 && l.Path != s.Path && IsUnder(l.Path, s.Path) {
				t.Errorf("removal of %s (step %d) precedes removal of its descendant %s (step %d)", s.Path, i, l.Path, j)
			}
			if phase(s) == 2 && phase(l) == 2 && l.Path != s.Path && IsUnder(l.Path, s.Path) {
				t.Errorf("dirperm of %s (step %d) precedes dirperm of its descendant %s (step %d)", s.Path, i, l.Path, j)
			}
			if phase(s) == phase(l) && s.Path == l.Path {
				t.Errorf("%s has two steps in one phase: %s and %s", s.Path, s.Kind, l.Kind)
			}
		}
		if isCreation(s.Kind) || s.Kind == StepChmod {
			for p := Parent(s.Path); p != "."; p = Parent(p) {
				if k, ok := mkdir[p]; ok && k > i {
					t.Errorf("%s %s (step %d) precedes mkdir of %s (step %d)", s.Kind, s.Path, i, p, k)
				}
			}
		}
	}
}

func TestPlanCases(t *testing.T) {
	f := func(p string, perm uint32, digest string) *Entry {
		return &Entry{Path: p, Type: File, Perm: perm, Digest: digest}
	}
	d := func(p string, perm uint32) *Entry { return &Entry{Path: p, Type: Dir, Perm: perm} }
	l := func(p, target string) *Entry { return &Entry{Path: p, Type: Symlink, Target: target} }
	type want struct {
		kind StepKind
		path string
	}
	for _, tc := range []struct {
		name    string
		changes []Change
		want    []want
	}{
		{"file to dir", []Change{
			{Path: "x", Action: Modified, Old: f("x", 0o644, "sha256:1"), New: d("x", 0o755)},
			{Path: "x/y", Action: Added, New: f("x/y", 0o644, "sha256:2")},
		}, []want{{StepRemove, "x"}, {StepMkdir, "x"}, {StepWrite, "x/y"}, {StepDirPerm, "x"}}},
		{"dir to file", []Change{
			{Path: "x", Action: Modified, Old: d("x", 0o755), New: f("x", 0o644, "sha256:1")},
			{Path: "x/y", Action: Deleted, Old: f("x/y", 0o644, "sha256:2")},
		}, []want{{StepRemove, "x/y"}, {StepRmdir, "x"}, {StepWrite, "x"}}},
		{"mode only", []Change{
			{Path: "f", Action: Modified, Old: f("f", 0o644, "sha256:1"), New: f("f", 0o755, "sha256:1")},
		}, []want{{StepChmod, "f"}}},
		{"content and mode", []Change{
			{Path: "f", Action: Modified, Old: f("f", 0o644, "sha256:1"), New: f("f", 0o755, "sha256:2")},
		}, []want{{StepWrite, "f"}}},
		{"identical digest and perm", []Change{
			{Path: "f", Action: Modified, Old: f("f", 0o644, "sha256:1"), New: f("f", 0o644, "sha256:1")},
		}, nil},
		{"dir perm only", []Change{
			{Path: "d", Action: Modified, Old: d("d", 0o755), New: d("d", 0o555)},
		}, []want{{StepDirPerm, "d"}}},
		{"symlink retarget", []Change{
			{Path: "s", Action: Modified, Old: l("s", "a"), New: l("s", "b")},
		}, []want{{StepSymlink, "s"}}},
		{"symlink to file", []Change{
			{Path: "s", Action: Modified, Old: l("s", "a"), New: f("s", 0o644, "sha256:1")},
		}, []want{{StepRemove, "s"}, {StepWrite, "s"}}},
		{"new read-only tree", []Change{
			{Path: "n", Action: Added, New: d("n", 0o555)},
			{Path: "n/m", Action: Added, New: d("n/m", 0o500)},
			{Path: "n/m/f", Action: Added, New: f("n/m/f", 0o444, "sha256:1")},
		}, []want{{StepMkdir, "n"}, {StepMkdir, "n/m"}, {StepWrite, "n/m/f"}, {StepDirPerm, "n/m"}, {StepDirPerm, "n"}}},
		{"deleted tree", []Change{
			{Path: "o", Action: Deleted, Old: d("o", 0o755)},
			{Path: "o/a", Action: Deleted, Old: f("o/a", 0o644, "sha256:1")},
			{Path: "o/b", Action: Deleted, Old: d("o/b", 0o755)},
			{Path: "o/b/c", Action: Deleted, Old: l("o/b/c", "x")},
		}, []want{{StepRemove, "o/b/c"}, {StepRmdir, "o/b"}, {StepRemove, "o/a"}, {StepRmdir, "o"}}},
		{"a read-only directory opened and written in", []Change{
			{Path: "ro", Action: Modified, Old: d("ro", 0o555), New: d("ro", 0o755)},
			{Path: "ro/new", Action: Added, New: f("ro/new", 0o644, "sha256:1")},
			{Path: "ro/old", Action: Deleted, Old: f("ro/old", 0o644, "sha256:2")},
		}, []want{{StepDirPerm, "ro"}, {StepRemove, "ro/old"}, {StepWrite, "ro/new"}}},
		{"a read-only tree removed", []Change{
			{Path: "t", Action: Deleted, Old: d("t", 0o555)},
			{Path: "t/u", Action: Deleted, Old: d("t/u", 0o500)},
			{Path: "t/u/f", Action: Deleted, Old: f("t/u/f", 0o444, "sha256:1")},
		}, []want{{StepDirPerm, "t"}, {StepDirPerm, "t/u"}, {StepRemove, "t/u/f"}, {StepRmdir, "t/u"}, {StepRmdir, "t"}}},
		{"a directory closed after it is written in", []Change{
			{Path: "c", Action: Modified, Old: d("c", 0o755), New: d("c", 0o555)},
			{Path: "c/new", Action: Added, New: f("c/new", 0o644, "sha256:1")},
		}, []want{{StepWrite, "c/new"}, {StepDirPerm, "c"}}},
		{"unsorted input", []Change{
			{Path: "n/f", Action: Added, New: f("n/f", 0o644, "sha256:1")},
			{Path: "n", Action: Added, New: d("n", 0o755)},
		}, []want{{StepMkdir, "n"}, {StepWrite, "n/f"}, {StepDirPerm, "n"}}},
	} {
		got := Plan(tc.changes)
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].Kind == tc.want[i].kind && got[i].Path == tc.want[i].path
		}
		if !ok {
			t.Errorf("%s: got %v, want %v", tc.name, stepList(got), tc.want)
		}
		checkPlanOrder(t, got)
	}
}

func stepList(steps []Step) []string {
	out := make([]string, len(steps))
	for i, s := range steps {
		out[i] = s.Kind.String() + " " + s.Path
	}
	return out
}

func TestPlanDoesNotReorderInput(t *testing.T) {
	cs := []Change{
		{Path: "b", Action: Added, New: &Entry{Path: "b", Type: File, Digest: "sha256:1"}},
		{Path: "a", Action: Added, New: &Entry{Path: "a", Type: File, Digest: "sha256:1"}},
	}
	Plan(cs)
	if cs[0].Path != "b" {
		t.Error("Plan sorted its caller's slice")
	}
}

func TestPlanRandom(t *testing.T) {
	seeds(t, 3000, func(t *testing.T, r *rand.Rand) {
		base := randTree(r)
		view := mutate(r, base)
		be, ve := base.entries(), view.entries()
		cs := Compare(be, ve)
		steps := Plan(cs)
		checkPlanOrder(t, steps)
		byPath := map[string]*Change{}
		for i := range cs {
			byPath[cs[i].Path] = &cs[i]
		}
		for _, s := range steps {
			c := byPath[s.Path]
			if c == nil {
				t.Fatalf("step %s %s for a path with no change", s.Kind, s.Path)
			}
			if s.Kind == StepWrite && c.Old != nil && c.Old.Type == File && c.Old.Digest == c.New.Digest {
				t.Errorf("write of %s whose digest did not change", s.Path)
			}
		}
		got, err := applyPlan(base, steps)
		if err != nil {
			t.Fatalf("applying the plan: %v\nplan: %q", err, stepList(steps))
		}
		if d := sameTree(got.entries(), ve); d != "" {
			t.Errorf("plan result differs from the view: %s\nplan: %q", d, stepList(steps))
		}
		if d := sameTree(Result(be, cs), got.entries()); d != "" {
			t.Errorf("Result differs from the applied plan: %s", d)
		}
	})
}

// TestPlanSelectedThenRest applies a random selection of the change set,
// then the rest: each apply must be valid on its own, selected paths must
// reach their view state, and the two together must equal the view.
func TestPlanSelectedThenRest(t *testing.T) {
	seeds(t, 2000, func(t *testing.T, r *rand.Rand) {
		base := randTree(r)
		view := mutate(r, base)
		cs := Compare(base.entries(), view.entries())
		if len(cs) == 0 {
			return
		}
		var raw []string
		for range 1 + r.IntN(2) {
			raw = append(raw, cs[r.IntN(len(cs))].Path)
		}
		sels, err := ParseSelectors(raw)
		if err != nil {
			t.Fatal(err)
		}
		sel := Select(cs, sels)
		mid, err := applyPlan(base, Plan(sel))
		if err != nil {
			t.Fatalf("applying selection %q: %v", raw, err)
		}
		for p := range base {
			_, inView := view[p]
			if _, inMid := mid[p]; sels.Match(p) && inMid != inView {
				t.Errorf("selected %s: present %v after apply, want %v", p, inMid, inView)
			}
		}
		for p, v := range view {
			if !sels.Match(p) {
				continue
			}
			if m, ok := mid[p]; !ok || !SameContent(&m, &v) {
				t.Errorf("selected %s is %+v after apply, want %+v", p, m, v)
			}
		}
		midEntries := mid.entries()
		rest := Compare(midEntries, view.entries())
		for _, c := range rest {
			if sels.Match(c.Path) {
				t.Errorf("selected %s still differs after its apply", c.Path)
			}
		}
		end, err := applyPlan(mid, Plan(rest))
		if err != nil {
			t.Fatalf("applying the rest after %q: %v", raw, err)
		}
		if d := sameTree(end.entries(), view.entries()); d != "" {
			t.Errorf("two applies differ from the view: %s", d)
		}
	})
}
