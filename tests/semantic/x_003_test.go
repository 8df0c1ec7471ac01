package semantic

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gitState is what a git export must leave alone in the exporting
// repository: the index file's bytes, HEAD (the current branch), the
// branch's commit, what git status says, and the worktree.
type gitState struct {
	index  []byte
	head   string
	branch string
	status string
	tree   map[string]node
}

func (m *machine) gitState() gitState {
	m.t.Helper()
	idx, err := os.ReadFile(filepath.Join(m.ws, ".git", "index"))
	if err != nil {
		m.t.Fatal(err)
	}
	return gitState{index: idx, head: gitCmd(m.t, m.ws, "symbolic-ref", "HEAD"), branch: gitCmd(m.t, m.ws, "rev-parse", "refs/heads/main"),
		status: gitCmd(m.t, m.ws, "status", "--porcelain=v1", "-z", "--untracked-files=all"), tree: m.tree()}
}

func (g gitState) same(t *testing.T, o gitState) {
	t.Helper()
	switch {
	case !bytes.Equal(g.index, o.index):
		t.Fatal("the git export changed the index file")
	case g.head != o.head:
		t.Fatalf("the git export changed HEAD: %q → %q", g.head, o.head)
	case g.branch != o.branch:
		t.Fatalf("the git export moved the current branch: %s → %s", g.branch, o.branch)
	case g.status != o.status:
		t.Fatalf("the git export changed git status: %q → %q", g.status, o.status)
	}
	if d := diffSnapshots(g.tree, o.tree); len(d) > 0 {
		t.Fatalf("the git export changed the worktree:\n%s", formatDiff(d, 20))
	}
}

// TestX003_GitTransport: machine A exports its stage to git (a commit on
// top of HEAD and a ref, nothing else: index, worktree, current branch and
// git status stay as they were, even with uncommitted work in A), pushes
// the ref to a bare repository; machine B fetches it and imports it: the
// same change set (same digest, same diff) as A's stage, which applies on
// B to the tree A gets at home.
func TestX003_GitTransport(t *testing.T) {
	t.Parallel()
	a, b, _ := twoMachines(t, false)
	mustWrite(t, filepath.Join(a.ws, "README"), "hello, uncommitted\n") // A's tree is dirty
	tx := a.runAgent("fix")
	before := a.gitState()
	var exp struct {
		Ref     string `json:"ref"`
		Commit  string `json:"commit"`
		GitHead string `json:"git_head"`
	}
	a.answer(a.ok(nil, "--json", "export", tx, "--git", "--ref", "refs/wtx/fix"), &exp)
	before.same(t, a.gitState())
	if exp.Ref != "refs/wtx/fix" || strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", "refs/wtx/fix")) != exp.Commit {
		t.Fatalf("export answer %+v does not name the ref's commit", exp)
	}
	if parent := strings.TrimSpace(gitCmd(t, a.ws, "rev-parse", exp.Commit+"^")); parent != strings.TrimSpace(before.branch) || exp.GitHead != parent {
		t.Fatalf("the commit's parent %s is not HEAD %s", parent, before.branch)
	}
	msg := gitCmd(t, a.ws, "log", "-1", "--format=%B", exp.Commit)
	if !strings.Contains(msg, "Wtx-Receipt: rc-") || !strings.Contains(msg, "Wtx-Changeset: "+a.digest(tx)) {
		t.Fatalf("the commit carries no receipt trailer:\n%s", msg)
	}
	// git itself sees the change: the commit's tree holds the new content,
	// the exec bit and the symlink.
	if got := gitCmd(t, a.ws, "cat-file", "-p", exp.Commit+":src/main.go"); !strings.Contains(got, "fixed") {
		t.Fatalf("src/main.go in the commit: %q", got)
	}
	if ls := gitCmd(t, a.ws, "ls-tree", exp.Commit, "run.sh", "link"); !strings.Contains(ls, "100755") || !strings.Contains(ls, "120000") {
		t.Fatalf("modes in the commit: %s", ls)
	}

	gitCmd(t, a.ws, "push", "-q", "origin", "refs/wtx/fix")
	bBefore := b.gitState()
	gitCmd(t, b.ws, "fetch", "-q", "origin", "refs/wtx/fix:refs/wtx/fix")
	var imp struct {
		Tx              string `json:"tx"`
		ChangesetDigest string `json:"changeset_digest"`
		Origin          struct {
			GitCommit string `json:"git_commit"`
			Receipts  []any  `json:"receipts"`
		} `json:"origin"`
	}
	b.answer(b.ok(nil, "--json", "import", "--git", "refs/wtx/fix"), &imp)
	bBefore.same(t, b.gitState())
	if imp.ChangesetDigest != a.digest(tx) || imp.Origin.GitCommit != exp.Commit || len(imp.Origin.Receipts) == 0 {
		t.Fatalf("B imported change set %s from %s with %d receipts; A's is %s from %s", imp.ChangesetDigest,
			imp.Origin.GitCommit, len(imp.Origin.Receipts), a.digest(tx), exp.Commit)
	}
	if da, db := a.ok(nil, "diff", tx).stdout, b.ok(nil, "diff", imp.Tx).stdout; da != db {
		t.Fatalf("diff on B differs from diff on A:\nA:\n%s\nB:\n%s", da, db)
	}
	b.ok(nil, "apply", imp.Tx)
	mustWrite(t, filepath.Join(a.ws, "README"), "hello\n")
	a.ok(nil, "apply", tx)
	if d := diffSnapshots(a.tree(), b.tree()); len(d) > 0 {
		t.Fatalf("B after apply differs from A after apply:\n%s", formatDiff(d, 20))
	}
}

// x003Tampered rewrites the exported commit with one more file in its
// tree (and the same message) and reports whether B imported it.
func x003Tampered(t *testing.T, failpoints bool, env []string) bool {
	a, b, _ := twoMachines(t, failpoints)
	b.env = env
	tx := a.runAgent("fix")
	a.ok(nil, "export", tx, "--git", "--ref", "refs/wtx/fix")
	// A tree with one more file than the change set names.
	idx := []string{"GIT_INDEX_FILE=" + filepath.Join(t.TempDir(), "index")}
	gitEnv(t, a.ws, idx, "read-tree", "refs/wtx/fix")
	sha := strings.TrimSpace(gitCmd(t, a.ws, "hash-object", "-w", filepath.Join(a.ws, "README")))
	gitEnv(t, a.ws, idx, "update-index", "--add", "--cacheinfo", "100755,"+sha+",src/smuggled.sh")
	treeID := strings.TrimSpace(gitEnv(t, a.ws, idx, "write-tree"))
	msgFile := filepath.Join(t.TempDir(), "msg")
	if err := os.WriteFile(msgFile, []byte(gitCmd(t, a.ws, "log", "-1", "--format=%B", "refs/wtx/fix")), 0o600); err != nil {
		t.Fatal(err)
	}
	forged := strings.TrimSpace(gitCmd(t, a.ws, "commit-tree", treeID, "-p", "refs/wtx/fix^", "-F", msgFile))
	gitCmd(t, a.ws, "update-ref", "refs/wtx/forged", forged)
	gitCmd(t, a.ws, "push", "-q", "origin", "refs/wtx/forged")
	gitCmd(t, b.ws, "fetch", "-q", "origin", "refs/wtx/forged:refs/wtx/forged")
	stages := len(b.stages())
	r := b.wtx(nil, "--json", "import", "--git", "refs/wtx/forged")
	if r.code == 0 {
		return true
	}
	if code := errCode(t, r); code != "io.corrupt" {
		t.Fatalf("import of a commit that changes more than its change set: exit %d code %q, want io.corrupt\n%s", r.code, code, r.stdout)
	}
	if n := len(b.stages()); n != stages {
		t.Fatal("a refused git import left a stage behind")
	}
	return false
}

// TestX003_TamperedCommitRefused: a commit whose tree changes a path its
// change set does not name (what a reviewer on a forge would see but wtx
// would not apply) is refused on import, and nothing is made.
func TestX003_TamperedCommitRefused(t *testing.T) {
	t.Parallel()
	if x003Tampered(t, false, nil) {
		t.Fatal("B imported a commit whose tree changes more than its change set")
	}
}

// TestX003_NegativeControl: with the tree check off
// (WTX_DISABLE=git-tree-check) the tampered commit is imported.
func TestX003_NegativeControl(t *testing.T) {
	t.Parallel()
	if !x003Tampered(t, true, []string{"WTX_DISABLE=git-tree-check"}) {
		t.Fatal("negative control: the tampered commit was still refused with the tree check off")
	}
}
