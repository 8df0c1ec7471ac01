package state

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestResolveWorkspaceKeepsIDs checks that a workspace recorded by path
// alone (before identities were recorded) keeps its id once its identity
// is known, and that another path to the same directory finds it.
func TestResolveWorkspaceKeepsIDs(t *testing.T) {
	ctx := context.Background()
	db, err := Open(ctx, filepath.Join(t.TempDir(), "wtx.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	gone := map[string]bool{}
	alive := func(p string) bool { return !gone[p] }
	old, err := db.EnsureWorkspace(ctx, "id-old", "/w/old", now)
	if err != nil {
		t.Fatal(err)
	}
	id := Ident{Dev: 7, Ino: 42}
	got, err := db.ResolveWorkspace(ctx, "id-new", "/w/old", id, now, false, alive)
	if err != nil || got.ID != old.ID {
		t.Fatalf("ResolveWorkspace of a pre-identity row = %+v, %v; want id %s", got, err, old.ID)
	}
	alias, err := db.ResolveWorkspace(ctx, "id-alias", "/mnt/alias", id, now, false, alive)
	if err != nil || alias.ID != old.ID {
		t.Fatalf("ResolveWorkspace through another path = %+v, %v; want id %s", alias, err, old.ID)
	}
	paths, err := db.WorkspacePaths(ctx, old.ID)
	if err != nil || len(paths) != 2 || paths[0] != "/mnt/alias" || paths[1] != "/w/old" {
		t.Fatalf("WorkspacePaths = %v, %v", paths, err)
	}
	other, err := db.ResolveWorkspace(ctx, "id-other", "/w/other", Ident{Dev: 7, Ino: 43}, now, false, alive)
	if err != nil || other.ID != "id-other" {
		t.Fatalf("a new directory = %+v, %v; want a new workspace", other, err)
	}
	// The directory of /w/other is gone and its inode number reused by a
	// new directory: that is a new workspace.
	gone["/w/other"] = true
	reused, err := db.ResolveWorkspace(ctx, "id-reused", "/w/reused", Ident{Dev: 7, Ino: 43}, now, false, alive)
	if err != nil || reused.ID != "id-reused" {
		t.Fatalf("a reused inode number = %+v, %v; want a new workspace", reused, err)
	}
	byPath, err := db.ResolveWorkspace(ctx, "id-p", "/mnt/alias2", id, now, true, alive)
	if err != nil || byPath.ID != "id-p" {
		t.Fatalf("path only = %+v, %v; want a workspace of its own", byPath, err)
	}
}
