package semantic

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// The I-001 property: names drawn from the whole byte alphabet (every byte
// but '/' and NUL: invalid UTF-8, control characters, newlines, 255-byte
// components, NFC/NFD twins, leading dashes, a literal U+FFFD) go through
// every entry point — run, write/edit/rm, batch, apply, undo, drop-op, fork,
// rebase, exclude and protect — and the workspace ends byte-exactly as a
// reference tree the test builds with os calls on the same raw names.
//
// Each case is one seed. The default run is short; WTX_SOAK=1 runs many
// more cases. -names-seed replays one.

var (
	namesSeedFlag  = flag.Uint64("names-seed", 0, "I-001 property: replay only this seed")
	namesCasesFlag = flag.Int("names-cases", 6, "I-001 property: number of seeds (x25 with WTX_SOAK=1)")
)

// nameGen draws hostile names.
type nameGen struct {
	r    *rand.Rand
	seen map[string]bool
}

// next returns a fresh name, valid as one path component.
func (g *nameGen) next() string {
	for {
		n := g.draw()
		if n == "" || n == "." || n == ".." || strings.HasPrefix(n, ".wtx-tmp-") || strings.ContainsAny(n, "/\x00") || len(n) > 255 || g.seen[n] {
			continue
		}
		g.seen[n] = true
		return n
	}
}

func (g *nameGen) draw() string {
	r := g.r
	randBytes := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			for b[i] == 0 || b[i] == '/' {
				b[i] = byte(r.IntN(256))
			}
		}
		return string(b)
	}
	switch r.IntN(10) {
	case 0:
		return randBytes(1 + r.IntN(12)) // anything at all
	case 1:
		return "x" + randBytes(254) // a 255-byte component
	case 2:
		return []string{"caf\u00e9", "cafe\u0301", "\u00c5", "A\u030a"}[r.IntN(4)] + randBytes(r.IntN(2)) // NFC/NFD twins
	case 3:
		return []string{"-rf", "--help", "-", "--", "-n\xff"}[r.IntN(5)] + randBytes(r.IntN(3)) // leading dashes
	case 4:
		return "lit\uFFFD" + randBytes(r.IntN(2)) // a literal U+FFFD
	case 5:
		return "n\xff" + string(rune('a'+r.IntN(26))) // a lone invalid byte
	case 6:
		return []string{"\n", "a\nb", "\x1b[2K", "\r", "\t", "\x7f", "\u0085", "\u202e"}[r.IntN(8)] + randBytes(r.IntN(3))
	case 7:
		return string([]byte{0xc3}) + "x" + randBytes(r.IntN(2)) // a truncated sequence
	case 8:
		return []string{"*", "?", "[a]", "\\", "**", "a*b"}[r.IntN(6)] + randBytes(r.IntN(2)) // glob syntax, literally
	default:
		return fmt.Sprintf("plain%d.txt", r.IntN(1000))
	}
}

// argText is content that can travel as a command-line argument (no NUL).
func (g *nameGen) argText() string {
	return strings.ReplaceAll(g.content(), "\x00", "\x01")
}

func (g *nameGen) content() string {
	b := make([]byte, g.r.IntN(24))
	for i := range b {
		b[i] = byte(g.r.IntN(256))
	}
	return string(b)
}

// literalSelector escapes a name so that a selector matches it alone.
func literalSelector(n string) string {
	var b strings.Builder
	for i := 0; i < len(n); i++ {
		if c := n[i]; c == '*' || c == '?' || c == '[' || c == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(n[i])
	}
	return b.String()
}

// nameCase runs one seed in a fresh workspace against a reference tree.
type nameCase struct {
	*nameEnv
	ref        string
	backend    string            // copy, or overlay where it works
	files      map[string]string // the reference's file contents
	g          *nameGen
	violations []string
	steps      int
}

func (c *nameCase) violate(format string, args ...any) {
	c.violations = append(c.violations, fmt.Sprintf(format, args...))
}

// seed writes the same file in the workspace and the reference tree.
func (c *nameCase) seed(rel, data string) {
	for _, root := range []string{c.ws, c.ref} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			c.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			c.t.Fatal(err)
		}
	}
	c.files[rel] = data
}

// ref* change the reference tree only: what wtx must end up doing.
func (c *nameCase) refWrite(rel, data string) {
	if err := os.WriteFile(filepath.Join(c.ref, rel), []byte(data), 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.files[rel] = data
}

func (c *nameCase) refRemove(rel string) {
	if err := os.Remove(filepath.Join(c.ref, rel)); err != nil {
		c.t.Fatal(err)
	}
	delete(c.files, rel)
}

// same compares the workspace with the reference, by raw names.
func (c *nameCase) same(step string) bool {
	c.steps++
	want, err := snapshot(c.ref)
	if err != nil {
		c.t.Fatal(err)
	}
	got, err := snapshot(c.ws)
	if err != nil {
		c.t.Fatal(err)
	}
	if d := diffSnapshots(want, got); len(d) > 0 {
		c.violate("%s: the workspace differs from the reference:\n%s", step, formatDiff(d, 6))
		return false
	}
	return true
}

// ok runs wtx and records a violation unless it exits 0.
func (c *nameCase) ok(step string, stdin []byte, args ...string) (wtxResult, bool) {
	r := c.wtx(stdin, args...)
	if r.code != 0 {
		c.violate("%s: wtx %q exit %d: %s%s", step, args, r.code, r.stdout, r.stderr)
		return r, false
	}
	return r, true
}

func runNameCase(t testing.TB, bin string, env []string, backend string, seed uint64) *nameCase {
	e := newNameEnv(t, bin, env...)
	c := &nameCase{nameEnv: e, ref: filepath.Join(filepath.Dir(e.ws), "ref"), backend: backend, files: map[string]string{},
		g: &nameGen{r: rand.New(rand.NewPCG(seed, 0x1001)), seen: map[string]bool{}}}
	if err := os.Mkdir(c.ref, 0o755); err != nil {
		t.Fatal(err)
	}
	c.play()
	return c
}

func (c *nameCase) play() {
	g := c.g
	const n = 8
	names := make([]string, n)
	for i := range names {
		names[i] = g.next()
		c.seed(names[i], g.content())
	}
	dir := g.next()
	inner := g.next()
	c.seed(filepath.Join(dir, inner), g.content())
	// NFC/NFD twins in every case: two names, never one.
	nfc, nfd := "twin-caf\u00e9", "twin-cafe\u0301"
	g.seen[nfc], g.seen[nfd] = true, true
	c.seed(nfc, "nfc")
	c.seed(nfd, "nfd")
	if !c.same("setup") {
		return
	}

	// run (copy backend): the command gets the names as argv, writes two,
	// removes one, makes a symlink with a hostile target; apply; undo.
	a, b, del, link, target := names[0], names[1], names[2], g.next(), g.next()
	ca, cb := g.argText(), g.argText()
	r, ok := c.ok("run", nil, "run", "--backend", c.backend, "--json", "--", "sh", "-c",
		`printf '%s' "$2" > "$1"; printf '%s' "$4" > "$3"; rm -- "$5"; ln -s -- "$7" "$6"; printf x >> "$8"`,
		"sh", a, ca, filepath.Join(dir, b), cb, del, link, target, nfc)
	if !ok {
		return
	}
	tx := nmString(r.stdout, "tx")
	var rj map[string]any
	json.Unmarshal([]byte(r.stdout), &rj)
	rc, _ := rj["receipt"].(map[string]any)
	if argv := exactList(rc, "command"); len(argv) < 9 || argv[4] != a || argv[8] != del {
		c.violate("run: the receipt's command %q does not hold the argv", argv)
	}
	r, ok = c.ok("apply run", nil, "apply", tx, "--json")
	if !ok {
		return
	}
	op := nmString(r.stdout, "op_id")
	if rs, ok := c.ok("show", nil, "show", op, "--json"); ok {
		want := sorted([]string{filepath.Join(dir, b), del, link, nfc})
		if ca != c.files[a] {
			want = sorted(append(want, a)) // writing what a held already changes nothing
		}
		if got, _ := nmChanged(rs.stdout); !slices.Equal(got, want) {
			c.violate("show --json names %q, want %q (written %q, in a dir %q, removed %q, a link %q, changed %q)", got, want, a, filepath.Join(dir, b), del, link, nfc)
		}
	}
	wasA, wasDel := c.files[a], c.files[del]
	c.refWrite(a, ca)
	c.refWrite(filepath.Join(dir, b), cb)
	c.refRemove(del)
	if err := os.Symlink(target, filepath.Join(c.ref, link)); err != nil {
		c.t.Fatal(err)
	}
	c.refWrite(nfc, "nfcx")
	if !c.same("apply of a run") {
		return
	}
	if _, ok := c.ok("undo", nil, "undo", op); !ok {
		return
	}
	// Back to before: rebuild the reference from its snapshot.
	c.refWrite(a, wasA)
	c.refRemove(filepath.Join(dir, b))
	c.refRemove(link)
	c.refWrite(del, wasDel)
	c.refWrite(nfc, "nfc")
	if !c.same("undo") {
		return
	}

	// write / edit / rm in a stage; drop-op of the last two; status names;
	// apply.
	w, ed, rm := names[3], names[4], names[5]
	cw := g.content()
	old, nw := "\xff"+g.next()+"\xfe", g.argText()+"\x01"
	body := g.content()
	for strings.Contains(body, old) {
		body = g.content()
	}
	c.seed(ed, "<"+body+old+body+">")
	r, ok = c.ok("begin", nil, "begin", "--backend", c.backend)
	if !ok {
		return
	}
	tx = strings.TrimSpace(r.stdout)
	if _, ok := c.ok("write", []byte(cw), "write", "--tx", tx, "--", w); !ok {
		return
	}
	if r, ok := c.ok("read", nil, "read", "--tx", tx, "--json", "--", w); ok {
		var m map[string]any
		json.Unmarshal([]byte(r.stdout), &m)
		if got, gotPath := nmExact(m, "content"), nmExact(m, "path"); got != cw || gotPath != w {
			c.violate("read --json gave %q at %q, want %q at %q", got, gotPath, cw, w)
		}
	}
	if _, ok := c.ok("edit", nil, "edit", "--tx", tx, "--old="+old, "--new="+nw, "--", ed); !ok {
		return
	}
	if _, ok := c.ok("rm", nil, "rm", "--tx", tx, "--", rm); !ok {
		return
	}
	if _, ok := c.ok("write again", []byte("x"), "write", "--tx", tx, "--", ed); !ok {
		return
	}
	r, ok = c.ok("drop-op", nil, "drop-op", tx, "4", "--json") // ops: write, read, edit, rm, write
	if !ok {
		return
	}
	var dm map[string]any
	json.Unmarshal([]byte(r.stdout), &dm)
	if got, want := sorted(exactList(dm, "restored")), sorted([]string{rm, ed}); !slices.Equal(got, want) {
		c.violate("drop-op restored %q, want %q", got, want)
	}
	r, ok = c.ok("status", nil, "status", tx, "--json")
	if !ok {
		return
	}
	if got, _ := nmChanged(r.stdout); !slices.Equal(got, sorted([]string{w, ed})) {
		c.violate("status names %q, want %q", got, sorted([]string{w, ed}))
	}
	if _, ok := c.ok("apply ops", nil, "apply", tx); !ok {
		return
	}
	c.refWrite(w, cw)
	c.refWrite(ed, "<"+body+nw+body+">")
	if !c.same("apply of write/edit after drop-op") {
		return
	}

	// batch with the byte-safe fields; and a raw invalid line refused.
	bw, be := g.next(), names[6]
	cbw := g.content()
	c.seed(be, "["+old+"]")
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	in := fmt.Sprintf(`{"command":"write","path_b64":%q,"content_b64":%q}
{"command":"edit","path_b64":%q,"old_b64":%q,"new_b64":%q}
{"command":"rm","path_b64":%q}
`, b64(bw), b64(cbw), b64(be), b64(old), b64(nw), b64(w))
	if _, ok := c.ok("batch", []byte(in), "batch", "--atomic", "--backend", c.backend); !ok {
		return
	}
	c.refWrite(bw, cbw)
	c.refWrite(be, "["+nw+"]")
	c.refRemove(w)
	if !c.same("batch") {
		return
	}
	if rb := c.wtx([]byte("{\"command\":\"write\",\"path\":\"z\xff\",\"content\":\"x\"}\n"), "batch", "--atomic", "--backend", c.backend, "--json"); rb.code != 1 || !strings.Contains(rb.stdout, "usage.invalid") {
		c.violate("batch with invalid UTF-8 in a string: exit %d %s, want usage.invalid", rb.code, rb.stdout)
	}
	if !c.same("refused batch") {
		return
	}

	// fork: a stage writes x, its fork writes y too; applying the fork
	// lands both.
	r, ok = c.ok("begin for fork", nil, "begin", "--backend", c.backend)
	if !ok {
		return
	}
	s1 := strings.TrimSpace(r.stdout)
	fx, fy := g.next(), g.next()
	cx, cy := g.content(), g.content()
	if _, ok := c.ok("write before fork", []byte(cx), "write", "--tx", s1, "--", fx); !ok {
		return
	}
	r, ok = c.ok("fork", nil, "fork", s1)
	if !ok {
		return
	}
	s2 := strings.TrimSpace(r.stdout)
	if _, ok := c.ok("write in fork", []byte(cy), "write", "--tx", s2, "--", fy); !ok {
		return
	}
	if _, ok := c.ok("apply fork", nil, "apply", s2); !ok {
		return
	}
	c.wtx(nil, "drop", s1)
	c.refWrite(fx, cx)
	c.refWrite(fy, cy)
	if !c.same("fork") {
		return
	}

	// rebase: the stage edits a file the workspace then changes; the edit is
	// re-run on the new content.
	rbn := names[7]
	c.seed(rbn, "{"+old+"}")
	r, ok = c.ok("begin for rebase", nil, "begin", "--backend", c.backend)
	if !ok {
		return
	}
	s3 := strings.TrimSpace(r.stdout)
	if _, ok := c.ok("edit for rebase", nil, "edit", "--tx", s3, "--old="+old, "--new="+nw, "--", rbn); !ok {
		return
	}
	drift := g.content()
	c.seed(rbn, drift+"{"+old+"}")
	for strings.Contains(drift, old) {
		drift = g.content()
		c.seed(rbn, drift+"{"+old+"}")
	}
	if _, ok := c.ok("rebase", nil, "rebase", s3); !ok {
		return
	}
	if _, ok := c.ok("apply rebased", nil, "apply", s3); !ok {
		return
	}
	c.refWrite(rbn, drift+"{"+nw+"}")
	if !c.same("rebase") {
		return
	}

	// exclude: the command does not see the excluded name, and its write to
	// it is not applied. protect: a change to the protected name is refused
	// without --approve.
	ex, pr := names[1], g.next()
	c.seed(pr, "p")
	r = c.wtx(nil, "run", "--backend", c.backend, "--exclude", literalSelector(ex), "--protect", literalSelector(pr), "--json", "--",
		"sh", "-c", `test ! -e "$1" || exit 3; printf x >> "$2"`, "sh", ex, pr)
	if r.code != 0 {
		c.violate("exclude %q: the command saw it or failed (exit %d): %s", literalSelector(ex), r.code, r.stderr)
		return
	}
	tx = nmString(r.stdout, "tx")
	if ra := c.wtx(nil, "apply", tx, "--json"); ra.code != 2 || !strings.Contains(ra.stdout, "refusal.protected") {
		c.violate("protect %q: apply without --approve exit %d %s", literalSelector(pr), ra.code, ra.stdout)
	}
	if !c.same("refused protected apply") {
		return
	}
	if _, ok := c.ok("apply --approve", nil, "apply", tx, "--approve"); !ok {
		return
	}
	c.refWrite(pr, "px")
	c.same("approved protected apply")
}

func exactList(m map[string]any, key string) []string {
	if raw, ok := m[key+"_b64"].([]any); ok {
		out := make([]string, len(raw))
		for i, v := range raw {
			s, _ := v.(string)
			b, _ := base64.StdEncoding.DecodeString(s)
			out[i] = string(b)
		}
		return out
	}
	raw, _ := m[key].([]any)
	out := make([]string, len(raw))
	for i, v := range raw {
		out[i], _ = v.(string)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestI001_PropertyAllByteNames runs the property over seeded cases and
// reports how many cases, steps and violations there were.
func TestI001_PropertyAllByteNames(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh: the property drives commands through sh")
	}
	bin := wtxtest.Binary(t, false)
	seeds := []uint64{}
	switch {
	case *namesSeedFlag != 0:
		seeds = append(seeds, *namesSeedFlag)
	default:
		n := *namesCasesFlag
		if os.Getenv("WTX_SOAK") != "" {
			n *= 25
		}
		for s := 1; s <= n; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	backends := []string{"copy"}
	if reason := overlayUsable(t, bin); reason == "" {
		backends = append(backends, "overlay")
	} else {
		t.Logf("overlay backend left out: %s", reason)
	}
	var cases, steps, names, failed atomic.Int64
	t.Run("cases", func(t *testing.T) {
		for i, seed := range seeds {
			backend := backends[i%len(backends)]
			t.Run(fmt.Sprintf("%s-%d", backend, seed), func(t *testing.T) {
				t.Parallel()
				c := runNameCase(t, bin, nil, backend, seed)
				cases.Add(1)
				steps.Add(int64(c.steps))
				names.Add(int64(len(c.g.seen)))
				if len(c.violations) > 0 {
					failed.Add(1)
					t.Errorf("%s, seed %d (replay: go test ./tests/semantic -run I001_Property -names-seed %d): %s",
						backend, seed, seed, strings.Join(c.violations, "\n"))
				}
			})
		}
	})
	t.Logf("I-001 property (%s): %d cases, %d names, %d checked steps, %d failing cases",
		strings.Join(backends, ", "), cases.Load(), names.Load(), steps.Load(), failed.Load())
}

// overlayUsable says why the overlay backend cannot stage here ("" when it
// can).
func overlayUsable(t *testing.T, bin string) string {
	e := newNameEnv(t, bin)
	r := e.wtx(nil, "begin", "--backend", "overlay")
	if r.code != 0 {
		return strings.TrimSpace(r.stderr)
	}
	return ""
}

// TestI001_PropertyNegativeControl runs the property with names written as
// plain JSON strings again (WTX_DISABLE=names in a failpoint build): it
// must find violations, which proves it can.
func TestI001_PropertyNegativeControl(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, true)
	var found []string
	for seed := uint64(1); seed <= 2; seed++ {
		c := runNameCase(t, bin, []string{"WTX_DISABLE=names"}, "copy", seed)
		for _, v := range c.violations {
			found = append(found, fmt.Sprintf("seed %d: %.160q", seed, strings.SplitN(v, "\n", 2)[0]))
		}
	}
	if len(found) == 0 {
		t.Fatal("with names written as plain JSON strings the property found no violation: it cannot detect a substituted name")
	}
	t.Logf("negative control (names off): %d violation(s):\n%s", len(found), strings.Join(found, "\n"))
}
