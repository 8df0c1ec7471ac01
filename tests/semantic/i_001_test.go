package semantic

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// I-001: a path, an argument or a selector is a byte string. These tests
// drive the binary with names that are not UTF-8 (and other hostile names)
// and compare the workspace with os.ReadDir's raw names afterwards.

// nameEnv is one workspace, its state root and the binary that acts on it.
type nameEnv struct {
	t         testing.TB
	bin       string
	env       []string
	ws, state string
}

func newNameEnv(t testing.TB, bin string, env ...string) *nameEnv {
	base := t.TempDir()
	e := &nameEnv{t: t, bin: bin, env: env, ws: filepath.Join(base, "ws"), state: filepath.Join(base, "state")}
	if err := os.Mkdir(e.ws, 0o755); err != nil {
		t.Fatal(err)
	}
	return e
}

// wtx runs the binary on the workspace with stdin; a failure to start it
// fails the test, an exit status does not.
func (e *nameEnv) wtx(stdin []byte, args ...string) wtxResult {
	cmd := exec.Command(e.bin, append([]string{"-C", e.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.state), e.env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		e.t.Fatalf("wtx %q: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

// nmField decodes one field of a --json answer.
func nmField(out, field string) (any, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		return nil, fmt.Errorf("answer is not JSON: %v: %q", err, out)
	}
	return m[field], nil
}

func nmString(out, field string) string {
	v, _ := nmField(out, field)
	s, _ := v.(string)
	return s
}

// nmExact reads a name back from JSON by the convention: X_b64 when
// present, else X.
func nmExact(m map[string]any, key string) string {
	if b, ok := m[key+"_b64"].(string); ok {
		raw, err := base64.StdEncoding.DecodeString(b)
		if err == nil {
			return string(raw)
		}
		return "bad base64 " + b
	}
	s, _ := m[key].(string)
	return s
}

// nmChanged lists the exact paths of a --json answer's changes.
func nmChanged(out string) ([]string, error) {
	v, err := nmField(out, "changes")
	if err != nil {
		return nil, err
	}
	list, _ := v.([]any)
	var paths []string
	for _, c := range list {
		m, _ := c.(map[string]any)
		paths = append(paths, nmExact(m, "path"))
	}
	slices.Sort(paths)
	return paths, nil
}

// nmRawNames lists a directory's entries by their exact bytes.
func nmRawNames(t testing.TB, dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range ents {
		names = append(names, d.Name())
	}
	slices.Sort(names)
	return names
}

func nmWrite(t testing.TB, p string, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func nmRead(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func nmOK(t testing.TB, r wtxResult, what string) {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", what, r.code, r.stdout, r.stderr)
	}
}

// TestI001_UndoRestoresTheExactName: undo of an op that changed a file
// named \xff writes the pre-image into \xff, and no file named U+FFFD
// appears.
func TestI001_UndoRestoresTheExactName(t *testing.T) {
	t.Parallel()
	e := newNameEnv(t, wtxtest.Binary(t, false))
	nmWrite(t, filepath.Join(e.ws, "\xff"), "old")
	r := e.wtx(nil, "run", "--backend", "copy", "--json", "--", "sh", "-c", `printf new > "$1"`, "sh", "\xff")
	nmOK(t, r, "run")
	tx := nmString(r.stdout, "tx")
	r = e.wtx(nil, "apply", tx, "--json")
	nmOK(t, r, "apply")
	op := nmString(r.stdout, "op_id")
	if got := nmRead(t, filepath.Join(e.ws, "\xff")); got != "new" {
		t.Fatalf("after apply \\xff holds %q", got)
	}
	nmOK(t, e.wtx(nil, "undo", op), "undo")
	if got := nmRawNames(t, e.ws); !slices.Equal(got, []string{"\xff"}) {
		t.Fatalf("after undo the workspace holds %q, want only \\xff", got)
	}
	if got := nmRead(t, filepath.Join(e.ws, "\xff")); got != "old" {
		t.Fatalf("after undo \\xff holds %q, want its pre-image", got)
	}
}

// TestI001_DropOpRestoresTheExactPath: drop-op puts back the staged state of
// the very path the dropped op touched.
func TestI001_DropOpRestoresTheExactPath(t *testing.T) {
	t.Parallel()
	e := newNameEnv(t, wtxtest.Binary(t, false))
	nmWrite(t, filepath.Join(e.ws, "d\xff"), "base")
	nmWrite(t, filepath.Join(e.ws, "d\uFFFD"), "twin")
	r := e.wtx(nil, "begin", "--backend", "copy")
	nmOK(t, r, "begin")
	tx := strings.TrimSpace(r.stdout)
	nmOK(t, e.wtx([]byte("one"), "write", "--tx", tx, "--", "d\xff"), "write 1")
	nmOK(t, e.wtx([]byte("two"), "write", "--tx", tx, "--", "d\xff"), "write 2")
	r = e.wtx(nil, "drop-op", tx, "2", "--json")
	nmOK(t, r, "drop-op")
	var m map[string]any
	json.Unmarshal([]byte(r.stdout), &m)
	if b64, _ := m["restored_b64"].([]any); len(b64) != 1 || b64[0] != base64.StdEncoding.EncodeToString([]byte("d\xff")) {
		t.Fatalf("drop-op answer names %v, want d\\xff in restored_b64", m["restored_b64"])
	}
	r = e.wtx(nil, "read", "--tx", tx, "--json", "--", "d\xff")
	nmOK(t, r, "read")
	if got := nmExact(nmMap(t, r.stdout), "content"); got != "one" {
		t.Fatalf("after drop-op 2 the stage holds %q at d\\xff, want %q", got, "one")
	}
	nmOK(t, e.wtx(nil, "apply", tx), "apply")
	if got := nmRead(t, filepath.Join(e.ws, "d\xff")); got != "one" {
		t.Fatalf("applied d\\xff holds %q", got)
	}
	if got := nmRead(t, filepath.Join(e.ws, "d\uFFFD")); got != "twin" {
		t.Fatalf("d+U+FFFD was touched: %q", got)
	}
}

func nmMap(t testing.TB, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v: %q", err, out)
	}
	return m
}

// TestI001_SelectorsMatchBytes: --exclude '*.key' hides secret\xff.key, and
// --protect conf\xff is enforced (and does not protect conf+U+FFFD), on the
// copy backend and, where it works, on overlay (which keeps the paths an
// exclude hides in its own configuration).
func TestI001_SelectorsMatchBytes(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	backends := []string{"copy"}
	if reason := overlayUsable(t, bin); reason == "" {
		backends = append(backends, "overlay")
	} else {
		t.Logf("overlay left out: %s", reason)
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) { checkSelectorBytes(t, bin, b) })
	}
}

func checkSelectorBytes(t *testing.T, bin, backend string) {
	e := newNameEnv(t, bin)
	nmWrite(t, filepath.Join(e.ws, "secret\xff.key"), "k")
	nmWrite(t, filepath.Join(e.ws, "conf\xff"), "c")
	nmWrite(t, filepath.Join(e.ws, "conf\uFFFD"), "t")
	nmWrite(t, filepath.Join(e.ws, "k\xffz"), "k")
	nmWrite(t, filepath.Join(e.ws, "k\uFFFDz"), "k")
	r := e.wtx(nil, "run", "--backend", backend, "--exclude", "*.key", "--exclude", "k\xff*", "--json", "--",
		"sh", "-c", `test ! -e "$1" && test ! -e "$2" && test -e "$3"`, "sh", "secret\xff.key", "k\xffz", "k\uFFFDz")
	if r.code != 0 {
		t.Fatalf("--exclude '*.key' --exclude $'k\\xff*' did not hide exactly secret\\xff.key and k\\xffz from the command (exit %d): %s", r.code, r.stderr)
	}
	r = e.wtx(nil, "run", "--backend", backend, "--protect", "conf\xff", "--json", "--", "sh", "-c", `printf x >> "$1"; printf y >> "$2"`, "sh", "conf\xff", "conf\uFFFD")
	nmOK(t, r, "run")
	tx := nmString(r.stdout, "tx")
	r = e.wtx(nil, "apply", tx, "--json")
	if r.code != 2 || !strings.Contains(r.stdout, "refusal.protected") {
		t.Fatalf("apply of a change to conf\\xff under --protect conf\\xff: exit %d %s", r.code, r.stdout)
	}
	m := nmMap(t, r.stdout)
	errm, _ := m["error"].(map[string]any)
	conflicts, _ := errm["conflicts"].([]any)
	if len(conflicts) != 1 || nmExact(conflicts[0].(map[string]any), "path") != "conf\xff" {
		t.Fatalf("protected conflicts %v, want only conf\\xff", conflicts)
	}
	if nmRead(t, filepath.Join(e.ws, "conf\xff")) != "c" || nmRead(t, filepath.Join(e.ws, "conf\uFFFD")) != "t" {
		t.Fatal("a refused apply wrote")
	}
	nmOK(t, e.wtx(nil, "apply", tx, "--approve"), "apply --approve")
	if nmRead(t, filepath.Join(e.ws, "conf\xff")) != "cx" || nmRead(t, filepath.Join(e.ws, "conf\uFFFD")) != "ty" {
		t.Fatal("approved apply did not land byte-exactly")
	}
}

// TestI001_BatchNeverSubstitutes: a batch line with invalid UTF-8 in a
// string is refused (usage.invalid) with nothing written; *_b64 fields carry
// any bytes; a literal U+FFFD is an ordinary character.
func TestI001_BatchNeverSubstitutes(t *testing.T) {
	t.Parallel()
	e := newNameEnv(t, wtxtest.Binary(t, false))
	nmWrite(t, filepath.Join(e.ws, "e\xfe"), "keep OLD\xff here")
	for _, line := range []string{
		"{\"command\":\"write\",\"path\":\"b\xff\",\"content\":\"x\"}",
		"{\"command\":\"write\",\"path\":\"b\",\"content\":\"x\xff\"}",
		`{"command":"write","path":"b\ud800","content":"x"}`,
	} {
		r := e.wtx([]byte(line+"\n"), "batch", "--atomic", "--backend", "copy", "--json")
		if r.code != 1 || !strings.Contains(r.stdout, `"usage.invalid"`) {
			t.Fatalf("batch %q: exit %d %s, want usage.invalid", line, r.code, r.stdout)
		}
	}
	if got := nmRawNames(t, e.ws); !slices.Equal(got, []string{"e\xfe"}) {
		t.Fatalf("refused batches wrote: %q", got)
	}
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	in := fmt.Sprintf(`{"command":"write","path_b64":%q,"content_b64":%q}
{"command":"write","path":"lit\uFFFD","content":"\uFFFD"}
{"command":"edit","path_b64":%q,"old_b64":%q,"new_b64":%q}
`, b64("b\xff"), b64("\x00\xff\xfe"), b64("e\xfe"), b64("OLD\xff"), b64("new\xfe"))
	r := e.wtx([]byte(in), "batch", "--atomic", "--backend", "copy", "--json")
	nmOK(t, r, "batch with *_b64")
	if got := nmRawNames(t, e.ws); !slices.Equal(got, []string{"b\xff", "e\xfe", "lit\uFFFD"}) {
		t.Fatalf("batch wrote %q", got)
	}
	for p, want := range map[string]string{"b\xff": "\x00\xff\xfe", "lit\uFFFD": "\uFFFD", "e\xfe": "keep new\xfe here"} {
		if got := nmRead(t, filepath.Join(e.ws, p)); got != want {
			t.Errorf("%q holds %q, want %q", p, got, want)
		}
	}
}

// TestI001_JSONAnswersCarryExactNames: every answer naming a non-UTF-8 path
// gives its exact bytes in path_b64, and the path field stays valid UTF-8.
func TestI001_JSONAnswersCarryExactNames(t *testing.T) {
	t.Parallel()
	e := newNameEnv(t, wtxtest.Binary(t, false))
	r := e.wtx(nil, "run", "--backend", "copy", "--json", "--", "sh", "-c", `printf a > "$1"; ln -s "$1" "$2"`, "sh", "n\xff", "l\xfe")
	nmOK(t, r, "run")
	tx, runOut := nmString(r.stdout, "tx"), r.stdout
	for _, args := range [][]string{{"status", tx}, {"diff", tx}, {"apply", tx}} {
		r := e.wtx(nil, append(args, "--json")...)
		nmOK(t, r, args[0])
		if !bytes.Equal([]byte(r.stdout), bytes.ToValidUTF8([]byte(r.stdout), nil)) {
			t.Fatalf("%s --json is not UTF-8: %q", args[0], r.stdout)
		}
		paths, err := nmChanged(r.stdout)
		if err != nil || !slices.Equal(paths, []string{"l\xfe", "n\xff"}) {
			t.Fatalf("%s --json names %q (%v)", args[0], paths, err)
		}
		if args[0] == "apply" {
			m := nmMap(t, r.stdout)
			rc, _ := m["receipt"].(map[string]any)
			if b, _ := rc["paths"].([]any); b == nil {
				t.Fatalf("receipt without paths: %v", rc)
			}
		}
	}
	if got, _ := os.Readlink(filepath.Join(e.ws, "l\xfe")); got != "n\xff" {
		t.Fatalf("symlink target %q", got)
	}
	r = e.wtx(nil, "log", "--json")
	nmOK(t, r, "log")
	ops, _ := nmMap(t, r.stdout)["ops"].([]any)
	if len(ops) != 1 {
		t.Fatalf("log: %v", ops)
	}
	op := ops[0].(map[string]any)
	if w, _ := op["written_b64"].([]any); len(w) != 2 {
		t.Fatalf("log names no written_b64: %v", op)
	}
	rc, _ := nmMap(t, runOut)["receipt"].(map[string]any)
	cmd, _ := rc["command_b64"].([]any)
	if len(cmd) != 6 || cmd[4] != base64.StdEncoding.EncodeToString([]byte("n\xff")) {
		t.Fatalf("run receipt's command_b64 %v does not carry the argv", rc["command_b64"])
	}
}

// TestI001_WorkspacePathNotUTF8: a workspace whose own path is not UTF-8
// stages, runs and applies on every backend that works here (overlay once
// refused it: its configuration no longer matched the workspace).
func TestI001_WorkspacePathNotUTF8(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	backends := []string{"copy"}
	if reason := overlayUsable(t, bin); reason == "" {
		backends = append(backends, "overlay")
	} else {
		t.Logf("overlay left out: %s", reason)
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			e := newNameEnv(t, bin)
			e.ws = filepath.Join(filepath.Dir(e.ws), "w\xff\n")
			if err := os.Mkdir(e.ws, 0o755); err != nil {
				t.Fatal(err)
			}
			r := e.wtx(nil, "run", "--backend", b, "--json", "--", "sh", "-c", `printf x > "$1"`, "sh", "n\xff")
			nmOK(t, r, "run")
			if m := nmMap(t, r.stdout); nmExact(m["receipt"].(map[string]any), "workspace") != e.ws {
				t.Errorf("the receipt names the workspace %q, want %q", nmExact(m["receipt"].(map[string]any), "workspace"), e.ws)
			}
			nmOK(t, e.wtx(nil, "apply", nmString(r.stdout, "tx")), "apply")
			if got := nmRead(t, filepath.Join(e.ws, "n\xff")); got != "x" {
				t.Fatalf("n\\xff holds %q", got)
			}
		})
	}
}
