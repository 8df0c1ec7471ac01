package semantic

import (
	"bytes"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/bundle"
	"github.com/wtx-dev/wtx/internal/tree"
)

// twiceTree is the tree of rev with its top-level entry name given twice:
// first as shown (the entry git shows and checks out), then as listed. git
// itself never writes such a tree; a forger writes it with hash-object
// --literally.
func twiceTree(t *testing.T, dir, rev, name, shown, listed string) string {
	t.Helper()
	blobOf := func(content string) []byte {
		f := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		sha, err := hex.DecodeString(strings.TrimSpace(gitCmd(t, dir, "hash-object", "-w", f)))
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	var raw bytes.Buffer
	for rec := range strings.SplitSeq(strings.TrimSuffix(gitCmd(t, dir, "ls-tree", "-z", rev), "\x00"), "\x00") {
		meta, p, _ := strings.Cut(rec, "\t")
		f := strings.Fields(meta)
		mode := strings.TrimPrefix(f[0], "0")
		if p == name {
			raw.WriteString("100644 " + p + "\x00")
			raw.Write(blobOf(shown))
			raw.WriteString("100644 " + p + "\x00")
			raw.Write(blobOf(listed))
			continue
		}
		sha, err := hex.DecodeString(f[2])
		if err != nil {
			t.Fatal(err)
		}
		raw.WriteString(mode + " " + p + "\x00")
		raw.Write(sha)
	}
	f := filepath.Join(t.TempDir(), "tree")
	if err := os.WriteFile(f, raw.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(gitCmd(t, dir, "hash-object", "-t", "tree", "-w", "--literally", f))
}

// t005GitTwice crafts, from A's export of a stage that modifies README,
// a commit whose tree holds README twice: first a harmless content (what
// 'git show C:README' and a checkout give), then another, which the
// change set in its message lists (unsigned). B fetches and imports it;
// it returns whether the import was taken and, then, what its apply
// wrote to README (when refused, the answer).
func t005GitTwice(t *testing.T, failpoints bool, env []string) (taken bool, landed string) {
	a, b, hub := twoMachines(t, failpoints)
	b.env = env
	var run struct {
		Tx string `json:"tx"`
	}
	a.answer(a.ok(nil, "--json", "run", "--", "sh", "-c", "printf 'reviewed\\n' > README"), &run)
	a.ok(nil, "export", run.Tx, "--git", "--ref", "refs/wtx/fix")
	base := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "HEAD"))
	const listed = "listed, not shown\n"
	var digest string
	msg := resealMessage(t, []byte(gitCmd(t, a.ws, "log", "-1", "--format=%B", "refs/wtx/fix")), func(fb *bundle.Bundle) {
		for i := range fb.Entries {
			if e := &fb.Entries[i]; e.Path == "README" {
				ne := *e.New
				ne.Size, ne.Digest = int64(len(listed)), string(blob.Sum([]byte(listed)))
				e.New = &ne
			}
		}
		fb.Receipts, fb.Keys = nil, nil
		digest = tree.ChangesetDigest(fb.Changes())
	})
	// The message's trailers say what the forged change set holds, as a
	// careful forger writes them.
	var lines []string
	for l := range strings.SplitSeq(string(msg), "\n") {
		switch {
		case strings.HasPrefix(l, "Wtx-Receipt: "):
			continue
		case strings.HasPrefix(l, "Wtx-Changeset: "):
			l = "Wtx-Changeset: " + digest
		}
		lines = append(lines, l)
	}
	msg = []byte(strings.Join(lines, "\n"))
	c := commitTree(t, a.ws, twiceTree(t, a.ws, "refs/wtx/fix", "README", "reviewed\n", listed), base, msg)
	if got := gitCmd(t, a.ws, "show", c+":README"); got != "reviewed\n" {
		t.Fatalf("git shows README of the crafted commit as %q", got)
	}
	gitCmd(t, a.ws, "update-ref", "refs/wtx/twice", c)
	gitCmd(t, a.ws, "push", "-q", hub, "refs/wtx/twice:refs/wtx/twice")
	gitCmd(t, b.ws, "fetch", "-q", hub, "refs/wtx/twice:refs/wtx/twice")
	r := b.wtx(nil, "--json", "import", "--git", "refs/wtx/twice")
	if r.code != 0 {
		if code := errCode(t, r); code != "io.corrupt" {
			t.Fatalf("exit %d code %q, want io.corrupt\n%s%s", r.code, code, r.stdout, r.stderr)
		}
		if n := len(b.stages()); n != 0 {
			t.Fatalf("a refused import left %d stages", n)
		}
		return false, r.stdout
	}
	var imp importAnswer
	b.answer(r, &imp)
	b.ok(nil, "apply", imp.Tx)
	data, err := os.ReadFile(filepath.Join(b.ws, "README"))
	if err != nil {
		t.Fatal(err)
	}
	return true, string(data)
}

// TestT_005_AttackGitTreeNamesAPathTwice: a commit whose tree holds one
// path twice (git shows and checks out the first, the change set in its
// message lists the second) is refused on import as io.corrupt: a git
// import's change set is what git shows of the commit, and such a commit
// has no one change set.
func TestT_005_AttackGitTreeNamesAPathTwice(t *testing.T) {
	t.Parallel()
	if taken, landed := t005GitTwice(t, false, nil); taken {
		t.Fatalf("B imported a commit whose tree holds README twice; its apply wrote %q", landed)
	}
}

// TestT_005_AttackGitTreeNamesAPathTwiceNegativeControl: without the
// tree check (WTX_DISABLE=git-tree-check) the commit imports, and its
// apply writes content 'git show' never showed.
func TestT_005_AttackGitTreeNamesAPathTwiceNegativeControl(t *testing.T) {
	t.Parallel()
	taken, landed := t005GitTwice(t, true, []string{"WTX_DISABLE=git-tree-check"})
	if !taken || landed != "listed, not shown\n" {
		t.Fatalf("negative control: taken %v, README (or the refusal) %q", taken, landed)
	}
}

// t005GitMessage crafts, from A's export of a stage that modifies README
// and deletes src/util.go, commits of the genuine tree on the genuine
// parent whose message, outside the change set, says something else:
// fewer deletions in the counts git log shows, another change set in the
// Wtx-Changeset trailer, a receipt's trailer left out. B fetches and
// imports each; it returns the ones B took.
func t005GitMessage(t *testing.T, failpoints bool, env []string) (taken []string) {
	a, b, hub := twoMachines(t, failpoints)
	b.env = env
	var run struct {
		Tx string `json:"tx"`
	}
	a.answer(a.ok(nil, "--json", "run", "--", "sh", "-c", "printf 'reviewed\\n' > README; rm src/util.go"), &run)
	a.ok(nil, "export", run.Tx, "--git", "--ref", "refs/wtx/fix")
	base := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "HEAD"))
	fixTree := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "refs/wtx/fix^{tree}"))
	msg := gitCmd(t, a.ws, "log", "-1", "--format=%B", "refs/wtx/fix")
	cs := a.digest(run.Tx)
	lies := map[string]func(string) string{
		"counts": func(m string) string {
			return strings.Replace(m, "0 added, 1 modified, 1 deleted.", "0 added, 1 modified, 0 deleted.", 1)
		},
		"changeset": func(m string) string {
			return strings.Replace(m, "Wtx-Changeset: "+cs, "Wtx-Changeset: "+string(blob.Sum([]byte("reviewed elsewhere"))), 1)
		},
		"receipt": func(m string) string {
			i := strings.Index(m, "Wtx-Receipt: ")
			j := strings.IndexByte(m[i:], '\n')
			return m[:i] + m[i+j+1:]
		},
	}
	refs := []string{}
	for name, lie := range lies {
		m := lie(msg)
		if m == msg {
			t.Fatalf("%s: the lie changed nothing in the message:\n%s", name, msg)
		}
		ref := "refs/wtx/" + name
		gitCmd(t, a.ws, "update-ref", ref, commitTree(t, a.ws, fixTree, base, []byte(m)))
		refs = append(refs, ref)
	}
	gitCmd(t, a.ws, "push", "-q", hub, "refs/wtx/*:refs/wtx/*")
	gitCmd(t, b.ws, "fetch", "-q", hub, "refs/wtx/*:refs/wtx/*")
	var imp importAnswer
	b.answer(b.ok(nil, "--json", "import", "--git", "refs/wtx/fix"), &imp)
	if imp.ChangesetDigest != cs {
		t.Fatalf("the genuine commit imported as %s; A's change set is %s", imp.ChangesetDigest, cs)
	}
	b.ok(nil, "drop", "--all")
	for _, ref := range refs {
		r := b.wtx(nil, "--json", "import", "--git", ref)
		if r.code == 0 {
			taken = append(taken, ref)
			b.answer(r, &imp)
			b.ok(nil, "drop", imp.Tx)
			continue
		}
		if code := errCode(t, r); code != "io.corrupt" {
			t.Fatalf("%s: exit %d code %q, want io.corrupt\n%s%s", ref, r.code, code, r.stdout, r.stderr)
		}
	}
	return taken
}

// TestT_005_AttackGitMessageSaysOtherwise: a commit of the genuine tree
// on the genuine parent, whose message says other counts than its change
// set, names another change set in its Wtx-Changeset trailer or leaves a
// receipt's trailer out, is refused on import as io.corrupt: what a
// person reads of the commit in git log is the change set wtx imports.
func TestT_005_AttackGitMessageSaysOtherwise(t *testing.T) {
	t.Parallel()
	if taken := t005GitMessage(t, false, nil); len(taken) > 0 {
		t.Fatalf("B imported commits whose message says otherwise: %q", taken)
	}
}

// TestT_005_AttackGitMessageSaysOtherwiseNegativeControl: without the
// check (WTX_DISABLE=git-message-check) every such commit imports.
func TestT_005_AttackGitMessageSaysOtherwiseNegativeControl(t *testing.T) {
	t.Parallel()
	if taken := t005GitMessage(t, true, []string{"WTX_DISABLE=git-message-check"}); len(taken) != 3 {
		t.Fatalf("negative control: only %q imported", taken)
	}
}
