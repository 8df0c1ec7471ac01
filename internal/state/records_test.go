package state

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 8, 15, 0, 0, time.UTC)

// seed records a workspace and returns its id.
func seed(t *testing.T, db *DB, id string) string {
	t.Helper()
	if _, err := db.EnsureWorkspace(context.Background(), id, "/projects/"+id, t0); err != nil {
		t.Fatal(err)
	}
	return id
}

func stageFor(ws, id, name string, at time.Time) Stage {
	return Stage{
		ID: id, WorkspaceID: ws, Name: name, Backend: "copy", State: StageOpen,
		Config: json.RawMessage(`{"excludes":["node_modules"],"shares":[]}`), CreatedAt: at,
	}
}

func TestEnsureWorkspace(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 600, time.FixedZone("x", 3600))
	w, err := db.EnsureWorkspace(ctx, "ws-1", "/projects/app", now)
	if err != nil {
		t.Fatal(err)
	}
	if w.ID != "ws-1" || w.Path != "/projects/app" || !w.CreatedAt.Equal(now) || w.CreatedAt.Location() != time.UTC {
		t.Fatalf("EnsureWorkspace = %+v", w)
	}
	// The same path keeps its first id and time.
	again, err := db.EnsureWorkspace(ctx, "ws-2", "/projects/app", now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if again != w {
		t.Fatalf("second EnsureWorkspace = %+v, want %+v", again, w)
	}
	// An id already used for another path is refused.
	if _, err := db.EnsureWorkspace(ctx, "ws-1", "/elsewhere", now); !errors.Is(err, ErrExists) {
		t.Fatalf("id reuse error = %v, want ErrExists", err)
	}
}

func TestStageRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	tests := []struct {
		name string
		in   Stage
	}{
		{"full", Stage{ID: "tx-a", WorkspaceID: ws, Name: "feature", Backend: "overlay", State: StageOpen,
			BaseDigest: "sha256:00", Config: json.RawMessage(`{"protects":["*.lock"],"reasons":{"clone":"no reflink"}}`),
			CreatedAt: t0, UpdatedAt: t0.Add(time.Second)}},
		{"minimal", Stage{ID: "tx-b", WorkspaceID: ws, Backend: "copy", State: StageOpen, CreatedAt: t0.Add(time.Nanosecond)}},
		{"settled", Stage{ID: "tx-c", WorkspaceID: ws, Name: "old", Backend: "clone", State: StageDropped, CreatedAt: t0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := db.InsertStage(ctx, tt.in); err != nil {
				t.Fatal(err)
			}
			got, err := db.GetStage(ctx, tt.in.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.in
			if want.UpdatedAt.IsZero() {
				want.UpdatedAt = want.CreatedAt
			}
			assertStage(t, got, want)
		})
	}

	s, err := db.GetStage(ctx, "tx-a")
	if err != nil {
		t.Fatal(err)
	}
	s.Name, s.State, s.BaseDigest = "", StageApplied, "sha256:11"
	s.Config = json.RawMessage(`{"excludes":[]}`)
	s.UpdatedAt = t0.Add(time.Minute)
	s.Backend = "ignored" // not an updatable field
	if err := db.UpdateStage(ctx, s); err != nil {
		t.Fatal(err)
	}
	got, err := db.GetStage(ctx, "tx-a")
	if err != nil {
		t.Fatal(err)
	}
	s.Backend = "overlay"
	assertStage(t, got, s)
}

func assertStage(t *testing.T, got, want Stage) {
	t.Helper()
	if got.ID != want.ID || got.WorkspaceID != want.WorkspaceID || got.Name != want.Name ||
		got.Backend != want.Backend || got.State != want.State || got.BaseDigest != want.BaseDigest ||
		string(got.Config) != string(want.Config) || !got.CreatedAt.Equal(want.CreatedAt) ||
		!got.UpdatedAt.Equal(want.UpdatedAt) {
		t.Fatalf("stage = %+v\nwant    %+v", got, want)
	}
}

func TestStageErrors(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	if err := db.InsertStage(ctx, stageFor(ws, "tx-1", "", t0)); err != nil {
		t.Fatal(err)
	}
	bad := func(mut func(*Stage)) Stage {
		s := stageFor(ws, "tx-new", "", t0)
		mut(&s)
		return s
	}
	inserts := []struct {
		name string
		s    Stage
		is   error
	}{
		{"duplicate id", stageFor(ws, "tx-1", "", t0), ErrExists},
		{"unknown workspace", bad(func(s *Stage) { s.WorkspaceID = "nope" }), nil},
		{"unknown state", bad(func(s *Stage) { s.State = "half" }), nil},
		{"empty state", bad(func(s *Stage) { s.State = "" }), nil},
		{"no id", bad(func(s *Stage) { s.ID = "" }), nil},
		{"no created time", bad(func(s *Stage) { s.CreatedAt = time.Time{} }), nil},
		{"invalid config", bad(func(s *Stage) { s.Config = json.RawMessage(`{"a":`) }), nil},
	}
	for _, tt := range inserts {
		t.Run(tt.name, func(t *testing.T) {
			err := db.InsertStage(ctx, tt.s)
			if err == nil {
				t.Fatal("InsertStage succeeded")
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("error = %v, want %v", err, tt.is)
			}
			if _, err := db.GetStage(ctx, "tx-new"); !errors.Is(err, ErrNotFound) {
				t.Fatalf("refused stage was recorded: %v", err)
			}
		})
	}

	if _, err := db.GetStage(ctx, "tx-missing"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetStage missing error = %v, want ErrNotFound", err)
	}
	s := stageFor(ws, "tx-missing", "", t0)
	s.UpdatedAt = t0
	if err := db.UpdateStage(ctx, s); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateStage missing error = %v, want ErrNotFound", err)
	}
	s.ID = "tx-1"
	s.State = "bogus"
	if err := db.UpdateStage(ctx, s); err == nil {
		t.Error("UpdateStage accepted an unknown state")
	}
}

func TestStageNameUniqueAmongOpen(t *testing.T) {
	ctx := context.Background()
	steps := []struct {
		name  string
		ws    string
		state string
		want  error
	}{
		{"first open", "ws-a", StageOpen, nil},
		{"second open, same workspace", "ws-a", StageOpen, ErrNameTaken},
		{"open in another workspace", "ws-b", StageOpen, nil},
		{"dropped with the name", "ws-a", StageDropped, nil},
		{"applied with the name", "ws-a", StageApplied, nil},
	}
	db := openTest(t)
	seed(t, db, "ws-a")
	seed(t, db, "ws-b")
	for i, st := range steps {
		s := stageFor(st.ws, fmt.Sprintf("tx-%d", i), "fix", t0.Add(time.Duration(i)*time.Second))
		s.State = st.state
		err := db.InsertStage(ctx, s)
		if !errors.Is(err, st.want) || (st.want == nil && err != nil) {
			t.Fatalf("%s: InsertStage error = %v, want %v", st.name, err, st.want)
		}
	}

	// Dropping the open stage frees its name.
	first, err := db.GetStage(ctx, "tx-0")
	if err != nil {
		t.Fatal(err)
	}
	first.State, first.UpdatedAt = StageDropped, t0.Add(time.Hour)
	if err := db.UpdateStage(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertStage(ctx, stageFor("ws-a", "tx-reuse", "fix", t0.Add(2*time.Hour))); err != nil {
		t.Fatalf("name of a dropped stage not reusable: %v", err)
	}
	// Re-opening the dropped stage now collides with the new holder.
	first.State, first.UpdatedAt = StageOpen, t0.Add(3*time.Hour)
	if err := db.UpdateStage(ctx, first); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("re-open error = %v, want ErrNameTaken", err)
	}
	// Renaming an open stage onto a taken name collides too.
	if err := db.InsertStage(ctx, stageFor("ws-a", "tx-other", "other", t0.Add(4*time.Hour))); err != nil {
		t.Fatal(err)
	}
	other, err := db.GetStage(ctx, "tx-other")
	if err != nil {
		t.Fatal(err)
	}
	other.Name, other.UpdatedAt = "fix", t0.Add(5*time.Hour)
	if err := db.UpdateStage(ctx, other); !errors.Is(err, ErrNameTaken) {
		t.Fatalf("rename error = %v, want ErrNameTaken", err)
	}
	// Nameless open stages never collide.
	for i := range 3 {
		if err := db.InsertStage(ctx, stageFor("ws-a", fmt.Sprintf("tx-anon-%d", i), "", t0)); err != nil {
			t.Fatalf("nameless stage %d: %v", i, err)
		}
	}
}

func TestListsAreOrdered(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	other := seed(t, db, "other")
	// Fractions chosen so that text order of RFC3339Nano (which drops
	// trailing zeros) would differ from time order.
	times := []time.Time{
		t0.Add(120 * time.Millisecond),
		t0.Add(100 * time.Millisecond),
		t0.Add(time.Second),
		t0,
		t0.Add(100 * time.Millisecond), // tie with [1]: id decides
	}
	ids := []string{"e", "d", "c", "b", "a"}
	for i, at := range times {
		if err := db.InsertStage(ctx, stageFor(ws, "tx-"+ids[i], "", at)); err != nil {
			t.Fatal(err)
		}
		if err := db.InsertOp(ctx, Op{ID: "op-" + ids[i], WorkspaceID: ws, StageID: "tx-" + ids[i],
			Kind: OpApply, State: "committed", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	for i, at := range times {
		if err := db.InsertReceipt(ctx, Receipt{ID: "rc-" + ids[i], Kind: ReceiptRun, WorkspaceID: ws,
			StageID: "tx-c", CreatedAt: at}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.InsertStage(ctx, stageFor(other, "tx-elsewhere", "", t0)); err != nil {
		t.Fatal(err)
	}
	want := []string{"b", "a", "d", "e", "c"}

	stages, err := db.ListStages(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := db.ListOps(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	receipts, err := db.ReceiptsForStage(ctx, "tx-c")
	if err != nil {
		t.Fatal(err)
	}
	if len(stages) != len(want) || len(ops) != len(want) || len(receipts) != len(want) {
		t.Fatalf("got %d stages, %d ops, %d receipts; want %d each", len(stages), len(ops), len(receipts), len(want))
	}
	for i, id := range want {
		if stages[i].ID != "tx-"+id || ops[i].ID != "op-"+id || receipts[i].ID != "rc-"+id {
			t.Errorf("position %d: stage %s, op %s, receipt %s; want suffix %s",
				i, stages[i].ID, ops[i].ID, receipts[i].ID, id)
		}
	}
	if none, err := db.ListStages(ctx, "no-such-workspace"); err != nil || len(none) != 0 {
		t.Errorf("ListStages of unknown workspace = %v, %v", none, err)
	}
}

func TestOpRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	if err := db.InsertStage(ctx, stageFor(ws, "tx-1", "", t0)); err != nil {
		t.Fatal(err)
	}
	ops := []Op{
		{ID: "op-1", WorkspaceID: ws, StageID: "tx-1", Kind: OpApply, State: "pending",
			Body: json.RawMessage(`{"paths":["a.txt"]}`), CreatedAt: t0},
		{ID: "op-2", WorkspaceID: ws, Kind: OpUndo, State: "committed", CreatedAt: t0.Add(time.Second)},
	}
	for _, o := range ops {
		if err := db.InsertOp(ctx, o); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetOp(ctx, o.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != o.ID || got.WorkspaceID != o.WorkspaceID || got.StageID != o.StageID || got.Kind != o.Kind ||
			got.State != o.State || string(got.Body) != string(o.Body) || !got.CreatedAt.Equal(o.CreatedAt) {
			t.Fatalf("op = %+v, want %+v", got, o)
		}
	}
	upd := ops[0]
	upd.State, upd.Body = "committed", json.RawMessage(`{"paths":["a.txt"],"seq":7}`)
	if err := db.UpdateOp(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if got, err := db.GetOp(ctx, "op-1"); err != nil || got.State != "committed" || string(got.Body) != string(upd.Body) {
		t.Fatalf("after UpdateOp: %+v, %v", got, err)
	}

	refused := []struct {
		name string
		o    Op
		is   error
	}{
		{"duplicate id", ops[0], ErrExists},
		{"unknown kind", Op{ID: "op-x", WorkspaceID: ws, Kind: "redo", State: "s", CreatedAt: t0}, nil},
		{"unknown stage", Op{ID: "op-x", WorkspaceID: ws, StageID: "tx-none", Kind: OpApply, State: "s", CreatedAt: t0}, nil},
		{"no state", Op{ID: "op-x", WorkspaceID: ws, Kind: OpApply, CreatedAt: t0}, nil},
		{"invalid body", Op{ID: "op-x", WorkspaceID: ws, Kind: OpApply, State: "s", Body: json.RawMessage("nope"), CreatedAt: t0}, nil},
	}
	for _, tt := range refused {
		err := db.InsertOp(ctx, tt.o)
		if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: InsertOp error = %v, want failure (%v)", tt.name, err, tt.is)
		}
	}
	if _, err := db.GetOp(ctx, "op-x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetOp missing error = %v, want ErrNotFound", err)
	}
	if err := db.UpdateOp(ctx, Op{ID: "op-x", State: "s"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("UpdateOp missing error = %v, want ErrNotFound", err)
	}
}

func TestReceiptRoundTrip(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	if err := db.InsertStage(ctx, stageFor(ws, "tx-1", "", t0)); err != nil {
		t.Fatal(err)
	}
	if err := db.InsertOp(ctx, Op{ID: "op-1", WorkspaceID: ws, StageID: "tx-1", Kind: OpApply, State: "committed", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	receipts := []Receipt{
		{ID: "rc-1", Kind: ReceiptRun, WorkspaceID: ws, StageID: "tx-1", Body: json.RawMessage(`{"exit":0}`), CreatedAt: t0},
		{ID: "rc-2", Kind: ReceiptApply, WorkspaceID: ws, StageID: "tx-1", OpID: "op-1",
			Body: json.RawMessage(`{"changes":3,"not_transactional":["network"]}`), CreatedAt: t0.Add(time.Second)},
	}
	for _, r := range receipts {
		if err := db.InsertReceipt(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := db.GetReceipt(ctx, r.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != r.ID || got.Kind != r.Kind || got.WorkspaceID != r.WorkspaceID || got.StageID != r.StageID ||
			got.OpID != r.OpID || string(got.Body) != string(r.Body) || !got.CreatedAt.Equal(r.CreatedAt) {
			t.Fatalf("receipt = %+v, want %+v", got, r)
		}
	}
	refused := []struct {
		name string
		r    Receipt
		is   error
	}{
		{"duplicate id", receipts[0], ErrExists},
		{"unknown kind", Receipt{ID: "rc-x", Kind: "drop", WorkspaceID: ws, StageID: "tx-1", CreatedAt: t0}, nil},
		{"unknown op", Receipt{ID: "rc-x", Kind: ReceiptApply, WorkspaceID: ws, StageID: "tx-1", OpID: "op-none", CreatedAt: t0}, nil},
		{"no stage", Receipt{ID: "rc-x", Kind: ReceiptRun, WorkspaceID: ws, CreatedAt: t0}, nil},
	}
	for _, tt := range refused {
		err := db.InsertReceipt(ctx, tt.r)
		if err == nil || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: InsertReceipt error = %v, want failure (%v)", tt.name, err, tt.is)
		}
	}
	if _, err := db.GetReceipt(ctx, "rc-x"); !errors.Is(err, ErrNotFound) {
		t.Errorf("GetReceipt missing error = %v, want ErrNotFound", err)
	}
}

func TestTxRollsBack(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	boom := errors.New("boom")

	err := db.Tx(ctx, func(tx *Txn) error {
		if err := tx.InsertStage(ctx, stageFor(ws, "tx-rolled", "n", t0)); err != nil {
			return err
		}
		// The transaction sees its own write.
		if _, err := tx.GetStage(ctx, "tx-rolled"); err != nil {
			return err
		}
		if err := tx.InsertOp(ctx, Op{ID: "op-rolled", WorkspaceID: ws, StageID: "tx-rolled", Kind: OpApply, State: "s", CreatedAt: t0}); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Tx error = %v, want boom", err)
	}
	if _, err := db.GetStage(ctx, "tx-rolled"); !errors.Is(err, ErrNotFound) {
		t.Errorf("stage survived rollback: %v", err)
	}
	if _, err := db.GetOp(ctx, "op-rolled"); !errors.Is(err, ErrNotFound) {
		t.Errorf("op survived rollback: %v", err)
	}

	func() {
		defer func() {
			if recover() == nil {
				t.Error("panic inside Tx was swallowed")
			}
		}()
		db.Tx(ctx, func(tx *Txn) error {
			if err := tx.InsertStage(ctx, stageFor(ws, "tx-panic", "", t0)); err != nil {
				t.Error(err)
			}
			panic("inside")
		})
	}()
	if _, err := db.GetStage(ctx, "tx-panic"); !errors.Is(err, ErrNotFound) {
		t.Errorf("stage survived panic: %v", err)
	}

	// A failing statement inside fn does not leave the connection in a
	// transaction: the next Tx commits normally.
	err = db.Tx(ctx, func(tx *Txn) error {
		if err := tx.InsertStage(ctx, stageFor(ws, "tx-ok", "n", t0)); err != nil {
			return err
		}
		return tx.InsertStage(ctx, stageFor(ws, "tx-ok2", "n", t0)) // name taken
	})
	if !errors.Is(err, ErrNameTaken) {
		t.Fatalf("Tx error = %v, want ErrNameTaken", err)
	}
	if _, err := db.GetStage(ctx, "tx-ok"); !errors.Is(err, ErrNotFound) {
		t.Errorf("first insert survived a failed Tx: %v", err)
	}
	if err := db.Tx(ctx, func(tx *Txn) error { return tx.InsertStage(ctx, stageFor(ws, "tx-ok", "n", t0)) }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.GetStage(ctx, "tx-ok"); err != nil {
		t.Errorf("committed stage missing: %v", err)
	}
}

// TestOpLinksReadUndoes checks the links of ops as InsertOp and UpdateOp
// record them: the kind, and the op an undo's body names, without the body.
func TestOpLinksReadUndoes(t *testing.T) {
	ctx := context.Background()
	db := openTest(t)
	ws := seed(t, db, "ws")
	if err := db.InsertStage(ctx, stageFor(ws, "tx-1", "", t0)); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Op{
		{ID: "op-1", WorkspaceID: ws, StageID: "tx-1", Kind: OpApply, State: "committed", Body: json.RawMessage(`{"paths":[]}`), CreatedAt: t0},
		{ID: "op-2", WorkspaceID: ws, Kind: OpUndo, State: "committed", Body: json.RawMessage(`{"undoes":"op-1"}`), CreatedAt: t0.Add(time.Second)},
		{ID: "op-3", WorkspaceID: ws, Kind: OpUndo, State: "committed", Body: json.RawMessage(`{"undoes":""}`), CreatedAt: t0.Add(2 * time.Second)},
		{ID: "op-4", WorkspaceID: ws, Kind: OpUndo, State: "pending", CreatedAt: t0.Add(3 * time.Second)},
	} {
		if err := db.InsertOp(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.UpdateOp(ctx, Op{ID: "op-4", State: "committed", Body: json.RawMessage(`{"undoes":"op-2"}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := db.ListOpLinks(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []OpLink{{"op-1", OpApply, "tx-1", ""}, {"op-2", OpUndo, "", "op-1"}, {"op-3", OpUndo, "", ""}, {"op-4", OpUndo, "", "op-2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("ListOpLinks = %v, want %v", got, want)
	}
}

// TestMigrationFillsUndoes opens a database made before the op_undoes
// table and checks the migration fills it from each op's body.
func TestMigrationFillsUndoes(t *testing.T) {
	ctx := context.Background()
	ms, err := loadMigrations()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(ms, func(m migration) bool { return m.name == "006_op_undoes.sql" })
	if i < 0 {
		t.Fatal("no migration 006_op_undoes.sql")
	}
	path := filepath.Join(t.TempDir(), "state.db")
	old, err := open(ctx, path, ms[:i])
	if err != nil {
		t.Fatal(err)
	}
	ws := seed(t, old, "ws")
	for n, row := range [][]string{
		{"op-1", OpApply, `{"paths":["a"]}`},
		{"op-2", OpUndo, `{"undoes":"op-1","paths":["a"]}`},
		{"op-3", OpUndo, `{"undoes":""}`},
	} {
		if _, err := old.pool.ExecContext(ctx, "INSERT INTO ops (id, workspace_id, kind, state, created_at, body) VALUES (?, ?, ?, 'committed', ?, ?)",
			row[0], ws, row[1], formatTime(t0.Add(time.Duration(n)*time.Second)), row[2]); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := old.pool.ExecContext(ctx, "INSERT INTO ops (id, workspace_id, kind, state, created_at) VALUES ('op-4', ?, 'undo', 'pending', ?)",
		ws, formatTime(t0.Add(time.Hour))); err != nil {
		t.Fatal(err)
	}
	// A body damaged past the schema's JSON check must not stop the
	// migrations (fsck reports it), nor a later write of it.
	conn, err := old.pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA ignore_check_constraints=ON"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO ops (id, workspace_id, kind, state, created_at, body) VALUES ('op-9', ?, 'undo', 'committed', ?, '{\"undoes\":\"op-')",
		ws, formatTime(t0.Add(3*time.Hour))); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close() // a test's connection
	old.Close()
	db, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	got, err := db.ListOpLinks(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	want := []OpLink{{"op-1", OpApply, "", ""}, {"op-2", OpUndo, "", "op-1"}, {"op-3", OpUndo, "", ""}, {"op-4", OpUndo, "", ""}, {"op-9", OpUndo, "", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("ListOpLinks after the migration = %v, want %v", got, want)
	}
	dconn, err := db.pool.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dconn.ExecContext(ctx, "PRAGMA ignore_check_constraints=ON"); err != nil {
		t.Fatal(err)
	}
	if _, err := dconn.ExecContext(ctx, "UPDATE ops SET body = '{\"undoes\"' WHERE id = 'op-9'"); err != nil {
		t.Fatalf("a damaged body written past the check was refused: %v", err)
	}
	_ = dconn.Close() // a test's connection
	// A wtx that opened the database before the migration still writes
	// ops without the column, and rewrites bodies: the schema fills it.
	if _, err := db.pool.ExecContext(ctx, "INSERT INTO ops (id, workspace_id, kind, state, created_at, body) VALUES ('op-5', ?, 'undo', 'committed', ?, '{\"undoes\":\"op-4\"}')",
		ws, formatTime(t0.Add(2*time.Hour))); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.ExecContext(ctx, "UPDATE ops SET body = '{\"undoes\":\"op-3\"}' WHERE id = 'op-4'"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.pool.ExecContext(ctx, "UPDATE ops SET body = '{\"paths\":[]}' WHERE id = 'op-2'"); err != nil {
		t.Fatal(err)
	}
	if got, err = db.ListOpLinks(ctx, ws); err != nil {
		t.Fatal(err)
	}
	want = []OpLink{{"op-1", OpApply, "", ""}, {"op-2", OpUndo, "", ""}, {"op-3", OpUndo, "", ""}, {"op-4", OpUndo, "", "op-3"}, {"op-5", OpUndo, "", "op-4"}, {"op-9", OpUndo, "", ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("ListOpLinks after writes by a program that knows no op_undoes = %v, want %v", got, want)
	}
}
