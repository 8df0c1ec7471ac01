package tree

import (
	"fmt"
	"strings"
)

// Selector picks workspace paths. It is a slash-separated path relative to
// the workspace root whose components may use the wildcards *, ? and [...]
// (matching within one component, with path.Match's syntax but on bytes:
// see globMatch) and whose whole components
// may be ** (any number of components, including none). A selector that
// matches a directory covers everything beneath it.
type Selector struct {
	raw   string
	parts []string
}

// ParseSelector checks s and returns it as a Selector.
func ParseSelector(s string) (Selector, error) {
	if s == "" {
		return Selector{}, fmt.Errorf("selector is empty")
	}
	if strings.ContainsRune(s, 0) {
		return Selector{}, fmt.Errorf("selector %q contains NUL", s)
	}
	if strings.HasPrefix(s, "/") {
		return Selector{}, fmt.Errorf("selector %q is absolute: selectors are relative to the workspace root", s)
	}
	s = strings.TrimSuffix(s, "/")
	parts := strings.Split(s, "/")
	for _, p := range parts {
		switch p {
		case "", ".", "..":
			return Selector{}, fmt.Errorf("selector %q has an empty, '.' or '..' component", s)
		}
		if p == "**" {
			continue
		}
		if _, err := globMatch(p, ""); err != nil {
			return Selector{}, fmt.Errorf("selector %q: bad pattern %q", s, p)
		}
	}
	return Selector{raw: s, parts: parts}, nil
}

// String returns the selector as given (without a trailing slash).
func (s Selector) String() string { return s.raw }

// Match reports whether p, or a directory above p, is selected.
func (s Selector) Match(p string) bool {
	if len(s.parts) == 0 {
		return false
	}
	return matchPrefix(s.parts, strings.Split(p, "/"))
}

// matchPrefix reports whether the pattern parts match some leading run of
// the path components (the path itself or one of its ancestors).
func matchPrefix(pat, comps []string) bool {
	if len(pat) == 0 {
		return true // matched an ancestor (or the path): everything beneath is covered
	}
	if pat[0] == "**" {
		for i := 0; i <= len(comps); i++ {
			if matchPrefix(pat[1:], comps[i:]) {
				return true
			}
		}
		return false
	}
	if len(comps) == 0 {
		return false
	}
	ok, _ := globMatch(pat[0], comps[0])
	return ok && matchPrefix(pat[1:], comps[1:])
}

// Selectors is a list of selectors; it matches when any member does.
type Selectors []Selector

// ParseSelectors parses every string in ss.
func ParseSelectors(ss []string) (Selectors, error) {
	out := make(Selectors, 0, len(ss))
	for _, s := range ss {
		sel, err := ParseSelector(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sel)
	}
	return out, nil
}

// Match reports whether any selector matches p.
func (ss Selectors) Match(p string) bool {
	for _, s := range ss {
		if s.Match(p) {
			return true
		}
	}
	return false
}

// Strings returns the selectors as strings.
func (ss Selectors) Strings() []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.raw
	}
	return out
}
