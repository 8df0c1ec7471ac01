package project

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx"
)

func TestParse(t *testing.T) {
	f, err := Parse("/w/.wtx.toml", []byte("# c\nbackend = 'clone'\nexclude = ['a', \"b/**\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if f.Backend != "clone" || !slices.Equal(f.Exclude, []string{"a", "b/**"}) || f.Protect == nil || len(f.Protect) != 0 {
		t.Fatalf("got %+v", f)
	}
	for _, tt := range []struct{ in, want string }{
		{"exclud = []\n", ".wtx.toml:1: unknown key \"exclud\""},
		{"\n\n[stage]\nx = 1\n", ".wtx.toml:3: "},
		{"exclude = 'a'\n", ".wtx.toml:1: "},
		{"backend = 'zfs'\n", ".wtx.toml:1: backend \"zfs\" is not one of"},
		{"protect = ['']\n", ".wtx.toml:1: protect holds an empty selector"},
		{"\nexclude = [\"a\\u0000\"]\n", ".wtx.toml:2: exclude selector"},
		{"exclude = ['\xff']\n", ".wtx.toml:1: "},
	} {
		_, err := Parse("/w/.wtx.toml", []byte(tt.in))
		var e *wtx.Error
		if !errors.As(err, &e) || e.Code != wtx.CodeProjectFile || !strings.Contains(e.Message, tt.want) {
			t.Errorf("Parse(%q) = %v, want usage.project-file containing %q", tt.in, err, tt.want)
		}
	}
}
