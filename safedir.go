package wtx

// Whose configuration wtx obeys (T-004). A boundary found above where wtx
// was started (a .git entry, a .wtx.toml) chooses the workspace, and the
// project file sets the backend, excludes and protects of every stage: a
// user who could put either in a directory another user works below (a
// shared /srv, /tmp, a checkout of someone else's) could steer that user's
// stages, switch them to a backend that writes through, or exclude their
// output so that it is silently never applied. So wtx obeys them only when
// the caller could have written them: owned by the caller or root, in a
// directory owned by the caller or root, and, for the project file, not
// writable by every user. Anything else is refused (precondition.
// untrusted-owner) unless the caller trusts the directory, as git refuses
// a repository another user owns unless safe.directory names it
// (CVE-2022-24765). The caller's list comes in Options: the library reads
// no configuration of its own.

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
)

// RepairTrust is the repair by which the caller trusts Paths[0], a directory, whoever owns what
// is in it (Options.SafeDirectories).
const RepairTrust RepairAction = "trust"

// SafeAll is the SafeDirectories entry that trusts every directory.
const SafeAll = "*"

// trustPolicy is whom the caller trusts besides itself and root.
type trustPolicy struct {
	euid int
	// sudo is the user a root caller acts for (Options.SudoUID), or -1.
	sudo int
	// all: SafeAll was given. exact and below hold canonical directories:
	// trusted as they are, and with everything below them.
	all          bool
	exact, below []string
}

// newTrustPolicy checks opts' trust settings. An entry is SafeAll, an
// absolute directory, or an absolute directory followed by "/*".
func newTrustPolicy(opts Options) (trustPolicy, error) {
	t := trustPolicy{euid: os.Geteuid(), sudo: -1}
	if t.euid == 0 && opts.SudoUID > 0 {
		t.sudo = opts.SudoUID
	}
	for _, e := range opts.SafeDirectories {
		dir, sub := strings.CutSuffix(e, "/*")
		if sub && dir == "" {
			dir = "/"
		}
		switch {
		case e == SafeAll:
			t.all = true
			continue
		case !filepath.IsAbs(dir) || strings.IndexByte(dir, 0) >= 0:
			return t, errorf(CodeUsage, "safe directory %s is neither %q nor an absolute path (optionally ending in \"/*\")", quote.Path(e), SafeAll)
		}
		c, err := canonicalMaybeMissing(dir)
		if err != nil {
			// An entry that cannot be resolved trusts the path as written.
			c = filepath.Clean(dir)
		}
		if sub {
			t.below = append(t.below, c)
		} else {
			t.exact = append(t.exact, c)
		}
	}
	return t, nil
}

// owns reports whether the caller trusts what uid owns as its own.
func (t trustPolicy) owns(uid int) bool {
	return uid == t.euid || uid == 0 || uid == t.sudo
}

// safe reports whether the caller trusts dir (canonical) whoever owns it.
func (t trustPolicy) safe(dir string) bool {
	if t.all {
		return true
	}
	for _, e := range t.exact {
		if dir == e {
			return true
		}
	}
	for _, e := range t.below {
		if within(dir, e) {
			return true
		}
	}
	return false
}

// foreign says why the caller does not trust fi as written by someone it
// trusts ("" when it does). world is whether a directory writable by every
// user without the sticky bit counts against it (anyone may replace what
// is in it), or a file writable by every user.
func (t trustPolicy) foreign(fi fs.FileInfo, world bool) string {
	uid, owner := ownerOf(fi)
	if uid >= 0 && !t.owns(uid) {
		return fmt.Sprintf("is owned by %s, not by you (uid %d) or root", owner, t.euid)
	}
	perm := fi.Mode().Perm()
	switch {
	case !world || perm&0o002 == 0:
	case fi.IsDir() && fi.Mode()&fs.ModeSticky != 0:
		// /tmp: only an entry's owner may replace it.
	default:
		return fmt.Sprintf("is writable by every user (mode %s)", unixMode(fi))
	}
	return ""
}

// checkBoundary refuses the boundary name (.git or .wtx.toml) that
// discovery found in dir, from the directory start, when the entry or dir
// is owned by someone the caller does not trust, unless it trusts dir.
func (t trustPolicy) checkBoundary(dir, name, start string) error {
	if failpoint.Disabled("untrusted-owner") || t.safe(dir) {
		return nil
	}
	for _, p := range []string{filepath.Join(dir, name), dir} {
		fi, err := os.Lstat(p)
		if err != nil {
			return AsError(fmt.Errorf("look at the workspace boundary %s: %w", quote.Path(p), err))
		}
		if why := t.foreign(fi, false); why != "" {
			return untrusted(fmt.Sprintf("refusing %s as the workspace found from %s: %s %s; a boundary another user controls would choose your workspace, and its project file your stages' backend, excludes and protects",
				quote.Path(dir), quote.Path(start), quote.Path(p), why), dir)
		}
	}
	return nil
}

// checkProject refuses the project file p of the workspace dir, whose
// opened file is fi, when it or dir is not the caller's or root's, or
// when every user may write it or replace it, unless it trusts dir.
func (t trustPolicy) checkProject(dir, p string, fi fs.FileInfo) error {
	if failpoint.Disabled("untrusted-owner") || t.safe(dir) {
		return nil
	}
	what := "it"
	why := t.foreign(fi, true)
	if why == "" {
		dfi, err := os.Stat(dir)
		if err != nil {
			return AsError(fmt.Errorf("look at the workspace %s: %w", quote.Path(dir), err))
		}
		what, why = "its directory "+quote.Path(dir), t.foreign(dfi, true)
	}
	if why == "" {
		return nil
	}
	return untrusted(fmt.Sprintf("refusing the project file %s: %s %s; a project file another user controls would set your stages' backend, excludes and protects",
		quote.Path(p), what, why), dir)
}

// untrusted is the refusal of a boundary or project file in dir.
func untrusted(msg, dir string) *Error {
	return &Error{Code: CodeUntrustedOwner, Message: msg,
		Repairs: []Repair{{Action: RepairTrust, Detail: "if you trust whoever can write there, trust the directory", Paths: []string{dir}}}}
}
