package cli

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/wtx-dev/wtx"
)

// Paths and selectors given on the command line are read as git reads
// pathspecs: relative to the directory the user stands in within the
// workspace (when the workspace was found from it, not named with -C),
// ":/" names the workspace's top. An absolute path is refused
// (refusal.boundary, C-001) as before, even one inside the workspace. The
// workspace's .wtx.toml and
// what batch and MCP read keep paths relative to the top.

// pathspecs are the selector flags of the command line, resolved once the
// workspace is open.
type pathspecs struct {
	lists    []*[]string
	resolved bool
	// prefix is where the user stands, relative to the workspace's top
	// ("" at the top or with -C), slash-separated.
	prefix string
}

// selectors registers a flag's list of selectors for resolution.
func (g *globals) selectors(p *[]string) *[]string {
	g.specs.lists = append(g.specs.lists, p)
	return p
}

// resolvePathspecs learns where the user stands in ws and resolves every
// registered selector flag; it runs once per command.
func (g *globals) resolvePathspecs(ws *wtx.Workspace) error {
	if g.specs.resolved {
		return nil
	}
	g.specs.resolved = true
	if g.dir == "" {
		g.specs.prefix = standingIn(ws.Path())
	}
	for _, l := range g.specs.lists {
		for i, s := range *l {
			r, err := g.resolve(s, false)
			if err != nil {
				return err
			}
			(*l)[i] = r
		}
	}
	return nil
}

// standingIn is the current directory relative to root, "" when it is
// root or not beneath it.
func standingIn(root string) string {
	cwd, err := os.Getwd()
	if err != nil {
		return "" // paths are then read from the top, as with -C
	}
	if real, err := filepath.EvalSymlinks(cwd); err == nil {
		cwd = real
	}
	rel, err := filepath.Rel(root, cwd)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	return filepath.ToSlash(rel)
}

// pathArg resolves a path argument that names one file (read, write,
// edit, rm): its bytes are taken literally.
func (g *globals) pathArg(s string) (string, error) { return g.resolve(s, true) }

// resolve turns s, as the user typed it, into a path (literal) or a
// selector relative to the workspace's top. A plain relative name typed at
// the top comes back byte for byte.
func (g *globals) resolve(s string, literal bool) (string, error) {
	var p string
	switch {
	case strings.HasPrefix(s, ":/"):
		p = path.Clean("./" + s[2:])
	case strings.HasPrefix(s, "/") || g.specs.prefix == "" && !dotted(s):
		// An absolute path is refused by the library (C-001), as
		// typed.
		return s, nil
	default:
		pre := g.specs.prefix
		if !literal {
			pre = wtx.LiteralSelector(pre) // the directory's name is not a pattern
		}
		p = path.Join(pre, s)
	}
	switch {
	case p == ".." || strings.HasPrefix(p, "../"):
		return "", outside(s)
	case p == "." && literal:
		return "", &wtx.Error{Code: wtx.CodeUsage, Message: fmt.Sprintf("%q names a directory, not a file", s)}
	case p == ".":
		return "**", nil // the whole workspace
	}
	return p, nil
}

func outside(s string) error {
	return &wtx.Error{Code: wtx.CodeBoundary, Message: fmt.Sprintf("path %q is outside the workspace", s)}
}

// dotted reports whether s has a "." or ".." component or a doubled or
// leading "./" that cleaning would change.
func dotted(s string) bool {
	for _, c := range strings.Split(strings.TrimSuffix(s, "/"), "/") {
		if c == "." || c == ".." {
			return true
		}
	}
	return false
}

// showPath is p, relative to the workspace's top, as the user sees it from
// where they stand: "../x" for a path beside their directory, as git shows
// it.
func (g *globals) showPath(p string) string {
	pre := g.specs.prefix
	if pre == "" {
		return p
	}
	rel, err := filepath.Rel(filepath.FromSlash(pre), filepath.FromSlash(p))
	if err != nil {
		return p
	}
	return filepath.ToSlash(rel)
}
