package semantic

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// sleepToken is a command line no other process has: "sleep 6NNNN", so a
// test can find (and end) what a killed wtx left running.
func sleepToken() string { return fmt.Sprintf("sleep 6%04d", rand.IntN(10000)) }

// busyRefused are the commands L-001 refuses while a run holds stage T,
// each with the stdin it needs.
func busyRefused(tx string) []struct {
	args  []string
	stdin string
} {
	return []struct {
		args  []string
		stdin string
	}{
		{[]string{"apply", tx}, ""},
		{[]string{"apply", tx, "--path", "r.txt"}, ""},
		{[]string{"drop", tx}, ""},
		{[]string{"drop", "--all"}, ""},
		{[]string{"fork", tx}, ""},
		{[]string{"rebase", tx}, ""},
		{[]string{"drop-op", tx, "1"}, ""},
		{[]string{"write", "new.txt", "--tx", tx}, "new\n"},
		{[]string{"edit", "a.txt", "--old", "a", "--new", "z", "--tx", tx}, ""},
		{[]string{"rm", "b.txt", "--tx", tx}, ""},
		{[]string{"run", "--tx", tx, "--", "sh", "-c", "echo second > second.txt"}, ""},
		{[]string{"shell", tx}, "echo shell > shell.txt\n"},
	}
}

// checkL001 holds a stage with a real 'wtx run -- sleep' and tries every
// command L-001 refuses on it. It returns what broke the promise: a
// command that was not refused as refusal.stage-busy with exit 2, or one
// that changed the workspace or the stage's change set. With control set
// it returns after the refusals (the negative control runs with the lock
// switched off, where what follows would not hold either).
func checkL001(t *testing.T, e *lcEnv, control bool) []string {
	token := sleepToken()
	b := e.startRun(token, "--name", "held", "--", "sh", "-c", `echo r > r.txt; : > "$MARKS/started"; exec `+token)
	e.waitMark("started", b)
	tx := e.stageTx()
	var st lcAnswer
	if control {
		st = e.answer(e.must("--json", "status", tx)) // nothing holds the stage: it is never running
	} else {
		st = e.waitRunning(tx, true)
	}
	var bad []string
	if st.Run == nil || st.Run.PID != b.cmd.Process.Pid {
		bad = append(bad, fmt.Sprintf("status names run %+v, want wtx pid %d", st.Run, b.cmd.Process.Pid))
	}
	if ls := e.answer(e.must("--json", "list")); len(ls.Stages) != 1 || !ls.Stages[0].Running {
		bad = append(bad, fmt.Sprintf("list does not show the stage running: %+v", ls.Stages))
	}
	if r := e.must("list"); !strings.Contains(r.stdout, "running") {
		bad = append(bad, "list (human) does not say running:\n"+r.stdout)
	}
	ws := wtxtest.MustSnapshot(t, e.ws)
	digest := st.ChangesetDigest
	for _, c := range busyRefused(tx) {
		r := e.runIn(c.stdin, append([]string{"--json"}, c.args...)...)
		what := "wtx " + strings.Join(c.args, " ")
		a := e.answer(r)
		switch {
		case r.code != 2 || a.Error.Code != "refusal.stage-busy":
			bad = append(bad, fmt.Sprintf("%s while running: exit %d, code %q; want 2, refusal.stage-busy", what, r.code, a.Error.Code))
		default:
			kill := false
			for _, rp := range a.Error.Repairs {
				kill = kill || rp.Command == "kill "+strconv.Itoa(b.cmd.Process.Pid)
			}
			if !kill {
				bad = append(bad, fmt.Sprintf("%s: the refusal names no 'kill %d' repair: %+v", what, b.cmd.Process.Pid, a.Error.Repairs))
			}
		}
		if got := wtxtest.MustSnapshot(t, e.ws); got != ws {
			bad = append(bad, what+" while running changed the workspace")
			ws = got
		}
		now := e.answer(e.run("--json", "status", tx))
		if now.ChangesetDigest != digest || now.State != "open" || !now.Running {
			bad = append(bad, fmt.Sprintf("%s while running: stage now %s (running %v), changeset %s; want open, running, %s",
				what, now.State, now.Running, now.ChangesetDigest, digest))
		}
	}
	if control {
		return bad
	}
	// The run ends: the stage is open again, and the same commands are
	// accepted (the refusals were the run's doing).
	b.stop(syscall.SIGTERM)
	if a := e.waitRunning(tx, false); a.State != "open" || len(a.Changes) != 1 || a.Changes[0].Path != "r.txt" {
		bad = append(bad, fmt.Sprintf("after the run: state %s, changes %+v; want open with r.txt", a.State, a.Changes))
	}
	for _, c := range [][]string{{"write", "new.txt", "--tx", tx}, {"edit", "a.txt", "--old", "a", "--new", "z", "--tx", tx},
		{"rm", "b.txt", "--tx", tx}, {"fork", tx}, {"drop-op", tx, "4"}, {"run", "--tx", tx, "--", "sh", "-c", "echo second > second.txt"}} {
		if r := e.runIn("new\n", c...); r.code != 0 {
			bad = append(bad, fmt.Sprintf("wtx %s after the run: %s", strings.Join(c, " "), r))
		}
	}
	if r := e.run("apply", tx); r.code != 0 {
		bad = append(bad, "apply after the run: "+r.String())
	}
	for name, want := range map[string]string{"r.txt": "r\n", "new.txt": "new\n", "second.txt": "second\n", "a.txt": "z\n"} {
		if got, err := os.ReadFile(filepath.Join(e.ws, name)); err != nil || string(got) != want {
			bad = append(bad, fmt.Sprintf("after apply %s holds %q (%v), want %q", name, got, err, want))
		}
	}
	if got, err := os.ReadFile(filepath.Join(e.ws, "b.txt")); err != nil || string(got) != "b\n" {
		bad = append(bad, fmt.Sprintf("b.txt after drop-op of its rm and apply: %q, %v", got, err))
	}
	return bad
}

// TestL001_RefusedWhileRunning checks L-001: while a real 'wtx run' holds a
// stage, apply, drop, fork, rebase, drop-op, write, edit, rm, a second run
// and a shell on it are refused as refusal.stage-busy (exit 2) with the
// workspace and the change set unchanged; list and status show it running
// with the pid of the wtx that runs it. Once the run ends, the same
// commands are accepted.
func TestL001_RefusedWhileRunning(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, false)
	for _, v := range checkL001(t, e, false) {
		t.Error(v)
	}
}

// TestL001_NegativeControlNoBusyLock runs the same check with the busy lock
// switched off: it must find commands that were not refused.
func TestL001_NegativeControlNoBusyLock(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, true, "WTX_DISABLE=busy")
	bad := checkL001(t, e, true)
	t.Logf("negative control (busy lock off): %d violations", len(bad))
	if len(bad) == 0 {
		t.Fatal("with the busy lock switched off every command was still refused: the check cannot fail")
	}
}

// TestL001_KilledRunInterrupted checks the end of a killed run: a SIGKILLed
// 'wtx run -- sh -c "…; sleep"' leaves its stage open (not running) once
// nothing of the run is left, its run op marked interrupted, and what the
// command wrote before the kill still staged.
func TestL001_KilledRunInterrupted(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, false)
	token := sleepToken()
	b := e.startRun(token, "--", "sh", "-c", `echo before > k.txt; : > "$MARKS/written"; `+token)
	e.waitMark("written", b)
	tx := e.stageTx()
	if a := e.waitRunning(tx, true); len(a.TxOps) == 0 || a.TxOps[len(a.TxOps)-1].Status != "running" {
		t.Errorf("while running, the run op is %+v; want status running", a.TxOps)
	}
	b.stop(syscall.SIGKILL)
	a := e.waitRunning(tx, false)
	if a.State != "open" {
		t.Errorf("after the kill the stage is %s, want open", a.State)
	}
	if len(a.TxOps) == 0 || a.TxOps[len(a.TxOps)-1].Kind != "run" || a.TxOps[len(a.TxOps)-1].Status != "interrupted" {
		t.Errorf("after the kill the run op is %+v; want status interrupted", a.TxOps)
	}
	if len(a.Changes) != 1 || a.Changes[0].Path != "k.txt" {
		t.Errorf("after the kill the change set is %+v; want k.txt", a.Changes)
	}
	// The stage is usable again: a run in it finishes as done.
	e.must("run", "--tx", tx, "--", "sh", "-c", "echo after > k2.txt")
	a = e.answer(e.must("--json", "status", tx))
	if n := len(a.TxOps); n < 2 || a.TxOps[n-1].Status != "done" || a.TxOps[n-2].Status != "interrupted" {
		t.Errorf("run ops after a second run: %+v; want interrupted, done", a.TxOps)
	}
	e.must("apply", tx)
	if got, err := os.ReadFile(filepath.Join(e.ws, "k.txt")); err != nil || string(got) != "before\n" {
		t.Errorf("k.txt after apply: %q, %v", got, err)
	}
}

// TestL001_KilledRunReceiptInterrupted checks the receipt of a killed run:
// once the stage is free again, 'wtx receipt T' is that run's receipt —
// its command, the change set as found (f), no exit status, interrupted —
// and 'receipt verify' accepts it, and refuses it without the interrupted
// field.
func TestL001_KilledRunReceiptInterrupted(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, false)
	tx, r := killedRunReceipt(t, e, false)
	if r.code != 0 {
		t.Fatalf("wtx receipt %s after the kill: %s", tx, r)
	}
	var a struct {
		Receipt  map[string]any  `json:"receipt"`
		Envelope json.RawMessage `json:"envelope"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
		t.Fatalf("receipt answer: %v\n%s", err, r.stdout)
	}
	rc := a.Receipt
	cmd, _ := rc["command"].([]any)
	counts, _ := rc["counts"].(map[string]any)
	if rc["kind"] != "run" || rc["interrupted"] != true || rc["exit_code"] != nil || len(cmd) != 3 || cmd[0] != "sh" ||
		counts["added"] != float64(1) {
		t.Errorf("receipt of the killed run: %v; want kind run, interrupted, exit_code null, command sh -c …, one path added", rc)
	}
	p := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(p, a.Envelope, 0o644); err != nil {
		t.Fatal(err)
	}
	e.must("receipt", "verify", p)
	// Control: the same receipt without its interrupted field fails.
	var env struct {
		PayloadType string          `json:"payloadType"`
		Payload     []byte          `json:"payload"`
		Signatures  json.RawMessage `json:"signatures"`
	}
	if err := json.Unmarshal(a.Envelope, &env); err != nil {
		t.Fatalf("envelope: %v\n%s", err, a.Envelope)
	}
	var st map[string]any
	if err := json.Unmarshal(env.Payload, &st); err != nil {
		t.Fatal(err)
	}
	delete(st["predicate"].(map[string]any), "interrupted")
	env.Payload, _ = json.Marshal(st) // it unmarshalled a moment ago
	body, _ := json.Marshal(env)      // as above
	if err := os.WriteFile(p, body, 0o644); err != nil {
		t.Fatal(err)
	}
	if r := e.run("receipt", "verify", p); r.code == 0 {
		t.Errorf("receipt verify accepts the receipt without its interrupted field: %s", r)
	}
	// The stage stays open with what the command wrote.
	if a := e.answer(e.must("--json", "status", tx)); a.State != "open" || len(a.Changes) != 1 || a.Changes[0].Path != "f" {
		t.Errorf("after the kill: state %s, changes %+v; want open with f", a.State, a.Changes)
	}
}

// TestL001_KilledRunReceiptNegativeControl switches the interrupted run's
// receipt off: 'wtx receipt T' then finds none, which the test above
// would see.
func TestL001_KilledRunReceiptNegativeControl(t *testing.T) {
	t.Parallel()
	e := newLCEnv(t, true, "WTX_DISABLE=interrupted-receipt")
	tx, r := killedRunReceipt(t, e, true)
	if r.code == 0 {
		t.Errorf("with the receipt switched off, wtx receipt %s still answers: %s", tx, r)
	}
}

// killedRunReceipt SIGKILLs a real 'wtx run -- sh -c "echo x > f; sleep"'
// once f is written, waits until the stage is free (by 'wtx status' when
// viaStatus is set, else by asking for the receipt until there is one),
// and asks for its receipt.
func killedRunReceipt(t *testing.T, e *lcEnv, viaStatus bool) (string, wtxResult) {
	token := sleepToken()
	b := e.startRun(token, "--", "sh", "-c", `echo x > f; : > "$MARKS/written"; `+token)
	e.waitMark("written", b)
	tx := e.stageTx()
	b.stop(syscall.SIGKILL)
	if viaStatus {
		e.waitRunning(tx, false)
		return tx, e.run("--json", "receipt", tx)
	}
	// Free again once every process of the run is gone (wtx receipt does
	// not wait for it).
	deadline := time.Now().Add(wtxtest.Patience(e.t))
	for {
		r := e.run("--json", "receipt", tx)
		if r.code == 0 || time.Now().After(deadline) || !strings.Contains(r.stdout, "no receipt") {
			return tx, r
		}
		time.Sleep(50 * time.Millisecond)
	}
}
