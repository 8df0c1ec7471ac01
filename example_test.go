package wtx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/wtx-dev/wtx"
)

// demo makes a workspace with two files and a state root beside it, and
// opens the workspace. The caller runs the returned clean-up.
func demo() (*wtx.Workspace, string, func()) {
	tmp, err := os.MkdirTemp("", "wtx-example-")
	if err != nil {
		panic(err)
	}
	dir := filepath.Join(tmp, "project")
	must(os.MkdirAll(filepath.Join(dir, "src"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "src", "main.c"), []byte("int main(void) { return 0; }\n"), 0o644))
	ws, err := wtx.Open(context.Background(), dir, wtx.Options{StateDir: filepath.Join(tmp, "state")})
	if err != nil {
		panic(err)
	}
	return ws, dir, func() { ws.Close(); os.RemoveAll(tmp) }
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func show(dir, rel string) {
	data, err := os.ReadFile(filepath.Join(dir, rel))
	if errors.Is(err, os.ErrNotExist) {
		fmt.Printf("%s: absent\n", rel)
		return
	}
	must(err)
	fmt.Printf("%s: %q\n", rel, data)
}

// Run a command against a staged view of the directory, look at what it
// changed, and apply it: the directory itself is untouched until then.
func Example() {
	ws, dir, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{Backend: "copy"})
	must(err)
	res, err := st.Run(ctx, []string{"sh", "-c", "echo bye > README; echo notes > NOTES"}, wtx.RunOptions{})
	must(err)
	fmt.Println("exit", res.ExitCode)
	for _, c := range res.Changes.Changes {
		fmt.Println(c.Action, c.Path)
	}
	show(dir, "README")

	applied, err := st.Apply(ctx, wtx.ApplyOptions{})
	must(err)
	fmt.Println("written", applied.Written)
	show(dir, "README")
	// Output:
	// exit 0
	// added NOTES
	// modified README
	// README: "hello\n"
	// written [NOTES README]
	// README: "bye\n"
}

// Per-file operations stage one file at a time, for agents that edit
// rather than run commands. A read records what the stage saw.
func ExampleStage_Write() {
	ws, dir, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{})
	must(err)
	r, err := st.Read(ctx, "README")
	must(err)
	fmt.Printf("read %q\n", r.Content)
	// The write is refused unless the file still has the digest read.
	_, err = st.Write(ctx, "README", []byte("hello, world\n"), wtx.WriteOptions{ExpectHash: r.Digest})
	must(err)
	_, err = st.Edit(ctx, "src/main.c", "return 0", "return 1", false, "")
	must(err)
	cs, err := st.Changes(ctx, nil)
	must(err)
	fmt.Println(cs.Counts.Modified, "modified")
	show(dir, "README")
	// Output:
	// read "hello\n"
	// 2 modified
	// README: "hello\n"
}

// A stage's change set as a git-style diff.
func ExampleStage_WriteDiff() {
	ws, _, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{})
	must(err)
	_, err = st.Write(ctx, "README", []byte("hello\nworld\n"), wtx.WriteOptions{})
	must(err)
	var b bytes.Buffer
	_, err = st.WriteDiff(ctx, &b, wtx.DiffOptions{})
	must(err)
	fmt.Print(b.String())
	// Output:
	// diff --git a/README b/README
	// --- a/README
	// +++ b/README
	// @@ -1 +1,2 @@
	//  hello
	// +world
}

// Apply part of a stage: the rest stays staged for later.
func ExampleStage_Apply() {
	ws, dir, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{})
	must(err)
	_, err = st.Write(ctx, "README", []byte("bye\n"), wtx.WriteOptions{})
	must(err)
	_, err = st.Write(ctx, "src/main.c", []byte("int main(void) { return 1; }\n"), wtx.WriteOptions{})
	must(err)
	res, err := st.Apply(ctx, wtx.ApplyOptions{Paths: []string{"src"}})
	must(err)
	fmt.Println("written", res.Written, "settled", res.Settled)
	show(dir, "README")
	left, err := st.Changes(ctx, nil)
	must(err)
	fmt.Println("still staged", len(left.Changes))
	// Output:
	// written [src/main.c] settled false
	// README: "hello\n"
	// still staged 1
}

// An apply refuses to overwrite what changed in the directory behind the
// stage's back, and says what and how to go on.
func ExampleStage_Apply_drift() {
	ws, dir, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{})
	must(err)
	_, err = st.Write(ctx, "README", []byte("staged\n"), wtx.WriteOptions{})
	must(err)
	must(os.WriteFile(filepath.Join(dir, "README"), []byte("someone else\n"), 0o644))

	_, err = st.Apply(ctx, wtx.ApplyOptions{})
	var e *wtx.Error
	if errors.As(err, &e) {
		fmt.Println(e.Code)
		for _, c := range e.Conflicts {
			fmt.Println(c.Path, c.Kind)
		}
	}
	show(dir, "README")
	// Output:
	// refusal.target-changed
	// README modified
	// README: "someone else\n"
}

// Undo takes an applied op back as a new op, all or nothing.
func ExampleWorkspace_Undo() {
	ws, dir, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{})
	must(err)
	_, err = st.Write(ctx, "README", []byte("bye\n"), wtx.WriteOptions{})
	must(err)
	applied, err := st.Apply(ctx, wtx.ApplyOptions{})
	must(err)
	show(dir, "README")

	last, err := ws.LatestOp(ctx, true) // the newest op not undone yet
	must(err)
	u, err := ws.Undo(ctx, last.ID)
	must(err)
	fmt.Println(u.Undoes == applied.OpID, u.Written)
	show(dir, "README")
	// Output:
	// README: "bye\n"
	// true [README]
	// README: "hello\n"
}

// A stage travels as a bundle: its change set with the bases it was made
// on and a signed receipt. The importing side checks it and opens a stage.
func ExampleWorkspace_Import() {
	ws, _, done := demo()
	defer done()
	other, otherDir, done2 := demo()
	defer done2()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{})
	must(err)
	_, err = st.Write(ctx, "README", []byte("from afar\n"), wtx.WriteOptions{})
	must(err)
	var bundle bytes.Buffer
	_, err = st.Export(ctx, &bundle)
	must(err)

	in, _, err := other.Import(ctx, &bundle, wtx.ImportOptions{})
	must(err)
	_, err = in.Apply(ctx, wtx.ApplyOptions{})
	must(err)
	show(otherDir, "README")
	// Output:
	// README: "from afar\n"
}

// Dropping a stage discards it; the directory never saw it.
func ExampleStage_Drop() {
	ws, dir, done := demo()
	defer done()
	ctx := context.Background()

	st, err := ws.Begin(ctx, wtx.BeginOptions{Name: "try"})
	must(err)
	_, err = st.Remove(ctx, "README", "")
	must(err)
	must(st.Drop(ctx))
	fmt.Println(st.State())
	show(dir, "README")
	// Output:
	// dropped
	// README: "hello\n"
}
