package semantic

import (
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the state database, damaged by hand below

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// T-006: fsck checks receipts, flow records, the receipt key and every
// blob an open stage's ops need, and names each problem with its repair.

// fsckFinding is one finding of 'wtx fsck --json', as a client reads it.
type fsckFinding struct {
	Kind    string `json:"kind"`
	Code    string `json:"code"`
	Object  string `json:"object"`
	Detail  string `json:"detail"`
	Repair  string `json:"repair"`
	Repairs []struct {
		Action  string `json:"action"`
		Command string `json:"command"`
	} `json:"repairs"`
}

// fsckFindings runs 'wtx fsck --json' (with the environment of e) and
// returns its findings; exit 0 must come with none.
func fsckFindings(t *testing.T, e *stateEnv, args ...string) []fsckFinding {
	t.Helper()
	r := e.run(append([]string{"--json", "fsck"}, args...)...)
	var out struct {
		Findings []fsckFinding `json:"findings"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("fsck --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	if (r.code == 0) != (len(out.Findings) == 0) && !strings.Contains(r.stdout, `"repaired":true`) {
		t.Fatalf("fsck: exit %d with %d findings\n%s", r.code, len(out.Findings), r.stdout)
	}
	return out.Findings
}

// wantFinding checks that findings hold one of kind whose detail says
// says, with a repair; it returns it.
func wantFsck(t *testing.T, findings []fsckFinding, kind, says string) fsckFinding {
	t.Helper()
	for _, f := range findings {
		if f.Kind == kind && strings.Contains(f.Detail, says) {
			if f.Repair == "" {
				t.Errorf("finding %s names no repair: %+v", kind, f)
			}
			return f
		}
	}
	t.Errorf("fsck does not find %s (%q); it found %+v", kind, says, findings)
	return fsckFinding{}
}

// stateDB opens the state database of e to damage it by hand.
func stateDB(t *testing.T, e *stateEnv) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(e.st, "wtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	res, err := db.Exec(q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%s: %d rows changed, want 1", q, n)
	}
}

// failpointEnv is e with the failpoint build and WTX_DISABLE=sw.
func failpointEnv(t *testing.T, e *stateEnv, sw string) *stateEnv {
	fp := *e
	fp.bin = wtxtest.Binary(t, true)
	fp.env = []string{"WTX_DISABLE=" + sw}
	return &fp
}

// TestT_006_FsckReceipts: a receipt changed after it was signed, one whose
// signature was changed, one whose record says another kind, and one
// replaced by an empty document are each found, with the restore repair.
// Negative control: WTX_DISABLE=fsck-receipts finds nothing.
func TestT_006_FsckReceipts(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	appliedOp(e, "a.txt")
	appliedOp(e, "b.txt")
	if f := fsckFindings(t, e); len(f) != 0 {
		t.Fatalf("fsck finds damage in a sound state root: %+v", f)
	}
	db := stateDB(t, e)
	rows, err := db.Query("SELECT id, body FROM receipts ORDER BY created_at, id")
	if err != nil {
		t.Fatal(err)
	}
	var ids, bodies []string
	for rows.Next() {
		var id, body string
		if err := rows.Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		ids, bodies = append(ids, id), append(bodies, body)
	}
	rows.Close()
	if len(ids) < 4 {
		t.Fatalf("%d receipts, want 4 (two runs, two applies)", len(ids))
	}
	env := genericDoc(t, []byte(bodies[0]))
	payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
	st := genericDoc(t, payload)
	st["predicate"].(map[string]any)["approved"] = true
	env["payload"] = base64.StdEncoding.EncodeToString(encodeDoc(t, st))
	mustExec(t, db, "UPDATE receipts SET body = ? WHERE id = ?", string(encodeDoc(t, env)), ids[0])
	env = genericDoc(t, []byte(bodies[1]))
	sig := env["signatures"].([]any)[0].(map[string]any)
	raw, _ := base64.StdEncoding.DecodeString(sig["sig"].(string))
	raw[0] ^= 1
	sig["sig"] = base64.StdEncoding.EncodeToString(raw)
	mustExec(t, db, "UPDATE receipts SET body = ? WHERE id = ?", string(encodeDoc(t, env)), ids[1])
	mustExec(t, db, "UPDATE receipts SET kind = 'undo' WHERE id = ?", ids[2])
	mustExec(t, db, "UPDATE receipts SET body = '{}' WHERE id = ?", ids[3])

	found := fsckFindings(t, e)
	wantFsck(t, found, "receipt-corrupt", ids[0]+" (")
	if f := wantFsck(t, found, "receipt-signature", ids[1]); f.Code != "precondition.receipt-invalid" {
		t.Errorf("a receipt whose signature fails is %s, want precondition.receipt-invalid", f.Code)
	}
	wantFsck(t, found, "receipt-corrupt", "its record names id "+ids[2])
	wantFsck(t, found, "receipt-corrupt", ids[3]+" (")
	if len(found) != 4 {
		t.Errorf("fsck found %d problems, want 4: %+v", len(found), found)
	}
	if f := fsckFindings(t, failpointEnv(t, e, "fsck-receipts")); len(f) != 0 {
		t.Errorf("with WTX_DISABLE=fsck-receipts fsck still finds %+v", f)
	}
}

// TestT_006_FsckFlows: a flow run whose stored definition was changed,
// and one whose step names an op the history lacks, are found (the first
// also makes 'flow list' fail: that is what fsck must say before anyone
// trips over it). Negative control: WTX_DISABLE=fsck-flows.
func TestT_006_FsckFlows(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	flow := writeTemp(t, []byte(`version = 1

[[steps]]
name = "make"
kind = "run"
command = ["sh", "-c", "echo $WTX_FLOW_RUN > run.txt"]
`))
	e.must("flow", "run", flow, "--name", "f1")
	e.must("flow", "run", flow, "--name", "f2")
	if f := fsckFindings(t, e); len(f) != 0 {
		t.Fatalf("fsck finds damage in a sound state root: %+v", f)
	}
	db := stateDB(t, e)
	mustExec(t, db, "UPDATE flow_runs SET definition = CAST(? AS BLOB) WHERE name = 'f1'", "version = 1\n\n[[steps]]\nname = \"make\"\nkind = \"run\"\ncommand = [\"sh\", \"-c\", \"rm -rf .\"]\n")
	var run2 string
	if err := db.QueryRow("SELECT id FROM flow_runs WHERE name = 'f2'").Scan(&run2); err != nil {
		t.Fatal(err)
	}
	// A step's op the history lacks (foreign keys are not enforced on
	// this connection: a damaged record is what is made here).
	mustExec(t, db, "UPDATE flow_steps SET op_id = 'op-gone' WHERE run_id = ? AND op_id IS NOT NULL", run2)
	found := fsckFindings(t, e)
	wantFsck(t, found, "flow-corrupt", "does not match its digest")
	wantFsck(t, found, "flow-corrupt", "names op op-gone")
	if f := fsckFindings(t, failpointEnv(t, e, "fsck-flows")); len(f) != 0 {
		t.Errorf("with WTX_DISABLE=fsck-flows fsck still finds %+v", f)
	}
}

// TestT_006_FsckOpBlobs: the content an open stage's per-file write
// replaced (what drop-op and rebase put back) is needed: with its object
// gone, fsck names it and the stage op that needs it. Negative control:
// WTX_DISABLE=fsck-op-blobs.
func TestT_006_FsckOpBlobs(t *testing.T) {
	t.Parallel()
	e := newStateEnv(t)
	var begun struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(e.must("--json", "begin", "--backend", "copy").stdout), &begun); err != nil {
		t.Fatal(err)
	}
	first := fmt.Sprintf("first content of %s\n", t.Name())
	for _, content := range []string{first, "second\n"} {
		r := e.runIn(e.ws, []string{"sh", "-c", `printf %s "$0" | "$@"`, content}, "write", "x.txt", "--tx", begun.Tx)
		if r.code != 0 {
			t.Fatalf("write: %v", r)
		}
	}
	e.must("edit", "x.txt", "--old", "second", "--new", "third", "--tx", begun.Tx)
	e.must("rm", "a.txt", "--tx", begun.Tx)
	if f := fsckFindings(t, e); len(f) != 0 {
		t.Fatalf("fsck finds damage in a sound state root: %+v", f)
	}
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(first)))
	obj := filepath.Join(e.st, "objects", sum[:2], sum[2:])
	if err := os.Remove(obj); err != nil {
		t.Fatalf("the first content's object: %v", err)
	}
	found := fsckFindings(t, e)
	f := wantFsck(t, found, "blob-missing", "stage "+begun.Tx+" op")
	if f.Code != "io.state-missing" || !strings.Contains(f.Repair, "drop the stage") {
		t.Errorf("the missing object: %+v", f)
	}
	if f := fsckFindings(t, failpointEnv(t, e, "fsck-op-blobs")); len(f) != 0 {
		t.Errorf("with WTX_DISABLE=fsck-op-blobs fsck still finds %+v", f)
	}
}

// TestT_006_FsckKey: a missing, damaged, unsafe key and a damaged keyring
// entry are each found with their repairs ('wtx receipt key new' among
// them); fsck --repair makes a key that is only too open private again.
// Negative control: WTX_DISABLE=fsck-key.
func TestT_006_FsckKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, kind, code string
		damage           func(t *testing.T, st string)
	}{
		{"missing", "key-missing", "io.state-missing", func(t *testing.T, st string) {
			if err := os.Remove(keyPath(st)); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", "key-corrupt", "io.corrupt", func(t *testing.T, st string) { keyDamages[0].damage(t, keyPath(st)) }},
		{"another key", "key-corrupt", "io.corrupt", func(t *testing.T, st string) { keyDamages[3].damage(t, keyPath(st)) }},
		{"a symlink", "key-unsafe", "precondition.state-unsafe", func(t *testing.T, st string) { keyDamages[7].damage(t, keyPath(st)) }},
		{"readable by others", "key-unsafe", "precondition.state-unsafe", func(t *testing.T, st string) { keyDamages[6].damage(t, keyPath(st)) }},
		{"a keyring entry", "key-corrupt", "io.corrupt", func(t *testing.T, st string) {
			ents, err := os.ReadDir(filepath.Join(st, "keys", "public"))
			if err != nil || len(ents) != 1 {
				t.Fatalf("keyring: %v %v", ents, err)
			}
			if err := os.WriteFile(filepath.Join(st, "keys", "public", ents[0].Name()), []byte("not a key\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newStateEnv(t)
			e.stage("echo x > x.txt")
			c.damage(t, e.st)
			found := fsckFindings(t, e)
			var f *fsckFinding
			others := 0
			for i := range found {
				switch {
				case found[i].Kind == c.kind:
					f = &found[i]
				case found[i].Kind != "key-not-kept" || c.name != "a keyring entry":
					others++
				}
			}
			if f == nil || f.Code != c.code || others > 0 {
				t.Fatalf("fsck with the key %s: %+v, want one %s (%s)", c.name, found, c.kind, c.code)
			}
			if c.name != "a keyring entry" {
				ok := false
				for _, r := range f.Repairs {
					ok = ok || r.Command == "wtx receipt key new"
				}
				if !ok {
					t.Errorf("fsck with the key %s names no 'wtx receipt key new': %+v", c.name, f.Repairs)
				}
			}
			if c.name == "readable by others" {
				if f := fsckFindings(t, e, "--repair"); len(f) != 1 {
					t.Errorf("fsck --repair: %+v", f)
				}
				if f := fsckFindings(t, e); len(f) != 0 {
					t.Errorf("after fsck --repair: %+v", f)
				}
				e.stage("echo y > y.txt")
			}
			if c.name == "missing" {
				if f := fsckFindings(t, failpointEnv(t, e, "fsck-key")); len(f) != 0 {
					t.Errorf("with WTX_DISABLE=fsck-key fsck still finds %+v", f)
				}
			}
		})
	}
}
