package semantic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// lcEnv is one workspace and its state root, for the lifecycle promises
// (L-001, L-004, L-007) and the lifecycle property test.
type lcEnv struct {
	t      testing.TB
	bin    string
	ws, st string
	// marks is a directory outside the workspace where commands run in a
	// stage leave marks the test can see at once (the view hides their
	// writes in the workspace).
	marks string
	env   []string
}

func newLCEnv(t testing.TB, failpoints bool, env ...string) *lcEnv {
	t.Helper()
	base := t.TempDir()
	e := &lcEnv{t: t, bin: wtxtest.Binary(t, failpoints), ws: filepath.Join(base, "ws"), st: filepath.Join(base, "state"),
		marks: filepath.Join(base, "marks"), env: env}
	for _, d := range []string{e.ws, e.marks} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{"a.txt": "a\n", "b.txt": "b\n", "src/main.go": "package main\n"} {
		p := filepath.Join(e.ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func (e *lcEnv) command(stdin string, args ...string) *exec.Cmd {
	cmd := exec.Command(e.bin, append([]string{"-C", e.ws}, args...)...)
	cmd.Env = append(append(os.Environ(), "WTX_STATE_DIR="+e.st, "MARKS="+e.marks, "WTX="+e.bin), e.env...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	return cmd
}

// run runs wtx with args (stdin may be "").
func (e *lcEnv) runIn(stdin string, args ...string) wtxResult {
	e.t.Helper()
	cmd := e.command(stdin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatalf("wtx %v: %v", args, err)
	}
	return wtxResult{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
}

func (e *lcEnv) run(args ...string) wtxResult { e.t.Helper(); return e.runIn("", args...) }

// must runs wtx and fails the test unless it exits 0.
func (e *lcEnv) must(args ...string) wtxResult {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("wtx %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// lcAnswer is the part of a --json answer the lifecycle tests read.
type lcAnswer struct {
	Status   string `json:"status"`
	Tx       string `json:"tx"`
	State    string `json:"state"`
	Settled  bool   `json:"settled"`
	ExitCode *int   `json:"exit_code"`
	OpID     string `json:"op_id"`
	Running  bool   `json:"running"`
	Run      *struct {
		PID int `json:"pid"`
	} `json:"run"`
	ChangesetDigest  string     `json:"changeset_digest"`
	Changes          []lcChange `json:"changes"`
	NotTransactional []string   `json:"not_transactional"`
	TxOps            []struct {
		Kind   string `json:"kind"`
		Status string `json:"status"`
	} `json:"tx_ops"`
	Stages []struct {
		Tx      string `json:"tx"`
		State   string `json:"state"`
		Running bool   `json:"running"`
	} `json:"stages"`
	Error struct {
		Code     string `json:"code"`
		Message  string `json:"message"`
		ExitCode int    `json:"exit_code"`
		Repairs  []struct {
			Action  string `json:"action"`
			Command string `json:"command"`
		} `json:"repairs"`
	} `json:"error"`
}

type lcChange struct {
	Path   string `json:"path"`
	Action string `json:"action"`
	Type   string `json:"type"`
	Digest string `json:"digest"`
}

func (e *lcEnv) answer(r wtxResult) lcAnswer {
	e.t.Helper()
	var a lcAnswer
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		e.t.Fatalf("not one JSON answer (exit %d): %v\nstdout: %s\nstderr: %s", r.code, err, r.stdout, r.stderr)
	}
	return a
}

// bgRun is a 'wtx run' in the background.
type bgRun struct {
	cmd   *exec.Cmd
	token string
	done  chan struct{}
	out   bytes.Buffer
	err   bytes.Buffer
}

// startRun starts 'wtx run ARGS...' in the background; its command must
// contain token (the test finds what it leaves behind by it).
func (e *lcEnv) startRun(token string, args ...string) *bgRun {
	e.t.Helper()
	b := &bgRun{cmd: e.command("", append([]string{"run"}, args...)...), token: token, done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.err
	// A killed wtx may leave its command holding the output pipes (until
	// every process of a stage is contained): do not wait for them.
	b.cmd.WaitDelay = time.Second
	if err := b.cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }() // the exit status is read from ProcessState
	e.t.Cleanup(func() { b.stop(syscall.SIGKILL) })
	return b
}

// waitMark waits until the mark file name exists (a command run in a
// stage made it), or fails the test.
func (e *lcEnv) waitMark(name string, b *bgRun) {
	e.t.Helper()
	deadline := time.Now().Add(wtxtest.Patience(e.t))
	for time.Now().Before(deadline) {
		if _, err := os.Stat(filepath.Join(e.marks, name)); err == nil {
			return
		}
		if b != nil {
			select {
			case <-b.done:
				e.t.Fatalf("wtx run ended before mark %s: %v\nstdout: %s\nstderr: %s", name, b.cmd.ProcessState, b.out.String(), b.err.String())
			default:
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("no mark %s", name)
}

// stop signals the background wtx and waits for it (and, by its token,
// for anything it left behind: before every process of a stage is
// contained, a SIGKILLed wtx leaves its command running).
func (b *bgRun) stop(sig syscall.Signal) {
	select {
	case <-b.done:
	default:
		_ = b.cmd.Process.Signal(sig) // it may have just ended
		select {
		case <-b.done:
		case <-time.After(15 * time.Second):
			_ = b.cmd.Process.Kill() // a wtx that ignores the signal is a failure the caller sees
			<-b.done
		}
	}
	killToken(b.token)
}

// killToken ends the processes whose command line holds token, by pid.
func killToken(token string) {
	if token == "" {
		return
	}
	for i := 0; i < 50; i++ {
		pids := pidsWith(token)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL) // it may be gone already
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func pidsWith(token string) []int {
	ents, _ := os.ReadDir("/proc") // no /proc: nothing to find
	var pids []int
	for _, d := range ents {
		pid, err := strconv.Atoi(d.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err == nil && bytes.Contains(bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}), []byte(token)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// waitRunning waits until 'wtx status T' says running is want.
func (e *lcEnv) waitRunning(tx string, want bool) lcAnswer {
	e.t.Helper()
	deadline := time.Now().Add(wtxtest.Patience(e.t))
	var a lcAnswer
	for time.Now().Before(deadline) {
		a = e.answer(e.must("--json", "status", tx))
		if a.Running == want {
			return a
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.t.Fatalf("stage %s: running is never %v", tx, want)
	return a
}

// stageTx returns the id of the only open stage.
func (e *lcEnv) stageTx() string {
	e.t.Helper()
	a := e.answer(e.must("--json", "list"))
	if len(a.Stages) != 1 {
		e.t.Fatalf("want one open stage, have %d", len(a.Stages))
	}
	return a.Stages[0].Tx
}

// stateOf returns the recorded state of stage tx.
func (e *lcEnv) stateOf(tx string) string {
	e.t.Helper()
	for _, s := range e.answer(e.must("--json", "list", "--settled")).Stages {
		if s.Tx == tx {
			return s.State
		}
	}
	e.t.Fatalf("no stage %s in list --settled", tx)
	return ""
}

// states returns the recorded state of every stage.
func (e *lcEnv) states() map[string]string {
	e.t.Helper()
	m := map[string]string{}
	for _, s := range e.answer(e.must("--json", "list", "--settled")).Stages {
		m[s.Tx] = s.State
	}
	return m
}

func (r wtxResult) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}
