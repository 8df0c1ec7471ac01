//go:build linux

package hardening

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/journal"
	"github.com/wtx-dev/wtx/internal/tree"
	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// Policies (docs/design.md, "Policies"), each pinned by a case below:
//
//   - .git/** in any letter case and at any depth (a submodule's .git too)
//     is staged and applied like anything else but protected by default:
//     an apply touching it is refused (refusal.protected) unless approved.
//   - the temporary prefix .wtx-tmp- is reserved: a staged name starting
//     with it shows in the change set but is never applied (an apply whose
//     selection holds one is refused with usage.reserved-name).
//   - setuid, setgid and sticky bits are never carried into the workspace.
//   - hard-linked stage files are applied as independent files; a mode-only
//     change of a workspace file with other hard links is refused
//     (refusal.boundary), since fchmod would change the other links too.
//   - symlink targets, absolute or escaping, are data: applied as links,
//     never followed.
//   - a journal of another workspace found in this one's journal directory
//     is refused, never rolled back here.

const refusedAny = "*" // any refusal

// hcase is one hostile input.
type hcase struct {
	class, name string
	// before prepares the workspace before the stage opens.
	before func(e *env)
	// stage makes the stage's changes; an error is a refusal at staging.
	stage func(e *env, s *wtx.Stage, view string) error
	// trap changes the workspace after staging, before the apply.
	trap  func(e *env)
	apply wtx.ApplyOptions
	// want is the refusal code, refusedAny, or "" when the apply is allowed.
	want string
	// check asserts the result of an allowed apply; nil: the workspace must
	// equal the view.
	check func(t *testing.T, e *env, view string)
	root  bool // needs root
}

func vpath(view, p string) string { return filepath.Join(view, filepath.FromSlash(p)) }

func writeView(p, content string, perm os.FileMode) func(e *env, s *wtx.Stage, view string) error {
	return func(e *env, s *wtx.Stage, view string) error {
		full := vpath(view, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		os.Remove(full)
		if err := os.WriteFile(full, []byte(content), perm); err != nil {
			return err
		}
		return os.Chmod(full, perm)
	}
}

func steps(fns ...func(e *env, s *wtx.Stage, view string) error) func(e *env, s *wtx.Stage, view string) error {
	return func(e *env, s *wtx.Stage, view string) error {
		for _, f := range fns {
			if err := f(e, s, view); err != nil {
				return err
			}
		}
		return nil
	}
}

func viewDo(f func(view string) error) func(e *env, s *wtx.Stage, view string) error {
	return func(e *env, s *wtx.Stage, view string) error { return f(view) }
}

func linkView(target, p string) func(e *env, s *wtx.Stage, view string) error {
	return viewDo(func(v string) error {
		os.RemoveAll(vpath(v, p))
		return os.Symlink(target, vpath(v, p))
	})
}

func txWrite(p string) func(e *env, s *wtx.Stage, view string) error {
	return func(e *env, s *wtx.Stage, view string) error {
		_, err := s.Write(e.ctx, p, []byte("escaped\n"), wtx.WriteOptions{})
		return err
	}
}

func txRemove(p string) func(e *env, s *wtx.Stage, view string) error {
	return func(e *env, s *wtx.Stage, view string) error {
		_, err := s.Remove(e.ctx, p, "")
		return err
	}
}

// modifyBoth changes a.txt and dir/b.txt in the view, so that a wrong
// selector would write something.
var modifyBoth = steps(writeView("a.txt", "changed a\n", 0o644), writeView("dir/b.txt", "changed b\n", 0o644))

// trapSwap replaces the workspace entry p by a symlink to target.
func trapSwap(p, target string) func(e *env) {
	return func(e *env) {
		must(e.t, os.RemoveAll(e.wsPath(p)))
		must(e.t, os.Symlink(strings.ReplaceAll(target, "CANARY", e.canary), e.wsPath(p)))
	}
}

func checkLink(p, target string) func(t *testing.T, e *env, view string) {
	return func(t *testing.T, e *env, view string) {
		got, err := os.Readlink(e.wsPath(p))
		want := strings.ReplaceAll(target, "CANARY", e.canary)
		if err != nil || got != want {
			t.Errorf("%s: link %q, %v; want %q", p, got, err, want)
		}
	}
}

func checkMode(p string, want os.FileMode) func(t *testing.T, e *env, view string) {
	return func(t *testing.T, e *env, view string) {
		fi, err := os.Lstat(e.wsPath(p))
		if err != nil || fi.Mode() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode(), err, want)
		}
	}
}

func allOf(fs ...func(t *testing.T, e *env, view string)) func(t *testing.T, e *env, view string) {
	return func(t *testing.T, e *env, view string) {
		for _, f := range fs {
			f(t, e, view)
		}
	}
}

// checkView asserts the workspace equals the view.
func checkView(t *testing.T, e *env, view string) {
	t.Helper()
	if got, want := e.snap(), wtxtest.MustSnapshot(t, view); got != want {
		t.Errorf("workspace differs from the view:\n%s\nwant\n%s", got, want)
	}
}

func hardeningCases() []hcase {
	var cs []hcase
	// A. Path syntax, through the per-file write, the per-file remove and
	// the --path selectors of an apply.
	long := strings.Repeat("n", 256)
	deep := strings.Repeat("d/", 2048) + "x"
	badPaths := []string{"/etc/x", "..", "../x", "a/../../x", "dir/..", "a//b", "./a.txt", "dir/.", ".", "",
		"a.txt/", "link/", "a\x00b", long, deep, "dir/b.txt/", "/" + "a.txt", "../canary/secret"}
	for _, p := range badPaths {
		cs = append(cs,
			hcase{class: "A", name: fmt.Sprintf("write %q", trunc(p)), stage: txWrite(p), want: wtx.CodeBoundary},
			hcase{class: "A", name: fmt.Sprintf("remove %q", trunc(p)), stage: txRemove(p), want: wtx.CodeBoundary})
	}
	for _, p := range []string{"/a.txt", "../ws/a.txt", "dir/../a.txt", "a.txt\x00", "/dir", "..", "../canary"} {
		cs = append(cs, hcase{class: "A", name: fmt.Sprintf("select %q", trunc(p)), stage: modifyBoth,
			apply: wtx.ApplyOptions{Paths: []string{p}}, want: refusedAny})
	}
	for _, n := range []string{`a\..\b`, `..\..\x`, "new\nline", "ctl\x01\x7f", "bad\xff\xfe", "tab\there", " lead", "trail "} {
		cs = append(cs, hcase{class: "A", name: fmt.Sprintf("name %q allowed verbatim", n), stage: writeView(n, "odd\n", 0o644)})
	}
	cs = append(cs,
		hcase{class: "A", name: "NFC and NFD twins both kept", stage: steps(writeView("\u00e9", "nfc\n", 0o644), writeView("e\u0301", "nfd\n", 0o644))},
		hcase{class: "A", name: "case twins both kept", stage: steps(writeView("README", "upper\n", 0o644), writeView("readme", "lower\n", 0o644))},
		hcase{class: "A", name: "255-byte name allowed", stage: writeView(strings.Repeat("m", 255), "max\n", 0o644)},
	)

	// B. Reserved names.
	for _, p := range []string{".wtx-tmp-evil", "dir/.wtx-tmp-x", ".wtx-tmp-abc-0-l"} {
		p := p
		cs = append(cs, hcase{class: "B", name: "temp prefix " + p, stage: writeView(p, "x\n", 0o644), want: wtx.CodeReserved,
			check: func(t *testing.T, e *env, view string) {
				if _, err := os.Lstat(e.wsPath(p)); err == nil {
					t.Errorf("%s was applied", p)
				}
			}})
	}
	for _, p := range []string{".git/hooks/pre-commit", ".GIT/config", ".Git/hooks/x", "sub/.git/config", "sub/x/.gIt"} {
		cs = append(cs,
			hcase{class: "B", name: "protected " + p, stage: writeView(p, "#!/bin/sh\necho pwned\n", 0o755), want: wtx.CodeProtected},
			hcase{class: "B", name: "approved " + p, stage: writeView(p, "#!/bin/sh\n", 0o755), apply: wtx.ApplyOptions{Approve: true}})
	}
	cs = append(cs,
		hcase{class: "B", name: ".gitignore is not protected", stage: writeView(".gitignore", "*.o\n", 0o644)},
		hcase{class: "B", name: ".github/workflow is not protected", stage: writeView(".github/x.yml", "on: push\n", 0o644)},
		hcase{class: "B", name: "mount point under the workspace", root: true, stage: writeView("dir/b.txt", "new\n", 0o644),
			trap: func(e *env) {
				must(e.t, unix.Mount("tmpfs", e.wsPath("dir"), "tmpfs", 0, "size=1m"))
				e.t.Cleanup(func() { unix.Unmount(e.wsPath("dir"), unix.MNT_DETACH) })
				must(e.t, os.WriteFile(e.wsPath("dir/b.txt"), []byte("bravo\n"), 0o644))
			}, want: wtx.CodeBoundary},
	)

	// C. Symlinks in the change set: data, never followed.
	for _, tg := range []struct{ name, target string }{
		{"absolute", "/etc/passwd"}, {"absolute into the canary", "CANARY/secret"}, {"escaping", "../../canary/secret"},
		{"dangling", "no/such/thing"}, {"self loop", "selfl"}, {"4095-byte target", strings.Repeat("t", 4095)},
		{"newline in target", "a\nb"}, {"root", "/"},
	} {
		tg := tg
		cs = append(cs, hcase{class: "C", name: "symlink " + tg.name,
			stage: func(e *env, s *wtx.Stage, view string) error {
				return os.Symlink(strings.ReplaceAll(tg.target, "CANARY", e.canary), vpath(view, "selfl"))
			}, check: checkLink("selfl", tg.target)})
	}
	cs = append(cs,
		hcase{class: "C", name: "dir replaced by a link to the canary", stage: linkView("../canary/cdir", "dir"),
			check: allOf(checkView, checkLink("dir", "../canary/cdir"))},
		hcase{class: "C", name: "write through a link applied by an earlier stage",
			stage: func(e *env, s *wtx.Stage, view string) error {
				s2, v2 := e.begin()
				os.RemoveAll(vpath(v2, "dir"))
				if err := os.Symlink(e.canary+"/cdir", vpath(v2, "dir")); err != nil {
					return err
				}
				if err := writeView("dir/f", "through\n", 0o644)(e, s, view); err != nil {
					return err
				}
				_, err := s2.Apply(e.ctx, wtx.ApplyOptions{})
				return err
			}, want: wtx.CodeBoundary},
		hcase{class: "C", name: "file becomes dir", stage: viewDo(func(v string) error {
			os.Remove(vpath(v, "a.txt"))
			return writeView("a.txt/inner", "in\n", 0o644)(nil, nil, v)
		})},
		hcase{class: "C", name: "dir becomes file", stage: viewDo(func(v string) error {
			os.RemoveAll(vpath(v, "sub"))
			return os.WriteFile(vpath(v, "sub"), []byte("now a file\n"), 0o644)
		})},
		hcase{class: "C", name: "file becomes symlink", stage: linkView("/etc/passwd", "a.txt")},
		hcase{class: "C", name: "symlink becomes file", stage: writeView("link", "plain\n", 0o644)},
		hcase{class: "C", name: "symlink becomes dir", stage: viewDo(func(v string) error {
			os.Remove(vpath(v, "link"))
			return writeView("link/f", "f\n", 0o644)(nil, nil, v)
		})},
		hcase{class: "C", name: "dir becomes symlink to outside with children", stage: linkView("/", "sub")},
	)

	// D. Traps on the workspace side.
	cs = append(cs,
		hcase{class: "D", name: "parent dir now a link to the canary", stage: writeView("dir/b.txt", "new\n", 0o644),
			trap: trapSwap("dir", "CANARY/cdir"), want: wtx.CodeBoundary},
		hcase{class: "D", name: "parent dir now a link inside", stage: writeView("dir/b.txt", "new\n", 0o644),
			trap: trapSwap("dir", "sub"), want: wtx.CodeBoundary},
		hcase{class: "D", name: "grandparent now a link to the canary", stage: writeView("sub/x/y.txt", "new\n", 0o644),
			trap: func(e *env) {
				must(e.t, os.MkdirAll(filepath.Join(e.canary, "cdir", "x"), 0o755))
				must(e.t, os.WriteFile(filepath.Join(e.canary, "cdir", "x", "y.txt"), []byte("yankee\n"), 0o644))
				trapSwap("sub", "CANARY/cdir")(e)
			}, want: wtx.CodeBoundary},
		hcase{class: "D", name: "new file under a parent now a link", stage: writeView("dir/new", "new\n", 0o644),
			trap: trapSwap("dir", "CANARY/cdir"), want: wtx.CodeBoundary},
		hcase{class: "D", name: "final file now a link out, modified", stage: writeView("a.txt", "new\n", 0o644),
			trap: trapSwap("a.txt", "CANARY/secret"), want: wtx.CodeTargetChanged},
		hcase{class: "D", name: "final file now a link out, deleted", stage: viewDo(func(v string) error { return os.Remove(vpath(v, "a.txt")) }),
			trap: trapSwap("a.txt", "CANARY/secret"), want: wtx.CodeTargetChanged},
		hcase{class: "D", name: "final file now a link out, chmod", stage: viewDo(func(v string) error { return os.Chmod(vpath(v, "a.txt"), 0o600) }),
			trap: trapSwap("a.txt", "CANARY/secret"), want: wtx.CodeTargetChanged},
		hcase{class: "D", name: "dir now a link out, chmod", stage: viewDo(func(v string) error { return os.Chmod(vpath(v, "dir"), 0o700) }),
			trap: trapSwap("dir", "CANARY/cdir"), want: refusedAny},
		hcase{class: "D", name: "absolute link in the base deleted", before: func(e *env) {
			must(e.t, os.Symlink(e.canary+"/secret", e.wsPath("abs")))
		}, stage: viewDo(func(v string) error { return os.Remove(vpath(v, "abs")) })},
		hcase{class: "D", name: "absolute link in the base retargeted", before: func(e *env) {
			must(e.t, os.Symlink(e.canary+"/secret", e.wsPath("abs")))
		}, stage: linkView("/etc/hostname", "abs")},
		hcase{class: "D", name: "hard link to the canary, content changed", before: hardlinkOut,
			stage: writeView("hl", "new content\n", 0o644)},
		hcase{class: "D", name: "hard link to the canary, mode-only change refused", before: hardlinkOut,
			stage: viewDo(func(v string) error { return os.Chmod(vpath(v, "hl"), 0o755) }), want: wtx.CodeBoundary},
		hcase{class: "D", name: "hard link to the canary, deleted", before: hardlinkOut,
			stage: viewDo(func(v string) error { return os.Remove(vpath(v, "hl")) })},
		hcase{class: "D", name: "deleted dir gained an entry", stage: viewDo(func(v string) error { return os.RemoveAll(vpath(v, "dir")) }),
			trap: func(e *env) { must(e.t, os.WriteFile(e.wsPath("dir/late"), []byte("late\n"), 0o644)) }, want: wtx.CodeTargetChanged},
		hcase{class: "D", name: "deleted empty dir gained an entry", stage: viewDo(func(v string) error { return os.Remove(vpath(v, "empty")) }),
			trap: func(e *env) { must(e.t, os.Mkdir(e.wsPath("empty/late"), 0o755)) }, want: wtx.CodeTargetChanged},
		hcase{class: "D", name: "workspace root replaced by a link to a replica", stage: writeView("a.txt", "new\n", 0o644),
			trap: func(e *env) {
				replica := filepath.Join(e.canary, "replica")
				must(e.t, wtxtest.CopyTree(e.ws, replica))
				must(e.t, os.Rename(e.ws, e.ws+".moved"))
				must(e.t, os.Symlink(replica, e.ws))
				e.t.Cleanup(func() { os.Remove(e.ws); os.Rename(e.ws+".moved", e.ws) })
			}, want: refusedAny},
		hcase{class: "D", name: "created path appeared meanwhile", stage: writeView("fresh", "mine\n", 0o644),
			trap: func(e *env) { must(e.t, os.WriteFile(e.wsPath("fresh"), []byte("theirs\n"), 0o644)) }, want: wtx.CodeTargetChanged},
		hcase{class: "D", name: "created path appeared as a link out", stage: writeView("fresh", "mine\n", 0o644),
			trap: func(e *env) { must(e.t, os.Symlink(e.canary+"/secret", e.wsPath("fresh"))) }, want: wtx.CodeTargetChanged},
	)

	// E. Traps on the stage side.
	cs = append(cs,
		hcase{class: "E", name: "FIFO", stage: viewDo(func(v string) error { return unix.Mkfifo(vpath(v, "fifo"), 0o644) }), want: wtx.CodeSpecialFile},
		hcase{class: "E", name: "FIFO in place of a file", stage: viewDo(func(v string) error {
			os.Remove(vpath(v, "a.txt"))
			return unix.Mkfifo(vpath(v, "a.txt"), 0o644)
		}), want: wtx.CodeSpecialFile},
		hcase{class: "E", name: "socket", stage: viewDo(func(v string) error {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: vpath(v, "sock"), Net: "unix"})
			if err != nil {
				return err
			}
			l.SetUnlinkOnClose(false)
			return l.Close()
		}), want: wtx.CodeSpecialFile},
		hcase{class: "E", name: "char device", root: true, stage: viewDo(func(v string) error {
			return unix.Mknod(vpath(v, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))
		}), want: wtx.CodeSpecialFile},
		hcase{class: "E", name: "block device", root: true, stage: viewDo(func(v string) error {
			return unix.Mknod(vpath(v, "blk"), unix.S_IFBLK|0o600, int(unix.Mkdev(7, 0)))
		}), want: wtx.CodeSpecialFile},
		hcase{class: "E", name: "stage symlink to the host secret applied as a link",
			stage: func(e *env, s *wtx.Stage, view string) error {
				return os.Symlink(e.canary+"/secret", vpath(view, "steal"))
			}, check: checkLink("steal", "CANARY/secret")},
		hcase{class: "E", name: "stage hard link to the host secret applied as an independent file",
			stage: func(e *env, s *wtx.Stage, view string) error {
				return os.Link(filepath.Join(e.canary, "secret"), vpath(view, "steal"))
			}, check: independent("steal")},
		hcase{class: "E", name: "two hard-linked stage files applied independently",
			stage: viewDo(func(v string) error {
				if err := os.WriteFile(vpath(v, "h1"), []byte("shared\n"), 0o644); err != nil {
					return err
				}
				return os.Link(vpath(v, "h1"), vpath(v, "h2"))
			}), check: allOf(checkView, independent("h1"), independent("h2"))},
		hcase{class: "E", name: "overlay-looking xattrs are ordinary metadata", stage: steps(writeView("ovl", "x\n", 0o644),
			viewDo(func(v string) error {
				unix.Lsetxattr(vpath(v, "ovl"), "user.overlay.whiteout", []byte("y"), 0)
				return nil
			})), check: allOf(checkView, noXattr("ovl"))},
	)

	// F. Metadata.
	cs = append(cs,
		hcase{class: "F", name: "setuid new file stripped", stage: writeView("suid", "x\n", 0o4755), check: checkMode("suid", 0o755)},
		hcase{class: "F", name: "setgid new file stripped", stage: writeView("sgid", "x\n", 0o2755), check: checkMode("sgid", 0o755)},
		hcase{class: "F", name: "sticky new dir stripped", stage: viewDo(func(v string) error {
			if err := os.Mkdir(vpath(v, "tmpdir"), 0o755); err != nil {
				return err
			}
			return os.Chmod(vpath(v, "tmpdir"), 0o777|os.ModeSticky)
		}), check: checkMode("tmpdir", os.ModeDir|0o777)},
		hcase{class: "F", name: "setuid added to an existing file is no change", stage: viewDo(func(v string) error {
			return os.Chmod(vpath(v, "exec.sh"), 0o755|os.ModeSetuid)
		}), check: checkMode("exec.sh", 0o755)},
		hcase{class: "F", name: "exec bit only", stage: viewDo(func(v string) error { return os.Chmod(vpath(v, "a.txt"), 0o755) }),
			check: allOf(checkView, checkMode("a.txt", 0o755))},
		hcase{class: "F", name: "exec bit removed", stage: viewDo(func(v string) error { return os.Chmod(vpath(v, "exec.sh"), 0o644) })},
		hcase{class: "F", name: "xattr never applied", stage: steps(writeView("xa", "x\n", 0o644), viewDo(func(v string) error {
			unix.Lsetxattr(vpath(v, "xa"), "user.wtx-test", []byte("v"), 0)
			return nil
		})), check: allOf(checkView, noXattr("xa"))},
		hcase{class: "F", name: "ownership never applied", root: true, stage: steps(writeView("owned", "x\n", 0o644), viewDo(func(v string) error {
			return os.Lchown(vpath(v, "owned"), 4321, 4321)
		})), check: func(t *testing.T, e *env, view string) {
			fi, err := os.Lstat(e.wsPath("owned"))
			if err != nil || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Getuid()) {
				t.Errorf("owned: %v, uid %v; want the applier's", err, fi.Sys())
			}
		}},
	)
	for _, mask := range []int{0, 0o022, 0o077} {
		mask := mask
		cs = append(cs, hcase{class: "F", name: fmt.Sprintf("modes under umask %03o", mask),
			stage: steps(writeView("m600", "x\n", 0o600), writeView("m775", "x\n", 0o775), writeView("m555", "x\n", 0o555),
				viewDo(func(v string) error {
					if err := os.Mkdir(vpath(v, "d700"), 0o700); err != nil {
						return err
					}
					return os.Chmod(vpath(v, "d700"), 0o700)
				}),
				func(e *env, s *wtx.Stage, view string) error { e.umask = mask; return nil }),
			check: allOf(checkView, checkMode("m600", 0o600), checkMode("m775", 0o775), checkMode("m555", 0o555), checkMode("d700", os.ModeDir|0o700))})
	}

	// G. Resource abuse.
	tiny := 2000
	if soak() {
		tiny = 100000
	}
	cs = append(cs,
		hcase{class: "G", name: fmt.Sprintf("%d tiny files", tiny), stage: viewDo(func(v string) error {
			for i := range tiny {
				d := vpath(v, fmt.Sprintf("many/%03d", i%100))
				if i < 100 {
					if err := os.MkdirAll(d, 0o755); err != nil {
						return err
					}
				}
				if err := os.WriteFile(filepath.Join(d, fmt.Sprint(i)), []byte{byte(i)}, 0o644); err != nil {
					return err
				}
			}
			return nil
		})},
		hcase{class: "G", name: "long link chain in the base (ELOOP) retargeted", before: func(e *env) {
			for i := range 60 {
				must(e.t, os.Symlink(fmt.Sprintf("l%d", i+1), e.wsPath(fmt.Sprintf("l%d", i))))
			}
		}, stage: linkView("elsewhere", "l0")},
		hcase{class: "G", name: "write through a file component", stage: txWrite("a.txt/child"), want: refusedAny},
		hcase{class: "G", name: "same path twice: the last write wins",
			stage: steps(txWrite("twice"), func(e *env, s *wtx.Stage, view string) error {
				_, err := s.Write(e.ctx, "twice", []byte("second\n"), wtx.WriteOptions{})
				return err
			}), check: func(t *testing.T, e *env, view string) {
				if b, err := os.ReadFile(e.wsPath("twice")); err != nil || string(b) != "second\n" {
					t.Errorf("twice: %q, %v", b, err)
				}
			}},
		hcase{class: "G", name: "delete then recreate beneath: the file becomes a directory", stage: steps(txRemove("dir/b.txt"), txWrite("dir/b.txt/deeper"))},
	)

	// H. Damaged journals and state.
	cs = append(cs,
		hcase{class: "H", name: "zero-length journal discarded", trap: plantJournal(func(e *env) []byte { return nil }),
			stage: writeView("a.txt", "new\n", 0o644), check: checkView},
		hcase{class: "H", name: "zero-filled journal discarded", trap: plantJournal(func(e *env) []byte { return make([]byte, 4096) }),
			stage: writeView("a.txt", "new\n", 0o644), check: checkView},
		hcase{class: "H", name: "garbage journal discarded", trap: plantJournal(func(e *env) []byte { return []byte("WTXJ\x01garbage") }),
			stage: writeView("a.txt", "new\n", 0o644), check: checkView},
		hcase{class: "H", name: "journal of another workspace refused", trap: plantJournal(func(e *env) []byte {
			return journal.Encode(foreignJournal(e.ws + "-other"))
		}), stage: writeView("a.txt", "new\n", 0o644), want: wtx.CodeInterruptedApply},
	)
	return cs
}

func trunc(s string) string {
	if len(s) > 24 {
		return s[:24] + fmt.Sprintf("…(%d bytes)", len(s))
	}
	return s
}

func hardlinkOut(e *env) {
	must(e.t, os.WriteFile(filepath.Join(e.canary, "hl"), []byte("shared inode\n"), 0o644))
	must(e.t, os.Link(filepath.Join(e.canary, "hl"), e.wsPath("hl")))
}

func independent(p string) func(t *testing.T, e *env, view string) {
	return func(t *testing.T, e *env, view string) {
		fi, err := os.Lstat(e.wsPath(p))
		if err != nil || !fi.Mode().IsRegular() || fi.Sys().(*syscall.Stat_t).Nlink != 1 {
			t.Errorf("%s: %v; want a regular file with one link", p, err)
		}
	}
}

func noXattr(p string) func(t *testing.T, e *env, view string) {
	return func(t *testing.T, e *env, view string) {
		buf := make([]byte, 1024)
		n, err := unix.Llistxattr(e.wsPath(p), buf)
		if err == nil && n > 0 {
			t.Errorf("%s carries xattrs %q", p, buf[:n])
		}
	}
}

// foreignJournal is a well-formed journal that would delete a.txt.
func foreignJournal(ws string) *journal.Journal {
	return &journal.Journal{OpID: "op-foreign-0001", Kind: "apply", StageID: "tx-foreign", Workspace: ws, Body: []byte("{}"),
		Records: []journal.Record{{Step: tree.Step{Kind: tree.StepRemove, Path: "a.txt",
			Old: &tree.Entry{Path: "a.txt", Type: tree.File, Perm: 0o644, Size: 6, Digest: "x"}}, Tmp: ".wtx-tmp-foreign-0-"}}}
}

// plantJournal writes data as a pending journal of the workspace and
// reopens it, so that recovery meets it.
func plantJournal(data func(e *env) []byte) func(e *env) {
	return func(e *env) {
		sum := sha256.Sum256([]byte(e.ws))
		dir := filepath.Join(e.state, "workspaces", hex.EncodeToString(sum[:8]), "journal", "op-planted-0001")
		must(e.t, os.MkdirAll(dir, 0o700))
		must(e.t, os.WriteFile(filepath.Join(dir, "journal"), data(e), 0o600))
	}
}

func TestHostileInputs(t *testing.T) {
	cases := hardeningCases()
	perClass := map[string]int{}
	for _, c := range cases {
		perClass[c.class]++
		t.Run(c.class+"/"+c.name, func(t *testing.T) {
			if c.root && os.Geteuid() != 0 {
				t.Skip("needs root")
			}
			runCase(t, c)
		})
	}
	t.Logf("hostile inputs: %d cases %v", len(cases), perClass)
}

func runCase(t *testing.T, c hcase) {
	e := newEnv(t)
	if c.before != nil {
		c.before(e)
	}
	s, view := e.begin()
	var err error
	if c.stage != nil {
		err = c.stage(e, s, view)
	}
	if c.trap != nil {
		c.trap(e)
	}
	pre, can := e.snap(), e.canarySnap()
	if e.umask != 0 || strings.Contains(c.name, "umask 000") {
		old := syscall.Umask(e.umask)
		defer syscall.Umask(old)
	}
	staged := err == nil
	if staged {
		if c.class == "H" {
			// Recovery runs first in every command: open the workspace anew.
			w, oerr := e.open()
			if oerr == nil {
				defer w.Close()
				s, oerr = w.Stage(e.ctx, s.ID())
			}
			err = oerr
		}
	}
	if err == nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_, err = s.Apply(e.ctx, c.apply)
		}()
		select {
		case <-done:
		case <-time.After(wtxtest.Patience(t)):
			t.Fatal("apply blocked")
		}
	} else if !staged {
		// Refused while staging: whatever did stage must not land outside.
		s.Apply(e.ctx, c.apply)
	}
	if got := e.canarySnap(); got != can {
		t.Errorf("canary changed:\n%s\nwas\n%s", got, can)
	}
	if d := wtxtest.Debris(e.ws); len(d) > 0 {
		t.Errorf("temporary names left: %v", d)
	}
	switch {
	case c.want == "":
		if err != nil {
			t.Fatalf("want allowed, got %v", err)
		}
		if c.check != nil {
			c.check(t, e, view)
		} else {
			checkView(t, e, view)
		}
	default:
		if err == nil {
			t.Fatalf("want refusal %s, got success", c.want)
		}
		if c.want != refusedAny && codeOf(err) != c.want {
			t.Errorf("want %s, got %s: %v", c.want, codeOf(err), err)
		}
		if got := e.snap(); got != pre {
			t.Errorf("workspace changed by a refused apply:\n%s\nwas\n%s", got, pre)
		}
	}
}
