package quote

import "testing"

func TestPath(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"a.txt", "a.txt"},
		{"dir/with space", "dir/with space"},
		{"tab\there", `"tab\there"`},
		{"new\nline", `"new\nline"`},
		{"esc\x1b[2K", `"esc\033[2K"`},
		{"q\"uote", `"q\"uote"`},
		{`back\slash`, `"back\\slash"`},
		{"caf\xc3\xa9", `"caf\303\251"`},
		{"bad\xff", `"bad\377"`},
		{"del\x7f", `"del\177"`},
	} {
		if got := Path(tt.in); got != tt.want {
			t.Errorf("Path(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

// FuzzRoundTrip: every byte string survives Path then Unquote exactly, and
// a quoted name never holds a control byte or a byte outside ASCII.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"", "a", "\xff", "a\nb", `"x"`, `\`, "\x00\x01\x7f\x80"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := Path(s)
		if Needs(s) {
			for i := 0; i < len(q); i++ {
				if q[i] < 0x20 || q[i] >= 0x7f {
					t.Fatalf("Path(%q) = %q holds byte %#x", s, q, q[i])
				}
			}
		}
		got, ok := Unquote(q)
		if !ok || got != s {
			t.Fatalf("Unquote(Path(%q)) = %q, %v", s, got, ok)
		}
	})
}

func TestUnquoteRejects(t *testing.T) {
	// An escape at the end, a digit that is not octal, too few digits, a
	// value over 255 (\400) and a bare quote inside are not Path's output.
	for _, s := range []string{`"\"`, `"\9"`, `"\40"`, `"\400"`, `"a"b"`} {
		if got, ok := Unquote(s); ok {
			t.Errorf("Unquote(%s) = %q, accepted", s, got)
		}
	}
}

func TestText(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"plain – café …", "plain – café …"},
		{"a\nb", `a\012b`},
		{"esc\x1b[2K", `esc\033[2K`},
		{"bad\xff", `bad\377`},
		{"c1\u009b", `c1\302\233`},
		{"rlo\u202e", `rlo\342\200\256`},
	} {
		if got := Text(tt.in); got != tt.want {
			t.Errorf("Text(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}
