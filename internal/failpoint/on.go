//go:build wtxfailpoint

package failpoint

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Enabled reports whether this build arms failpoints.
const Enabled = true

var (
	mu    sync.Mutex
	count int
)

// Hit crashes the process (SIGKILL, so no deferred cleanup runs) when the
// environment arms this point.
func Hit(name string) {
	mu.Lock()
	defer mu.Unlock()
	count++
	if f := os.Getenv("WTX_FAILPOINT_COUNT"); f != "" {
		if out, err := os.OpenFile(f, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
			fmt.Fprintf(out, "%d %s\n", count, name)
			out.Close()
		}
	}
	arm := os.Getenv("WTX_FAILPOINT")
	if arm == "" {
		return
	}
	if n, err := strconv.Atoi(arm); err == nil && n == count || arm == name {
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
