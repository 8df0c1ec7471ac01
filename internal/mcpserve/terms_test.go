package mcpserve

import "testing"

func TestToolMessage(t *testing.T) {
	for in, want := range map[string]string{
		"edit a.txt: --old must not be empty":                             "edit a.txt: old must not be empty",
		"--path \"src\" matches nothing":                                  "paths \"src\" matches nothing",
		"no stage \"x\" in workspace /w (see 'wtx list')":                 "no stage \"x\" in workspace /w (see the list tool)",
		"x--all changed; apply the rest (--exclude x--all)":               "x--all changed; apply the rest (exclude x--all)",
		"no hunk 7 (the file has 2; see 'wtx diff --hunks --path h.txt')": "no hunk 7 (the file has 2; see the diff tool with number_hunks)",
		"leave it out with --exclude":                                     "leave it out with exclude",
		"--frobnicate stays as it is":                                     "--frobnicate stays as it is",
	} {
		if got := toolMessage(in); got != want {
			t.Errorf("toolMessage(%q) = %q, want %q", in, got, want)
		}
	}
}
