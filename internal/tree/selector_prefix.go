package tree

import "strings"

// LiteralPrefix returns the leading components of the selector that hold
// no wildcard, joined with "/", and whether the whole selector is literal
// (then it names exactly one path). A selector starting with a wildcard
// has the prefix "".
func (s Selector) LiteralPrefix() (prefix string, whole bool) {
	n := 0
	for n < len(s.parts) && !strings.ContainsAny(s.parts[n], `*?[\`) {
		n++
	}
	return strings.Join(s.parts[:n], "/"), n == len(s.parts)
}
