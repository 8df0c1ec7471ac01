package semantic

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// hostileNames hold what can rewrite or split a line of a listing.
var hostileNames = []string{
	"esc\x1b[2K\x1b[1Gfake.txt", // erases its own line and writes another
	"new\nline",                 // one path that would read as two
	"cr\rret",                   // returns to the start of the line
	"bell\x07\x08",
	"tab\tname",
	"bad\xff",
	`back\slash"q`,
}

// checkListing fails unless out shows every name quoted as git quotes it and
// holds no control byte but newline (and tab where the format separates
// fields with one), with lines lines when lines >= 0.
func checkListing(t *testing.T, what, out string, tabs bool, lines int) {
	t.Helper()
	for i := 0; i < len(out); i++ {
		c := out[i]
		if c < 0x20 && c != '\n' && !(tabs && c == '\t') || c == 0x7f {
			t.Errorf("%s: raw control byte %#02x at %d in %q", what, c, i, out)
			return
		}
	}
	for _, n := range hostileNames {
		if !strings.Contains(out, quote.Path(n)) {
			t.Errorf("%s: %q is not shown as %s:\n%s", what, n, quote.Path(n), out)
		}
	}
	if lines >= 0 {
		if got := strings.Count(out, "\n"); got != lines {
			t.Errorf("%s: %d lines, want %d:\n%s", what, got, lines, out)
		}
	}
}

// TestI007_ListingsQuoteNames (I-007): run summary, status, diff --name-status and
// --stat, apply --dry-run, the refusal's conflict list, apply/undo/drop-op
// notices and show's diff headers all quote names with control characters;
// no name can erase or split a line.
func TestI007_ListingsQuoteNames(t *testing.T) {
	t.Parallel()
	e := newNameEnv(t, wtxtest.Binary(t, false))
	script := `for n in "$@"; do printf 'x\n' > "$n"; done`
	args := append([]string{"run", "--backend", "copy", "--protect", "**", "--", "sh", "-c", script, "sh"}, hostileNames...)
	r := e.wtx(nil, args...)
	nmOK(t, r, "run")
	checkListing(t, "run summary", r.stderr, false, -1)
	if got := strings.Count(r.stderr, "\n  A "); got != len(hostileNames) {
		t.Errorf("run summary lists %d added paths, want %d:\n%s", got, len(hostileNames), r.stderr)
	}
	r = e.wtx(nil, "status")
	nmOK(t, r, "status")
	checkListing(t, "status", r.stdout, false, -1)
	if got := strings.Count(r.stdout, "\n  A "); got != len(hostileNames) {
		t.Errorf("status lists %d added paths, want %d:\n%s", got, len(hostileNames), r.stdout)
	}
	r = e.wtx(nil, "diff", "--name-status")
	nmOK(t, r, "diff --name-status")
	checkListing(t, "diff --name-status", r.stdout, true, len(hostileNames))
	for _, line := range strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n") {
		if strings.Count(line, "\t") != 1 {
			t.Errorf("diff --name-status line %q has more than one field separator", line)
		}
	}
	r = e.wtx(nil, "diff", "--stat")
	nmOK(t, r, "diff --stat")
	checkListing(t, "diff --stat", r.stdout, false, len(hostileNames)+1)
	r = e.wtx(nil, "diff", "--no-pager")
	nmOK(t, r, "diff")
	for _, n := range hostileNames {
		if !strings.Contains(r.stdout, "diff --git "+quote.Path("a/"+n)+" "+quote.Path("b/"+n)) {
			t.Errorf("diff header of %q is not quoted:\n%s", n, r.stdout)
		}
	}
	r = e.wtx(nil, "apply", "--dry-run", "--approve")
	nmOK(t, r, "apply --dry-run")
	checkListing(t, "apply --dry-run", r.stdout, false, len(hostileNames)+1)
	r = e.wtx(nil, "apply")
	if r.code != 2 {
		t.Fatalf("apply under --protect '**': exit %d, want 2\n%s", r.code, r.stderr)
	}
	checkListing(t, "refusal", r.stderr, false, -1)
	r = e.wtx(nil, "apply", "--approve")
	nmOK(t, r, "apply --approve")
	op := strings.TrimSpace(r.stdout)
	r = e.wtx(nil, "show", op)
	nmOK(t, r, "show")
	for _, n := range hostileNames {
		if !strings.Contains(r.stdout, "diff --git "+quote.Path("a/"+n)+" "+quote.Path("b/"+n)) {
			t.Errorf("show's header of %q is not quoted", n)
		}
	}
	for _, n := range hostileNames {
		if got := nmRead(t, filepath.Join(e.ws, n)); got != "x\n" {
			t.Errorf("%q holds %q", n, got)
		}
	}

	// A per-file op's notice, a refusal naming a path, drop-op.
	r = e.wtx(nil, "begin", "--backend", "copy")
	nmOK(t, r, "begin")
	tx := strings.TrimSpace(r.stdout)
	for _, n := range hostileNames {
		r = e.wtx([]byte("y"), "write", "--tx", tx, "--", n)
		nmOK(t, r, "write")
		if !strings.Contains(r.stderr, quote.Path(n)) || strings.Count(r.stderr, "\n") != 1 || strings.ContainsAny(r.stderr, "\x1b\r\x07") {
			t.Errorf("write notice of %q: %q", n, r.stderr)
		}
	}
	r = e.wtx(nil, "edit", "--tx", tx, "--old=zzz", "--new=q", "--", hostileNames[0])
	if r.code == 0 || strings.ContainsAny(r.stderr, "\x1b\r") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("edit refusal naming %q: exit %d %q", hostileNames[0], r.code, r.stderr)
	}
}
