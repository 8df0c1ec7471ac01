package semantic

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// TestL002_LeftoverNamedByWhatItRan: a leftover is named by the program it
// runs when it ends, not by the one it was forked from. The command leaves
// a shell that, once told to stop, executes sleep in its place; the summary
// must name it sleep, and name no shell. The negative control
// (WTX_DISABLE=contain-names, failpoint build) keeps the name first listed,
// sh. No timing is involved: the shell turns into sleep only when wtx
// signals it, after wtx has listed it.
func TestL002_LeftoverNamedByWhatItRan(t *testing.T) {
	bin := wtxtest.Binary(t, true)
	ws, state := l002Env(t, bin, "copy")
	for _, control := range []bool{false, true} {
		marker := fmt.Sprintf("wtx-l002-%d-names-%v", os.Getpid(), control)
		t.Cleanup(func() { l002Kill(marker) })
		script := `(trap 'exec sleep 1000' TERM; : > ready; while :; do sleep 0.01; done) & until [ -e ready ]; do sleep 0.01; done`
		var env []string
		if control {
			env = []string{"WTX_DISABLE=contain-names"}
		}
		r := l002Run(t, bin, env, ws, state, "run", "--backend", "copy", "--json", "--", "sh", "-c", script, marker)
		if r.code != 0 {
			t.Fatalf("wtx run exited %d\n%s%s", r.code, r.stdout, r.stderr)
		}
		var ans l002Answer
		if err := json.Unmarshal([]byte(r.stdout), &ans); err != nil {
			t.Fatalf("run --json: %v\n%s", err, r.stdout)
		}
		var sh, sleep int
		for _, p := range ans.Stopped {
			switch p.Comm {
			case "sh":
				sh++
			case "sleep":
				sleep++
			}
		}
		switch {
		case !control && (sh != 0 || sleep == 0):
			t.Errorf("stopped = %+v, want the shell named sleep, the program it ran last", ans.Stopped)
		case control && sh == 0:
			t.Errorf("negative control: stopped = %+v, want the shell still named sh", ans.Stopped)
		}
	}
}
