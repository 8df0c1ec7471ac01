package textdiff

import (
	"bytes"
	"strings"
)

// binarySniffLen is how much of a text IsBinary inspects, as git does.
const binarySniffLen = 8000

// Lines splits text into lines, each keeping its trailing "\n"; the last
// line lacks one when text does not end in "\n". Empty text has no lines.
func Lines(text []byte) []string {
	if len(text) == 0 {
		return nil
	}
	n := bytes.Count(text, []byte{'\n'})
	if text[len(text)-1] != '\n' {
		n++
	}
	s := string(text)
	out := make([]string, 0, n)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}

// IsBinary reports whether content should be treated as binary: it has a
// NUL byte within its first 8000 bytes, the rule git uses.
func IsBinary(content []byte) bool {
	if len(content) > binarySniffLen {
		content = content[:binarySniffLen]
	}
	return bytes.IndexByte(content, 0) >= 0
}
