package wtx

import "testing"

// TestTrustPolicyEntries: how SafeDirectories entries match a directory.
func TestTrustPolicyEntries(t *testing.T) {
	for _, k := range []struct {
		entry, dir string
		safe       bool
	}{
		{"/nonexistent/srv/a", "/nonexistent/srv/a", true},
		{"/nonexistent/srv/a", "/nonexistent/srv/a/b", false},
		{"/nonexistent/srv/a", "/nonexistent/srv/ab", false},
		{"/nonexistent/srv/a/", "/nonexistent/srv/a", true},
		{"/nonexistent/srv/a/*", "/nonexistent/srv/a", true},
		{"/nonexistent/srv/a/*", "/nonexistent/srv/a/b/c", true},
		{"/nonexistent/srv/a/*", "/nonexistent/srv/ab", false},
		{"/*", "/anything/at/all", true},
		{"*", "/anything", true},
	} {
		p, err := newTrustPolicy(Options{SafeDirectories: []string{k.entry}})
		if err != nil {
			t.Fatalf("%q: %v", k.entry, err)
		}
		if got := p.safe(k.dir); got != k.safe {
			t.Errorf("entry %q, directory %q: safe %v, want %v", k.entry, k.dir, got, k.safe)
		}
	}
	for _, bad := range []string{"rel/dir", "", "./x", "rel/*", "/a\x00b"} {
		if _, err := newTrustPolicy(Options{SafeDirectories: []string{bad}}); err == nil {
			t.Errorf("entry %q accepted", bad)
		}
	}
}
