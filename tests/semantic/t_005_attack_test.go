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
// wrote to README.
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
	msg := resealMessage(t, []byte(gitCmd(t, a.ws, "log", "-1", "--format=%B", "refs/wtx/fix")), func(fb *bundle.Bundle) {
		for i := range fb.Entries {
			if e := &fb.Entries[i]; e.Path == "README" {
				ne := *e.New
				ne.Size, ne.Digest = int64(len(listed)), string(blob.Sum([]byte(listed)))
				e.New = &ne
			}
		}
		fb.Receipts, fb.Keys = nil, nil
	})
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
		return false, ""
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
		t.Fatalf("negative control: taken %v, README %q", taken, landed)
	}
}
