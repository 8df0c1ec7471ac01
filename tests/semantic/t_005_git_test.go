package semantic

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/bundle"
)

// gitTree is rev's tree with the paths of set given new blobs (content,
// mode 100644) and the paths of drop removed, written by plumbing alone
// (hash-object, a scratch index, write-tree): what a forger crafts.
func gitTree(t *testing.T, dir, rev string, set map[string]string, drop ...string) string {
	t.Helper()
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	gitEnv(t, dir, idx, "read-tree", rev)
	for p, content := range set {
		f := filepath.Join(t.TempDir(), "blob")
		if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		sha := strings.TrimSpace(gitCmd(t, dir, "hash-object", "-w", f))
		gitEnv(t, dir, idx, "update-index", "--add", "--cacheinfo", "100644,"+sha+","+p)
	}
	for _, p := range drop {
		gitEnv(t, dir, idx, "update-index", "--force-remove", "--", p)
	}
	return strings.TrimSpace(gitEnv(t, dir, idx, "write-tree"))
}

// commitTree writes a commit of tree on parent with message msg.
func commitTree(t *testing.T, dir, tree, parent string, msg []byte) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(f, msg, 0o600); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(gitCmd(t, dir, "commit-tree", tree, "-p", parent, "-F", f))
}

// resealMessage is msg with the change set between its markers rewritten
// by edit and re-encoded (every digest recomputed).
func resealMessage(t *testing.T, msg []byte, edit func(*bundle.Bundle)) []byte {
	t.Helper()
	begin, end := []byte("-----BEGIN WTX CHANGE SET-----\n"), []byte("-----END WTX CHANGE SET-----\n")
	head, rest, _ := bytes.Cut(msg, begin)
	enc, tail, _ := bytes.Cut(rest, end)
	data, err := base64.StdEncoding.DecodeString(string(bytes.ReplaceAll(enc, []byte("\n"), nil)))
	if err != nil {
		t.Fatal(err)
	}
	b := decodeBundle(t, data)
	edit(b)
	out := base64.StdEncoding.EncodeToString(reencode(t, b))
	var m bytes.Buffer
	m.Write(head)
	m.Write(begin)
	for len(out) > 76 {
		m.WriteString(out[:76] + "\n")
		out = out[76:]
	}
	m.WriteString(out + "\n")
	m.Write(end)
	m.Write(tail)
	return m.Bytes()
}

// t005Git crafts, from A's genuine export of a stage that modifies a file
// (under a name that is not UTF-8) and deletes src/util.go, commits that
// git shows as the modification only: their parent is the base without
// src/util.go. B fetches and imports each; it returns the ones B took
// and, when one was taken, whether its apply deleted B's src/util.go.
func t005Git(t *testing.T, failpoints bool, env []string) (taken []string, deleted bool) {
	a, b, hub := twoMachines(t, failpoints)
	b.env = env
	var run struct {
		Tx string `json:"tx"`
	}
	a.answer(a.ok(nil, "--json", "run", "--", "sh", "-c", `printf 'odd, changed\n' > "$(printf 'n\377\376\nname')"; rm src/util.go`), &run)
	a.ok(nil, "export", run.Tx, "--git", "--ref", "refs/wtx/fix")
	base := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "HEAD"))
	msg := []byte(gitCmd(t, a.ws, "log", "-1", "--format=%B", "refs/wtx/fix"))
	// A parent that lacks src/util.go, and on it a commit that changes
	// the odd name only.
	parent := commitTree(t, a.ws, gitTree(t, a.ws, base, nil, "src/util.go"), base, []byte("tidy\n"))
	shown := gitTree(t, a.ws, parent, map[string]string{oddName: "odd, changed\n"})
	crafted := map[string]string{
		// its message says it was made on base: not its parent
		"refs/wtx/claims-base": commitTree(t, a.ws, shown, parent, msg),
		// the claim rewritten to the parent: the listed base of
		// src/util.go is not what the parent holds
		"refs/wtx/claims-parent": commitTree(t, a.ws, shown, parent, resealMessage(t, msg, func(b *bundle.Bundle) { b.Origin.GitHead = parent })),
		// on the true base, a tree that changes more than it lists
		"refs/wtx/more": commitTree(t, a.ws, gitTree(t, a.ws, "refs/wtx/fix", map[string]string{"src/smuggled.go": "package main\n"}), base, msg),
	}
	for ref, c := range crafted {
		gitCmd(t, a.ws, "update-ref", ref, c)
	}
	if out := gitCmd(t, a.ws, "diff-tree", "-r", "--name-only", "--no-commit-id", crafted["refs/wtx/claims-parent"]); strings.Contains(out, "util.go") {
		t.Fatalf("the crafted commit shows the deletion: %s", out)
	}
	gitCmd(t, a.ws, "push", "-q", hub, "refs/wtx/*:refs/wtx/*")
	gitCmd(t, b.ws, "fetch", "-q", hub, "refs/wtx/*:refs/wtx/*")
	// The control: the genuine commit imports, with its signer named.
	var imp importAnswer
	b.answer(b.ok(nil, "--json", "import", "--git", "refs/wtx/fix"), &imp)
	if imp.ChangesetDigest != a.digest(run.Tx) || imp.Proof.Status != "signed" {
		t.Fatalf("the genuine commit imported as %s with proof %+v; A's change set is %s", imp.ChangesetDigest, imp.Proof, a.digest(run.Tx))
	}
	b.ok(nil, "drop", "--all")
	for _, ref := range []string{"refs/wtx/claims-base", "refs/wtx/claims-parent", "refs/wtx/more"} {
		r := b.wtx(nil, "--json", "import", "--git", ref)
		if r.code != 0 {
			if code := errCode(t, r); code != "io.corrupt" {
				t.Fatalf("%s: exit %d code %q, want io.corrupt\n%s", ref, r.code, code, r.stdout)
			}
			continue
		}
		taken = append(taken, ref)
		b.answer(r, &imp)
		if deleted {
			b.ok(nil, "drop", imp.Tx)
			continue
		}
		b.ok(nil, "apply", imp.Tx)
		_, err := os.Lstat(filepath.Join(b.ws, "src", "util.go"))
		deleted = os.IsNotExist(err)
	}
	if len(taken) == 0 && len(b.stages()) != 1 {
		t.Fatalf("refused git imports left stages behind: %v", b.stages())
	}
	return taken, deleted
}

// TestT_005_GitChangeSetIsTheCommitsDiff: a commit that git shows as one
// modification, whose message lists a deletion too, is refused on import
// as io.corrupt: the change set is the commit's diff against its real
// parent, listed base included, and the commit it claims to be made on
// must be that parent. A commit whose tree changes more than it lists is
// refused too. The genuine commit imports.
func TestT_005_GitChangeSetIsTheCommitsDiff(t *testing.T) {
	t.Parallel()
	if taken, _ := t005Git(t, false, nil); len(taken) > 0 {
		t.Fatalf("B imported crafted commits: %q", taken)
	}
}

// TestT_005_GitChangeSetNegativeControl: without the parent check
// (WTX_DISABLE=git-parent-check) the commit whose claim was rewritten
// imports, and its apply deletes a file git never showed deleted.
func TestT_005_GitChangeSetNegativeControl(t *testing.T) {
	t.Parallel()
	taken, deleted := t005Git(t, true, []string{"WTX_DISABLE=git-parent-check"})
	if len(taken) != 2 || !deleted {
		t.Fatalf("negative control: taken %q, src/util.go deleted %v", taken, deleted)
	}
}

// t005Refs exports A's stage to git under refs it must not rewrite and
// returns the refs an export changed without --force.
func t005Refs(t *testing.T, failpoints bool, env []string) (rewritten []string) {
	a, _, _ := twoMachines(t, failpoints)
	a.env = env
	tx := a.runAgent("fix")
	gitCmd(t, a.ws, "branch", "release")
	gitCmd(t, a.ws, "symbolic-ref", "refs/wtx/points-at-release", "refs/heads/release")
	main := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "refs/heads/main"))
	refs := func() string { return gitCmd(t, a.ws, "for-each-ref", "--format=%(refname) %(objectname) %(symref)") }
	var exp struct {
		Ref    string `json:"ref"`
		Commit string `json:"commit"`
	}
	a.answer(a.ok(nil, "--json", "export", tx, "--git"), &exp)
	if exp.Ref != "refs/wtx/fix" {
		t.Fatalf("the default ref is %q, want refs/wtx/fix", exp.Ref)
	}
	for _, c := range []struct {
		ref, code string
	}{
		{"refs/heads/release", "usage.invalid"},            // outside refs/wtx/
		{"refs/heads/new-branch", "usage.invalid"},         // outside, even new
		{"refs/wtx/fix", "usage.name-taken"},               // exists
		{"refs/wtx/points-at-release", "usage.name-taken"}, // a symbolic ref to a branch
	} {
		before := refs()
		r := a.wtx(nil, "--json", "export", tx, "--git", "--ref", c.ref)
		if r.code == 0 {
			rewritten = append(rewritten, c.ref)
			continue
		}
		if code := errCode(t, r); code != c.code {
			t.Fatalf("export --git --ref %s: code %q, want %s\n%s", c.ref, code, c.code, r.stdout)
		}
		if after := refs(); after != before {
			t.Fatalf("a refused export changed the refs:\n%s\n%s", before, after)
		}
	}
	if len(rewritten) > 0 {
		return rewritten
	}
	// --force writes them, never through the symbolic ref, never the
	// current branch.
	a.answer(a.ok(nil, "--json", "export", tx, "--git", "--ref", "refs/wtx/fix", "--force"), &exp)
	if got := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "refs/wtx/fix")); got != exp.Commit {
		t.Fatalf("--force left refs/wtx/fix at %s, the export wrote %s", got, exp.Commit)
	}
	a.ok(nil, "export", tx, "--git", "--ref", "refs/wtx/points-at-release", "--force")
	if got := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "refs/heads/release")); got != main {
		t.Fatalf("an export through a symbolic ref moved refs/heads/release to %s", got)
	}
	if r := a.wtx(nil, "--json", "export", tx, "--git", "--ref", "refs/heads/main", "--force"); r.code == 0 {
		t.Fatal("export --git --force rewrote the current branch")
	}
	if strings.Contains(refs(), "wtx-export-tmp") {
		t.Fatalf("exports left a temporary ref:\n%s", refs())
	}
	return nil
}

// TestT_005_ExportGitRefs: export --git writes under refs/wtx/ (the
// default) and never a ref outside it, nor an existing one (a symbolic
// ref included), without --force; a refused export changes no ref.
func TestT_005_ExportGitRefs(t *testing.T) {
	t.Parallel()
	if rewritten := t005Refs(t, false, nil); len(rewritten) > 0 {
		t.Fatalf("export --git wrote %q without --force", rewritten)
	}
}

// TestT_005_ExportGitRefsNegativeControl: without the guard
// (WTX_DISABLE=export-ref-guard) an export rewrites refs/heads/release.
func TestT_005_ExportGitRefsNegativeControl(t *testing.T) {
	t.Parallel()
	if rewritten := t005Refs(t, true, []string{"WTX_DISABLE=export-ref-guard"}); len(rewritten) == 0 {
		t.Fatal("negative control: no ref was written with the guard off")
	}
}
