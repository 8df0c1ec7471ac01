package semantic

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// fsckAnswer is the JSON answer of wtx fsck.
type fsckAnswer struct {
	Status   string `json:"status"`
	Findings []struct {
		Kind     string `json:"kind"`
		Code     string `json:"code"`
		Path     string `json:"path"`
		Object   string `json:"object"`
		Detail   string `json:"detail"`
		Repair   string `json:"repair"`
		Repaired bool   `json:"repaired"`
	} `json:"findings"`
	SetAside string `json:"set_aside"`
}

// fsck runs wtx fsck --json with extra args and checks its exit status.
func (e *stateEnv) fsck(exit int, args ...string) fsckAnswer {
	e.t.Helper()
	r := e.run(append([]string{"--json", "fsck"}, args...)...)
	var a fsckAnswer
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		e.t.Fatalf("fsck: not one JSON object: %v\n%v", err, r)
	}
	if r.code != exit {
		e.t.Fatalf("fsck %v: exit %d, want %d\n%s", args, r.code, exit, r.stdout)
	}
	return a
}

// wantFinding fails unless a has an unrepaired finding of kind with code
// whose path or detail holds what.
func wantFinding(t *testing.T, a fsckAnswer, kind, code, what string) {
	t.Helper()
	for _, f := range a.Findings {
		if f.Kind == kind && f.Code == code && (strings.Contains(f.Path, what) || strings.Contains(f.Detail, what) || strings.Contains(f.Object, what)) {
			if f.Repair == "" {
				t.Errorf("finding %s has no repair", kind)
			}
			return
		}
	}
	t.Fatalf("no %s (%s) finding about %q in %+v", kind, code, what, a.Findings)
}

// applied stages and applies a change that replaces a.txt, and returns the
// op id.
func (e *stateEnv) applied() string {
	e.t.Helper()
	e.stage("echo new > a.txt; echo b > b.txt")
	r := e.must("--json", "apply")
	var out struct {
		Op string `json:"op_id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Op == "" {
		e.t.Fatalf("apply --json: no op id in %s", r.stdout)
	}
	return out.Op
}

// TestI005_DatabaseMissing checks I-005 for the database: a deleted wtx.db
// in a state root that was used is reported as io.state-missing with what
// was lost and a repair, by every command, and never re-created; fsck
// reports it; fsck --reinit sets the rest aside and starts anew.
func TestI005_DatabaseMissing(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.applied()
	for _, n := range []string{"wtx.db", "wtx.db-wal", "wtx.db-shm"} {
		os.Remove(filepath.Join(e.st, n))
	}
	for _, args := range [][]string{{"--json", "list"}, {"--json", "begin"}, {"--json", "log"}} {
		got := wantCode(t, e.run(args...), 1, "io.state-missing")
		if !strings.Contains(got.Error.Message, "stage director") || !strings.Contains(got.Error.Message, "stored object") {
			t.Errorf("message does not say what was lost: %s", got.Error.Message)
		}
		reinit := false
		for _, r := range got.Error.Repairs {
			reinit = reinit || r.Command == "wtx fsck --reinit"
		}
		if !reinit {
			t.Errorf("no repair command 'wtx fsck --reinit' in %+v", got.Error.Repairs)
		}
	}
	if _, err := os.Lstat(filepath.Join(e.st, "wtx.db")); err == nil {
		t.Fatalf("wtx.db was re-created")
	}
	wantFinding(t, e.fsck(1), "database-missing", "io.state-missing", "wtx.db")
	a := e.fsck(0, "--reinit")
	if a.SetAside == "" {
		t.Fatalf("--reinit set nothing aside: %+v", a)
	}
	if ents, err := os.ReadDir(filepath.Join(a.SetAside, "stages")); err != nil || len(ents) != 1 {
		t.Errorf("the stage directory was not set aside into %s: %v %v", a.SetAside, ents, err)
	}
	e.must("list")
	e.fsck(0)
}

// TestI005_DatabaseEmpty checks I-005: a database truncated to zero length
// is io.corrupt, not an empty history.
func TestI005_DatabaseEmpty(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.applied()
	if err := os.Truncate(filepath.Join(e.st, "wtx.db"), 0); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(e.st, "wtx.db-wal"))
	wantCode(t, e.run("--json", "log"), 1, "io.corrupt")
	if fi, err := os.Stat(filepath.Join(e.st, "wtx.db")); err != nil || fi.Size() != 0 {
		t.Fatalf("the emptied database was written to: %v %v", fi, err)
	}
	wantFinding(t, e.fsck(1), "database-corrupt", "io.corrupt", "zero length")
}

// TestI005_DatabaseDamaged checks I-005: pages of the database overwritten
// with garbage are found by fsck's integrity check (or refused when the
// file is opened), reported as io.corrupt.
func TestI005_DatabaseDamaged(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.applied()
	p := filepath.Join(e.st, "wtx.db")
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	// Keep the first page (so the file is still an SQLite database of
	// wtx) and damage the b-tree header of every later page.
	if len(data) < 3*4096 {
		t.Fatalf("database of %d bytes: expected several pages", len(data))
	}
	for off := 4096; off+16 < len(data); off += 4096 {
		for i := range 16 {
			data[off+i] = byte(i*7 + 3)
		}
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	wantFinding(t, e.fsck(1), "database-corrupt", "io.corrupt", "wtx.db")
}

// TestI005_BlobDamaged checks I-005 for objects: a damaged pre-image and a
// missing post-image of an op are found by fsck, each naming the op that
// needs it, with a code and a repair; nothing is re-created.
func TestI005_BlobDamaged(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	op := e.applied()
	objs, err := filepath.Glob(filepath.Join(e.st, "objects", "*", "*"))
	if err != nil || len(objs) < 3 {
		t.Fatalf("objects: %v %v", objs, err)
	}
	e.fsck(0)
	// The pre-image of a.txt ("a\n") and the post-image of b.txt ("b\n").
	pre, post := objectOf(t, e.st, "a\n"), objectOf(t, e.st, "b\n")
	if err := os.Chmod(pre, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pre, []byte("X\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(pre, 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(post); err != nil {
		t.Fatal(err)
	}
	a := e.fsck(1)
	wantFinding(t, a, "blob-corrupt", "io.corrupt", op)
	wantFinding(t, a, "blob-missing", "io.state-missing", op)
	if _, err := os.Lstat(post); err == nil {
		t.Errorf("fsck re-created the missing object")
	}
}

// objectOf returns the object file holding content.
func objectOf(t *testing.T, st, content string) string {
	t.Helper()
	objs, _ := filepath.Glob(filepath.Join(st, "objects", "*", "*"))
	for _, o := range objs {
		if b, err := os.ReadFile(o); err == nil && string(b) == content {
			return o
		}
	}
	t.Fatalf("no object holds %q", content)
	return ""
}

// TestI005_StateRootModes checks that fsck reports what is not private
// (I-004) and --repair makes it private.
func TestI005_StateRootModes(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.applied()
	obj := objectOf(t, e.st, "b\n")
	if err := os.Chmod(obj, 0o644); err != nil {
		t.Fatal(err)
	}
	wantFinding(t, e.fsck(1), "not-private", "precondition.state-unsafe", obj)
	e.fsck(0, "--repair")
	if fi, err := os.Stat(obj); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("after --repair: %v %v; want 0400", fi.Mode(), err)
	}
	e.fsck(0)
	if os.Geteuid() != 0 {
		return // giving an entry to another user needs root
	}
	if err := os.Chown(obj, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	wantFinding(t, e.fsck(1), "state-unsafe", "precondition.state-unsafe", obj)
}

// TestI005_StageOrphans checks fsck's stage checks both ways: a stage
// directory no record names, and an open stage whose directory is gone.
func TestI005_StageOrphans(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	tx := e.stage("echo new > a.txt")
	dir := filepath.Join(e.st, "stages", tx)
	moved := filepath.Join(e.st, "stages", "tx-20200101T000000Z-0000dead")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	a := e.fsck(1)
	wantFinding(t, a, "stage-dir-missing", "io.state-missing", tx)
	wantFinding(t, a, "stage-orphan", "io.state-missing", "0000dead")
}

// TestI005_JournalDamagedAfterTouch checks I-005 for journals: an apply
// killed after it touched the workspace, whose journal is then damaged, is
// not "discarded": recover reports the damage and the temporary files, keeps
// the journal, and every apply is refused as refusal.interrupted-apply until
// a person puts the workspace right and sets the journal aside.
func TestI005_JournalDamagedAfterTouch(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.stage("echo new > a.txt")
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fp.env = []string{"WTX_FAILPOINT=apply:exchanged"}
	if r := fp.run("apply"); r.code != -1 && r.code != 137 {
		t.Fatalf("apply was not killed at the failpoint: %v", r)
	}
	temps, _ := filepath.Glob(filepath.Join(e.ws, ".wtx-tmp-*"))
	if len(temps) == 0 {
		t.Fatal("the killed apply left no temporary file")
	}
	journals, _ := filepath.Glob(filepath.Join(e.st, "workspaces", "*", "journal", "*", "journal"))
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	op := filepath.Base(filepath.Dir(journals[0]))
	if err := os.WriteFile(journals[0], []byte("WTXJ\x01damaged"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := e.run("--json", "recover")
	got := wantCode(t, r, 2, "refusal.interrupted-apply")
	if !strings.Contains(got.Error.Message, ".wtx-tmp-") || strings.Contains(r.stdout, "discarded") {
		t.Errorf("recover does not name the temporary files, or says discarded: %s", r.stdout)
	}
	setAside := false
	for _, rp := range got.Error.Repairs {
		setAside = setAside || rp.Command == "wtx recover --set-aside "+op
	}
	if !setAside {
		t.Errorf("no repair 'wtx recover --set-aside %s' in %+v", op, got.Error.Repairs)
	}
	if _, err := os.Stat(journals[0]); err != nil {
		t.Fatalf("the damaged journal is gone: %v", err)
	}
	wantCode(t, e.run("--json", "apply"), 2, "refusal.interrupted-apply")
	wantFinding(t, e.fsck(1), "journal-corrupt", "io.corrupt", ".wtx-tmp-")
	// A person puts the workspace right, then sets the journal aside.
	for _, tmp := range temps {
		os.Remove(tmp)
	}
	if err := os.WriteFile(filepath.Join(e.ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("recover", "--set-aside", op)
	if _, err := os.Stat(journals[0]); err == nil {
		t.Fatal("the journal is still in place after --set-aside")
	}
	kept, _ := filepath.Glob(filepath.Join(e.st, "lost+found", "journal-*"+op+"*", "journal"))
	if len(kept) != 1 {
		t.Errorf("the journal was not kept in lost+found: %v", kept)
	}
	e.must("apply")
}

// TestI005_JournalDamagedUntouched checks that a damaged journal of an apply
// that left no trace in the workspace is set aside (kept, reported), and
// the workspace goes on.
func TestI005_JournalDamagedUntouched(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.stage("echo new > a.txt")
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fp.env = []string{"WTX_FAILPOINT=apply:journaled"}
	fp.run("apply")
	journals, _ := filepath.Glob(filepath.Join(e.st, "workspaces", "*", "journal", "*", "journal"))
	if len(journals) != 1 {
		t.Fatalf("journals: %v", journals)
	}
	if err := os.Truncate(journals[0], 0); err != nil {
		t.Fatal(err)
	}
	r := e.must("recover")
	if !strings.Contains(r.stdout, "set aside") {
		t.Errorf("recover does not say it set the journal aside: %v", r)
	}
	if kept, _ := filepath.Glob(filepath.Join(e.st, "lost+found", "journal-*", "journal")); len(kept) != 1 {
		t.Errorf("the journal was not kept in lost+found: %v", kept)
	}
	e.must("apply")
}

// TestI005_RecoveryStepFails checks that a recovery step that fails (an
// injected EIO on the chmod that undoes an apply's mode change) is
// reported, the journal kept, and the next recovery finishes the job: a
// failed chmod is never counted as undone.
func TestI005_RecoveryStepFails(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	e.stage("chmod 755 a.txt")
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fp.env = []string{"WTX_FAILPOINT=apply:step-done"}
	fp.run("apply")
	if fi, _ := os.Stat(filepath.Join(e.ws, "a.txt")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("the killed apply did not chmod a.txt: %v", fi.Mode())
	}
	fp.env = []string{"WTX_FAULT_OP=chmod", "WTX_FAULT=1:EIO"}
	r := fp.run("--json", "recover")
	wantCode(t, r, 1, "io.error")
	if fi, _ := os.Stat(filepath.Join(e.ws, "a.txt")); fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %v after a failed chmod", fi.Mode())
	}
	journals, _ := filepath.Glob(filepath.Join(e.st, "workspaces", "*", "journal", "*", "journal"))
	if len(journals) != 1 {
		t.Fatalf("the journal was not kept after a failed step: %v", journals)
	}
	e.must("recover")
	if fi, _ := os.Stat(filepath.Join(e.ws, "a.txt")); fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v after recovery, want 0644", fi.Mode())
	}
}
