package wtxtest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A built binary is kept in the shared directory (see sharedDir) under
// the digest of everything that goes into it (see buildKey), so a test
// process reuses one only when it would have built the same bytes. Entries
// nobody has used for keepUnused are removed when a new one is added.
const keepUnused = 2 * time.Hour

// sharedDir returns the directory shared builds are kept in: a directory
// of the Go build cache in use, so that a run with an empty build cache
// also builds wtx afresh. It returns "" when there is no build cache.
func sharedDir() string {
	cache := os.Getenv("GOCACHE")
	if cache == "off" {
		return ""
	}
	if cache == "" || !filepath.IsAbs(cache) {
		user, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		cache = filepath.Join(user, "go-build")
	}
	return filepath.Join(cache, "wtx-testbin")
}

// sharedBuild returns the path of a wtx binary built from the module at
// root, building it unless a test process of this user already did from
// the same sources and settings. One build runs at a time, under a lock;
// others wait for it and take its result. Without a shared
// directory it builds into a directory of its own, as before.
func sharedBuild(root string, failpoints bool) (string, error) {
	return sharedBuildIn(sharedDir(), root, failpoints)
}

// sharedBuildIn is sharedBuild with the shared directory dir.
func sharedBuildIn(dir, root string, failpoints bool) (string, error) {
	if dir == "" {
		return privateBuild(root, failpoints)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return privateBuild(root, failpoints)
	}
	key, err := buildKey(root, failpoints)
	if err != nil {
		return "", err
	}
	// One lock for every build: the second build (the failpoint one, say)
	// then finds the packages the first compiled in the build cache,
	// where two at once would compile each of them twice.
	lock, err := os.OpenFile(filepath.Join(dir, "build.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	final := filepath.Join(dir, key)
	out := filepath.Join(final, "wtx")
	if _, err := os.Stat(out); err == nil {
		now := time.Now()
		_ = os.Chtimes(final, now, now) // only the pruning age depends on it
		return out, nil
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	if err := goBuild(root, filepath.Join(tmp, "wtx"), failpoints); err != nil {
		_ = os.RemoveAll(tmp) // a failed build leaves nothing worth keeping
		return "", err
	}
	// A source that changed during the build may be in the binary: it is
	// this process's alone then, never published under the older key.
	if again, err := buildKey(root, failpoints); err != nil || again != key {
		return filepath.Join(tmp, "wtx"), nil
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", err
	}
	prune(dir, key)
	return out, nil
}

// privateBuild builds wtx into a new temporary directory.
func privateBuild(root string, failpoints bool) (string, error) {
	dir, err := os.MkdirTemp("", "wtxbin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "wtx")
	return out, goBuild(root, out, failpoints)
}

// prune removes the shared builds other than keep that nobody used for
// keepUnused, and build directories as old that a killed build left.
func prune(dir, keep string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if name == keep || name == "build.lock" {
			continue
		}
		info, err := e.Info()
		if err != nil || time.Since(info.ModTime()) < keepUnused {
			continue
		}
		_ = os.RemoveAll(filepath.Join(dir, name)) // a leftover is retried at the next prune
	}
}

// keepFresh marks the shared build holding bin as used, so no prune
// removes it while this process still runs it. It reports false when the
// build is gone.
func keepFresh(bin string) bool {
	now := time.Now()
	return os.Chtimes(filepath.Dir(bin), now, now) == nil
}

// buildKey is the digest of everything a build of wtx from root depends
// on: the toolchain, the environment the go command reads, its arguments,
// and every file of the module (see hashTree).
func buildKey(root string, failpoints bool) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "wtxtest build 1\n%s %s/%s\n%q\n", runtime.Version(), runtime.GOOS, runtime.GOARCH, buildArgs("", failpoints))
	if gobin, err := exec.LookPath("go"); err == nil {
		fmt.Fprintf(h, "go %s", gobin)
		if fi, err := os.Stat(gobin); err == nil {
			fmt.Fprintf(h, " %d %d", fi.Size(), fi.ModTime().UnixNano())
		}
		fmt.Fprintln(h)
	}
	env := buildEnv()
	for _, kv := range env {
		fmt.Fprintf(h, "env %q\n", kv)
	}
	if data, err := os.ReadFile(goEnvFile()); err == nil {
		fmt.Fprintf(h, "goenv %q\n", data)
	}
	if err := hashTree(h, root); err != nil {
		return "", fmt.Errorf("digest of %s: %w", root, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// buildEnv lists, sorted, the environment variables the go command or the
// tools it runs read: every GO* and CGO_* one but those only a running
// program reads, and the C toolchain's.
func buildEnv() []string {
	runtimeOnly := map[string]bool{"GOMAXPROCS": true, "GOGC": true, "GOMEMLIMIT": true,
		"GOTRACEBACK": true, "GORACE": true, "GOCOVERDIR": true}
	var out []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case runtimeOnly[name]:
		case strings.HasPrefix(name, "GO"), strings.HasPrefix(name, "CGO_"),
			name == "CC", name == "CXX", name == "AR", name == "PKG_CONFIG", name == "PATH":
			out = append(out, kv)
		}
	}
	sort.Strings(out)
	return out
}

// goEnvFile is the file `go env -w` writes settings to.
func goEnvFile() string {
	if f := os.Getenv("GOENV"); f != "" {
		return f
	}
	dir, err := os.UserConfigDir()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "go", "env")
}

// hashTree writes to h the path, type and content of every file under
// root but .git: whatever a build may read (sources, embedded files,
// go.mod and go.sum), and more, since a key that moves needlessly costs a
// build while one that misses a file would hand out a stale binary.
func hashTree(h io.Writer, root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed since its directory was read: not in the tree
		}
		if err != nil {
			return err
		}
		if d.Name() == ".git" && p != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%q %v ", rel, d.Type())
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %q\n", target)
			return nil
		}
		if !d.Type().IsRegular() {
			fmt.Fprintln(h)
			return nil
		}
		return hashFile(h, p)
	})
}

func hashFile(h io.Writer, p string) error {
	f, err := os.Open(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			// Removed since the walk listed it: it is not in the tree.
			fmt.Fprintln(h, "gone")
			return nil
		}
		return err
	}
	defer f.Close()
	fh := sha256.New()
	if _, err := io.Copy(fh, f); err != nil {
		return err
	}
	fmt.Fprintf(h, "%x\n", fh.Sum(nil))
	return nil
}
