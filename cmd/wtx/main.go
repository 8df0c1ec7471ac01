// Command wtx gives a directory transactions. See the README and 'wtx --help'.
//
// WTX_CPUPROFILE=FILE writes a CPU profile of the command to FILE (for
// 'go tool pprof'), to see where the time of a slow command goes;
// WTX_MEMPROFILE=FILE writes a heap profile when it ends (every allocation
// it made: 'go tool pprof -sample_index=alloc_space').
package main

import (
	"os"
	"runtime/pprof"

	"github.com/wtx-dev/wtx/internal/cli"
	"github.com/wtx-dev/wtx/internal/fsx"
	"github.com/wtx-dev/wtx/internal/sandbox"
)

func main() {
	// A process wtx started from its own binary to supervise and confine a
	// command runs that, and exits.
	if sandbox.Main() {
		return
	}
	// The command never changes its umask: files it creates with bits the
	// umask leaves whole need no fchmod.
	fsx.FixUmask()
	// The collector's pace follows the live heap (see paceGC). GOGC or
	// GOMEMLIMIT, when set, wins.
	if os.Getenv("GOGC") == "" && os.Getenv("GOMEMLIMIT") == "" {
		paceGC()
	}
	if p := os.Getenv("WTX_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			if pprof.StartCPUProfile(f) == nil {
				code := cli.Main(os.Args[1:])
				pprof.StopCPUProfile()
				f.Close()
				os.Exit(code)
			}
		}
	}
	code := cli.Main(os.Args[1:])
	if p := os.Getenv("WTX_MEMPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			_ = pprof.Lookup("allocs").WriteTo(f, 0) // a diagnostic: nothing to report if it fails
			f.Close()
		}
	}
	os.Exit(code)
}
