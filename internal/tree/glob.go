package tree

import (
	"errors"
	"unicode/utf8"
)

// errBadPattern is returned for a malformed selector component.
var errBadPattern = errors.New("syntax error in pattern")

// Names are bytes, so selector components are matched on bytes, not on
// decoded text (path.Match decodes both sides and cannot tell the bytes
// 0xfe and 0xff apart: each reads as U+FFFD). The syntax is path.Match's:
//
//	*        any run of bytes
//	?        one character: a UTF-8 encoded rune, or else a single byte
//	[...]    one character from the class; [^...] one not in it; a-z ranges
//	\c       the byte c itself
//
// A byte that is not part of valid UTF-8 — in the pattern or in the name —
// is a character of its own that equals only itself: it never matches a
// literal U+FFFD, and U+FFFD (EF BF BD) is an ordinary character. Ranges
// order such bytes after every rune, so [\x80-\xff] matches any of them and
// [a-z] none.

// unit returns the character at the start of s and its length in bytes:
// a rune, or for a byte that does not start valid UTF-8, 0x110000 + the
// byte (beyond every rune).
func unit(s string) (rune, int) {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n == 1 {
		return utf8.MaxRune + 1 + rune(s[0]), 1
	}
	return r, n
}

// globMatch reports whether name matches the component pattern pattern.
// Its error is errBadPattern for a malformed pattern (checked in full
// even when the answer is known early).
func globMatch(pattern, name string) (bool, error) {
Pattern:
	for len(pattern) > 0 {
		var star bool
		var chunk string
		star, chunk, pattern = scanChunk(pattern)
		if star && chunk == "" {
			return true, nil // a trailing * matches the rest of the component
		}
		t, ok, err := matchChunk(chunk, name)
		// Only the last chunk must match the whole rest of the name.
		if ok && (len(t) == 0 || len(pattern) > 0) {
			name = t
			continue
		}
		if err != nil {
			return false, err
		}
		if star {
			for i := 0; i < len(name); i++ {
				t, ok, err := matchChunk(chunk, name[i+1:])
				if ok {
					if len(pattern) == 0 && len(t) > 0 {
						continue
					}
					name = t
					continue Pattern
				}
				if err != nil {
					return false, err
				}
			}
		}
		// Check the rest of the pattern for syntax before answering.
		for len(pattern) > 0 {
			_, chunk, pattern = scanChunk(pattern)
			if _, _, err := matchChunk(chunk, ""); err != nil {
				return false, err
			}
		}
		return false, nil
	}
	return len(name) == 0, nil
}

// scanChunk gets the next run of pattern: leading stars, then the chunk up
// to the next unescaped star outside a class.
func scanChunk(pattern string) (star bool, chunk, rest string) {
	for len(pattern) > 0 && pattern[0] == '*' {
		pattern = pattern[1:]
		star = true
	}
	inrange := false
	var i int
Scan:
	for i = 0; i < len(pattern); i++ {
		switch pattern[i] {
		case '\\':
			if i+1 < len(pattern) {
				i++
			}
		case '[':
			inrange = true
		case ']':
			inrange = false
		case '*':
			if !inrange {
				break Scan
			}
		}
	}
	return star, pattern[0:i], pattern[i:]
}

// matchChunk matches chunk against the start of s and returns the rest of
// s. With an empty s it only checks chunk's syntax (failing to match).
func matchChunk(chunk, s string) (rest string, ok bool, err error) {
	failed := false
	for len(chunk) > 0 {
		if !failed && len(s) == 0 {
			failed = true
		}
		switch chunk[0] {
		case '[':
			var r rune
			if !failed {
				var n int
				r, n = unit(s)
				s = s[n:]
			}
			chunk = chunk[1:]
			negated := false
			if len(chunk) > 0 && chunk[0] == '^' {
				negated = true
				chunk = chunk[1:]
			}
			match := false
			nrange := 0
			for {
				if len(chunk) > 0 && chunk[0] == ']' && nrange > 0 {
					chunk = chunk[1:]
					break
				}
				var lo, hi rune
				if lo, chunk, err = getEsc(chunk); err != nil {
					return "", false, err
				}
				hi = lo
				if chunk[0] == '-' {
					if hi, chunk, err = getEsc(chunk[1:]); err != nil {
						return "", false, err
					}
				}
				if lo <= r && r <= hi {
					match = true
				}
				nrange++
			}
			if match == negated {
				failed = true
			}
		case '?':
			if !failed {
				_, n := unit(s)
				s = s[n:]
			}
			chunk = chunk[1:]
		case '\\':
			chunk = chunk[1:]
			if len(chunk) == 0 {
				return "", false, errBadPattern
			}
			if !failed {
				if chunk[0] != s[0] {
					failed = true
				}
				s = s[1:]
			}
			chunk = chunk[1:]
		default:
			if !failed {
				if chunk[0] != s[0] {
					failed = true
				}
				s = s[1:]
			}
			chunk = chunk[1:]
		}
	}
	if failed {
		return "", false, nil
	}
	return s, true, nil
}

// getEsc gets a possibly escaped character of a class.
func getEsc(chunk string) (r rune, nchunk string, err error) {
	if len(chunk) == 0 || chunk[0] == '-' || chunk[0] == ']' {
		return 0, "", errBadPattern
	}
	if chunk[0] == '\\' {
		chunk = chunk[1:]
		if len(chunk) == 0 {
			return 0, "", errBadPattern
		}
	}
	r, n := unit(chunk)
	nchunk = chunk[n:]
	if len(nchunk) == 0 {
		return 0, "", errBadPattern
	}
	return r, nchunk, nil
}
