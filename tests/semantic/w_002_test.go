package semantic

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// crashFlow writes the five-step flow of the crash tests: two commands
// (the second prints batch ops), a batch of those ops, an inline batch and
// an agent whose proposal depends on the tree. The commands append to a
// counter file outside the workspace.
func crashFlow(e *flowEnv) string {
	seed := e.script("seed.sh", `echo seed >> "$FLOW_COUNTER"
mkdir -p src
printf 'alpha\n' > src/a.txt
printf 'beta\n' > src/b.txt

`)
	emit := e.script("emit.sh", `echo emit >> "$FLOW_COUNTER"
sed 's/alpha/ALPHA/' src/a.txt > src/a.new
mv src/a.new src/a.txt

printf '%s\n' '{"command":"write","path":"gen/c.txt","content":"gamma\n"}' '{"command":"rm","path":"src/b.txt"}'
`)
	bot := e.script("bot.sh", `a=$(cat src/a.txt)
printf '{"command":"write","path":"docs/summary.md","content":"summary: %s\\n"}\n' "$a"
`)
	return e.file("crash.toml", fmt.Sprintf(`version = 1
name = "crash"

[[steps]]
name = "seed"
kind = "run"
command = [%q]

[[steps]]
name = "emit"
kind = "run"
command = [%q]

[[steps]]
name = "apply-emitted"
kind = "batch"
from = "previous"

[[steps]]
name = "inline"
kind = "batch"
[[steps.ops]]
command = "edit"
path = "src/a.txt"
old = "ALPHA"
new = "Alpha"
[[steps.ops]]
command = "write"
path = "notes.txt"
content = "noted\n"

[[steps]]
name = "bot"
kind = "agent"
command = [%q]
[steps.allow]
paths = ["docs/**"]
ops = ["write"]
`, seed, emit, bot))
}

// crashReference is an uninterrupted run's final tree and results.
type crashReference struct {
	tree, results string
	points        int
	elapsed       time.Duration
}

func crashRef(t *testing.T) crashReference {
	e := newFlowEnv(t, true)
	f := crashFlow(e)
	countFile := filepath.Join(e.outside, "points")
	start := time.Now()
	out, r := e.flowJSON([]string{"WTX_FAILPOINT_COUNT=" + countFile}, "flow", "run", f, "--name", "crash")
	elapsed := time.Since(start)
	if r.code != 0 || out.Run.Status != "done" {
		t.Fatalf("uninterrupted run: exit %d, status %s\n%s\n%s", r.code, out.Run.Status, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(countFile)
	if err != nil {
		t.Fatal(err)
	}
	points := 0
	for sc := bufio.NewScanner(strings.NewReader(string(data))); sc.Scan(); {
		points++
	}
	return crashReference{tree: wtxtest.MustSnapshot(t, e.ws), results: out.results(), points: points, elapsed: elapsed}
}

// crashCase runs the flow killed by kill (a failpoint number, or a delay
// when it is 0), resumes it until it is done, and returns the violations
// of W-002 against the reference. killed reports whether a kill happened.
func crashCase(t *testing.T, ref crashReference, point int, delay time.Duration, resumeEnv []string) (violations []string, killed bool) {
	e := newFlowEnv(t, true)
	f := crashFlow(e)
	var extra []string
	if point > 0 {
		extra = []string{fmt.Sprintf("WTX_FAILPOINT=%d", point)}
	}
	c := e.cmd(extra, "--json", "-q", "flow", "run", f, "--name", "crash")
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if point == 0 {
		timer := time.AfterFunc(delay, func() { _ = c.Process.Kill() }) // it may have ended: then nothing is killed
		defer timer.Stop()
	}
	_ = c.Wait() // killed, or done: both are looked at below
	killed = !c.ProcessState.Exited()
	var last flowJSON
	for i := 0; i < 3; i++ {
		out, r := e.flowJSON(resumeEnv, "flow", "resume", "crash")
		if out.Error != nil && out.Error.Code == "not-found.run" {
			// Killed before the run was recorded: nothing started, so
			// the user starts it again.
			out, r = e.flowJSON(resumeEnv, "flow", "run", f, "--name", "crash")
		}
		last = out
		if out.Run.Status == "done" {
			break
		}
		if r.code != 0 && out.Error != nil {
			violations = append(violations, fmt.Sprintf("resume refused: %s\n%s", out.Error.Code, r.stdout))
			return violations, killed
		}
	}
	what := fmt.Sprintf("point %d", point)
	if point == 0 {
		what = fmt.Sprintf("kill after %s", delay)
	}
	if last.Run.Status != "done" {
		violations = append(violations, fmt.Sprintf("%s: run %s after resume", what, last.Run.Status))
	}
	if got := last.results(); got != ref.results {
		violations = append(violations, fmt.Sprintf("%s: recorded results differ:\n%s\nwant\n%s", what, got, ref.results))
	}
	if got := wtxtest.MustSnapshot(t, e.ws); got != ref.tree {
		violations = append(violations, fmt.Sprintf("%s: final tree differs:\n%s\nwant\n%s", what, got, ref.tree))
	}
	for _, s := range last.Run.Steps {
		done := 0
		for _, a := range s.Attempts {
			if a.Status == "done" {
				done++
			}
		}
		if done != 1 {
			violations = append(violations, fmt.Sprintf("%s: step %s has %d done attempts; a step with a recorded result ran again", what, s.Name, done))
		}
	}
	return violations, killed
}

// TestW002_KilledAtEveryBoundaryAndInsideSteps kills a five-step flow with
// SIGKILL at every failpoint of a run (step starts, stage opened, staged,
// every point of each apply, result recorded) and at random moments, then
// resumes it: the final tree and the recorded results must equal an
// uninterrupted run's, and no step with a result may run again. By default
// a spread of points and a few random kills; WTX_SOAK=1 kills at every
// point and at random moments until at least 100 kills.
func TestW002_KilledAtEveryBoundaryAndInsideSteps(t *testing.T) {
	ref := crashRef(t)
	t.Logf("uninterrupted run: %d failpoints, %s", ref.points, ref.elapsed)
	var points []int
	random := 3
	if os.Getenv("WTX_SOAK") != "" {
		for p := 1; p <= ref.points; p++ {
			points = append(points, p)
		}
		random = max(100-len(points), 40)
	} else {
		for i := 0; i < 5; i++ {
			points = append(points, 1+i*(ref.points-1)/4)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	kills, total := 0, 0
	var bad []string
	for _, p := range points {
		start := time.Now()
		v, killed := crashCase(t, ref, p, 0, nil)
		t.Logf("point %d: killed %v, %s", p, killed, time.Since(start))
		if killed {
			kills++
		}
		total++
		bad = append(bad, v...)
	}
	for i := 0; i < random; i++ {
		d := time.Duration(rng.Int64N(int64(ref.elapsed)))
		v, killed := crashCase(t, ref, 0, d, nil)
		if killed {
			kills++
		}
		total++
		bad = append(bad, v...)
	}
	t.Logf("W-002: %d cases, %d kills, %d violations", total, kills, len(bad))
	for _, b := range bad {
		t.Error(b)
	}
	if kills < len(points) {
		t.Errorf("only %d of %d failpoint cases killed the run", kills, len(points))
	}
}

// TestW002_NegativeControlResumeRerunsEverything switches off resume's
// skipping of recorded steps (WTX_DISABLE=flow-resume: a resume runs every
// step again, like a CI re-run): the harness must see steps with a result
// run again.
func TestW002_NegativeControlResumeRerunsEverything(t *testing.T) {
	ref := crashRef(t)
	var bad []string
	for _, p := range []int{ref.points / 2} {
		v, _ := crashCase(t, ref, p, 0, []string{"WTX_DISABLE=flow-resume"})
		bad = append(bad, v...)
	}
	t.Logf("negative control (resume re-runs recorded steps): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with resume re-running recorded steps nothing broke: the harness cannot fail")
	}
}
