package wtx

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"os/exec"
	"sort"
	"strings"

	"github.com/wtx-dev/wtx/internal/tree"
)

// git runs git in dir with args and returns its standard output. Git's own
// environment variables that would point it elsewhere are the caller's.
func git(ctx context.Context, dir string, stdin []byte, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir, "-c", "core.quotePath=false"}, args...)...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return stdout.Bytes(), fmt.Errorf("git %s: %s", args[0], msg)
	}
	return stdout.Bytes(), nil
}

// gitIdentity returns the commit the git repository holding dir has
// checked out ("" when dir is in no repository or git is missing) and,
// when base is given, a digest of its uncommitted files as base holds them
// ("" when there are none): the workspace's identity beyond its content.
func gitIdentity(ctx context.Context, dir string, base *tree.Manifest) (head, dirty string) {
	out, err := git(ctx, dir, nil, "rev-parse", "--verify", "-q", "HEAD^{commit}")
	if err != nil {
		return "", ""
	}
	head = strings.TrimSpace(string(out))
	if base == nil {
		return head, ""
	}
	prefix, err := gitPrefix(ctx, dir)
	if err != nil {
		return head, ""
	}
	// Porcelain paths are relative to the repository's top, whatever the
	// directory git runs in.
	out, err = git(ctx, dir, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames", "--", ".")
	if err != nil || len(out) == 0 {
		return head, ""
	}
	var paths []string
	for rec := range bytes.SplitSeq(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
		if p, ok := strings.CutPrefix(string(rec[min(3, len(rec)):]), prefix); ok && p != "" {
			paths = append(paths, p)
		}
	}
	if len(paths) == 0 {
		return head, ""
	}
	sort.Strings(paths)
	h := sha256.New()
	for _, p := range paths {
		// A hash.Hash never fails a write.
		_, _ = fmt.Fprintf(h, "%d:%s", len(p), p)
		if e := base.Lookup(strings.TrimSuffix(p, "/")); e != nil {
			_, _ = fmt.Fprintf(h, " %d %o %s %d:%s\n", e.Type, e.Perm, e.Digest, len(e.Target), e.Target)
		} else {
			_, _ = fmt.Fprint(h, " absent\n")
		}
	}
	return head, fmt.Sprintf("sha256:%x", h.Sum(nil))
}

// gitPrefix is dir's path beneath the top of its repository, with a
// trailing slash ("" at the top).
func gitPrefix(ctx context.Context, dir string) (string, error) {
	out, err := git(ctx, dir, nil, "rev-parse", "--show-prefix")
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(out), "\n"), nil
}
