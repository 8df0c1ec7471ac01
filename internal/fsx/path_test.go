package fsx

import (
	"errors"
	"strings"
	"testing"
)

func TestValidRel(t *testing.T) {
	long := strings.Repeat("x", MaxNameLen)
	tests := []struct {
		rel string
		ok  bool
	}{
		{".", true},
		{"a", true},
		{"a/b/c", true},
		{".hidden/..x/x..", true},
		{`a\..\b`, true},
		{"new\nline", true},
		{long, true},
		{long + "/" + long, true},
		{"", false},
		{"/", false},
		{"/etc/passwd", false},
		{"..", false},
		{"../x", false},
		{"a/..", false},
		{"a/../b", false},
		{"a/./b", false},
		{"./a", false},
		{"a/.", false},
		{"a//b", false},
		{"a/", false},
		{"a/b/", false},
		{"a\x00b", false},
		{long + "x", false},
		{"a/" + long + "x", false},
		{strings.Repeat("a/", MaxPathLen/2+1) + "a", false},
	}
	for _, tt := range tests {
		err := ValidRel(tt.rel)
		if (err == nil) != tt.ok {
			t.Errorf("ValidRel(%q) = %v, want ok=%v", tt.rel, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidPath) {
			t.Errorf("ValidRel(%q) = %v, does not wrap ErrInvalidPath", tt.rel, err)
		}
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"a", true},
		{"..a", true},
		{strings.Repeat("n", MaxNameLen), true},
		{"", false},
		{".", false},
		{"..", false},
		{"a/b", false},
		{"a/", false},
		{"/a", false},
		{"a\x00", false},
		{strings.Repeat("n", MaxNameLen+1), false},
	}
	for _, tt := range tests {
		if err := validName(tt.name); (err == nil) != tt.ok {
			t.Errorf("validName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
