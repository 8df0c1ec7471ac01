package semantic

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// l002KillParent is a command that leaves a process writing into the view
// (tick, every 0.1 s) and then SIGKILLs its parent, wtx's supervisor.
func l002KillParent(marker string) []string {
	loop := `sleep 0.5; while :; do echo x >> tick; sleep 0.1; done`
	return []string{"sh", "-c", fmt.Sprintf(`(sh -c '%s' %s &); sleep 0.2; kill -9 $PPID; sleep 0.3`, loop, marker), marker}
}

// l002Ticks sums the sizes of the tick files under root.
func l002Ticks(root string) int64 {
	var n int64
	_ = filepath.Walk(root, func(p string, fi os.FileInfo, err error) error { // unreadable parts are skipped
		if err == nil && fi.Name() == "tick" {
			n += fi.Size()
		}
		return nil
	})
	return n
}

// l002SupervisorKilled runs l002KillParent on backend with env and
// returns the answer and whether a leftover was alive, and writing, after
// wtx returned.
func l002SupervisorKilled(t *testing.T, bin, backend string, env []string) (ans l002Answer, alive bool) {
	t.Helper()
	ws, state := l002Env(t, bin, backend)
	marker := fmt.Sprintf("wtx-l002-%d-killsv-%s-%d", os.Getpid(), backend, time.Now().UnixNano())
	t.Cleanup(func() { l002Kill(marker) })
	r := l002Run(t, bin, env, ws, state, append([]string{"run", "--backend", backend, "--json", "--keep", "--"}, l002KillParent(marker)...)...)
	if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil {
		t.Fatalf("run --json: %v\n%s%s", err, r.stdout, r.stderr)
	}
	left := l002Procs(marker)
	before := l002Ticks(state)
	time.Sleep(1200 * time.Millisecond)
	after := l002Ticks(state)
	t.Logf("%s: containment %q, stopped %v, left %v, ticks %d -> %d", backend, ans.Containment, ans.Stopped, left, before, after)
	return ans, len(left) > 0 || after != before
}

func outliveKept(items []string) bool {
	for _, item := range items {
		if strings.Contains(item, "outlive") {
			return true
		}
	}
	return false
}

// TestL002_SupervisorKilled checks L-002 against a command that kills its
// own supervisor (kill -9 $PPID) after leaving a process that writes into
// the view: on every backend, nothing of it is alive or writing once wtx
// returns. Where wtx makes namespaces (overlay; copy and clone too) the
// supervisor is pid 1 of the command's PID namespace, which the command
// cannot kill, and the receipt says containment held. Where it cannot
// (WTX_DISABLE=contain-ns, failpoint build), wtx itself is the subreaper
// the orphans go to: it stops them before the scan, and the receipt says
// containment was broken and keeps "processes ... outlive it".
func TestL002_SupervisorKilled(t *testing.T) {
	bin := wtxtest.Binary(t, false)
	fp := wtxtest.Binary(t, true)
	for _, backend := range l002Backends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ans, alive := l002SupervisorKilled(t, bin, backend, nil)
			if alive {
				t.Errorf("a process the command left kept running (or writing the stage) after wtx returned")
			}
			if ans.Receipt.Containment != "pid-namespace" {
				t.Errorf("containment %q, want pid-namespace (the supervisor out of the command's reach)", ans.Receipt.Containment)
			}
			if backend == "overlay" {
				return
			}
			ans, alive = l002SupervisorKilled(t, fp, backend, []string{"WTX_DISABLE=contain-ns"})
			if alive {
				t.Errorf("without namespaces, a process the command left kept running after its supervisor was killed")
			}
			if ans.Receipt.Containment != "broken" || !outliveKept(ans.Receipt.NotTransactional) {
				t.Errorf("without namespaces, a killed supervisor: containment %q, not_transactional %v; want broken, and the line kept",
					ans.Receipt.Containment, ans.Receipt.NotTransactional)
			}
			if len(ans.Stopped) == 0 {
				t.Errorf("without namespaces, nothing was named as stopped")
			}
		})
	}
}

// TestL002_SupervisorKilledNegativeControl switches off both the
// namespaces and wtx's own adoption of orphans (failpoint build,
// WTX_DISABLE=contain-ns,contain-orphans): the leftover must then outlive
// wtx and keep writing, or the test above could not fail.
func TestL002_SupervisorKilledNegativeControl(t *testing.T) {
	fp := wtxtest.Binary(t, true)
	ans, alive := l002SupervisorKilled(t, fp, "copy", []string{"WTX_DISABLE=contain-ns,contain-orphans"})
	if !alive {
		t.Errorf("with namespaces and adoption off, no leftover outlived wtx: the check cannot fail")
	}
	if ans.Receipt.Containment != "broken" || !outliveKept(ans.Receipt.NotTransactional) {
		t.Errorf("containment %q, not_transactional %v; want broken and the line kept", ans.Receipt.Containment, ans.Receipt.NotTransactional)
	}
}
