// Package wtxtest holds what the test suites that drive the wtx binary
// share: building the binary once for all of them and describing a tree
// completely so that two trees can be compared exactly.
package wtxtest

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	buildMu sync.Mutex
	built   = map[bool]string{}
	touched = map[bool]time.Time{}
)

// Binary returns the path of a wtx binary: $WTX_BIN (or, with failpoints,
// $WTX_FAILPOINT_BIN) when set, else one built from this module (with the
// wtxfailpoint tag when failpoints is set). The build is shared by every
// test process of one machine and user that asks for the same module
// sources and build settings (see sharedBuild), so the packages of one
// `go test ./...` build it once between them.
func Binary(t testing.TB, failpoints bool) string {
	t.Helper()
	env := "WTX_BIN"
	if failpoints {
		env = "WTX_FAILPOINT_BIN"
	}
	if p := os.Getenv(env); p != "" {
		return p
	}
	buildMu.Lock()
	defer buildMu.Unlock()
	if p, ok := built[failpoints]; ok {
		if time.Since(touched[failpoints]) < time.Minute {
			return p
		}
		if keepFresh(p) {
			touched[failpoints] = time.Now()
			return p
		}
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	out, err := sharedBuild(root, failpoints)
	if err != nil {
		t.Fatalf("build wtx (set %s to use a prebuilt one): %v", env, err)
	}
	built[failpoints], touched[failpoints] = out, time.Now()
	return out
}

// buildArgs are the arguments of the go command that builds wtx.
func buildArgs(out string, failpoints bool) []string {
	args := []string{"build", "-o", out}
	if failpoints {
		args = append(args, "-tags", "wtxfailpoint")
	}
	return append(args, "./cmd/wtx")
}

// goBuild builds wtx from the module at root into out.
func goBuild(root, out string, failpoints bool) error {
	cmd := exec.Command("go", buildArgs(out, failpoints)...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%v\n%s", err, msg)
	}
	return nil
}

func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Snapshot describes the tree at root completely: every path with its
// type, permission bits (including setuid, setgid, sticky) and content or
// link target, one line per path, sorted. Times and inodes are left out.
// Names in skip (base names) are left out with everything beneath them.
func Snapshot(root string, skip ...string) (string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != root {
			for _, s := range skip {
				if d.Name() == s {
					if d.IsDir() {
						return filepath.SkipDir
					}
					return nil
				}
			}
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		line := fmt.Sprintf("%s %v", filepath.ToSlash(rel), fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %q", data)
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n"), nil
}

// MustSnapshot is Snapshot that fails t on error.
func MustSnapshot(t testing.TB, root string, skip ...string) string {
	t.Helper()
	s, err := Snapshot(root, skip...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Debris lists the paths under root whose base name starts with wtx's
// temporary prefix.
func Debris(root string) []string {
	var out []string
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".wtx-tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}
