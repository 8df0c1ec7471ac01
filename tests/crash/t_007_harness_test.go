package crash

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// The harness of T-007 kills a per-file op (write, edit, rm, a read that
// brings a path up to date, a batch) with SIGKILL on entry to a system call
// (strace's syscall injection), runs the next wtx command, and checks that
// the stage holds exactly what its recorded ops describe: no op left
// pending, the killed op either recorded whole or not at all, and the
// change set equal to the one its ops make of the base.

// killCalls are the system calls a kill lands on: every call that writes a
// file, the database, a directory or a mount, and every sync.
var killCalls = []string{"write", "pwrite64", "fsync", "fdatasync", "rename", "renameat", "renameat2",
	"unlink", "unlinkat", "mkdir", "mkdirat", "rmdir", "fchmod", "fchmodat", "ftruncate", "mount"}

// killPoint is where wtx, or a helper it started, is killed: on entry to
// the n-th call of one system call (counted per thread, as strace counts),
// or at a crash point of the failpoint build (call "failpoint", n its
// number among the points the command hits).
type killPoint struct {
	call string
	n    int
	name string // a crash point's name, for the label
}

func (k killPoint) String() string {
	if k.call == "failpoint" {
		return fmt.Sprintf("crash point %d (%s)", k.n, k.name)
	}
	return fmt.Sprintf("%s #%d", k.call, k.n)
}

// straceOrSkip skips t where strace cannot trace a program.
func straceOrSkip(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("strace"); err != nil {
		t.Skip("strace is not installed: the T-007 harness kills wtx at its system calls with it")
	}
	if out, err := exec.Command("strace", "-qq", "-o", "/dev/null", "-e", "trace=none", "true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v: %s", err, out)
	}
}

// pfSide is a path's state as status shows it.
type pfSide struct {
	Type   string `json:"type"`
	Mode   string `json:"mode"`
	Digest string `json:"digest"`
}

type pfFile struct {
	Path    string  `json:"path"`
	PathB64 string  `json:"path_b64"`
	Before  *pfSide `json:"before"`
	After   *pfSide `json:"after"`
}

type pfOp struct {
	Seq       int             `json:"tx_op"`
	Kind      string          `json:"kind"`
	Files     []pfFile        `json:"files"`
	Mkdirs    []string        `json:"mkdirs"`
	MkdirsB64 []string        `json:"mkdirs_b64"`
	Pending   json.RawMessage `json:"pending"`
}

type pfChange struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64"`
	Action  string `json:"action"`
	Type    string `json:"type"`
	Mode    string `json:"mode"`
	Digest  string `json:"digest"`
}

type pfStatus struct {
	State   string     `json:"state"`
	Changes []pfChange `json:"changes"`
	TxOps   []pfOp     `json:"tx_ops"`
}

// name is a path given as text or, when it is not UTF-8, as base64.
func name(text, b64 string) string {
	if b64 == "" {
		return text
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "?bad base64 " + b64
	}
	return string(b)
}

func (f pfFile) path() string { return name(f.Path, f.PathB64) }

func (o pfOp) mkdirs() []string {
	if o.MkdirsB64 == nil {
		return o.Mkdirs
	}
	out := make([]string, len(o.MkdirsB64))
	for i := range o.MkdirsB64 {
		out[i] = name("", o.MkdirsB64[i])
	}
	return out
}

// pfEnv is a workspace and state root with the stage the per-file ops run
// in.
type pfEnv struct {
	t       *testing.T
	bin     string
	dir     string
	ws, st  string
	backend string
	tx      string
	// env is added to every command (a negative control's switch).
	env []string
	// base is every file of the workspace when the stage opened.
	base map[string]pfSide
	// last is the stage's status after the last trial.
	last *pfStatus
}

func sideOf(content []byte, mode string) *pfSide {
	sum := sha256.Sum256(content)
	return &pfSide{Type: "file", Mode: mode, Digest: "sha256:" + hex.EncodeToString(sum[:])}
}

// newPFEnv makes a workspace with setup's files (in a fresh directory) and
// opens a stage on backend; ok is false when the backend cannot stage here.
func newPFEnv(t *testing.T, backend string, env []string, setup map[string]string) (*pfEnv, bool) {
	t.Helper()
	dir := scratch(t)
	e := &pfEnv{t: t, bin: wtxtest.Binary(t, true), dir: dir, ws: filepath.Join(dir, "ws"), st: filepath.Join(dir, "st"),
		backend: backend, env: env}
	mustDo(t, os.Mkdir(e.ws, 0o755))
	for p, c := range setup {
		mustDo(t, os.MkdirAll(filepath.Join(e.ws, filepath.Dir(p)), 0o755))
		mustDo(t, os.WriteFile(filepath.Join(e.ws, p), []byte(c), 0o644))
	}
	e.base = baseFiles(t, e.ws)
	r := e.wtx(nil, "", "--json", "begin", "--backend", backend)
	if r.code != 0 {
		if backend != "copy" {
			t.Logf("backend %s cannot stage here: %s", backend, strings.TrimSpace(r.stdout+r.stderr))
			return nil, false
		}
		t.Fatalf("begin: %v", r)
	}
	var out struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || out.Tx == "" {
		t.Fatalf("begin --json: no stage id in %q", r.stdout)
	}
	e.tx = out.Tx
	return e, true
}

// baseFiles lists the files under ws with their content digest and mode.
func baseFiles(t *testing.T, ws string) map[string]pfSide {
	out := map[string]pfSide{}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		out[filepath.ToSlash(rel)] = *sideOf(data, fmt.Sprintf("%04o", fi.Mode().Perm()))
		return nil
	})
	mustDo(t, err)
	return out
}

// wtx runs the failpoint binary on the workspace (killed at kp when kp is
// set) with stdin, in a clean environment plus e.env.
func (e *pfEnv) wtx(kp *killPoint, stdin string, args ...string) result {
	e.t.Helper()
	prefix, env := killWith(kp)
	return e.exec(append(prefix, append([]string{e.bin, "-C", e.ws}, args...)...), stdin, env...)
}

func (e *pfEnv) exec(argv []string, stdin string, env ...string) result {
	e.t.Helper()
	cmd := e.command(argv, env)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	return e.finish(cmd, cmd.Run(), &out, &errb)
}

// command is argv with a clean environment plus e.env and env.
func (e *pfEnv) command(argv, env []string) *exec.Cmd {
	cmd := exec.Command(argv[0], argv[1:]...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WTX_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(append(append(cmd.Env, "WTX_STATE_DIR="+e.st), e.env...), env...)
	return cmd
}

// finish is the result of cmd, which ended with err.
func (e *pfEnv) finish(cmd *exec.Cmd, err error, out, errb *bytes.Buffer) result {
	e.t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		e.t.Fatalf("%v: %v", cmd.Args, err)
	}
	r := result{code: cmd.ProcessState.ExitCode(), stdout: out.String(), stderr: errb.String()}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		r.killed = true
	}
	return r
}

// mcpWrite asks 'wtx mcp' (killed at kp when it is set) to write content
// to path in stage tx, as an agent does, and returns when the server has
// answered (or died) and ended.
func (e *pfEnv) mcpWrite(kp *killPoint, tx, path, content string) result {
	e.t.Helper()
	prefix, env := killWith(kp)
	return e.mcpRun(prefix, env, tx, path, content)
}

// killWith is the command prefix and environment that kill at kp.
func killWith(kp *killPoint) (prefix, env []string) {
	switch {
	case kp == nil:
		return nil, nil
	case kp.call == "failpoint":
		return nil, fp(kp.n)
	}
	return []string{"strace", "-f", "-qq", "-o", "/dev/null", "-e", "trace=" + kp.call,
		"-e", fmt.Sprintf("inject=%s:signal=SIGKILL:when=%d", kp.call, kp.n)}, nil
}

// mcpRun is mcpWrite with the server's command line started by prefix,
// and env added.
func (e *pfEnv) mcpRun(prefix, env []string, tx, path, content string) result {
	e.t.Helper()
	cmd := e.command(append(prefix, e.bin, "-C", e.ws, "mcp"), env)
	in, err := cmd.StdinPipe()
	mustDo(e.t, err)
	pipe, err := cmd.StdoutPipe()
	mustDo(e.t, err)
	var out, errb bytes.Buffer
	cmd.Stderr = &errb
	mustDo(e.t, cmd.Start())
	lines := []map[string]any{
		{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-06-18",
			"capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "t007", "version": "1"}}},
		{"jsonrpc": "2.0", "method": "notifications/initialized", "params": map[string]any{}},
		{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": map[string]any{"name": "write",
			"arguments": map[string]any{"tx": tx, "path_b64": base64.StdEncoding.EncodeToString([]byte(path)), "content": content}}},
	}
	for _, l := range lines {
		b, err := json.Marshal(l)
		mustDo(e.t, err)
		_, _ = in.Write(append(b, '\n')) // a server killed already reads nothing more
	}
	sc := bufio.NewScanner(pipe)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		out.Write(append(sc.Bytes(), '\n'))
		var m struct {
			ID int `json:"id"`
		}
		if json.Unmarshal(sc.Bytes(), &m) == nil && m.ID == 2 {
			break
		}
	}
	in.Close()
	_, _ = io.Copy(&out, pipe) // what the server writes as it ends
	r := e.finish(cmd, cmd.Wait(), &out, &errb)
	if !r.killed && !strings.Contains(r.stdout, `"id":2`) {
		r.code = -1 // no answer to the call: the harness counts it as failed
	}
	if strings.Contains(r.stdout, `"isError":true`) {
		r.code = 1
	}
	return r
}

// callLine is one system call of an strace -f log: thread id and name.
var callLine = regexp.MustCompile(`^(\d+) +([a-z0-9_]+)\(`)

// killPoints runs args (uncrashed) under strace and returns every point a
// kill can land on: for each call of killCalls, 1 up to the most times one
// thread made it; and, apart, the crash points of the failpoint build the
// command hit.
func (e *pfEnv) killPoints(stdin string, args ...string) (calls, points []killPoint, r result) {
	e.t.Helper()
	return e.countPoints(func(prefix, env []string) result {
		return e.exec(append(prefix, append([]string{e.bin, "-C", e.ws}, args...)...), stdin, env...)
	})
}

// mcpKillPoints is killPoints for an agent's write over MCP.
func (e *pfEnv) mcpKillPoints(try pfTry) (calls, points []killPoint, r result) {
	e.t.Helper()
	return e.countPoints(func(prefix, env []string) result {
		return e.mcpRun(prefix, env, e.tx, try.path, try.content)
	})
}

// countPoints is killPoints for the command run starts with the command
// prefix and environment it is given.
func (e *pfEnv) countPoints(run func(prefix, env []string) result) (calls, points []killPoint, r result) {
	e.t.Helper()
	log, cnt := filepath.Join(e.dir, "strace.log"), filepath.Join(e.dir, "count")
	_ = os.Remove(cnt) // a count of an earlier command
	r = run([]string{"strace", "-f", "-qq", "-o", log, "-e", "trace=" + strings.Join(killCalls, ",")}, []string{"WTX_FAILPOINT_COUNT=" + cnt})
	if data, err := os.ReadFile(cnt); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			if n, name, ok := strings.Cut(line, " "); ok {
				k, _ := strconv.Atoi(n)
				points = append(points, killPoint{call: "failpoint", n: k, name: name})
			}
		}
	}
	data, err := os.ReadFile(log)
	mustDo(e.t, err)
	counts := map[[2]string]int{}
	most := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		m := callLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		k := [2]string{m[1], m[2]}
		counts[k]++
		most[m[2]] = max(most[m[2]], counts[k])
	}
	for _, c := range killCalls {
		for n := 1; n <= most[c]; n++ {
			calls = append(calls, killPoint{call: c, n: n})
		}
	}
	return calls, points, r
}

// sample picks k of kps at random (all of them in a soak run).
func sample(rng *rand.Rand, kps []killPoint, k int) []killPoint {
	if soak() || len(kps) <= k {
		return kps
	}
	out := append([]killPoint(nil), kps...)
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out[:k]
}

// harnessSeed seeds the random choice of the kill points a run samples;
// it is logged, and WTX_T007_SEED sets it.
func harnessSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("WTX_T007_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		mustDo(t, err)
		seed = n
	}
	t.Logf("kill points sampled with WTX_T007_SEED=%d", seed)
	return seed
}

// rngFor is the random source of one subtest of a harness seeded with seed.
func rngFor(seed uint64, sub string) *rand.Rand {
	h := sha256.Sum256([]byte(sub))
	return rand.New(rand.NewPCG(seed, uint64(h[0])<<8|uint64(h[1])))
}

// status reads the stage's status.
func (e *pfEnv) status(tx string) pfStatus {
	e.t.Helper()
	r := e.wtx(nil, "", "--json", "status", tx)
	if r.code != 0 {
		e.t.Fatalf("status %s: %v", tx, r)
	}
	var st pfStatus
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		e.t.Fatalf("status --json: %v in %q", err, r.stdout)
	}
	return st
}

// described checks that the stage's change set is the one its recorded ops
// make of base, and that no op is pending. It returns the violations.
func described(label string, base map[string]pfSide, st pfStatus) []string {
	var v []string
	state := map[string]*pfSide{}
	dirs := map[string]bool{}
	for _, op := range st.TxOps {
		if len(op.Pending) > 0 && string(op.Pending) != "null" {
			v = append(v, fmt.Sprintf("%s: op %d (%s) is still pending after the next command", label, op.Seq, op.Kind))
		}
		switch op.Kind {
		case "write", "edit", "rm":
		default:
			continue
		}
		for _, f := range op.Files {
			state[f.path()] = f.After
		}
		for _, d := range op.mkdirs() {
			dirs[d] = true
		}
	}
	want := map[string]string{}
	for p, after := range state {
		b, had := base[p]
		switch {
		case after == nil && had:
			want[p] = "deleted"
		case after != nil && !had:
			want[p] = "added file " + after.Mode + " " + after.Digest
		case after != nil && (b.Digest != after.Digest || b.Mode != after.Mode):
			want[p] = "modified file " + after.Mode + " " + after.Digest
		}
	}
	for d := range dirs {
		want[d] = "added dir"
	}
	got := map[string]string{}
	for _, c := range st.Changes {
		s := c.Action
		switch {
		case c.Action == "deleted":
		case c.Type == "dir":
			s += " dir"
		default:
			s += " " + c.Type + " " + c.Mode + " " + c.Digest
		}
		got[name(c.Path, c.PathB64)] = s
	}
	var paths []string
	for p := range want {
		paths = append(paths, p)
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	for _, p := range paths {
		if want[p] != got[p] {
			v = append(v, fmt.Sprintf("%s: %q: the recorded ops make %q, the stage holds %q", label, p, orNone(want[p]), orNone(got[p])))
		}
	}
	return v
}

func orNone(s string) string {
	if s == "" {
		return "no change"
	}
	return s
}

// pfTry is one per-file op a trial runs.
type pfTry struct {
	kind  string   // the op's kind as recorded
	path  string   // the path it names
	after *pfSide  // what it writes (nil: removes); for a read, what it reads
	args  []string // its command line
	stdin string
	// noOp is set on a read of a path that left the workspace: no op is
	// ever recorded for it.
	noOp bool
	// ran is set when readying the op ran a wtx command on the stage.
	ran bool
	// mcp is set on a write an agent asks 'wtx mcp' for: content is the
	// file's content.
	mcp     bool
	content string
}

// recorded checks the ops after a trial against prev: the same, or prev
// and the tried op, whole. It reports whether the op was recorded.
func recorded(label string, prev, now []pfOp, try pfTry, r result) (bool, []string) {
	var v []string
	n := min(len(prev), len(now))
	for i := 0; i < n; i++ {
		if prev[i].Seq != now[i].Seq || prev[i].Kind != now[i].Kind {
			v = append(v, fmt.Sprintf("%s: op %d changed from %s to op %d %s", label, prev[i].Seq, prev[i].Kind, now[i].Seq, now[i].Kind))
		}
	}
	switch {
	case len(now) == len(prev):
		if r.code == 0 && !r.killed && !try.noOp {
			v = append(v, fmt.Sprintf("%s: %s said it was done (%v) but recorded no op", label, try.kind, r))
		}
		return false, v
	case len(now) == len(prev)+1:
		op := now[len(now)-1]
		switch {
		case op.Kind != try.kind || len(op.Files) != 1 || op.Files[0].path() != try.path:
			v = append(v, fmt.Sprintf("%s: the new op is %s %v, not %s %q", label, op.Kind, op.Files, try.kind, try.path))
		case try.noOp:
			v = append(v, fmt.Sprintf("%s: a read of a path that left the workspace recorded op %d", label, op.Seq))
		case (op.Files[0].After == nil) != (try.after == nil) || try.after != nil && *op.Files[0].After != *try.after:
			v = append(v, fmt.Sprintf("%s: op %d records %+v after it, the op wrote %+v", label, op.Seq, op.Files[0].After, try.after))
		}
		if r.code != 0 && !r.killed {
			v = append(v, fmt.Sprintf("%s: op %d is recorded but %s failed: %v", label, op.Seq, try.kind, r))
		}
		return true, v
	}
	return false, append(v, fmt.Sprintf("%s: %d ops before the trial, %d after", label, len(prev), len(now)))
}

// nextCommands are the commands run after a kill, in turn: each settles
// what the kill left.
// (A dry-run apply ignores stale reads: the reads of the harness go stale
// as it changes the workspace under them.)
var nextCommands = [][]string{{"status"}, {"list"}, {"read", "--tx", "TX", "--", "keep.txt"}, {"apply", "--dry-run", "--ignore-stale-reads", "TX"}}

func (e *pfEnv) nextCommand(i int) []string {
	var out []string
	for _, a := range nextCommands[i%len(nextCommands)] {
		out = append(out, strings.ReplaceAll(a, "TX", e.tx))
	}
	return out
}
