package wtx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/wtx-dev/wtx/internal/blob"
	"github.com/wtx-dev/wtx/internal/bundle"
	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Git export: the change set becomes a commit on top of HEAD, written with
// git fast-import (objects and one ref; the index, the worktree and the
// current branch are never touched). Its tree is HEAD's with the change
// set folded in, so any git tool or forge shows it; its message carries
// what git cannot hold (the base of every path, permission bits beyond the
// exec bit, directories, the receipts) as a bundle without content,
// between these markers.
// CodeGitRefNotFound: import --git was given a ref that names no commit.
const CodeGitRefNotFound = "not-found.git-ref"

const (
	gitBundleBegin = "-----BEGIN WTX CHANGE SET-----"
	gitBundleEnd   = "-----END WTX CHANGE SET-----"
)

// ExportGit writes the stage's change set as a commit on top of the
// workspace repository's HEAD under ref (default refs/wtx/<name or id>).
func (s *Stage) ExportGit(ctx context.Context, ref string) (*ExportResult, error) {
	head, _ := gitIdentity(ctx, s.ws.path, nil)
	if head == "" {
		return nil, errorf(CodeUnsupported, "export --git: %s is not in a git repository with a commit checked out", s.ws.path)
	}
	if ref == "" {
		ref = "refs/wtx/" + s.ID()
		if s.Name() != "" {
			ref = "refs/wtx/" + s.Name()
		}
	}
	if !strings.HasPrefix(ref, "refs/") {
		return nil, errorf(CodeUsage, "export --git: ref %q must start with refs/ (refs/wtx/NAME)", ref)
	}
	if _, err := git(ctx, s.ws.path, nil, "check-ref-format", ref); err != nil {
		return nil, errorf(CodeUsage, "export --git: %q is not a valid ref name", ref)
	}
	if cur, err := git(ctx, s.ws.path, nil, "symbolic-ref", "-q", "HEAD"); err == nil && strings.TrimSpace(string(cur)) == ref {
		return nil, errorf(CodeUsage, "export --git: %s is the current branch; export to another ref", ref)
	}
	prefix, err := gitPrefix(ctx, s.ws.path)
	if err != nil {
		return nil, AsError(err)
	}
	b, cs, err := s.bundleOf(ctx, true)
	if err != nil {
		return nil, err
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

	// The fast-import stream: every blob, then one commit whose deletions
	// come first (deepest first) and whose files and symlinks follow.
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
		mode := "100644"
		switch {
		case e.New.Type == tree.Symlink:
			mode = "120000"
		case e.New.Perm&0o111 != 0:
			mode = "100755"
		}
		fmt.Fprintf(&in, "M %s :%d %s\n", mode, marks[i], fastImportPath(prefix+e.Path))
	}
	in.WriteString("\ndone\n")
	if _, err := git(ctx, s.ws.path, in.Bytes(), "fast-import", "--quiet", "--force", "--done"); err != nil {
		return nil, AsError(fmt.Errorf("export --git: %w", err))
	}
	out, err := git(ctx, s.ws.path, nil, "rev-parse", "--verify", ref+"^{commit}")
	if err != nil {
		return nil, AsError(fmt.Errorf("export --git: %w", err))
	}
	return &ExportResult{Tx: s.ID(), ChangesetDigest: cs.Digest, BaseDigest: b.Origin.BaseDigest, Counts: cs.Counts,
		Receipts: len(b.Receipts), GitHead: head, GitDirty: b.Origin.GitDirty, Ref: ref,
		Commit: strings.TrimSpace(string(out))}, nil
}

func gitMessage(s *Stage, cs *ChangeSet, meta *bundle.Bundle, enc []byte) string {
	var m strings.Builder
	who := s.ID()
	if s.Name() != "" {
		who = s.Name() + " (" + s.ID() + ")"
	}
	fmt.Fprintf(&m, "wtx: change set of %s\n\n%d added, %d modified, %d deleted. Import it with\n'wtx import --git REF': the apply there is refused wherever the workspace\nno longer holds the base recorded below.\n\n",
		who, cs.Counts.Added, cs.Counts.Modified, cs.Counts.Deleted)
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
	fmt.Fprintf(&m, "Wtx-Stage: %s\nWtx-Changeset: %s\nWtx-Base: %s\n", s.ID(), cs.Digest, meta.Origin.BaseDigest)
	for _, body := range meta.Receipts {
		if r, err := receiptContent(body); err == nil {
			fmt.Fprintf(&m, "Wtx-Receipt: %s %s %s\n", r.ID, r.Kind, r.Digest)
		}
	}
	return m.String()
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
// which wtx export --git wrote (and git fetch brought here): the change
// set its message describes, with each file's content taken from the
// commit's tree and checked against its digest. A commit whose tree
// changes anything its message does not describe, or whose content does
// not match, is refused as io.corrupt and nothing is made.
func (w *Workspace) ImportGit(ctx context.Context, ref string, opts ImportOptions) (*Stage, *ImportResult, error) {
	if strings.HasPrefix(ref, "-") {
		return nil, nil, errorf(CodeUsage, "import --git: %q is not a ref", ref)
	}
	out, err := git(ctx, w.path, nil, "rev-parse", "--verify", "-q", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return nil, nil, errorf(CodeGitRefNotFound, "import --git: %s names no commit in the repository of %s (fetch it first)", ref, w.path)
	}
	commit := strings.TrimSpace(string(out))
	raw, err := git(ctx, w.path, nil, "cat-file", "commit", commit)
	if err != nil {
		return nil, nil, AsError(err)
	}
	hdr, msg, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		return nil, nil, errorf(CodeCorrupt, "import --git: commit %s has no message", commit)
	}
	var parent string
	for line := range bytes.SplitSeq(hdr, []byte("\n")) {
		if p, ok := bytes.CutPrefix(line, []byte("parent ")); ok && parent == "" {
			parent = string(p)
		}
	}
	corrupt := func(format string, args ...any) error {
		return &Error{Code: CodeCorrupt, Message: "refusing commit " + commit + ": " + fmt.Sprintf(format, args...)}
	}
	if parent == "" {
		return nil, nil, corrupt("it has no parent, so it was not written by wtx export --git")
	}
	_, rest, ok1 := bytes.Cut(msg, []byte(gitBundleBegin+"\n"))
	enc, rest, ok2 := bytes.Cut(rest, []byte(gitBundleEnd+"\n"))
	if !ok1 || !ok2 || bytes.Contains(rest, []byte(gitBundleBegin)) {
		return nil, nil, corrupt("its message carries no change set (or more than one), so it was not written by wtx export --git")
	}
	data, err := base64.StdEncoding.DecodeString(string(bytes.ReplaceAll(enc, []byte("\n"), nil)))
	if err != nil {
		return nil, nil, corrupt("its change set does not decode: %v", err)
	}
	b, err := decodeBundle(data)
	if err != nil {
		return nil, nil, corrupt("%v", err)
	}
	if b.Flags&bundle.FlagContentElsewhere == 0 {
		return nil, nil, corrupt("its change set says it carries content, which a commit's message never does")
	}
	prefix, err := gitPrefix(ctx, w.path)
	if err != nil {
		return nil, nil, AsError(err)
	}
	if err := gitCheckTree(ctx, w.path, parent, commit, prefix, b); err != nil {
		return nil, nil, err
	}
	if err := gitContents(ctx, w.path, commit, prefix, b); err != nil {
		return nil, nil, err
	}
	b.Flags = 0
	return w.importBundle(ctx, b, ImportOrigin{GitCommit: commit}, opts)
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
	for i := 0; i+1 < len(fields); i += 2 {
		p := string(fields[i+1])
		rel, ok := strings.CutPrefix(p, prefix)
		if !ok || !named[rel] {
			return &Error{Code: CodeCorrupt, Message: fmt.Sprintf("refusing commit %s: its tree changes %q, which its change set does not name", commit, p)}
		}
	}
	return nil
}

// gitContents fills in each new file's content (and checks each symlink's
// target) from the commit's tree, checking every one against the change
// set's digest and the git mode against the entry.
func gitContents(ctx context.Context, dir, commit, prefix string, b *bundle.Bundle) error {
	want := map[string]*bundle.Entry{}
	var paths []string
	for i := range b.Entries {
		e := &b.Entries[i]
		want[prefix+e.Path] = e
		paths = append(paths, prefix+e.Path)
	}
	type obj struct{ mode, kind, sha string }
	found := map[string]obj{}
	for len(paths) > 0 {
		n, size := 0, 0
		for n < len(paths) && size < 64<<10 {
			size += len(paths[n]) + 1
			n++
		}
		args := append([]string{"--literal-pathspecs", "ls-tree", "-z", "--full-tree", commit, "--"}, paths[:n]...)
		paths = paths[n:]
		out, err := git(ctx, dir, nil, args...)
		if err != nil {
			return AsError(err)
		}
		for rec := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
			meta, p, ok := bytes.Cut(rec, []byte{'\t'})
			f := strings.Fields(string(meta))
			if !ok || len(f) != 3 {
				return errorf(CodeInternal, "git ls-tree: unexpected output %q", rec)
			}
			found[string(p)] = obj{f[0], f[1], f[2]}
		}
	}
	var shas []string
	order := []*bundle.Entry{}
	for p, e := range want {
		o, ok := found[p]
		isObj := e.New != nil && (e.New.Type == tree.File || e.New.Type == tree.Symlink)
		switch {
		case !isObj && ok && o.kind != "tree":
			return errorf(CodeCorrupt, "refusing commit %s: its tree holds %q, which its change set says is no file", commit, p)
		case !isObj:
			continue
		case !ok || o.kind != "blob":
			return errorf(CodeCorrupt, "refusing commit %s: its tree lacks %q, which its change set names", commit, p)
		}
		wantMode := "100644"
		switch {
		case e.New.Type == tree.Symlink:
			wantMode = "120000"
		case e.New.Perm&0o111 != 0:
			wantMode = "100755"
		}
		if o.mode != wantMode {
			return errorf(CodeCorrupt, "refusing commit %s: %q has mode %s in its tree and %s in its change set", commit, p, o.mode, wantMode)
		}
		shas = append(shas, o.sha)
		order = append(order, e)
	}
	if len(shas) == 0 {
		return nil
	}
	cmd := exec.CommandContext(ctx, "git", "-C", dir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(strings.Join(shas, "\n") + "\n")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return AsError(err)
	}
	if err := cmd.Start(); err != nil {
		return AsError(err)
	}
	br := bufio.NewReader(stdout)
	var rerr error
	for _, e := range order {
		data, err := readBatchObject(br)
		if err != nil {
			rerr = err
			break
		}
		if e.New.Type == tree.Symlink {
			if string(data) != e.New.Target {
				rerr = errorf(CodeCorrupt, "refusing commit %s: symlink %q points elsewhere in its tree than in its change set", commit, e.Path)
				break
			}
			continue
		}
		if blob.Sum(data) != blob.Digest(e.New.Digest) && !failpoint.Disabled("bundle-digest") {
			rerr = errorf(CodeCorrupt, "refusing commit %s: the content of %q in its tree does not match its change set's digest", commit, e.Path)
			break
		}
		e.Content = data
	}
	_, _ = io.Copy(io.Discard, br) // let git finish writing
	if err := cmd.Wait(); err != nil && rerr == nil {
		rerr = AsError(fmt.Errorf("git cat-file: %v: %s", err, strings.TrimSpace(stderr.String())))
	}
	return rerr
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
