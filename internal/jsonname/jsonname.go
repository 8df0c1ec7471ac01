// Package jsonname carries names (and other byte strings: arguments, edit
// texts, file contents) through JSON without losing a byte. encoding/json
// writes a string that is not valid UTF-8 with U+FFFD in place of each bad
// byte, and reads one the same way; a name must never be substituted.
//
// The convention, for stored records and for every --json answer alike: a
// field X holds the name itself when it is valid UTF-8, else the name as
// git quotes it (internal/quote, pure ASCII); and only when the name is not
// valid UTF-8, a sibling field X_b64 holds its exact bytes in standard
// padded base64. A reader takes X_b64 when it is there, else X. For a list
// of names, X_b64 is present when any member is not valid UTF-8 and then
// holds every member, in order.
package jsonname

import (
	"encoding/base64"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
)

// Text returns the X field of name: name itself when it is valid UTF-8,
// else git's quoted form.
func Text(name string) string {
	if utf8.ValidString(name) || lossy() {
		return name
	}
	return quote.Path(name)
}

// B64 returns the X_b64 field of name: "" when name is valid UTF-8, else
// its bytes in base64.
func B64(name string) string {
	if utf8.ValidString(name) || lossy() {
		return ""
	}
	return base64.StdEncoding.EncodeToString([]byte(name))
}

// Name reads a pair back: the bytes of b64 when it is not empty, else text.
func Name(text, b64 string) (string, error) {
	if b64 == "" {
		return text, nil
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("base64 of %q: %w", text, err)
	}
	return string(b), nil
}

// Texts returns the X field of a list (nil stays nil).
func Texts(names []string) []string {
	if names == nil {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = Text(n)
	}
	return out
}

// B64s returns the X_b64 field of a list: nil when every member is valid
// UTF-8, else the base64 of every member.
func B64s(names []string) []string {
	if lossy() {
		return nil
	}
	all := true
	for _, n := range names {
		if !utf8.ValidString(n) {
			all = false
			break
		}
	}
	if all {
		return nil
	}
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = base64.StdEncoding.EncodeToString([]byte(n))
	}
	return out
}

// Names reads a list pair back: b64s when it is there, else texts.
func Names(texts, b64s []string) ([]string, error) {
	if b64s == nil {
		return texts, nil
	}
	if texts != nil && len(texts) != len(b64s) {
		return nil, fmt.Errorf("%d names but %d base64 forms", len(texts), len(b64s))
	}
	out := make([]string, len(b64s))
	for i, s := range b64s {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("base64 form %d: %w", i+1, err)
		}
		out[i] = string(b)
	}
	return out, nil
}

// lossy is the negative control of the tests that check names survive:
// with WTX_DISABLE=names in a failpoint build, names are written as plain
// JSON strings again, so those tests must fail.
func lossy() bool { return failpoint.Disabled("names") }

// ErrInvalidUTF8 is wrapped by Check's errors.
var ErrInvalidUTF8 = errors.New("a JSON string is not valid UTF-8")

// Check refuses a JSON text that encoding/json would read with
// substitutions: bytes that are not valid UTF-8, or a \u escape of a lone
// surrogate. Both can only occur inside strings (JSON's own syntax is
// ASCII), so the whole text is checked. The error says at which byte.
func Check(raw []byte) error {
	inString := false
	for i := 0; i < len(raw); {
		c := raw[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				return fmt.Errorf("%w: byte %#02x at offset %d", ErrInvalidUTF8, c, i)
			}
			i += size
			continue
		}
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(raw):
			if raw[i+1] == 'u' {
				r, ok := hex4(raw, i+2)
				if ok && r >= 0xd800 && r < 0xdc00 {
					// A high surrogate needs a low one right after.
					r2, ok2 := rune(0), false
					if i+7 < len(raw) && raw[i+6] == '\\' && raw[i+7] == 'u' {
						r2, ok2 = hex4(raw, i+8)
					}
					if !ok2 || r2 < 0xdc00 || r2 >= 0xe000 {
						return fmt.Errorf("%w: lone surrogate escape at offset %d", ErrInvalidUTF8, i)
					}
					i += 12
					continue
				}
				if ok && r >= 0xdc00 && r < 0xe000 {
					return fmt.Errorf("%w: lone surrogate escape at offset %d", ErrInvalidUTF8, i)
				}
			}
			i += 2
			continue
		}
		i++
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}
