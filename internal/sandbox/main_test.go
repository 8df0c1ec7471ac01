package sandbox_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/stage"
)

// TestImportRunsNoHiddenEntry builds a program that imports wtx and starts
// it with the first argument and the environment of each of wtx's own
// re-executions: it must run its own main. The control hands the same
// start to sandbox.Main or to wtx.Reexec, which must take it over; and a start with the
// argument but not the environment mark is never taken over.
func TestImportRunsNoHiddenEntry(t *testing.T) {
	if os.Getenv("WTX_BIN") != "" {
		t.Skip("prebuilt binaries in use: this test builds a program of its own")
	}
	prog := filepath.Join(t.TempDir(), "importwtx")
	build := exec.Command("go", "build", "-o", prog, "./testdata/importwtx")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	run := func(arg string, env ...string) (string, error) {
		cmd := exec.Command(prog, arg, "x")
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	for _, e := range stage.Entries() {
		mark := e.Env + "=1"
		if out, err := run(e.Arg, mark); err != nil || out != "plain\n" {
			t.Errorf("%s with %s: %q, %v; want the program's own output", e.Arg, e.Env, out, err)
		}
		for _, entry := range []string{"sandbox", "wtx"} {
			if out, err := run(e.Arg, "IMPORTWTX_MAIN="+entry); err != nil || out != "plain\n" {
				t.Errorf("%s without %s, through %s's entry: %q, %v; want the program's own output", e.Arg, e.Env, entry, out, err)
			}
			if out, _ := run(e.Arg, mark, "IMPORTWTX_MAIN="+entry); strings.Contains(out, "plain") {
				t.Errorf("%s with %s, through %s's entry: %q; want it taken over", e.Arg, e.Env, entry, out)
			}
		}
	}
}
