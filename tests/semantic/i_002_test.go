package semantic

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// blobFile is where the state root keeps the object of content.
func blobFile(state string, content []byte) string {
	sum := sha256.Sum256(content)
	h := hex.EncodeToString(sum[:])
	return filepath.Join(state, "objects", h[:2], h[2:])
}

// damageBlob overwrites the object of content in place with bytes of the
// same length (a silent bit-rot stand-in) and returns the damaged bytes.
func damageBlob(t *testing.T, state string, content []byte) []byte {
	t.Helper()
	p := blobFile(state, content)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the object of %q is not stored: %v", content, err)
	}
	bad := bytes.ToUpper(content)
	if bytes.Equal(bad, content) {
		bad = bytes.Repeat([]byte("X"), len(content))
	}
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o444); err != nil {
		t.Fatal(err)
	}
	return bad
}

// errorCode is the error code of a --json answer ("" when there is none).
func errorCode(t *testing.T, r wtxResult) string {
	t.Helper()
	var out struct {
		Error *struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("no JSON answer (exit %d): %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	if out.Error == nil {
		return ""
	}
	return out.Error.Code
}

func readWS(t *testing.T, ws, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noTemps fails t if wtx left temporary files in the workspace.
func noTemps(t *testing.T, ws string) {
	t.Helper()
	filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".wtx-tmp-") {
			t.Errorf("temporary file left in the workspace: %s", p)
		}
		return nil
	})
}

func mustWtx(t *testing.T, ws, state string, args ...string) wtxResult {
	t.Helper()
	r := runWtx(t, ws, state, args...)
	if r.code != 0 {
		t.Fatalf("wtx %v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
	}
	return r
}

func jsonField(t *testing.T, r wtxResult, field string) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &m); err != nil {
		t.Fatalf("no JSON answer: %v\n%s", err, r.stdout)
	}
	s, _ := m[field].(string)
	if s == "" {
		t.Fatalf("no %q in %s", field, r.stdout)
	}
	return s
}

// TestI_002_UndoOfDamagedPreImage: the pre-image an undo restores is
// damaged in the store (same size, other bytes): the undo is io.corrupt,
// and the workspace keeps exactly what it had.
func TestI_002_UndoOfDamagedPreImage(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	before := []byte("the original content\n")
	if err := os.WriteFile(filepath.Join(ws, "f"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	tx := jsonField(t, mustWtx(t, ws, state, "--json", "run", "--backend", "copy", "--", "sh", "-c", "echo changed > f"), "tx")
	op := jsonField(t, mustWtx(t, ws, state, "--json", "apply", tx), "op_id")
	damageBlob(t, state, before)

	r := runWtx(t, ws, state, "--json", "undo", op)
	if code := errorCode(t, r); code != "io.corrupt" {
		t.Fatalf("undo with a damaged pre-image: want io.corrupt, got %q (exit %d): %s", code, r.code, r.stdout)
	}
	if got := readWS(t, ws, "f"); got != "changed\n" {
		t.Fatalf("a refused undo changed the workspace: f = %q", got)
	}
	noTemps(t, ws)
	// Storing the content again heals the object; the undo then lands.
	if err := os.WriteFile(filepath.Join(ws, "g"), before, 0o644); err != nil {
		t.Fatal(err)
	}
	tx2 := jsonField(t, mustWtx(t, ws, state, "--json", "run", "--backend", "copy", "--", "rm", "g"), "tx")
	mustWtx(t, ws, state, "apply", tx2)
	mustWtx(t, ws, state, "undo", op)
	if got := readWS(t, ws, "f"); got != string(before) {
		t.Fatalf("undo after the object healed: f = %q, want %q", got, before)
	}
}

// TestI_002_ApplyHealsDamagedObject: the staged content is already in the
// store (an earlier op) but damaged; the apply stores it again, which
// replaces the damaged object, and what lands is the staged content.
func TestI_002_ApplyHealsDamagedObject(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	content := []byte("content staged twice\n")
	if err := os.WriteFile(filepath.Join(ws, "f"), content, 0o644); err != nil {
		t.Fatal(err)
	}
	tx := jsonField(t, mustWtx(t, ws, state, "--json", "run", "--backend", "copy", "--", "rm", "f"), "tx")
	mustWtx(t, ws, state, "apply", tx) // f's content is now a pre-image in the store
	damageBlob(t, state, content)
	tx = jsonField(t, mustWtx(t, ws, state, "--json", "run", "--backend", "copy", "--", "sh", "-c", "printf 'content staged twice\\n' > f"), "tx")
	mustWtx(t, ws, state, "apply", tx)
	if got := readWS(t, ws, "f"); got != string(content) {
		t.Fatalf("apply over a damaged object of its content: f = %q, want %q", got, content)
	}
	if got, err := os.ReadFile(blobFile(state, content)); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("the damaged object was not replaced: %q, %v", got, err)
	}
}

// TestI_002_DropOpOfDamagedContent: drop-op restores a staged file from a
// damaged object: io.corrupt, and the view keeps what it had.
func TestI_002_DropOpOfDamagedContent(t *testing.T) {
	t.Parallel()
	ws, state := t.TempDir(), filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tx := jsonField(t, mustWtx(t, ws, state, "--json", "begin", "--backend", "copy"), "tx")
	first := []byte("first write of f\n")
	for _, c := range []string{string(first), "second write\n"} {
		cmd := []string{"write", "f", "--tx", tx}
		r := runWtxStdin(t, ws, state, c, cmd...)
		if r.code != 0 {
			t.Fatalf("write: %v", r)
		}
	}
	damageBlob(t, state, first)
	r := runWtx(t, ws, state, "--json", "drop-op", tx, "2")
	if code := errorCode(t, r); code != "io.corrupt" {
		t.Fatalf("drop-op back to a damaged object: want io.corrupt, got %q (exit %d): %s", code, r.code, r.stdout)
	}
	r = mustWtx(t, ws, state, "read", "f", "--tx", tx)
	if r.stdout != "second write\n" {
		t.Fatalf("a failed drop-op changed the staged file: %q", r.stdout)
	}
}

// runWtxStdin is runWtx with stdin.
func runWtxStdin(t *testing.T, ws, state, stdin string, args ...string) wtxResult {
	t.Helper()
	cmd := exec.Command(wtxtest.Binary(t, false), append([]string{"-C", ws}, args...)...)
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}
