package flow_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/flow"
)

// Parse a flow file and list its steps: Parse checks everything it can
// without a workspace, and fills in the defaults.
func ExampleParse() {
	def, err := flow.Parse([]byte(`version = 1
name = "tidy"

[[steps]]
name = "format"
kind = "run"
command = ["gofmt", "-w", "."]

[[steps]]
name = "notes"
kind = "batch"
[[steps.ops]]
command = "write"
path = "NOTES.md"
content = "formatted\n"

[[steps]]
name = "suggest"
kind = "agent"
command = ["./suggest"]
[steps.allow]
paths = ["docs/**"]
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(def.Name)
	for i, s := range def.Steps {
		fmt.Printf("%d %s: %s, on success %s, idempotent %v\n", i+1, s.Name, s.Kind, s.OnSuccess, s.IsIdempotent())
	}
	fmt.Println("agent may write", def.Steps[2].Allow.Paths, "with", def.Steps[2].Allow.Ops)
	// Output:
	// tidy
	// 1 format: run, on success apply, idempotent true
	// 2 notes: batch, on success apply, idempotent true
	// 3 suggest: agent, on success apply, idempotent true
	// agent may write [docs/**] with [write edit rm]
}

// Start a run of a flow in a workspace: each step is one stage, and a step
// that applies is one op, recorded with the step's result.
func ExampleStart() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "flow-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	work, state := filepath.Join(dir, "work"), filepath.Join(dir, "state")
	if err := os.Mkdir(work, 0o755); err != nil {
		log.Fatal(err)
	}
	ws, err := wtx.Open(ctx, work, wtx.Options{StateDir: state})
	if err != nil {
		log.Fatal(err)
	}
	defer ws.Close()
	def, err := flow.Parse([]byte(`version = 1
[[steps]]
name = "greet"
kind = "batch"
backend = "copy"
[[steps.ops]]
command = "write"
path = "hello.txt"
content = "hello\n"
`))
	if err != nil {
		log.Fatal(err)
	}
	run, err := flow.Start(ctx, ws, def, flow.Options{Name: "first"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(run.Name, run.Status)
	for _, s := range run.Steps {
		fmt.Println(s.Name, s.Status, s.Attempts[0].Result.Counts.Added, "added")
	}
	data, err := os.ReadFile(filepath.Join(work, "hello.txt"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(data))
	// Output:
	// first done
	// greet done 1 added
	// hello
}
