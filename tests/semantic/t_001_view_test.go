//go:build linux

package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// viewLinkShape is one way the stage's own command puts a symlink where
// wtx, preparing the stage's view for the next command, resolves a path
// that --exclude hides. Every path lies under the shape's own top
// directory, so that shapes share one workspace without meeting.
type viewLinkShape struct {
	name    string
	files   []string // made in the workspace before the stage opens
	exclude string
	// runs are shell lines run in the stage one after another; "$1" is
	// the shape's victim directory outside the workspace, "$2" the
	// directory where a line may leave what it saw.
	runs []string
	// last is the line of the command whose view is prepared over what
	// runs left ("" for true); viaWrite prepares it for a per-file write
	// instead.
	last     string
	viaWrite bool
	// gone is removed from the workspace once the stage is open; linked
	// is then replaced there by a link to the victim.
	gone, linked string
	// harmed says what wtx damaged or followed, or "".
	harmed func(e *boundaryEnv, tx, victim, seen string) string
}

// victimGone is the harm of the shapes whose link leads to the victim.
func victimGone(_ *boundaryEnv, _, victim, _ string) string {
	if _, err := os.Lstat(filepath.Join(victim, "secret.pem")); err != nil {
		return "the excluded name was removed from the directory the link leads to, outside the workspace"
	}
	return ""
}

// viewLinkShapes are the shapes; the top directory of shape i is "s<i>".
var viewLinkShapes = []viewLinkShape{
	{name: "parent-absolute", files: []string{"d/secret.pem"}, exclude: "d/secret.pem",
		runs: []string{`rm -rf d && ln -s "$1" d`}, harmed: victimGone},
	{name: "parent-absolute-per-file-write", files: []string{"d/secret.pem"}, exclude: "d/secret.pem",
		runs: []string{`rm -rf d && ln -s "$1" d`}, viaWrite: true, harmed: victimGone},
	{name: "link-chain", files: []string{"d/secret.pem"}, exclude: "d/secret.pem",
		runs: []string{`rm -rf d && ln -s "$1" l2 && ln -s l2 l1 && ln -s l1 d`}, harmed: victimGone},
	{name: "swapped-between-runs", files: []string{"d/secret.pem"}, exclude: "d/secret.pem",
		runs: []string{`rm -rf d && mkdir e && ln -s e d`, `rm d && ln -s "$1" d`}, harmed: victimGone},
	{name: "invalid-utf8-name", files: []string{"d\xff/secret.pem"}, exclude: "d\xff/secret.pem",
		runs: []string{`n=$(printf 'd\377') && rm -rf "$n" && ln -s "$1" "$n"`}, harmed: victimGone},
	{name: "newline-name", files: []string{"d\nx/secret.pem"}, exclude: "d\nx/secret.pem",
		runs: []string{`n=$(printf 'd\nx') && rm -rf "$n" && ln -s "$1" "$n"`}, harmed: victimGone},
	// The workspace's own directory replaced by a link after the stage
	// opened (a checkout of another branch, say): the overlay shows it.
	{name: "workspace-parent-became-link", files: []string{"d/secret.pem"}, exclude: "d/secret.pem",
		linked: "d", harmed: victimGone},
	// ".." inside the view: hiding a/b/sub/keep.pem through a/b/sub -> ..
	// hides a/keep.pem, which the command never touched.
	{name: "parent-dotdot", files: []string{"a/b/sub/keep.pem", "a/keep.pem"}, exclude: "a/b/sub/keep.pem",
		runs: []string{`rm -rf a/b/sub && ln -s .. a/b/sub`},
		harmed: func(e *boundaryEnv, tx, _, _ string) string {
			r := e.run("--json", "diff", tx, "--name-status")
			var st struct{ Changes []struct{ Path string } }
			if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
				return "diff: " + err.Error() + ": " + r.stdout + r.stderr
			}
			if slices.ContainsFunc(st.Changes, func(c struct{ Path string }) bool { return strings.HasSuffix(c.Path, "a/keep.pem") }) {
				return "a file the command never touched was removed from the view through its link"
			}
			return ""
		}},
	// ".." out of the view's root reaches the stage's own directory in
	// the state root.
	{name: "parent-dotdot-into-state", files: []string{"d/overlay.json"}, exclude: "d/overlay.json",
		runs: []string{`rm -rf d && ln -s ../.. d`},
		harmed: func(e *boundaryEnv, tx, _, _ string) string {
			if r := e.run("status", tx); r.code != 0 {
				return "the stage's own record was removed from the state root: " + strings.TrimSpace(r.stderr)
			}
			return ""
		}},
	// The excluded directory itself a link: it left the workspace after
	// the stage opened, and the command put a link in its place. Hiding it
	// must not cover the link's target.
	{name: "excluded-entry-is-link", files: []string{"d/cache/x"}, exclude: "d/cache", gone: "d/cache",
		runs: []string{`ln -s "$1" d/cache`}, last: `ls "$1" > "$2"`,
		harmed: func(_ *boundaryEnv, _, _, seen string) string {
			got, err := os.ReadFile(seen)
			if err != nil || !strings.Contains(string(got), "secret.pem") {
				return "the directory the link leads to was covered in the command's view (it listed " + strconv.Quote(string(got)) + ")"
			}
			return ""
		}},
}

// TestT_001_ExcludeThroughLinks checks T-001 for the paths --exclude
// hides: whatever links the stage's command left in its view (a parent
// directory replaced by a link to an absolute path, a chain of links, one
// swapped between runs, one to "..", the excluded directory itself as a
// link, names that are not UTF-8 or hold a newline), or the workspace holds
// since the stage opened, preparing the view for the next command (a run or
// a per-file write) never removes, covers or hides anything outside the
// workspace, in the state root, or elsewhere in the view, on every backend;
// an apply afterwards changes nothing outside either. The excluded entry
// itself a link is removed from the view as itself. Clone runs on an XFS
// loop filesystem where root can mount one. Negative control (overlay,
// failpoint build, WTX_DISABLE=view-links): the helper resolves paths the
// ordinary way, and every shape does its damage, inside the test's own
// directory.
func TestT_001_ExcludeThroughLinks(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"overlay", "copy", "clone"} {
		for _, control := range []bool{false, true} {
			if control && backend != "overlay" {
				continue // only the overlay's helper prepares a view
			}
			name := backend
			if control {
				name += "/negative-control"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				base := ""
				if backend == "clone" && os.Geteuid() == 0 {
					base = wtxtest.NewLoopFS(t, "xfs", 320, []string{"-m", "reflink=1"}, "").Dir
				}
				e := newBoundaryEnvIn(t, base, backend, control)
				if control {
					e.env = append(e.env, "WTX_DISABLE=view-links")
				}
				base = filepath.Dir(e.ws)
				for i, sh := range viewLinkShapes {
					top := "s" + strconv.Itoa(i)
					for _, f := range sh.files {
						mustWrite(t, filepath.Join(e.ws, top, f), "ws\n")
					}
					victim := filepath.Join(base, "victim"+strconv.Itoa(i))
					mustWrite(t, filepath.Join(victim, "secret.pem"), "victim\n")
				}
				// Every stage opens before any shape changes the workspace
				// (a walk must not meet a directory becoming a link); then
				// the shapes play at once, each in its own stage.
				for i, sh := range viewLinkShapes {
					e.must("begin", "--backend", backend, "--name", "shape"+strconv.Itoa(i),
						"--exclude", "s"+strconv.Itoa(i)+"/"+sh.exclude)
				}
				var wg sync.WaitGroup
				for i, sh := range viewLinkShapes {
					wg.Add(1)
					go func() {
						defer wg.Done()
						// An apply afterwards goes through the same engine
						// on every backend: once is enough.
						harm := e.viewLinkShape(i, sh, control, !control && backend == "overlay")
						switch {
						case control && harm == "":
							t.Errorf("%s: with links followed, the shape did no harm: the check cannot fail", sh.name)
						case !control && harm != "":
							t.Errorf("%s: %s", sh.name, harm)
						}
					}()
				}
				wg.Wait()
			})
		}
	}
}

// viewLinkShape plays shape i in its stage (open), applies the stage when
// apply is set, and returns the harm done; control says links are followed
// (a run may then fail). It runs beside the other shapes: it reports with
// Errorf only.
func (e *boundaryEnv) viewLinkShape(i int, sh viewLinkShape, control, apply bool) string {
	top := "s" + strconv.Itoa(i)
	base := filepath.Dir(e.ws)
	victim := filepath.Join(base, "victim"+strconv.Itoa(i))
	seen := filepath.Join(e.out, "seen"+strconv.Itoa(i))
	tx := "shape" + strconv.Itoa(i)
	if sh.gone != "" {
		if err := os.RemoveAll(filepath.Join(e.ws, top, sh.gone)); err != nil {
			return err.Error()
		}
	}
	if sh.linked != "" {
		if err := os.RemoveAll(filepath.Join(e.ws, top, sh.linked)); err != nil {
			return err.Error()
		}
		if err := os.Symlink(victim, filepath.Join(e.ws, top, sh.linked)); err != nil {
			return err.Error()
		}
	}
	for _, line := range sh.runs {
		if r := e.run("run", "--tx", tx, "--", "sh", "-c", "cd "+top+" && "+line, "sh", victim, seen); r.code != 0 {
			e.t.Errorf("%s: run %q: exit %d: %s", sh.name, line, r.code, r.stderr)
			return ""
		}
	}
	if sh.viaWrite {
		if r := e.runStdin("x\n", "write", "--tx", tx, top+"/new.txt"); r.code != 0 && !control {
			e.t.Errorf("%s: write: exit %d: %s", sh.name, r.code, r.stderr)
		}
	} else {
		last := sh.last
		if last == "" {
			last = "true"
		}
		// With links followed, the run may fail: the harm says what happened.
		if r := e.run("run", "--tx", tx, "--", "sh", "-c", "cd "+top+" && "+last, "sh", victim, seen); r.code != 0 && !control {
			e.t.Errorf("%s: the run after the links: exit %d: %s", sh.name, r.code, r.stderr)
		}
	}
	harm := sh.harmed(e, tx, victim, seen)
	if harm == "" {
		harm = victimGone(e, tx, victim, seen)
	}
	if apply && harm == "" {
		_ = e.run("apply", tx) // refused or not: nothing outside may change
		if h := victimGone(e, tx, victim, seen); h != "" {
			return "after apply: " + h
		}
	}
	return harm
}

// runStdin runs wtx with stdin.
func (e *boundaryEnv) runStdin(stdin string, args ...string) wtxResult {
	e.t.Helper()
	cmd := exec.Command(e.bin, append([]string{"-C", e.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st), e.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}
