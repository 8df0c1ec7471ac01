package wtx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"math/rand/v2"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/bundle"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/textdiff"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/receipt"
)

// Git export: the change set becomes a commit on top of HEAD, written with
// git fast-import (objects and one ref; the index, the worktree and the
// current branch are never touched). Its tree is HEAD's with the change
// set folded in, so any git tool or forge shows it; its message carries
// what git cannot hold (the base of every path, permission bits beyond the
// exec bit, directories, the receipts) as a bundle without content,
// between these markers.
const (
	gitBundleBegin = "-----BEGIN WTX CHANGE SET-----"
	gitBundleEnd   = "-----END WTX CHANGE SET-----"
)

// CodeGitRefNotFound is the code of an import --git given a ref that
// names no commit.
const CodeGitRefNotFound = "not-found.git-ref"

// ExportGitOptions configure a git export.
type ExportGitOptions struct {
	// Ref is the ref the commit goes under (default refs/wtx/<name or
	// id>). Without Force it must lie under refs/wtx/ and not exist yet.
	Ref string
	// Force writes a ref outside refs/wtx/, and replaces an existing one.
	Force bool
}

// ExportGit writes the stage's change set as a commit on top of the
// workspace repository's HEAD under opts.Ref. The commit shows exactly
// the change set: a stage whose base differs from HEAD at a path it
// changes (uncommitted or untracked there) is refused, since a commit on
// HEAD would show another change. The ref is written last, in one git
// transaction that creates it (or, with Force, replaces it).
func (s *Stage) ExportGit(ctx context.Context, opts ExportGitOptions) (*ExportResult, error) {
	head, _ := gitIdentity(ctx, s.ws.path, nil)
	if head == "" {
		return nil, errorf(CodeUnsupported, "export --git: %s is not in a git repository with a commit checked out", s.ws.path)
	}
	ref, old, err := s.exportRef(ctx, opts)
	if err != nil {
		return nil, err
	}
	prefix, err := gitPrefix(ctx, s.ws.path)
	if err != nil {
		return nil, AsError(err)
	}
	b, cs, err := s.bundleOf(ctx, true)
	if err != nil {
		return nil, err
	}
	if _, probs, err := gitSide(ctx, s.ws.path, head, prefix, b, true); err != nil {
		return nil, err
	} else if len(probs) > 0 && !failpoint.Disabled("git-parent-check") {
		for i := range probs {
			probs[i].Kind, probs[i].Detail = "uncommitted", "the stage's base is "+probs[i].Detail+"; HEAD holds something else"
		}
		return nil, &Error{Code: CodeUnsupported, Conflicts: probs,
			Message: fmt.Sprintf("export --git: stage %s changes %d paths whose base is not what HEAD (%s) holds (uncommitted or untracked there): a commit on HEAD would show another change than the stage's; commit that base first, or export a bundle", s.ID(), len(probs), shortID(head))}
	}
	meta := *b
	meta.Flags = bundle.FlagContentElsewhere
	meta.Entries = make([]bundle.Entry, len(b.Entries))
	for i, e := range b.Entries {
		e.Content, e.Base = nil, nil
		meta.Entries[i] = e
	}
	var mb bytes.Buffer
	if err := bundle.Encode(&mb, &meta); err != nil {
		return nil, AsError(err)
	}
	msg := gitMessage(s, cs, &meta, mb.Bytes())
	ident := gitIdent(ctx, s.ws.path, s.ws.now())
	tmp := fmt.Sprintf("refs/wtx-export-tmp/%s-%x", s.ID(), rand.Uint64())
	commit, err := gitWriteCommit(ctx, s.ws.path, gitStream(b, prefix, head, tmp, ident, msg), tmp, ref, old, opts.Force)
	if err != nil {
		return nil, err
	}
	return &ExportResult{Tx: s.ID(), ChangesetDigest: cs.Digest, BaseDigest: b.Origin.BaseDigest, Counts: cs.Counts,
		Receipts: len(b.Receipts), KeyID: exportKeyID(b), GitHead: head, GitDirty: b.Origin.GitDirty, Ref: ref, Commit: commit}, nil
}

// exportRef checks the ref a git export writes and returns it with the
// commit it names now ("" when it does not exist). Without Force, a ref
// outside refs/wtx/ or one that exists is refused; the current branch
// never is written.
func (s *Stage) exportRef(ctx context.Context, opts ExportGitOptions) (ref, old string, err error) {
	ref = opts.Ref
	if ref == "" {
		ref = "refs/wtx/" + s.ID()
		if s.Name() != "" {
			ref = "refs/wtx/" + s.Name()
		}
	}
	if !strings.HasPrefix(ref, "refs/") {
		return "", "", errorf(CodeUsage, "export --git: ref %q must start with refs/ (refs/wtx/NAME)", ref)
	}
	if _, err := git(ctx, s.ws.path, nil, "check-ref-format", ref); err != nil {
		return "", "", errorf(CodeUsage, "export --git: %q is not a valid ref name", ref)
	}
	guard := !opts.Force && !failpoint.Disabled("export-ref-guard")
	if guard && !strings.HasPrefix(ref, "refs/wtx/") {
		return "", "", errorf(CodeUsage, "export --git writes under refs/wtx/ only: %s is another namespace (a branch or tag others follow); force it to write there", ref)
	}
	if cur, err := git(ctx, s.ws.path, nil, "symbolic-ref", "-q", "HEAD"); err == nil && strings.TrimSpace(string(cur)) == ref {
		return "", "", errorf(CodeUsage, "export --git: %s is the current branch; export to another ref", ref)
	}
	if out, err := git(ctx, s.ws.path, nil, "show-ref", "--verify", "-s", ref); err == nil {
		old = strings.TrimSpace(string(out))
	}
	if old != "" && guard {
		return "", "", &Error{Code: CodeNameTaken,
			Message: fmt.Sprintf("export --git: %s exists (commit %s); export never rewrites a ref unless forced: give another ref, or force it", ref, shortID(old))}
	}
	return ref, old, nil
}

// gitStream is the fast-import stream of a git export: every blob, then
// one commit on head, under ref, whose deletions come first (deepest
// first) and whose files and symlinks follow.
func gitStream(b *bundle.Bundle, prefix, head, ref, ident, msg string) []byte {
	var in bytes.Buffer
	mark := 0
	marks := make([]int, len(b.Entries))
	for i, e := range b.Entries {
		if e.New == nil || (e.New.Type != tree.File && e.New.Type != tree.Symlink) {
			continue
		}
		data := e.Content
		if e.New.Type == tree.Symlink {
			data = []byte(e.New.Target)
		}
		mark++
		marks[i] = mark
		fmt.Fprintf(&in, "blob\nmark :%d\ndata %d\n", mark, len(data))
		in.Write(data)
		in.WriteByte('\n')
	}
	fmt.Fprintf(&in, "commit %s\ncommitter %s\ndata %d\n%s\nfrom %s\n", ref, ident, len(msg), msg, head)
	for i := len(b.Entries) - 1; i >= 0; i-- {
		e := b.Entries[i]
		if e.Old != nil && (e.New == nil || e.New.Type != e.Old.Type) {
			fmt.Fprintf(&in, "D %s\n", fastImportPath(prefix+e.Path))
		}
	}
	for i, e := range b.Entries {
		if marks[i] == 0 {
			continue
		}
		fmt.Fprintf(&in, "M %s :%d %s\n", gitObjMode(e.New), marks[i], fastImportPath(prefix+e.Path))
	}
	in.WriteString("\ndone\n")
	return in.Bytes()
}

// gitWriteCommit runs fast-import with stream, which commits to the ref
// tmp of its own, then moves the commit to ref in one transaction that
// also removes tmp: ref is created (refused if it appeared meanwhile) or,
// with force, set whatever it held (never through a symbolic ref).
func gitWriteCommit(ctx context.Context, dir string, stream []byte, tmp, ref, old string, force bool) (string, error) {
	if _, err := git(ctx, dir, stream, "fast-import", "--quiet", "--done"); err != nil {
		return "", AsError(fmt.Errorf("export --git: %w", err))
	}
	out, err := git(ctx, dir, nil, "rev-parse", "--verify", tmp+"^{commit}")
	if err != nil {
		_, _ = git(context.WithoutCancel(ctx), dir, nil, "update-ref", "-d", tmp) // the export failed; its error says why
		return "", AsError(fmt.Errorf("export --git: %w", err))
	}
	commit := strings.TrimSpace(string(out))
	var txn strings.Builder
	txn.WriteString("start\n")
	switch {
	case old == "":
		fmt.Fprintf(&txn, "create %s %s\n", ref, commit)
	case force:
		fmt.Fprintf(&txn, "update %s %s\n", ref, commit)
	default:
		fmt.Fprintf(&txn, "update %s %s %s\n", ref, commit, old)
	}
	fmt.Fprintf(&txn, "delete %s %s\ncommit\n", tmp, commit)
	if _, err := git(ctx, dir, []byte(txn.String()), "update-ref", "--no-deref", "--stdin"); err != nil {
		_, _ = git(context.WithoutCancel(ctx), dir, nil, "update-ref", "-d", tmp) // the export failed; its error says why
		return "", &Error{Code: CodeNameTaken, Err: err, Message: fmt.Sprintf("export --git: %s could not be written (it changed meanwhile?): %v", ref, err)}
	}
	return commit, nil
}

// gitObjMode is the git mode of a file or symlink entry, as ls-tree
// prints it: git keeps the owner's exec bit only.
func gitObjMode(e *tree.Entry) string {
	return fmt.Sprintf("%o", gitMode(e))
}

func shortID(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func gitMessage(s *Stage, cs *ChangeSet, meta *bundle.Bundle, enc []byte) string {
	var m strings.Builder
	who := s.ID()
	if s.Name() != "" {
		who = s.Name() + " (" + s.ID() + ")"
	}
	c := tree.Count(meta.Changes())
	fmt.Fprintf(&m, "wtx: change set of %s\n\n"+gitCountsLine+" Import it with\n'wtx import --git REF': the apply there is refused wherever the workspace\nno longer holds the base recorded below.\n\n",
		who, c.Added, c.Modified, c.Deleted)
	m.WriteString(gitBundleBegin + "\n")
	b64 := base64.StdEncoding.EncodeToString(enc)
	for len(b64) > 76 {
		m.WriteString(b64[:76] + "\n")
		b64 = b64[76:]
	}
	if b64 != "" {
		m.WriteString(b64 + "\n")
	}
	m.WriteString(gitBundleEnd + "\n\n")
	for _, t := range gitTrailers(meta) {
		m.WriteString(t + "\n")
	}
	return m.String()
}

// gitCountsLine is how a git export's message says what its change set
// counts.
const gitCountsLine = "%d added, %d modified, %d deleted."

// gitTrailers are the lines a git export's message ends with: the stage,
// the change set, its base and each receipt, as b carries them.
func gitTrailers(b *bundle.Bundle) []string {
	out := []string{"Wtx-Stage: " + b.Origin.Stage, "Wtx-Changeset: " + b.Origin.ChangesetDigest, "Wtx-Base: " + b.Origin.BaseDigest}
	for _, body := range b.Receipts {
		if r, err := receipt.CheckContent(body); err == nil {
			out = append(out, fmt.Sprintf("Wtx-Receipt: %s %s %s", r.ID, r.Kind, r.Digest))
		}
	}
	return out
}

// gitMessageSays refuses a commit whose message, outside its change set,
// says something else than the change set does: the counts git log shows
// or a Wtx- trailer that is not the change set's own, or that lacks one of
// them. The change set is what wtx imports; what a person reads of the
// commit must be the same change set.
func gitMessageSays(head, tail []byte, b *bundle.Bundle) error {
	if failpoint.Disabled("git-message-check") {
		return nil // negative control of T-005
	}
	c := tree.Count(b.Changes())
	for line := range bytes.SplitSeq(head, []byte("\n")) {
		var a, m, d int
		if n, _ := fmt.Sscanf(string(line), gitCountsLine, &a, &m, &d); n == 3 && (a != c.Added || m != c.Modified || d != c.Deleted) {
			return fmt.Errorf("its message says %q, and its change set holds %d added, %d modified, %d deleted", line, c.Added, c.Modified, c.Deleted)
		}
	}
	want := gitTrailers(b)
	got := map[string]bool{}
	for line := range bytes.SplitSeq(tail, []byte("\n")) {
		if l := string(line); strings.HasPrefix(l, "Wtx-") {
			if !slices.Contains(want, l) {
				return fmt.Errorf("its message says %q, which its change set does not", l)
			}
			got[l] = true
		}
	}
	for _, l := range want {
		if !got[l] {
			return fmt.Errorf("its message lacks %q, which its change set says", l)
		}
	}
	return nil
}

// gitIdent is the committer of a git export: git's own when configured,
// else wtx's.
func gitIdent(ctx context.Context, dir string, now time.Time) string {
	if out, err := git(ctx, dir, nil, "var", "GIT_COMMITTER_IDENT"); err == nil {
		if s := strings.TrimSpace(string(out)); s != "" && !strings.ContainsAny(s, "\n") {
			return s
		}
	}
	return fmt.Sprintf("wtx <wtx@localhost> %d +0000", now.Unix())
}

// fastImportPath quotes p as a C-style string, which git fast-import takes
// for any bytes.
func fastImportPath(p string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// ImportGit opens a stage carrying the change set of the commit ref names,
// which wtx export --git wrote (and git fetch brought here). The change
// set is the commit's diff against its parent in git, and must equal, path
// for path and on both sides, the change set its message lists: every
// path the diff shows is listed, every listed base is what the parent
// holds and every listed result what the commit holds (content checked
// against its digest), and the base it says it was made on is that
// parent. Anything else is refused as io.corrupt and nothing is made
// (X-003, T-005). The listing's receipts are checked as a bundle's.
func (w *Workspace) ImportGit(ctx context.Context, ref string, opts ImportOptions) (*Stage, *ImportResult, error) {
	commit, parent, b, err := w.gitChangeSet(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	corrupt := func(format string, args ...any) error {
		return &Error{Code: CodeCorrupt, Message: "refusing commit " + commit + ": " + fmt.Sprintf(format, args...)}
	}
	checkParent := !failpoint.Disabled("git-parent-check")
	if b.Origin.GitHead != parent && checkParent {
		return nil, nil, corrupt("its change set says it was made on commit %s, but its parent is %s", orNone(b.Origin.GitHead), parent)
	}
	prefix, err := gitPrefix(ctx, w.path)
	if err != nil {
		return nil, nil, AsError(err)
	}
	if err := gitCheckTree(ctx, w.path, parent, commit, prefix, b); err != nil {
		return nil, nil, err
	}
	news, probs, err := gitSide(ctx, w.path, commit, prefix, b, false)
	if err != nil {
		return nil, nil, err
	}
	if len(probs) > 0 {
		return nil, nil, corrupt("its change set lists %q as %s, which is not what its tree holds", probs[0].Path, probs[0].Detail)
	}
	olds := map[int][]byte{}
	if checkParent {
		if olds, probs, err = gitSide(ctx, w.path, parent, prefix, b, true); err != nil {
			return nil, nil, err
		}
		if len(probs) > 0 {
			return nil, nil, corrupt("its change set lists the base of %q as %s, which is not what its parent %s holds", probs[0].Path, probs[0].Detail, shortID(parent))
		}
	}
	for i := range b.Entries {
		e := &b.Entries[i]
		if data, ok := news[i]; ok && e.New.Type == tree.File {
			e.Content = data
		}
		if base, ok := olds[i]; ok && e.Old.Type == tree.File && e.New != nil && e.New.Type == tree.File &&
			!textdiff.IsBinary(base) && !textdiff.IsBinary(e.Content) {
			e.Base = base // the original a three-way merge needs
		}
	}
	b.Flags &^= bundle.FlagContentElsewhere
	return w.importBundle(ctx, b, ImportOrigin{GitCommit: commit}, opts)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// gitChangeSet resolves ref to a commit, reads its one parent and the
// change set its message carries.
func (w *Workspace) gitChangeSet(ctx context.Context, ref string) (commit, parent string, b *bundle.Bundle, err error) {
	if strings.HasPrefix(ref, "-") {
		return "", "", nil, errorf(CodeUsage, "import --git: %q is not a ref", ref)
	}
	out, err := git(ctx, w.path, nil, "rev-parse", "--verify", "-q", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return "", "", nil, errorf(CodeGitRefNotFound, "import --git: %s names no commit in the repository of %s (fetch it first)", ref, w.path)
	}
	commit = strings.TrimSpace(string(out))
	raw, err := git(ctx, w.path, nil, "cat-file", "commit", commit)
	if err != nil {
		return "", "", nil, AsError(err)
	}
	corrupt := func(format string, args ...any) error {
		return &Error{Code: CodeCorrupt, Message: "refusing commit " + commit + ": " + fmt.Sprintf(format, args...)}
	}
	hdr, msg, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return "", "", nil, corrupt("it has no message")
	}
	var parents []string
	for line := range bytes.SplitSeq(hdr, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("parent ")); ok {
			parents = append(parents, string(p))
		}
	}
	if len(parents) != 1 {
		return "", "", nil, corrupt("it has %d parents, so it was not written by wtx export --git (one, the commit it was made on)", len(parents))
	}
	head, rest, ok1 := bytes.Cut(msg, []byte(gitBundleBegin+"\n"))
	enc, rest, ok2 := bytes.Cut(rest, []byte(gitBundleEnd+"\n"))
	if !ok1 || !ok2 || bytes.Contains(rest, []byte(gitBundleBegin)) {
		return "", "", nil, corrupt("its message carries no change set (or more than one), so it was not written by wtx export --git")
	}
	data, err := base64.StdEncoding.DecodeString(string(bytes.ReplaceAll(enc, []byte("\n"), nil)))
	if err != nil {
		return "", "", nil, corrupt("its change set does not decode: %v", err)
	}
	if b, err = decodeBundle(data); err != nil {
		return "", "", nil, corrupt("%v", err)
	}
	if b.Flags&bundle.FlagContentElsewhere == 0 {
		return "", "", nil, corrupt("its change set says it carries content, which a commit's message never does")
	}
	if err := gitMessageSays(head, rest, b); err != nil {
		return "", "", nil, corrupt("%v", err)
	}
	return commit, parents[0], b, nil
}

// gitCheckTree refuses a commit whose tree changes, relative to its
// parent, a path that its change set does not name: what git shows of the
// commit is what wtx imports.
func gitCheckTree(ctx context.Context, dir, parent, commit, prefix string, b *bundle.Bundle) error {
	if failpoint.Disabled("git-tree-check") {
		return nil // negative control of X-003
	}
	out, err := git(ctx, dir, nil, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", parent, commit)
	if err != nil {
		return AsError(err)
	}
	named := make(map[string]bool, len(b.Entries))
	for i := range b.Entries {
		named[b.Entries[i].Path] = true
	}
	fields := bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0})
	seen := make(map[string]bool, len(fields)/2)
	for i := 0; i+1 < len(fields); i += 2 {
		p := string(fields[i+1])
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok || !named[rel] {
			return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing commit %s: its tree changes %q, which its change set does not name", commit, p)}
		}
		if seen[p] {
			return gitTwiceError(commit, p)
		}
		seen[p] = true
	}
	return nil
}

// gitTwiceError refuses a commit whose tree holds one path twice: git
// shows and checks out one of the two entries, so the change set cannot
// be both what git shows and what it lists.
func gitTwiceError(commit, p string) error {
	return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing commit %s: its tree, or its parent's, holds %q twice, which git never writes: what git shows of it is not one change set", commit, p)}
}

// gitObject is one entry of git ls-tree.
type gitObject struct{ mode, kind, sha string }

// gitSide checks one side of b's entries (the base with old, else the
// result) against the tree of rev: a path the side lacks is absent there,
// a directory is a tree or absent (git keeps no empty directory), a file
// or symlink is a blob of its git mode whose content matches the entry's
// digest or target. It returns each file's content by entry index and,
// for every entry that does not match, a conflict whose Detail says what
// the entry lists.
func gitSide(ctx context.Context, dir, rev, prefix string, b *bundle.Bundle, old bool) (map[int][]byte, []Conflict, error) {
	paths := make([]string, len(b.Entries))
	for i := range b.Entries {
		paths[i] = prefix + b.Entries[i].Path
	}
	found, err := gitLsTree(ctx, dir, rev, paths)
	if err != nil {
		return nil, nil, err
	}
	var probs []Conflict
	var shas []string
	var idx []int
	for i := range b.Entries {
		e := b.Entries[i].New
		if old {
			e = b.Entries[i].Old
		}
		o, ok := found[paths[i]]
		switch {
		case e == nil && !ok, e != nil && e.Type == tree.Dir && (!ok || o.kind == "tree"):
			continue
		case e != nil && (e.Type == tree.File || e.Type == tree.Symlink) && ok && o.kind == "blob" && o.mode == gitObjMode(e):
			shas, idx = append(shas, o.sha), append(idx, i)
			continue
		}
		probs = append(probs, Conflict{Path: b.Entries[i].Path, Kind: "git-tree", Detail: describeSide(e)})
	}
	datas, err := gitCatBlobs(ctx, dir, shas)
	if err != nil {
		return nil, nil, err
	}
	contents := make(map[int][]byte, len(idx))
	for k, i := range idx {
		e := b.Entries[i].New
		if old {
			e = b.Entries[i].Old
		}
		switch {
		case e.Type == tree.Symlink && string(datas[k]) != e.Target:
		case e.Type == tree.File && blob.Sum(datas[k]) != blob.Digest(e.Digest) && !failpoint.Disabled("bundle-digest"):
		default:
			contents[i] = datas[k]
			continue
		}
		probs = append(probs, Conflict{Path: b.Entries[i].Path, Kind: "git-tree", Detail: describeSide(e)})
	}
	return contents, probs, nil
}

// describeSide says what an entry lists, for a message.
func describeSide(e *tree.Entry) string {
	switch {
	case e == nil:
		return "absent"
	case e.Type == tree.Dir:
		return "a directory"
	case e.Type == tree.Symlink:
		return fmt.Sprintf("a symlink to %q", e.Target)
	}
	return fmt.Sprintf("a file of mode %s with content %s", gitObjMode(e), e.Digest)
}

// gitLsTree lists what rev's tree holds at each of paths (full paths from
// the repository's top), by path; a path it lacks is not in the map.
func gitLsTree(ctx context.Context, dir, rev string, paths []string) (map[string]gitObject, error) {
	found := map[string]gitObject{}
	for len(paths) > 0 {
		n, size := 0, 0
		for n < len(paths) && size < 64<<10 {
			size += len(paths[n]) + 1
			n++
		}
		args := append([]string{"--literal-pathspecs", "ls-tree", "-z", "--full-tree", rev, "--"}, paths[:n]...)
		paths = paths[n:]
		out, err := git(ctx, dir, nil, args...)
		if err != nil {
			return nil, AsError(err)
		}
		for rec := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
			if len(rec) == 0 {
				continue
			}
			meta, p, ok := bytes.Cut(rec, []byte{'\t'})
			f := strings.Fields(string(meta))
			if !ok || len(f) != 3 {
				return nil, errorf(CodeInternal, "git ls-tree: unexpected output %q", rec)
			}
			if _, twice := found[string(p)]; twice && !failpoint.Disabled("git-tree-check") {
				return nil, gitTwiceError(rev, string(p))
			}
			found[string(p)] = gitObject{f[0], f[1], f[2]}
		}
	}
	return found, nil
}

// gitCatBlobs reads the blobs shas names, in order.
func gitCatBlobs(ctx context.Context, dir string, shas []string) ([][]byte, error) {
	if len(shas) == 0 {
		return nil, nil
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(shas, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, AsError(err)
	}
	if err := cmd.Start(); err != nil {
		return nil, AsError(err)
	}
	br := bufio.NewReader(stdout)
	out := make([][]byte, 0, len(shas))
	var rerr error
	for range shas {
		data, err := readBatchObject(br)
		if err != nil {
			rerr = err
			break
		}
		out = append(out, data)
	}
	_, _ = io.Copy(io.Discard, br) // let git finish writing
	if err := cmd.Wait(); err != nil && rerr == nil {
		rerr = AsError(fmt.Errorf("git cat-file: %v: %s", err, strings.TrimSpace(stderr.String())))
	}
	return out, rerr
}

// readBatchObject reads one "<sha> <type> <size>\n<content>\n" record of
// git cat-file --batch.
func readBatchObject(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, AsError(fmt.Errorf("git cat-file: %w", err))
	}
	f := strings.Fields(line)
	if len(f) != 3 || f[1] != "blob" {
		return nil, errorf(CodeInternal, "git cat-file: unexpected %q", strings.TrimSpace(line))
	}
	n, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || n < 0 || n > bundle.DefaultLimits.Expanded {
		return nil, errorf(CodeCorrupt, "git cat-file: bad size %q", f[2])
	}
	data := make([]byte, n+1)
	if _, err := io.ReadFull(br, data); err != nil {
		return nil, AsError(fmt.Errorf("git cat-file: %w", err))
	}
	return data[:n], nil
}
