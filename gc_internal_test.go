package wtx

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx/internal/blob"
)

// TestI003_GCStopsOnUnreadableRecord: an op whose stored body cannot be
// decoded names objects nobody can list any more, so gc must not judge
// them unreferenced: the sweep stops with io.corrupt and the op's
// pre-image (what its undo needs) is still in the store.
func TestI003_GCStopsOnUnreadableRecord(t *testing.T) {
	ctx := context.Background()
	work, state := t.TempDir(), t.TempDir()
	original := []byte("original\n")
	if err := os.WriteFile(filepath.Join(work, "f"), original, 0o644); err != nil {
		t.Fatal(err)
	}
	ws, err := Open(ctx, work, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := st.Run(ctx, []string{"sh", "-c", "echo staged > f"}, RunOptions{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("run: %v, %v", err, res)
	}
	ar, err := st.Apply(ctx, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pre := ws.blobs.Path(blob.Sum(original))
	if _, err := os.Stat(pre); err != nil {
		t.Fatalf("the op's pre-image is not stored: %v", err)
	}

	// Damage the op's body past the schema's JSON check, as a bad sector
	// or a foreign writer would.
	raw, err := sql.Open("sqlite", filepath.Join(state, "wtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA ignore_check_constraints=ON"); err != nil {
		t.Fatal(err)
	}
	res, err := conn.ExecContext(ctx, "UPDATE ops SET body = ? WHERE id = ?", `{"changes":[{"old":{"digest":"sha256:`, ar.OpID)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("damaged %d op rows, want 1", n)
	}
	conn.Close()
	raw.Close()

	_, err = ws.GC(ctx, GCOptions{})
	if e := AsError(err); e == nil || e.Code != CodeCorrupt {
		t.Errorf("gc over an unreadable op body: want %s, got %v", CodeCorrupt, err)
	}
	if _, err := os.Stat(pre); err != nil {
		t.Errorf("gc removed the pre-image an unreadable op may need: %v", err)
	}
}
