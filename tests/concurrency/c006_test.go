package concurrency

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// shared are the files the processes append to, one or two a round, so
// rounds of different processes overlap; the external writer appends to
// the first extShared of them.
var shared = []string{"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"}

const extShared = 4

// round is what one process did in one round.
type round struct {
	proc, n    int
	files      []string // shared files it appended its line to
	own        string   // the file of its own it created
	staged     bool     // wtx run made the stage
	openErr    string   // why it did not
	code       int      // wtx apply's exit status
	errCode    string   // its error code when refused
	start, end time.Time
}

func (r *round) line() string { return fmt.Sprintf("p%d r%d", r.proc, r.n) }

// extEdit is one external edit: a line appended to file, in place or, when
// replace is set, by writing a copy next to the workspace and renaming it
// over the file between read and done.
type extEdit struct {
	file, line string
	replace    bool
	read, done time.Time
}

// outcome is what a harness run saw.
type outcome struct {
	applied, refused int
	unstaged         map[string]int
	ext              int
	lostExternal     []string
	violations       []string
}

// harness runs procs processes of rounds rounds each against one
// workspace, with an external writer, and checks the C-006 invariants.
func harness(t *testing.T, bin string, extra []string, procs, rounds int) outcome {
	t.Helper()
	root := t.TempDir()
	e := env{bin: bin, ws: filepath.Join(root, "ws"), state: filepath.Join(root, "state"), extra: extra}
	scratch := filepath.Join(root, "scratch")
	for _, d := range []string{filepath.Join(e.ws, "own"), scratch} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range shared {
		if err := os.WriteFile(filepath.Join(e.ws, f), []byte("base "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	stop := make(chan struct{})
	var extLog []extEdit
	var extWG sync.WaitGroup
	extWG.Add(1)
	go func() {
		defer extWG.Done()
		extLog = externalWriter(t, e.ws, scratch, stop)
	}()

	results := make([][]round, procs)
	var wg sync.WaitGroup
	for p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(p), uint64(time.Now().UnixNano())))
			for n := range rounds {
				results[p] = append(results[p], doRound(t, e, rng, p, n))
			}
		}()
	}
	wg.Wait()
	close(stop)
	extWG.Wait()
	if t.Failed() {
		return outcome{}
	}
	return check(t, e.ws, results, extLog)
}

// doRound opens a stage that appends the round's line to one or two shared files
// and creates the round's own file, then applies it.
func doRound(t *testing.T, e env, rng *rand.Rand, p, n int) round {
	r := round{proc: p, n: n, own: fmt.Sprintf("own/p%d-r%d", p, n)}
	i := rng.IntN(len(shared))
	r.files = []string{shared[i]}
	if rng.IntN(2) == 0 {
		r.files = append(r.files, shared[(i+1+rng.IntN(len(shared)-1))%len(shared)])
	}
	script := fmt.Sprintf("echo '%s' > %s", r.line(), r.own)
	for _, f := range r.files {
		script += fmt.Sprintf(" && echo '%s' >> %s", r.line(), f)
	}
	r.start = time.Now()
	tx, res := e.stage(t, script)
	if tx == "" {
		// A stage cannot open while a file it copies is being replaced
		// by the external writer; that is reported, and loses no write.
		// (Staging holds the workspace lock, so another process's apply
		// is never seen half done.)
		out := res.stdout + res.stderr
		switch {
		case strings.Contains(out, "changed-while-read"):
			r.openErr = "changed-while-read"
		default:
			t.Errorf("p%d r%d: wtx run exited %d: %s%s", p, n, res.code, res.stdout, res.stderr)
		}
		return r
	}
	r.staged = true
	res = e.wtx(t, nil, "--json", "apply", tx)
	r.end = time.Now()
	r.code = res.code
	switch res.code {
	case 0:
	case 2:
		if rep := parse(t, res); rep.Error != nil {
			r.errCode = rep.Error.Code
		}
	default:
		t.Errorf("p%d r%d: wtx apply exited %d: %s%s", p, n, res.code, res.stdout, res.stderr)
	}
	return r
}

// externalWriter appends numbered lines to shared files every 20-60 ms
// (often enough to hit stages, seldom enough to let some apply) until stop
// is closed, alternating in-place appends and rename-replaces, and returns
// the exact log of what it wrote.
func externalWriter(t *testing.T, ws, scratch string, stop <-chan struct{}) []extEdit {
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	var log []extEdit
	for i := 0; ; i++ {
		select {
		case <-stop:
			return log
		case <-time.After(time.Duration(20+rng.IntN(40)) * time.Millisecond):
		}
		ed := extEdit{file: shared[rng.IntN(extShared)], line: fmt.Sprintf("x%d", i), replace: rng.IntN(2) == 0}
		p := filepath.Join(ws, ed.file)
		ed.read = time.Now()
		if ed.replace {
			old, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("external writer: %v", err)
				return log
			}
			tmp := filepath.Join(scratch, "next")
			if err := os.WriteFile(tmp, append(old, ed.line+"\n"...), 0o644); err != nil {
				t.Errorf("external writer: %v", err)
				return log
			}
			if err := os.Rename(tmp, p); err != nil {
				t.Errorf("external writer: %v", err)
				return log
			}
		} else {
			f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Errorf("external writer: %v", err)
				return log
			}
			_, err = f.WriteString(ed.line + "\n")
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				t.Errorf("external writer: %v", err)
				return log
			}
		}
		ed.done = time.Now()
		log = append(log, ed)
	}
}

// check compares the final workspace with what every writer did:
//   - every external line is still in its file (nobody deletes lines, so a
//     missing one was overwritten by an apply whose stage never saw it);
//   - an acknowledged round's own file exists and its line is in each of
//     its shared files, unless an external rename-replace of that file read
//     it before the apply ended and renamed after the apply started (the
//     external writer's own read-modify-write can drop it; wtx cannot see
//     that);
//   - a refused round left nothing: no own file, its line in no file.
func check(t *testing.T, ws string, results [][]round, extLog []extEdit) outcome {
	t.Helper()
	lines := map[string]map[string]int{}
	for _, f := range shared {
		data, err := os.ReadFile(filepath.Join(ws, f))
		if err != nil {
			t.Fatal(err)
		}
		lines[f] = map[string]int{}
		for _, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
			lines[f][l]++
		}
	}
	o := outcome{unstaged: map[string]int{}}
	o.ext = len(extLog)
	for _, ed := range extLog {
		if lines[ed.file][ed.line] != 1 {
			o.lostExternal = append(o.lostExternal, fmt.Sprintf("external edit %q of %s: %d copies in the final file", ed.line, ed.file, lines[ed.file][ed.line]))
		}
	}
	excused := func(r round, f string) bool {
		for _, ed := range extLog {
			if ed.replace && ed.file == f && ed.read.Before(r.end) && ed.done.After(r.start) {
				return true
			}
		}
		return false
	}
	for _, rs := range results {
		for _, r := range rs {
			_, ownErr := os.Lstat(filepath.Join(ws, r.own))
			switch {
			case !r.staged:
				o.unstaged[r.openErr]++
			case r.code == 0:
				o.applied++
				if ownErr != nil {
					o.violations = append(o.violations, fmt.Sprintf("p%d r%d applied but %s is missing", r.proc, r.n, r.own))
				}
				for _, f := range r.files {
					if n := lines[f][r.line()]; n != 1 && !(n == 0 && excused(r, f)) {
						o.violations = append(o.violations, fmt.Sprintf("p%d r%d applied but its line is in %s %d times", r.proc, r.n, f, n))
					}
				}
			default:
				o.refused++
				if ownErr == nil {
					o.violations = append(o.violations, fmt.Sprintf("p%d r%d was refused (%s) but %s landed", r.proc, r.n, r.errCode, r.own))
				}
				for _, f := range shared {
					if lines[f][r.line()] != 0 {
						o.violations = append(o.violations, fmt.Sprintf("p%d r%d was refused (%s) but its line is in %s", r.proc, r.n, r.errCode, f))
					}
				}
			}
		}
	}
	return o
}

func TestC_006_ConcurrentAppliesLoseNoWrite(t *testing.T) {
	procs, rounds := 8, 12
	if soak() {
		rounds = 2000
	}
	o := harness(t, wtxtest.Binary(t, false), nil, procs, rounds)
	t.Logf("%d processes x %d rounds: %d applied, %d refused, stages not opened %v; %d external edits; %d lost external edits; %d other violations",
		procs, rounds, o.applied, o.refused, o.unstaged, o.ext, len(o.lostExternal), len(o.violations))
	for _, v := range append(o.lostExternal, o.violations...) {
		t.Error(v)
	}
	if o.applied == 0 || o.refused == 0 {
		t.Errorf("%d applied and %d refused: the rounds did not both land and conflict, so the harness proved little", o.applied, o.refused)
	}
}

// TestC_006_NegativeControlNoCAS runs the same harness with the
// compare-and-swap check switched off: it must lose external edits.
func TestC_006_NegativeControlNoCAS(t *testing.T) {
	procs, rounds := 4, 12
	o := harness(t, wtxtest.Binary(t, true), []string{"WTX_DISABLE=cas"}, procs, rounds)
	t.Logf("negative control (cas disabled), %d processes x %d rounds: %d applied, %d refused; %d of %d external edits lost; %d other violations",
		procs, rounds, o.applied, o.refused, len(o.lostExternal), o.ext, len(o.violations))
	if len(o.lostExternal) == 0 {
		t.Fatal("with the compare-and-swap check disabled no external edit was lost: the harness cannot see a lost edit")
	}
}
