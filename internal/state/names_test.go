package state

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// Workspace paths and read-set paths are TEXT columns bound from Go strings:
// SQLite keeps their bytes as given, valid UTF-8 or not, NUL included.
func TestTextColumnsKeepBytes(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "x.db"))
	if err != nil {
		t.Fatal(err)
	}
	p := "a\xff\xfe\x00b\xef\xbf\xbd"
	w, err := db.EnsureWorkspace(ctx, "w1", "/x/"+p, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w.Path != "/x/"+p {
		t.Fatalf("%q", w.Path)
	}
	db.InsertStage(ctx, Stage{ID: "s", WorkspaceID: "w1", State: StageOpen, Backend: "copy", CreatedAt: time.Now()})
	if err := db.PutRead(ctx, Read{StageID: "s", Path: p, Digest: "d", Seq: 1, ReadAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	rs, err := db.ReadSet(ctx, "s")
	if err != nil || len(rs) != 1 || rs[0].Path != p {
		t.Fatalf("%v %+v", err, rs)
	}
}
