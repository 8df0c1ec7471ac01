package fsx

import (
	"fmt"
	"path"
	"strings"
)

// Length limits of a rel path, in bytes.
const (
	MaxNameLen = 255  // one component
	MaxPathLen = 4095 // the whole rel path
)

// ValidRel reports whether rel is an acceptable workspace-relative path:
// slash-separated, relative, clean (path.Clean(rel) == rel), without an empty,
// "." or ".." component, without a trailing slash or NUL byte, each component at
// most [MaxNameLen] bytes and the whole at most [MaxPathLen] bytes. "." alone
// denotes the root and is valid. The error wraps [ErrInvalidPath] and says what
// is wrong.
func ValidRel(rel string) error {
	if rel == "." {
		return nil
	}
	if reason := relProblem(rel); reason != "" {
		return fmt.Errorf("%w %q: %s", ErrInvalidPath, rel, reason)
	}
	return nil
}

func relProblem(rel string) string {
	switch {
	case rel == "":
		return "empty"
	case len(rel) > MaxPathLen:
		return fmt.Sprintf("longer than %d bytes", MaxPathLen)
	case strings.IndexByte(rel, 0) >= 0:
		return "contains a NUL byte"
	case rel[0] == '/':
		return "absolute"
	case rel[len(rel)-1] == '/':
		return "trailing slash"
	}
	for comp := range strings.SplitSeq(rel, "/") {
		if reason := nameProblem(comp); reason != "" {
			return reason
		}
	}
	if path.Clean(rel) != rel {
		return "not clean"
	}
	return ""
}

// nameProblem describes why comp is not a single acceptable path component,
// or returns "".
func nameProblem(comp string) string {
	switch {
	case comp == "":
		return "empty component"
	case comp == ".":
		return `"." component`
	case comp == "..":
		return `".." component`
	case len(comp) > MaxNameLen:
		return fmt.Sprintf("component longer than %d bytes", MaxNameLen)
	case strings.IndexByte(comp, 0) >= 0:
		return "contains a NUL byte"
	case strings.IndexByte(comp, '/') >= 0:
		return "contains a slash"
	}
	return ""
}

// validName checks that name is a single acceptable component.
func validName(name string) error {
	if reason := nameProblem(name); reason != "" {
		return fmt.Errorf("%w: name %q: %s", ErrInvalidPath, name, reason)
	}
	return nil
}

// joinRel joins a rel directory path and a name.
func joinRel(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}
