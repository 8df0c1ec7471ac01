// Package quote writes names the way git writes them when core.quotePath is
// on: a name that holds a control character, '"', '\\', DEL or a byte of
// 0x80 and above is put in double quotes with C-style escapes and octal for
// the other bytes. Names are byte strings; this is the one place that turns
// one into text a person or a listing can show without being fooled by it.
package quote

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Needs reports whether Path would quote name.
func Needs(name string) bool {
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			return true
		}
	}
	return false
}

// Path returns name unchanged, or quoted as git quotes it. The result holds
// no control character and no newline, so it can never split a line or
// rewrite the terminal; Unquote gives the exact bytes back.
func Path(name string) string {
	if !Needs(name) {
		return name
	}
	var sb strings.Builder
	sb.Grow(len(name) + 8)
	sb.WriteByte('"')
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch c {
		case '\a':
			sb.WriteString(`\a`)
		case '\b':
			sb.WriteString(`\b`)
		case '\t':
			sb.WriteString(`\t`)
		case '\n':
			sb.WriteString(`\n`)
		case '\v':
			sb.WriteString(`\v`)
		case '\f':
			sb.WriteString(`\f`)
		case '\r':
			sb.WriteString(`\r`)
		case '"':
			sb.WriteString(`\"`)
		case '\\':
			sb.WriteString(`\\`)
		default:
			if c < 0x20 || c >= 0x7f {
				sb.WriteByte('\\')
				sb.WriteByte('0' + c>>6)
				sb.WriteByte('0' + (c>>3)&7)
				sb.WriteByte('0' + c&7)
			} else {
				sb.WriteByte(c)
			}
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// Unquote reverses Path: a string not in double quotes is returned as it
// is; a quoted one is decoded byte-exactly. ok is false for a quoted string
// that Path could not have written.
func Unquote(s string) (name string, ok bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return s, true
	}
	body := s[1 : len(s)-1]
	var b []byte
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == '"' {
			return "", false
		}
		if c != '\\' {
			b = append(b, c)
			continue
		}
		i++
		if i >= len(body) {
			return "", false
		}
		switch e := body[i]; e {
		case 'a':
			b = append(b, '\a')
		case 'b':
			b = append(b, '\b')
		case 't':
			b = append(b, '\t')
		case 'n':
			b = append(b, '\n')
		case 'v':
			b = append(b, '\v')
		case 'f':
			b = append(b, '\f')
		case 'r':
			b = append(b, '\r')
		case '"', '\\':
			b = append(b, e)
		default:
			if e < '0' || e > '3' || i+2 >= len(body) {
				return "", false
			}
			d1, d2 := body[i+1], body[i+2]
			if d1 < '0' || d1 > '7' || d2 < '0' || d2 > '7' {
				return "", false
			}
			b = append(b, (e-'0')<<6|(d1-'0')<<3|(d2-'0'))
			i += 2
		}
	}
	return string(b), true
}

// Text makes free text (a message that may hold names) safe to print on a
// terminal: every control character (newline included), DEL, C1 control and
// byte that is not valid UTF-8 is written as an octal escape; printable
// text, UTF-8 included, is left as it is. It is the net under messages; the
// names inside them should already be quoted by Path.
func Text(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, size) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unsafeRune(r, size) {
			sb.WriteString(s[i : i+size])
			i += size
			continue
		}
		for _, c := range []byte(s[i : i+size]) {
			sb.WriteByte('\\')
			sb.WriteByte('0' + c>>6)
			sb.WriteByte('0' + (c>>3)&7)
			sb.WriteByte('0' + c&7)
		}
		i += size
	}
	return sb.String()
}

func unsafeRune(r rune, size int) bool {
	return r == utf8.RuneError && size == 1 || r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 ||
		r == 0x2028 || r == 0x2029 || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// Shell writes a name as one POSIX shell word, for the commands a
// repair suggests: a plain name as it is, anything else in single quotes;
// bytes that are not printable become $'\ooo' pieces.
func Shell(s string) string {
	plain := s != ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./+=,:@%", c) >= 0) {
			plain = false
			break
		}
	}
	if plain {
		return s
	}
	var b strings.Builder
	open := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f {
			if open {
				b.WriteByte('\'')
				open = false
			}
			fmt.Fprintf(&b, "$'\\%03o'", c)
			continue
		}
		if !open {
			b.WriteByte('\'')
			open = true
		}
		if c == '\'' {
			b.WriteString(`'\''`)
			continue
		}
		b.WriteByte(c)
	}
	if open {
		b.WriteByte('\'')
	}
	if b.Len() == 0 {
		return "''"
	}
	return b.String()
}
