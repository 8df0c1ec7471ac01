package crash

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// perKind is how many system calls of each kind of op a run kills wtx at,
// sampled from every one it makes (every one of them with WTX_SOAK=1).
const perKind = 2

// pfTree is the workspace of the per-file harness.
func pfTree() map[string]string {
	m := map[string]string{"keep.txt": "keep\n", "ed.txt": "count=0\n"}
	for i := 0; i < 5; i++ {
		m[fmt.Sprintf("base/f%d.txt", i)] = fmt.Sprintf("base %d\n", i)
	}
	for i := 0; i < 32; i++ {
		m[fmt.Sprintf("fresh/%d.txt", i)] = fmt.Sprintf("fresh %d\n", i)
	}
	return m
}

// opGen makes the next op of each kind, valid in the stage as it is.
type opGen struct {
	e     *pfEnv
	i     int
	count int // ed.txt holds count=N
}

// prepare readies the next op of kind (writing, uncrashed, what it needs)
// and returns it.
func (g *opGen) prepare(kind string) pfTry {
	g.i++
	i, e := g.i, g.e
	switch kind {
	case "write":
		p := []string{fmt.Sprintf("w%d/s/f.txt", i), fmt.Sprintf("base/f%d.txt", i%5), fmt.Sprintf("odd\xfe%d/\n%d\xff.txt", i, i)}[i%3]
		c := fmt.Sprintf("write %d\n", i)
		return pfTry{kind: "write", path: p, after: sideOf([]byte(c), "0644"), args: []string{"write", "--tx", e.tx, "--", p}, stdin: c}
	case "edit":
		next := fmt.Sprintf("count=%d", g.count+1)
		return pfTry{kind: "edit", path: "ed.txt", after: sideOf([]byte(next+"\n"), "0644"),
			args: []string{"edit", "--tx", e.tx, "--old", fmt.Sprintf("count=%d", g.count), "--new", next, "--", "ed.txt"}}
	case "mcp":
		p := []string{fmt.Sprintf("agent%d/new.txt", i), "base/f1.txt"}[i%2]
		c := fmt.Sprintf("agent %d\n", i)
		return pfTry{kind: "write", path: p, after: sideOf([]byte(c), "0644"), mcp: true, content: c}
	case "rm":
		p := fmt.Sprintf("rmme/%d.txt", i)
		if r := e.wtx(nil, "doomed\n", "write", "--tx", e.tx, "--", p); r.code != 0 {
			e.t.Fatalf("write %s: %v", p, r)
		}
		return pfTry{kind: "rm", path: p, args: []string{"rm", "--tx", e.tx, "--", p}, ran: true}
	case "read":
		// The workspace's copy changes, goes, or comes under directories
		// the stage never had, first: a copy stage brings the path up to
		// date as it reads it.
		p := fmt.Sprintf("fresh/%d.txt", i%32)
		if i%4 == 3 {
			p = fmt.Sprintf("new%d/sub/f.txt", i)
		}
		ws := filepath.Join(e.ws, filepath.FromSlash(p))
		try := pfTry{kind: "read", path: p, args: []string{"read", "--tx", e.tx, "--", p}}
		if i%4 == 2 {
			mustDo(e.t, removeIfThere(ws))
			try.noOp = true
			return try
		}
		c := fmt.Sprintf("workspace %d\n", i)
		mustDo(e.t, os.MkdirAll(filepath.Dir(ws), 0o755))
		mustDo(e.t, os.WriteFile(ws, []byte(c), 0o644))
		try.after = sideOf([]byte(c), "0644")
		return try
	}
	panic("unknown kind " + kind)
}

func removeIfThere(p string) error {
	if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// done tells g whether its last op of kind was recorded.
func (g *opGen) done(kind string, recorded bool) {
	if kind == "edit" && recorded {
		g.count++
	}
}

// withoutKeepReads leaves out the reads the next command makes.
func withoutKeepReads(ops []pfOp) []pfOp {
	var out []pfOp
	for _, op := range ops {
		if op.Kind == "read" && len(op.Files) == 1 && op.Files[0].path() == "keep.txt" {
			continue
		}
		out = append(out, op)
	}
	return out
}

// trial runs the next op of kind, killed at kp (uncrashed when kp is nil;
// counted, returning its kill points, when count is set), then the next
// command (itself killed at its first crash point once, when compound is
// set, and run again), and checks the stage.
func (e *pfEnv) trial(g *opGen, kind string, kp *killPoint, count, compound bool, label string) (calls, points []killPoint, killed bool, v []string) {
	try := g.prepare(kind)
	prev := e.last
	if prev == nil || try.ran {
		st := e.status(e.tx)
		prev = &st
	}
	var r result
	switch {
	case try.mcp && count:
		calls, points, r = e.mcpKillPoints(try)
	case try.mcp:
		r = e.mcpWrite(kp, e.tx, try.path, try.content)
	case count:
		calls, points, r = e.killPoints(try.stdin, try.args...)
	default:
		r = e.wtx(kp, try.stdin, try.args...)
	}
	next := e.nextCommand(g.i)
	if compound {
		if rn := e.wtx(&killPoint{call: "failpoint", n: 1}, "", next...); rn.killed {
			label += ", the next command killed at its first crash point"
		}
	}
	if rn := e.wtx(nil, "", next...); rn.code != 0 || rn.killed {
		v = append(v, fmt.Sprintf("%s: the next command (%s) failed: %v", label, strings.Join(next, " "), rn))
	}
	st := e.status(e.tx)
	e.last = &st
	ok, rv := recorded(label, withoutKeepReads(prev.TxOps), withoutKeepReads(st.TxOps), try, r)
	g.done(kind, ok)
	v = append(v, rv...)
	v = append(v, described(label, e.base, st)...)
	if d := debrisIn(e.st); len(d) > 0 && e.backend == "copy" {
		v = append(v, fmt.Sprintf("%s: temporary files left in the view: %q", label, d))
	}
	return calls, points, r.killed, v
}

// debrisIn lists wtx's temporary files left in the stage views under st.
func debrisIn(st string) []string {
	var out []string
	views, _ := filepath.Glob(filepath.Join(st, "stages", "*", "view"))
	for _, v := range views {
		_ = filepath.WalkDir(v, func(p string, d os.DirEntry, err error) error {
			if err == nil && strings.HasPrefix(d.Name(), ".wtx-tmp-") {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// sweep runs, for each kind of op in turn, one counted trial, then a
// killed trial at each crash point of the op and at each sampled system
// call; every third trial kills the next command once too.
func (e *pfEnv) sweep(rng *rand.Rand, kinds []string, k int) (trials, kills int, v []string) {
	g := &opGen{e: e}
	for _, kind := range kinds {
		label := fmt.Sprintf("%s %s uncrashed", e.backend, kind)
		calls, points, _, cv := e.trial(g, kind, nil, true, false, label)
		v = append(v, cv...)
		// A read changes nothing where the view shows the workspace
		// (overlay): it has no crash point there.
		if len(calls) == 0 || len(points) == 0 && kind != "read" {
			e.t.Fatalf("%s: %d system calls and %d crash points counted: is strace tracing, is the binary built with -tags wtxfailpoint?", label, len(calls), len(points))
		}
		for _, kp := range append(points, sample(rng, calls, k)...) {
			label := fmt.Sprintf("%s %s killed at %s", e.backend, kind, kp)
			_, _, killed, tv := e.trial(g, kind, &kp, false, trials%3 == 1, label)
			v = append(v, tv...)
			trials++
			if killed {
				kills++
			}
		}
	}
	return trials, kills, v
}

// TestT_007_PerFileOpsAtomicUnderKill kills write, edit, rm, a read that
// brings a path up to date and an agent's write over MCP at each crash
// point of the op and at system calls sampled from every one they make
// (every one with WTX_SOAK=1), on the copy and overlay backends; after
// each kill the next command must leave the stage holding exactly what its
// recorded ops describe (T-007).
func TestT_007_PerFileOpsAtomicUnderKill(t *testing.T) {
	straceOrSkip(t)
	seed := harnessSeed(t)
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e, ok := newPFEnv(t, backend, nil, pfTree())
			if !ok {
				t.Skipf("the %s backend cannot stage here", backend)
			}
			trials, kills, v := e.sweep(rngFor(seed, backend), []string{"write", "edit", "rm", "read", "mcp"}, perKind)
			t.Logf("%s: %d trials, %d killed wtx itself, %d violations", backend, trials, kills, len(v))
			if kills == 0 {
				t.Error("no trial killed wtx: the harness tested nothing")
			}
			reportAll(t, v)
		})
	}
}

// TestT_007_NegativeControl runs the harness's writes and edits with the
// op recorded after its change (WTX_DISABLE=fileop-intent), killed at
// each crash point: the harness must find staged content that no op
// records.
func TestT_007_NegativeControl(t *testing.T) {
	straceOrSkip(t)
	e, _ := newPFEnv(t, "copy", []string{"WTX_DISABLE=fileop-intent"}, pfTree())
	g := &opGen{e: e}
	var found []string
	for _, kind := range []string{"write", "edit"} {
		_, points, _, _ := e.trial(g, kind, nil, true, false, "negative control, uncrashed")
		for _, kp := range points {
			_, _, _, v := e.trial(g, kind, &kp, false, false, fmt.Sprintf("negative control, %s killed at %s", kind, kp))
			found = append(found, v...)
		}
	}
	if len(found) == 0 {
		t.Fatal("with the op recorded after its change the harness found no violation: it cannot see a half-recorded op")
	}
	t.Logf("negative control (fileop-intent off): %d violation(s), first: %s", len(found), strings.SplitN(found[0], "\n", 2)[0])
}

// reportAll fails t with the first violations.
func reportAll(t *testing.T, v []string) {
	t.Helper()
	if len(v) == 0 {
		return
	}
	if len(v) > 8 && !soak() {
		v = append(v[:8:8], fmt.Sprintf("... and %d more", len(v)-8))
	}
	t.Errorf("%d violation(s):\n%s", len(v), strings.Join(v, "\n"))
}

// batchInput is the batch TestT_007_BatchAtomicUnderKill runs: a write
// under directories it creates, an edit, a removal and a read.
const batchInput = `{"command":"write","path":"b/new/x.txt","content":"x\n"}
{"command":"edit","path":"ed.txt","old":"count=0","new":"count=1"}
{"command":"rm","path":"base/f0.txt"}
{"command":"read","path":"keep.txt"}
`

// TestT_007_BatchAtomicUnderKill kills 'wtx batch' at each of a sample of
// its crash points and system calls (every one with WTX_SOAK=1): after the
// next command the workspace is the before- or the after-image, with no
// debris, and a stage the batch left open holds exactly what its recorded
// ops describe.
func TestT_007_BatchAtomicUnderKill(t *testing.T) {
	straceOrSkip(t)
	seed := harnessSeed(t)
	for _, backend := range []string{"copy", "overlay"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			rng := rngFor(seed, "batch "+backend)
			e, ok := newPFEnv(t, backend, nil, pfTree())
			if !ok {
				t.Skipf("the %s backend cannot stage here", backend)
			}
			// Every trial starts from the workspace without a state root.
			tmpl := filepath.Join(e.dir, "tmpl-ws")
			mustDo(t, wtxtest.CopyTree(e.ws, tmpl))
			reset := func() {
				mustDo(t, removeTree(e.ws))
				mustDo(t, removeTree(e.st))
				mustDo(t, wtxtest.CopyTree(tmpl, e.ws))
			}
			before := wtxtest.MustSnapshot(t, e.ws)
			args := []string{"--json", "batch", "--backend", backend}
			reset()
			calls, points, r := e.killPoints(batchInput, args...)
			if r.code != 0 || r.killed {
				t.Fatalf("uncrashed batch: %v", r)
			}
			after := wtxtest.MustSnapshot(t, e.ws)
			var v []string
			trials, kills := 0, 0
			for _, kp := range append(sample(rng, points, perKind), sample(rng, calls, perKind)...) {
				reset()
				r := e.wtx(&kp, batchInput, args...)
				trials++
				if r.killed {
					kills++
				}
				v = append(v, e.batchSettled(fmt.Sprintf("%s batch killed at %s", backend, kp), before, after, r)...)
			}
			t.Logf("%s: %d trials, %d killed wtx itself, %d violations", backend, trials, kills, len(v))
			reportAll(t, v)
		})
	}
}

// batchSettled runs the next command after a batch ended with r and checks
// the workspace and every stage left open.
func (e *pfEnv) batchSettled(label, before, after string, r result) []string {
	var v []string
	rn := e.wtx(nil, "", "--json", "list")
	if rn.code != 0 || rn.killed {
		return append(v, fmt.Sprintf("%s: the next command failed: %v", label, rn))
	}
	switch got := wtxtest.MustSnapshot(e.t, e.ws); {
	case got != before && got != after:
		v = append(v, fmt.Sprintf("%s: the workspace is neither the before- nor the after-image:\n%s", label, diffLines(after, got)))
	case got == before && !r.killed && r.code == 0:
		v = append(v, fmt.Sprintf("%s: batch said it applied (%v) but the workspace is the before-image", label, r))
	}
	if d := wtxtest.Debris(e.ws); len(d) > 0 {
		v = append(v, fmt.Sprintf("%s: temporary debris in the workspace: %v", label, d))
	}
	var list struct {
		Stages []struct {
			Tx    string `json:"tx"`
			State string `json:"state"`
		} `json:"stages"`
	}
	if err := json.Unmarshal([]byte(rn.stdout), &list); err != nil {
		return append(v, fmt.Sprintf("%s: list --json: %v", label, err))
	}
	for _, s := range list.Stages {
		if s.State == "open" {
			v = append(v, described(label+", stage "+s.Tx, e.base, e.status(s.Tx))...)
		}
	}
	return v
}
