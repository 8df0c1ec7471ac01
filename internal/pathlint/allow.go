package pathlint

import "strings"

// An Allowed entry lets path-based calls stand outside the path layer, with
// the reason they cannot steer wtx onto a tree an untrusted party shaped.
// Path is a file, or a directory ending in "/" that covers every file
// beneath it; Func is the enclosing function ("" for any); Calls lists the
// calls allowed there ("os.Remove"; empty for any).
type Allowed struct {
	Path  string
	Func  string
	Calls []string
	Why   string
}

// Covers reports whether the entry allows finding f.
func (a Allowed) Covers(f Finding) bool {
	if strings.HasSuffix(a.Path, "/") {
		if !strings.HasPrefix(f.File, a.Path) {
			return false
		}
	} else if f.File != a.Path {
		return false
	}
	if a.Func != "" && a.Func != f.Func {
		return false
	}
	if len(a.Calls) == 0 {
		return true
	}
	for _, c := range a.Calls {
		if c == f.Call {
			return true
		}
	}
	return false
}

// Check matches findings against the allowlist: it returns the findings no
// entry covers and the entries that cover no finding (an entry outlives
// the code it allowed: it must go, so the list stays the reviewed truth).
func Check(found []Finding, allow []Allowed) (unallowed []Finding, stale []Allowed) {
	used := make([]bool, len(allow))
	for _, f := range found {
		ok := false
		for i, a := range allow {
			if a.Covers(f) {
				used[i], ok = true, true
			}
		}
		if !ok {
			unallowed = append(unallowed, f)
		}
	}
	for i, a := range allow {
		if !used[i] {
			stale = append(stale, a)
		}
	}
	return unallowed, stale
}
