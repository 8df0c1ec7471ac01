package wtx_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/wtx-dev/wtx"
	_ "github.com/wtx-dev/wtx/flow" // registers the flow step's recorder
)

// TestW_001_AnnotationRefusals: an Annotate hook whose note no recorder
// reads, whose note is not a JSON object, or that fails, refuses the apply
// before anything lands in the workspace; the stage stays open.
func TestW_001_AnnotationRefusals(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	ws, err := wtx.Open(ctx, work, wtx.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	st, err := ws.Begin(ctx, wtx.BeginOptions{Backend: "copy"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write(ctx, "a.txt", []byte("a\n"), wtx.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	refused := errors.New("not this one")
	for name, hook := range map[string]func(wtx.AppliedOp) (*wtx.Annotation, error){
		"no recorder": func(wtx.AppliedOp) (*wtx.Annotation, error) {
			return &wtx.Annotation{Kind: "other", Data: json.RawMessage(`{}`)}, nil
		},
		"not an object": func(wtx.AppliedOp) (*wtx.Annotation, error) {
			return &wtx.Annotation{Kind: wtx.FlowStepAnnotation, Data: json.RawMessage(`null`)}, nil
		},
		"hook fails": func(wtx.AppliedOp) (*wtx.Annotation, error) { return nil, refused },
	} {
		_, err := st.Apply(ctx, wtx.ApplyOptions{Annotate: hook})
		if err == nil {
			t.Fatalf("%s: the apply went through", name)
		}
		if name == "hook fails" && !errors.Is(err, refused) || name != "hook fails" && !errors.Is(err, wtx.ErrUsage) {
			t.Errorf("%s: %v", name, err)
		}
		if _, err := os.Lstat(filepath.Join(work, "a.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the refused apply wrote the workspace (%v)", name, err)
		}
	}
	var seen wtx.AppliedOp
	res, err := st.Apply(ctx, wtx.ApplyOptions{Annotate: func(op wtx.AppliedOp) (*wtx.Annotation, error) { seen = op; return nil, nil }})
	if err != nil {
		t.Fatal(err)
	}
	if seen.OpID != res.OpID || seen.Stage != st.ID() || len(seen.Written) != 1 || seen.Written[0] != "a.txt" || seen.Receipt == "" {
		t.Fatalf("the hook was told %+v of op %s", seen, res.OpID)
	}
}
