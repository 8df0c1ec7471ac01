//go:build linux

package semantic

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// shareCase is one way --share could reach, through a symlink, something
// other than the workspace's own path. It runs in a workspace of its own;
// harm says what wtx did through the link, or "".
type shareCase struct {
	name string
	// setup makes the workspace ws (a.txt holds "a\n"); victim is a
	// directory outside it.
	setup   func(t *testing.T, ws, victim string)
	begin   []string // begin's selectors
	refused bool     // begin is refused as refusal.boundary
	// after runs once the stage is open; then each of runs in the stage
	// ("$1" the victim, "$2" a file the line may leave what it saw in),
	// then again, before the last one, between runs when set.
	after   func(t *testing.T, ws, victim string)
	runs    []string
	between func(t *testing.T, ws, victim string)
	// lastRefused: the last run is refused as refusal.boundary.
	lastRefused bool
	harm        func(t *testing.T, ws, victim, seen string) string
}

func symlink(t *testing.T, target, p string) {
	t.Helper()
	mustDo(t, os.MkdirAll(filepath.Dir(p), 0o755))
	mustDo(t, os.Symlink(target, p))
}

// wsWritten is the harm of a run that wrote the real workspace.
func wsWritten(t *testing.T, ws, _, _ string) string {
	if got, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(got) != "a\n" {
		return "the command wrote the real workspace through the shared link"
	}
	return ""
}

var shareCases = []shareCase{
	{name: "selector-is-link", setup: func(t *testing.T, ws, _ string) { symlink(t, ".", filepath.Join(ws, "cache")) },
		begin: []string{"--share", "cache"}, refused: true, runs: []string{`echo pwned > a.txt`}, harm: wsWritten},
	{name: "wildcard-matches-link", setup: func(t *testing.T, ws, _ string) { symlink(t, ".", filepath.Join(ws, "cache")) },
		begin: []string{"--share", "c*"}, refused: true, runs: []string{`echo pwned > a.txt`}, harm: wsWritten},
	{name: "selector-under-link", setup: func(t *testing.T, ws, _ string) {
		mustDo(t, os.MkdirAll(filepath.Join(ws, "real", "cache"), 0o755))
		symlink(t, "real", filepath.Join(ws, "lnk"))
	}, begin: []string{"--share", "lnk/cache"}, refused: true, runs: []string{`true`},
		harm: func(*testing.T, string, string, string) string { return "" }},
	{name: "became-link-after-begin", setup: func(t *testing.T, ws, _ string) {
		mustDo(t, os.Mkdir(filepath.Join(ws, "cache"), 0o755))
	}, begin: []string{"--share", "cache"}, after: func(t *testing.T, ws, _ string) {
		mustDo(t, os.Remove(filepath.Join(ws, "cache")))
		symlink(t, ".", filepath.Join(ws, "cache"))
	}, runs: []string{`echo pwned > a.txt`}, lastRefused: true, harm: wsWritten},
	// The stage's command put a link on the way to a shared path while
	// the path was gone from the workspace; back, it is not bound through
	// the view's link.
	{name: "view-link-on-the-way", setup: func(t *testing.T, ws, victim string) {
		mustDo(t, os.MkdirAll(filepath.Join(ws, "a", "cache"), 0o755))
		mustDo(t, os.MkdirAll(filepath.Join(victim, "cache"), 0o755))
	}, begin: []string{"--share", "a/cache"}, after: func(t *testing.T, ws, _ string) {
		mustDo(t, os.Remove(filepath.Join(ws, "a", "cache")))
	}, runs: []string{`rm -rf a && ln -s "$1" a`, `awk '{print $5}' /proc/self/mountinfo > "$2"`},
		between: func(t *testing.T, ws, _ string) { mustDo(t, os.Mkdir(filepath.Join(ws, "a", "cache"), 0o755)) },
		harm: func(t *testing.T, _, victim, seen string) string {
			got, err := os.ReadFile(seen)
			mustDo(t, err)
			if strings.Contains(string(got), victim+"/cache\n") {
				return "the shared path was bound over the view link's target"
			}
			return ""
		}},
	// Excluded files inside a shared path are the workspace's own.
	{name: "exclude-inside-share", setup: func(t *testing.T, ws, _ string) {
		mustWrite(t, filepath.Join(ws, "cache", "x.log"), "log\n")
	}, begin: []string{"--share", "cache", "--exclude", "**/*.log"}, after: func(t *testing.T, ws, _ string) {
		mustWrite(t, filepath.Join(ws, "cache", "late.log"), "log\n")
	}, runs: []string{`true`},
		harm: func(t *testing.T, ws, _, _ string) string {
			for _, f := range []string{"x.log", "late.log"} {
				if _, err := os.Lstat(filepath.Join(ws, "cache", f)); err != nil {
					return "hiding an excluded file inside the shared path removed the workspace's cache/" + f
				}
			}
			return ""
		}},
}

// TestT_001_SharedPathsNeverFollowLinks checks T-001 for --share (overlay):
// a share selector that is, matches or passes through a symlink of the
// workspace is refused when the stage opens, and a shared path that became
// one since is refused before the next run (refusal.boundary, the real
// workspace untouched); a link the stage's command put on the way to a
// shared path is not bound through; excluded files inside a shared path
// are never hidden (they are the workspace's). Negative control (failpoint
// build, WTX_DISABLE=view-links,hide-in-share): links are followed and
// excluded paths inside shared ones hidden, and each case does its damage
// (or, for the selector under a link, is let through).
func TestT_001_SharedPathsNeverFollowLinks(t *testing.T) {
	t.Parallel()
	for _, control := range []bool{false, true} {
		name := "protected"
		if control {
			name = "negative-control"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newBoundaryEnv(t, "overlay", control)
			if control {
				e.env = append(e.env, "WTX_DISABLE=view-links,hide-in-share")
			}
			for i, c := range shareCases {
				harm := e.shareCase(i, c, control)
				switch {
				case control && harm == "":
					t.Errorf("%s: with links followed, the case did no harm: the check cannot fail", c.name)
				case !control && harm != "":
					t.Errorf("%s: %s", c.name, harm)
				}
			}
		})
	}
}

// shareCase plays c in workspace i and returns the harm done; control
// says links are followed (a run may then fail).
func (e *boundaryEnv) shareCase(i int, c shareCase, control bool) string {
	t := e.t
	base := filepath.Dir(e.ws)
	ws := filepath.Join(base, "ws-share"+strconv.Itoa(i))
	victim := filepath.Join(base, "victim-share"+strconv.Itoa(i))
	seen := filepath.Join(e.out, "share"+strconv.Itoa(i))
	mustWrite(t, filepath.Join(ws, "a.txt"), "a\n")
	mustDo(t, os.MkdirAll(victim, 0o755))
	c.setup(t, ws, victim)
	r := e.runIn(ws, nil, append([]string{"--json", "begin", "--backend", "overlay", "--name", "s"}, c.begin...)...)
	if r.code != 0 {
		if !c.refused {
			t.Fatalf("%s: begin: exit %d: %s", c.name, r.code, r.stdout+r.stderr)
		}
		if code := errorCode(t, r); code != "refusal.boundary" {
			return "begin refused as " + code + ", not refusal.boundary: " + r.stdout
		}
		return ""
	}
	harm := ""
	if c.refused {
		harm = "begin took a share selector through a symlink"
	}
	if c.after != nil {
		c.after(t, ws, victim)
	}
	for j, line := range c.runs {
		last := j == len(c.runs)-1
		if last && c.between != nil {
			c.between(t, ws, victim)
		}
		r := e.runIn(ws, nil, "--json", "run", "--tx", "s", "--", "sh", "-c", line, "sh", victim, seen)
		switch {
		case r.code == 0 || control:
		case last && c.lastRefused:
			if code := errorCode(t, r); code != "refusal.boundary" {
				return "the run was refused as " + code + ", not refusal.boundary: " + r.stdout
			}
		default:
			t.Errorf("%s: run %q: exit %d: %s", c.name, line, r.code, r.stdout+r.stderr)
		}
	}
	if h := c.harm(t, ws, victim, seen); h != "" {
		harm = h
	}
	return harm
}
