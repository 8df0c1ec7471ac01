package mcpserve

import (
	"encoding/base64"
	"fmt"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// checkText refuses JSON text whose strings cannot carry what was meant:
// raw bytes that are not UTF-8, or an escaped UTF-16 surrogate that is not
// part of a pair. Decoding would silently put U+FFFD in their place. A
// literal U+FFFD is an ordinary character and passes.
func checkText(raw []byte) error {
	if !utf8.Valid(raw) {
		return notText("a string in the arguments is not valid UTF-8")
	}
	// A backslash only occurs inside a string in valid JSON, so escapes can
	// be found without tracking where strings begin and end.
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hex4(raw, i+1)
		i += 4
		switch {
		case !ok || r < 0xd800 || r > 0xdfff:
		case r <= 0xdbff && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u':
			if lo, ok := hex4(raw, i+3); ok && lo >= 0xdc00 && lo <= 0xdfff {
				i += 6
				continue
			}
			return notText("a string in the arguments holds an unpaired UTF-16 surrogate escape")
		default:
			return notText("a string in the arguments holds an unpaired UTF-16 surrogate escape")
		}
	}
	return nil
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

func notText(what string) error {
	return &wtx.Error{Code: wtx.CodeUsage, Message: what +
		"; send names and contents that are not UTF-8 base64-encoded in path_b64, content_b64, old_b64 or new_b64"}
}

// pick returns the text field or the bytes of its base64 twin; giving both
// is a usage error.
func pick(name, text, b64 string) (string, bool, error) {
	if b64 == "" {
		return text, text != "", nil
	}
	if text != "" {
		return "", false, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("give %s or %s_b64, not both", name, name)}
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", false, &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("%s_b64 is not standard padded base64: %v", name, err)}
	}
	return string(b), true, nil
}

// needPath is the path of a per-file call, from path or path_b64.
func needPath(text, b64 string) (string, error) {
	p, ok, err := pick("path", text, b64)
	if err == nil && !ok {
		err = &wtx.Error{Code: wtx.CodeUsage, Message: "path (or path_b64) is required"}
	}
	return p, err
}

// name writes a name into JSON as the command line's --json does: the name
// itself when it is UTF-8, else its quoted form plus the exact bytes in
// base64.
func name(n string) (text, b64 string) {
	if utf8.ValidString(n) {
		return n, ""
	}
	return quote.Path(n), base64.StdEncoding.EncodeToString([]byte(n))
}

// textOr puts s in text when it is UTF-8 and in base64 otherwise.
func textOr(s string) (text, b64 string) {
	if utf8.ValidString(s) {
		return s, ""
	}
	return "", base64.StdEncoding.EncodeToString([]byte(s))
}
