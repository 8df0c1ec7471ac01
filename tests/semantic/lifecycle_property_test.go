package semantic

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// The lifecycle property: random interleavings of runs (whose commands
// leave children behind), applies, drops, per-file writes, forks, wtx run
// inside a stage's view, and runs that hold a stage while others act on it
// and end by SIGTERM or SIGKILL. After every step, every write a command
// made is applied, still staged, or was dropped on request, and no command
// reported a change it did not make. A write by a process that outlived its
// command is only held to this where the run's receipt does not declare
// such processes not transactional.

// notOutliving is the receipt's phrase for what containment covers.
const notOutliving = "processes started by the command that outlive it"

type pStage struct {
	id    string
	state string
	// writes are the files commands and per-file writes made in the stage
	// (path → content).
	writes map[string]string
	// lates are files a child that outlived its command may write into
	// the stage ("late"), each with whether its run declared such
	// processes not transactional; forks inherit them as maybe-present.
	lates map[string]bool
	// forkedLates may be present in a fork (written before the fork).
	forkedLates map[string]bool
}

type pBg struct {
	run   *bgRun
	stage *pStage
}

type pModel struct {
	t      *testing.T
	e      *lcEnv
	r      *rand.Rand
	ws     map[string]string
	stages []*pStage
	bg     *pBg
	k      int
	bad    []string
	// control is set for the negative control: whether a stage shows as
	// running is not compared (the lock that says so is off).
	control bool
	// ops counts the steps by kind.
	ops map[string]int
	// declared counts late writes lost where the run declared outliving
	// processes not transactional (not a violation).
	declared int
}

func (m *pModel) violate(format string, args ...any) {
	m.bad = append(m.bad, fmt.Sprintf("step %d: ", m.k)+fmt.Sprintf(format, args...))
}

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(h[:])
}

func (m *pModel) find(id string) *pStage {
	for _, s := range m.stages {
		if s.id == id {
			return s
		}
	}
	return nil
}

func (m *pModel) running(s *pStage) bool { return m.bg != nil && m.bg.stage == s }

// pick returns a random stage, preferring open ones.
func (m *pModel) pick() *pStage {
	var open []*pStage
	for _, s := range m.stages {
		if s.state == "open" {
			open = append(open, s)
		}
	}
	if len(open) > 0 && m.r.IntN(5) > 0 {
		return open[m.r.IntN(len(open))]
	}
	if len(m.stages) == 0 {
		return nil
	}
	return m.stages[m.r.IntN(len(m.stages))]
}

func (m *pModel) openCount() int {
	n := 0
	for _, s := range m.stages {
		if s.state == "open" {
			n++
		}
	}
	return n
}

// expectRefused checks an answer that must be a refusal with nothing done.
func (m *pModel) expectRefused(what string, r wtxResult, codes ...string) {
	a := m.e.answer(r)
	if r.code == 0 || !slices.Contains(codes, a.Error.Code) {
		m.violate("%s: exit %d, code %q; want one of %v", what, r.code, a.Error.Code, codes)
	}
}

// settledCodes is how an action on a settled stage is refused.
func settledCodes(s *pStage) []string {
	if s.state == "dropped" {
		return []string{"refusal.dropped"}
	}
	return []string{"precondition.stage-settled"}
}

// checkReported checks that each change a command reported for s is one
// the model knows s holds (or may hold).
func (m *pModel) checkReported(what string, s *pStage, changes []lcChange) {
	for _, c := range changes {
		if !m.known(s, c) {
			m.violate("%s reported a change it did not make: %+v", what, c)
		}
	}
}

func (m *pModel) known(s *pStage, c lcChange) bool {
	if c.Action != "added" || c.Type != "file" {
		return false
	}
	if want, ok := s.writes[c.Path]; ok {
		return c.Digest == sum(want)
	}
	if _, ok := s.lates[c.Path]; ok {
		return c.Digest == sum("late")
	}
	return s.forkedLates[c.Path] && c.Digest == sum("late")
}

func (m *pModel) script(child bool) (string, string) {
	m.k++
	p := fmt.Sprintf("p%d", m.k)
	sc := fmt.Sprintf("printf %%s v%d > %s", m.k, p)
	late := ""
	if child {
		late = fmt.Sprintf("l%d", m.k)
		sc += fmt.Sprintf(`; ( sleep 0.2; printf late > %s && : > "$MARKS/%s" ) &`, late, late)
	}
	return sc, late
}

func declares(nt []string) bool { return slices.Contains(nt, notOutliving) }

func (m *pModel) opRun(s *pStage) {
	child := m.r.IntN(2) == 0
	noop := m.r.IntN(6) == 0
	sc, late := m.script(child)
	p, v := fmt.Sprintf("p%d", m.k), fmt.Sprintf("v%d", m.k)
	if noop {
		sc, late = "true", ""
	}
	args := []string{"--json", "run"}
	if s != nil {
		args = append(args, "--tx", s.id)
	}
	r := m.e.run(append(args, "--", "sh", "-c", sc)...)
	what := "run " + sc
	if s != nil {
		what = "run --tx " + s.id + " " + sc
		switch {
		case m.running(s):
			m.expectRefused(what, r, "refusal.stage-busy")
			return
		case s.state != "open":
			m.expectRefused(what, r, settledCodes(s)...)
			return
		}
	}
	if r.code != 0 {
		m.violate("%s: %s", what, r)
		return
	}
	a := m.e.answer(r)
	if s == nil {
		s = &pStage{id: a.Tx, state: "open", writes: map[string]string{}, lates: map[string]bool{}, forkedLates: map[string]bool{}}
		m.stages = append(m.stages, s)
		if noop {
			s.state = "empty"
		}
	}
	if !noop {
		s.writes[p] = v
	}
	if late != "" {
		s.lates[late] = declares(a.NotTransactional)
	}
	m.checkReported(what, s, a.Changes)
	if a.State != s.state {
		m.violate("%s: stage is %s, want %s", what, a.State, s.state)
	}
}

func (m *pModel) opBegin() {
	r := m.e.run("begin")
	if r.code != 0 {
		m.violate("begin: %s", r)
		return
	}
	m.stages = append(m.stages, &pStage{id: strings.TrimSpace(r.stdout), state: "open", writes: map[string]string{}, lates: map[string]bool{}, forkedLates: map[string]bool{}})
}

func (m *pModel) opApply(s *pStage) {
	r := m.e.run("--json", "apply", s.id)
	what := "apply " + s.id
	switch {
	case m.running(s):
		m.expectRefused(what, r, "refusal.stage-busy")
		return
	case s.state == "dropped":
		m.expectRefused(what, r, "refusal.dropped")
		return
	case s.state != "open":
		if r.code != 0 {
			m.violate("%s of a settled stage: %s", what, r)
		}
		return
	}
	if r.code != 0 {
		m.violate("%s: %s", what, r)
		return
	}
	a := m.e.answer(r)
	m.checkReported(what, s, a.Changes)
	for _, c := range a.Changes {
		if m.known(s, c) {
			if w, ok := s.writes[c.Path]; ok {
				m.ws[c.Path] = w
			} else {
				m.ws[c.Path] = "late"
			}
		}
	}
	for p := range s.writes {
		if _, ok := m.ws[p]; !ok {
			m.violate("%s: staged %s did not land", what, p)
		}
	}
	s.state = "applied"
	if len(a.Changes) == 0 {
		s.state = "empty"
	}
}

func (m *pModel) opDrop(s *pStage) {
	r := m.e.run("--json", "drop", s.id)
	what := "drop " + s.id
	switch {
	case m.running(s):
		m.expectRefused(what, r, "refusal.stage-busy")
	case s.state == "applied":
		m.expectRefused(what, r, "precondition.stage-settled")
	case r.code != 0:
		m.violate("%s: %s", what, r)
	case s.state == "open":
		s.state = "dropped"
	}
}

// opDropMany is drop --empty or drop --all.
func (m *pModel) opDropMany() {
	all := m.r.IntN(2) == 0
	flag := "--empty"
	if all {
		flag = "--all"
	}
	r := m.e.run("--json", "drop", flag)
	busy := false
	for _, s := range m.stages {
		if s.state != "open" {
			continue
		}
		if m.running(s) {
			busy = busy || all
			continue
		}
		if all || len(s.writes) == 0 {
			s.state = "dropped"
		}
	}
	if busy && r.code != 2 || !busy && r.code != 0 {
		m.violate("drop %s: %s (a running stage: %v)", flag, r, busy)
	}
}

func (m *pModel) opWrite(s *pStage) {
	m.k++
	p, v := fmt.Sprintf("w%d", m.k), fmt.Sprintf("c%d", m.k)
	r := m.e.runIn(v, "--json", "write", p, "--tx", s.id)
	what := "write " + p + " --tx " + s.id
	switch {
	case m.running(s):
		m.expectRefused(what, r, "refusal.stage-busy")
	case s.state != "open":
		m.expectRefused(what, r, settledCodes(s)...)
	case r.code != 0:
		m.violate("%s: %s", what, r)
	default:
		s.writes[p] = v
	}
}

func (m *pModel) opFork(s *pStage) {
	r := m.e.run("--json", "fork", s.id)
	what := "fork " + s.id
	switch {
	case m.running(s):
		m.expectRefused(what, r, "refusal.stage-busy")
	case s.state != "open":
		m.expectRefused(what, r, settledCodes(s)...)
	case r.code != 0:
		m.violate("%s: %s", what, r)
	default:
		f := &pStage{id: m.e.answer(r).Tx, state: "open", writes: map[string]string{}, lates: map[string]bool{}, forkedLates: map[string]bool{}}
		for p, v := range s.writes {
			f.writes[p] = v
		}
		for l := range s.lates {
			f.forkedLates[l] = true
		}
		for l := range s.forkedLates {
			f.forkedLates[l] = true
		}
		m.stages = append(m.stages, f)
	}
}

// opInside runs wtx inside the stage's view, acting on that stage: it must
// be refused, and nothing of the stage may change.
func (m *pModel) opInside(s *pStage) {
	m.k++
	mark := fmt.Sprintf("in%d", m.k)
	inner := [][]string{{"apply", s.id}, {"drop", s.id}, {"write", fmt.Sprintf("x%d", m.k), "--tx", s.id}, {"run", "--tx", s.id, "--", "true"}, {"apply"}}[m.r.IntN(5)]
	sc := fmt.Sprintf(`echo inner | "$WTX" %s > /dev/null 2>&1; echo $? > "$MARKS/%s"`, strings.Join(inner, " "), mark)
	r := m.e.run("--json", "run", "--tx", s.id, "--", "sh", "-c", sc)
	what := "wtx " + strings.Join(inner, " ") + " inside " + s.id
	if r.code != 0 {
		m.violate("%s: the outer run: %s", what, r)
		return
	}
	got, err := os.ReadFile(filepath.Join(m.e.marks, mark))
	code, _ := strconv.Atoi(strings.TrimSpace(string(got)))
	if err != nil || code == 0 {
		m.violate("%s: the inner wtx exited %q (%v); want a refusal", what, got, err)
	}
	m.checkReported(what, s, m.e.answer(r).Changes)
}

func (m *pModel) opBgStart(s *pStage) {
	m.k++
	p, v := fmt.Sprintf("b%d", m.k), fmt.Sprintf("v%d", m.k)
	token := sleepToken()
	// When the run is stopped, the command writes once more on its way
	// out: that write must stay staged like any other.
	late := fmt.Sprintf("e%d", m.k)
	b := m.e.startRun(token, "--tx", s.id, "--", "sh", "-c", fmt.Sprintf(
		`trap 'printf late > %s && : > "$MARKS/%s"; exit 0' TERM; printf %s > %s; : > "$MARKS/%s"; %s & wait`, late, late, v, p, p, token))
	m.e.waitMark(p, b)
	s.writes[p] = v
	s.lates[late] = false
	m.bg = &pBg{run: b, stage: s}
}

func (m *pModel) opBgEnd() {
	sig := syscall.SIGTERM
	if m.r.IntN(2) == 0 {
		sig = syscall.SIGKILL
	}
	b := m.bg
	b.run.stop(sig)
	m.bg = nil
	a := m.e.waitRunning(b.stage.id, false)
	n := len(a.TxOps)
	want := "done"
	if sig == syscall.SIGKILL {
		want = "interrupted"
	}
	if n == 0 || a.TxOps[n-1].Kind != "run" || a.TxOps[n-1].Status != want {
		m.violate("run ended by %v: last op %+v, want a run %s", sig, a.TxOps, want)
	}
	if a.State != "open" {
		m.violate("run ended by %v: stage %s, want open", sig, a.State)
	}
}

// check compares wtx's view of every stage and the workspace with the
// model.
func (m *pModel) check() {
	list := m.e.answer(m.e.must("--json", "list", "--settled"))
	seen := map[string]bool{}
	for _, ls := range list.Stages {
		seen[ls.Tx] = true
		s := m.find(ls.Tx)
		if s == nil {
			m.violate("unknown stage %s (%s)", ls.Tx, ls.State)
			continue
		}
		if ls.State != s.state || ls.Running != m.running(s) && !m.control {
			m.violate("stage %s is %s (running %v), want %s (running %v)", s.id, ls.State, ls.Running, s.state, m.running(s))
		}
	}
	for _, s := range m.stages {
		if !seen[s.id] {
			m.violate("stage %s is gone", s.id)
		}
	}
	// Late files: a mark means the write was made.
	for _, s := range m.stages {
		for l, declared := range s.lates {
			if _, err := os.Stat(filepath.Join(m.e.marks, l)); err != nil {
				continue
			}
			switch s.state {
			case "open":
				if _, ok := s.writes[l]; !ok {
					s.writes[l] = "late" // the diff below must show it
				}
			case "applied", "empty":
				if _, ok := m.ws[l]; !ok {
					if got, err := os.ReadFile(filepath.Join(m.e.ws, l)); err == nil && string(got) == "late" {
						m.ws[l] = "late"
					} else if declared {
						m.declared++
						delete(s.lates, l)
					} else {
						m.violate("late write %s of contained stage %s (%s) was lost", l, s.id, s.state)
						delete(s.lates, l)
					}
				}
			}
		}
	}
	for _, s := range m.stages {
		if s.state != "open" {
			continue
		}
		a := m.e.answer(m.e.must("--json", "diff", s.id))
		have := map[string]bool{}
		for _, c := range a.Changes {
			have[c.Path] = true
			if !m.known(s, c) {
				m.violate("stage %s holds a change nobody made: %+v", s.id, c)
			} else if _, ok := s.writes[c.Path]; !ok {
				s.writes[c.Path] = "late"
			}
		}
		for p := range s.writes {
			if !have[p] {
				m.violate("stage %s lost the staged write %s", s.id, p)
			}
		}
	}
	got := map[string]string{}
	_ = filepath.WalkDir(m.e.ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil // a vanished entry shows as missing below
		}
		rel, _ := filepath.Rel(m.e.ws, p)
		data, _ := os.ReadFile(p)
		got[rel] = string(data)
		return nil
	})
	for p, want := range m.ws {
		if got[p] != want {
			m.violate("workspace %s holds %q, want %q", p, got[p], want)
		}
	}
	for p, have := range got {
		if _, ok := m.ws[p]; !ok {
			m.violate("workspace holds %s (%q) that nothing applied", p, have)
		}
	}
}

func (m *pModel) step() {
	if m.bg != nil && m.r.IntN(4) == 0 {
		m.ops["end a holding run"]++
		m.opBgEnd()
		return
	}
	s := m.pick()
	n := m.r.IntN(20)
	switch {
	case s == nil || n < 3 || m.openCount() == 0 && n < 8:
		if m.openCount() < 4 {
			if m.r.IntN(3) == 0 {
				m.ops["begin"]++
				m.opBegin()
			} else {
				m.ops["run (new stage)"]++
				m.opRun(nil)
			}
			return
		}
		m.ops["drop --empty/--all"]++
		m.opDropMany()
	case n < 5:
		m.ops["run --tx"]++
		m.opRun(s)
	case n < 8:
		m.ops["apply"]++
		m.opApply(s)
	case n < 10:
		m.ops["drop"]++
		m.opDrop(s)
	case n < 12:
		m.ops["write --tx"]++
		m.opWrite(s)
	case n < 13:
		if m.openCount() < 4 {
			m.ops["fork"]++
			m.opFork(s)
		} else {
			m.ops["drop --empty/--all"]++
			m.opDropMany()
		}
	case n < 15:
		if s.state == "open" && !m.running(s) {
			m.ops["wtx inside the view"]++
			m.opInside(s)
		} else {
			m.ops["write --tx"]++
			m.opWrite(s)
		}
	case n < 18:
		if m.bg == nil && s.state == "open" {
			m.ops["start a holding run"]++
			m.opBgStart(s)
		} else {
			m.ops["apply"]++
			m.opApply(s)
		}
	default:
		m.ops["drop --empty/--all"]++
		m.opDropMany()
	}
}

// propertyRun is what a set of interleavings found.
type propertyRun struct {
	interleavings, steps, violations, declared atomic.Int64
	mu                                         sync.Mutex
	ops                                        map[string]int
}

func (pr *propertyRun) addOps(ops map[string]int) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ops == nil {
		pr.ops = map[string]int{}
	}
	for k, n := range ops {
		pr.ops[k] += n
	}
}

// runProperty runs one interleaving per seed, each as a parallel subtest,
// and reports its violations through report (t.Errorf for the property,
// t.Logf for the negative control).
func runProperty(t *testing.T, seeds []uint64, steps int, failpoints bool, env []string, pr *propertyRun, report func(t *testing.T, format string, args ...any)) {
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			e := newLCEnv(t, failpoints, env...)
			m := &pModel{t: t, e: e, r: rand.New(rand.NewPCG(seed, 0x11fe)), ws: map[string]string{}, control: failpoints, ops: map[string]int{}}
			for name, content := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "src/main.go": "package main\n"} {
				m.ws[name] = content
			}
			for i := 0; i < steps && len(m.bad) == 0; i++ {
				m.step()
				m.check()
				pr.steps.Add(1)
			}
			if m.bg != nil && len(m.bad) == 0 {
				m.opBgEnd()
				m.check()
			}
			pr.interleavings.Add(1)
			pr.violations.Add(int64(len(m.bad)))
			pr.declared.Add(int64(m.declared))
			pr.addOps(m.ops)
			for _, v := range m.bad {
				report(t, "seed %d (replay: WTX_LIFECYCLE_SEED=%d go test ./tests/semantic -run TestLifecycleProperty): %s", seed, seed, v)
			}
		})
	}
}

// TestLifecycleProperty runs the lifecycle property over seeded random
// interleavings: a few short ones by default, many long ones with
// WTX_SOAK=1. Replay one with WTX_LIFECYCLE_SEED=N.
func TestLifecycleProperty(t *testing.T) {
	interleavings, steps := 3, 10
	if os.Getenv("WTX_SOAK") == "1" {
		interleavings, steps = 60, 40
	}
	seeds := make([]uint64, interleavings)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	if s := os.Getenv("WTX_LIFECYCLE_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{n}
	}
	var pr propertyRun
	t.Cleanup(func() {
		t.Logf("lifecycle property: %d interleavings, %d steps, %d violations; %d late writes of uncontained runs lost as declared; steps: %v",
			pr.interleavings.Load(), pr.steps.Load(), pr.violations.Load(), pr.declared.Load(), pr.ops)
	})
	runProperty(t, seeds, steps, false, nil, &pr, func(t *testing.T, format string, args ...any) { t.Errorf(format, args...) })
}

// TestLifecycleProperty_NegativeControlNoBusyLock runs interleavings with
// the busy lock switched off: they must find violations.
func TestLifecycleProperty_NegativeControlNoBusyLock(t *testing.T) {
	var pr propertyRun
	t.Run("control", func(t *testing.T) {
		runProperty(t, []uint64{101}, 12, true, []string{"WTX_DISABLE=busy"}, &pr, func(t *testing.T, format string, args ...any) { t.Logf(format, args...) })
	})
	t.Logf("negative control (busy lock off): %d interleavings, %d steps, %d violations", pr.interleavings.Load(), pr.steps.Load(), pr.violations.Load())
	if pr.violations.Load() == 0 {
		t.Fatal("with the busy lock switched off the property held: it cannot fail")
	}
}
