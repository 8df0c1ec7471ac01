package tree

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// model is an in-memory tree: path to entry. It is the reference the
// package's change, selection and plan logic is checked against.
type model map[string]Entry

func (m model) clone() model {
	out := make(model, len(m))
	for p, e := range m {
		out[p] = e
	}
	return out
}

// entries returns the model's entries sorted by path.
func (m model) entries() []Entry {
	out := make([]Entry, 0, len(m))
	for _, e := range m {
		out = append(out, e)
	}
	SortEntries(out)
	return out
}

// removeTree deletes p and everything beneath it.
func (m model) removeTree(p string) {
	for q := range m {
		if IsUnder(q, p) {
			delete(m, q)
		}
	}
}

func (m model) hasChildren(p string) bool {
	for q := range m {
		if q != p && IsUnder(q, p) {
			return true
		}
	}
	return false
}

func join(dir, name string) string {
	if dir == "" || dir == "." {
		return name
	}
	return dir + "/" + name
}

var (
	genNames   = []string{"a", "b", "c"}
	genDigests = []string{"sha256:01", "sha256:02", "sha256:03"}
	genTargets = []string{"a", "../b", "/elsewhere", "c/d"}
	filePerms  = []uint32{0o644, 0o755, 0o600}
	dirPerms   = []uint32{0o755, 0o700, 0o555}
)

const maxGenDepth = 3

func randStat(r *rand.Rand) Stat {
	return Stat{Ino: r.Uint64(), Dev: r.Uint64N(4), Size: r.Int64N(1 << 20), Mtime: r.Int64(), Ctime: r.Int64()}
}

// randEntry returns a random entry for p; dirs only when dirOK.
func randEntry(r *rand.Rand, p string, dirOK bool) Entry {
	n := 3
	if !dirOK {
		n = 2
	}
	e := Entry{Path: p, WS: randStat(r), View: randStat(r)}
	switch r.IntN(n) {
	case 0:
		e.Type, e.Perm, e.Digest = File, filePerms[r.IntN(len(filePerms))], genDigests[r.IntN(len(genDigests))]
		e.Size = int64(len(e.Digest))
	case 1:
		e.Type, e.Target = Symlink, genTargets[r.IntN(len(genTargets))]
		e.Size = int64(len(e.Target))
	default:
		e.Type, e.Perm = Dir, dirPerms[r.IntN(len(dirPerms))]
	}
	return e
}

// fill adds random children beneath dir (a directory at depth-1).
func (m model) fill(r *rand.Rand, dir string, depth int) {
	for _, n := range genNames {
		if r.IntN(3) == 0 {
			continue
		}
		p := join(dir, n)
		e := randEntry(r, p, depth < maxGenDepth)
		m[p] = e
		if e.Type == Dir {
			m.fill(r, p, depth+1)
		}
	}
}

// randTree returns a random, consistent tree: every parent is a directory.
func randTree(r *rand.Rand) model {
	m := model{}
	m.fill(r, "", 1)
	return m
}

// mutate returns a random view of base: a few deletions, edits, type
// changes and additions, and fresh view stat tuples everywhere.
func mutate(r *rand.Rand, base model) model {
	m := base.clone()
	for range 1 + r.IntN(6) {
		paths := sortedKeys(m)
		switch op := r.IntN(5); {
		case op == 0 && len(paths) > 0: // delete a subtree
			m.removeTree(paths[r.IntN(len(paths))])
		case op == 1 && len(paths) > 0: // edit content or perm in place
			p := paths[r.IntN(len(paths))]
			e := m[p]
			switch e.Type {
			case File:
				if r.IntN(2) == 0 {
					e.Perm = filePerms[r.IntN(len(filePerms))]
				} else {
					e.Digest = genDigests[r.IntN(len(genDigests))]
				}
			case Dir:
				e.Perm = dirPerms[r.IntN(len(dirPerms))]
			case Symlink:
				e.Target = genTargets[r.IntN(len(genTargets))]
			}
			m[p] = e
		case op == 2 && len(paths) > 0: // replace with something random
			p := paths[r.IntN(len(paths))]
			m.removeTree(p)
			e := randEntry(r, p, Depth(p) < maxGenDepth)
			m[p] = e
			if e.Type == Dir {
				m.fill(r, p, Depth(p)+1)
			}
		default: // add beneath the root or an existing directory
			dirs := []string{""}
			for _, p := range paths {
				if m[p].Type == Dir && Depth(p) < maxGenDepth {
					dirs = append(dirs, p)
				}
			}
			dir := dirs[r.IntN(len(dirs))]
			p := join(dir, genNames[r.IntN(len(genNames))])
			if _, ok := m[p]; ok {
				continue
			}
			e := randEntry(r, p, Depth(p) < maxGenDepth)
			m[p] = e
			if e.Type == Dir {
				m.fill(r, p, Depth(p)+1)
			}
		}
	}
	for p, e := range m {
		e.View = randStat(r)
		m[p] = e
	}
	return m
}

func sortedKeys(m model) []string {
	out := make([]string, 0, len(m))
	for p := range m {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// applyPlan runs steps against a copy of base, checking that every step's
// precondition holds the way it would on a real filesystem.
func applyPlan(base model, steps []Step) (model, error) {
	m := base.clone()
	for i, s := range steps {
		cur, exists := m[s.Path]
		parent := Parent(s.Path)
		parentOK := parent == "."
		if pe, ok := m[parent]; ok && pe.Type == Dir {
			parentOK = true
		}
		fail := func(why string) error {
			return fmt.Errorf("step %d %s %s: %s", i, s.Kind, s.Path, why)
		}
		matchesOld := func() bool { return exists && s.Old != nil && SameContent(&cur, s.Old) }
		switch s.Kind {
		case StepRemove:
			if !matchesOld() || cur.Type == Dir {
				return nil, fail("path does not hold the expected file or symlink")
			}
			delete(m, s.Path)
		case StepRmdir:
			if !exists || cur.Type != Dir {
				return nil, fail("not a directory")
			}
			if m.hasChildren(s.Path) {
				return nil, fail("directory not empty")
			}
			delete(m, s.Path)
		case StepMkdir:
			if exists || !parentOK || s.New == nil || s.New.Type != Dir {
				return nil, fail("cannot mkdir")
			}
			m[s.Path] = Entry{Path: s.Path, Type: Dir, Perm: 0o700}
		case StepWrite, StepSymlink:
			want := File
			if s.Kind == StepSymlink {
				want = Symlink
			}
			if !parentOK || s.New == nil || s.New.Type != want {
				return nil, fail("no parent directory or wrong new entry")
			}
			if s.Old == nil && exists {
				return nil, fail("path exists")
			}
			if s.Old != nil && (!matchesOld() || cur.Type != want) {
				return nil, fail("path does not hold the expected entry")
			}
			m[s.Path] = *s.New
		case StepChmod:
			if !matchesOld() || cur.Type != File || s.New == nil || s.New.Digest != cur.Digest {
				return nil, fail("chmod of a file that does not match")
			}
			cur.Perm = s.New.Perm
			m[s.Path] = cur
		case StepDirPerm:
			if !exists || cur.Type != Dir || s.New == nil {
				return nil, fail("dirperm of a non-directory")
			}
			cur.Perm = s.New.Perm
			m[s.Path] = cur
		default:
			return nil, fail("unknown step")
		}
	}
	return m, nil
}

// sameTree reports the first difference in paths, types, permission bits
// and content between a and b, or "".
func sameTree(a, b []Entry) string {
	if len(a) != len(b) {
		return fmt.Sprintf("%d entries, want %d: %v vs %v", len(a), len(b), paths(a), paths(b))
	}
	for i := range a {
		if a[i].Path != b[i].Path {
			return fmt.Sprintf("entry %d is %q, want %q", i, a[i].Path, b[i].Path)
		}
		if !SameContent(&a[i], &b[i]) {
			return fmt.Sprintf("%s: got %+v, want %+v", a[i].Path, a[i], b[i])
		}
	}
	return ""
}

func paths(es []Entry) string {
	ps := make([]string, len(es))
	for i := range es {
		ps[i] = es[i].Path
	}
	return strings.Join(ps, ",")
}

// seeds runs fn for n seeded random cases, naming the seed on failure.
func seeds(t *testing.T, n int, fn func(t *testing.T, r *rand.Rand)) {
	t.Helper()
	if testing.Short() {
		n /= 10
	}
	for seed := range uint64(n) {
		r := rand.New(rand.NewPCG(seed, 0x77747821))
		fn(t, r)
		if t.Failed() {
			t.Fatalf("failed with seed %d", seed)
		}
	}
}
