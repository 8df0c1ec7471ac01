package tree

import "sort"

// StepKind is what one step of a plan does to one path.
type StepKind uint8

// Step kinds. The numbers are persisted (the journal writes them): never
// renumber one; a new kind takes the next free number. The order a plan runs
// steps in is Plan's, not these numbers'.
const (
	// StepRemove removes a file or symlink (Old says which).
	StepRemove StepKind = 1 // persisted
	// StepRmdir removes an empty directory.
	StepRmdir StepKind = 2 // persisted
	// StepMkdir creates a directory, private at first; its final permission
	// bits come with a StepDirPerm at the end of the plan.
	StepMkdir StepKind = 3 // persisted
	// StepWrite creates a file (Old nil) or replaces one (Old a file).
	StepWrite StepKind = 4 // persisted
	// StepSymlink creates a symlink (Old nil) or replaces one (Old a symlink).
	StepSymlink StepKind = 5 // persisted
	// StepChmod changes a file's permission bits and nothing else.
	StepChmod StepKind = 6 // persisted
	// StepDirPerm sets a directory's final permission bits.
	StepDirPerm StepKind = 7 // persisted
)

// String names the step kind.
func (k StepKind) String() string {
	return [...]string{"?", "remove", "rmdir", "mkdir", "write", "symlink", "chmod", "dirperm"}[k]
}

// Step is one action of a plan on one path. Old is the entry the path must
// hold right before the step (nil: absent); New is what it holds after.
type Step struct {
	Kind StepKind
	Path string
	Old  *Entry
	New  *Entry
}

// Plan orders the steps that apply changes: first the directories that
// become open to their owner (permission bits that give the owner write and
// search where it lacked either, and an owner-closed directory that goes,
// opened to 0700 so that its entries can be removed), parents first; then
// removals deepest first; then creations and replacements parents first;
// then the remaining directory permission bits children first (so a
// read-only directory is closed only after its contents are in place). An
// owner who is not root can so apply, and undo, a change of directories it
// owns whatever their modes.
func Plan(changes []Change) []Step {
	cs := append([]Change(nil), changes...)
	SortChanges(cs)
	var opens, removals, builds, perms []Step
	for i := range cs {
		c := &cs[i]
		old, nw := c.Old, c.New
		replaced := old != nil && (nw == nil || old.Type != nw.Type)
		if replaced && old.Type == Dir && !ownerOpen(old.Perm) {
			open := *old
			open.Perm |= 0o700
			opens = append(opens, Step{Kind: StepDirPerm, Path: c.Path, Old: old, New: &open})
		}
		if replaced {
			k := StepRemove
			if old.Type == Dir {
				k = StepRmdir
			}
			removals = append(removals, Step{Kind: k, Path: c.Path, Old: old})
			old = nil
		}
		if nw == nil {
			continue
		}
		switch nw.Type {
		case Dir:
			if old == nil {
				builds = append(builds, Step{Kind: StepMkdir, Path: c.Path, New: nw})
				perms = append(perms, Step{Kind: StepDirPerm, Path: c.Path, Old: nw, New: nw})
			} else if old.Perm != nw.Perm && !ownerOpen(old.Perm) && ownerOpen(nw.Perm) {
				opens = append(opens, Step{Kind: StepDirPerm, Path: c.Path, Old: old, New: nw})
			} else if old.Perm != nw.Perm {
				perms = append(perms, Step{Kind: StepDirPerm, Path: c.Path, Old: old, New: nw})
			}
		case File:
			if old != nil && old.Digest == nw.Digest {
				if old.Perm != nw.Perm {
					builds = append(builds, Step{Kind: StepChmod, Path: c.Path, Old: old, New: nw})
				}
			} else {
				builds = append(builds, Step{Kind: StepWrite, Path: c.Path, Old: old, New: nw})
			}
		case Symlink:
			builds = append(builds, Step{Kind: StepSymlink, Path: c.Path, Old: old, New: nw})
		}
	}
	sort.SliceStable(removals, func(i, j int) bool { return removals[i].Path > removals[j].Path })
	sort.SliceStable(perms, func(i, j int) bool { return perms[i].Path > perms[j].Path })
	out := make([]Step, 0, len(opens)+len(removals)+len(builds)+len(perms))
	out = append(out, opens...) // parents first: cs is sorted
	out = append(out, removals...)
	out = append(out, builds...)
	return append(out, perms...)
}

// ownerOpen reports whether directory permission bits perm let the owner
// write in the directory and search it.
func ownerOpen(perm uint32) bool { return perm&0o300 == 0o300 }

// Opens reports whether st is a step of a plan's first phase: a directory
// opened to its owner before anything else runs.
func (st Step) Opens() bool {
	return st.Kind == StepDirPerm && st.Old != nil && st.New != nil && !ownerOpen(st.Old.Perm) && ownerOpen(st.New.Perm)
}
