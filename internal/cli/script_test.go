package cli_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/wtx-dev/wtx/internal/cli"
	"github.com/wtx-dev/wtx/internal/sandbox"
)

// TestMain makes the test binary double as the wtx command, so the scripts
// drive the real command line in a child process.
func TestMain(m *testing.M) {
	// The binary serves as the helper it starts to run commands in views.
	if sandbox.Main() {
		return
	}
	// Under -race every wtx process would otherwise linger a second at exit.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=10")
	}
	testscript.Main(m, map[string]func(){
		"wtx": func() { os.Exit(cli.Main(os.Args[1:])) },
	})
}

// TestScript runs the semantic suite: one script per SPEC promise id (and
// a few for the command line's own contract), in testdata/script.
//
// Each script starts with the workspace $WS ($WORK/ws, filled from the
// archive's ws/ files) as its current directory, the state root $STATE
// ($WORK/.state, beside the workspace and never inside it) and a harmless
// $HOME ($WORK/home).
func TestScript(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir:                 filepath.Join("testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			ws := filepath.Join(env.WorkDir, "ws")
			state := filepath.Join(env.WorkDir, ".state")
			home := filepath.Join(env.WorkDir, "home")
			for _, d := range []string{ws, home} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					return err
				}
			}
			env.Setenv("WS", ws)
			env.Setenv("STATE", state)
			env.Setenv("WTX_STATE_DIR", state)
			env.Setenv("HOME", home)
			env.Setenv("XDG_STATE_HOME", "")
			env.Setenv("NO_COLOR", "1")
			env.Cd = ws
			return nil
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "root":
				return os.Geteuid() == 0, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"rc":         cmdRC,
			"stdout2env": cmdStdout2Env,
			"json":       cmdJSON,
			"json2env":   cmdJSON2Env,
			"snap":       cmdSnap,
			"samesnap":   cmdSameSnap,
			"sametree":   cmdSameTree,
			"noshare":    cmdNoShare,
			"entry":      cmdEntry,
			"prefix2env": cmdPrefix2Env,
		},
	})
}

// rc WANT PROG [ARG...] runs PROG and asserts its exit status is WANT.
// Its stdout and stderr are kept for the commands that follow.
func cmdRC(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: rc WANT PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("rc: bad status %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			ts.Fatalf("rc: %v", err)
		}
		got = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			got = 128 + int(ws.Signal())
		}
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// stdout2env NAME sets NAME to the last command's stdout, trimmed.
func cmdStdout2Env(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: stdout2env NAME")
	}
	ts.Setenv(args[0], strings.TrimSpace(ts.ReadFile("stdout")))
}

// prefix2env NAME VALUE N sets NAME to the first N bytes of VALUE, or to
// VALUE without its last -N bytes when N is negative.
func cmdPrefix2Env(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: prefix2env NAME VALUE N")
	}
	n, err := strconv.Atoi(args[2])
	if err != nil {
		ts.Fatalf("prefix2env: bad length %q", args[2])
	}
	v := args[1]
	if n < 0 {
		n += len(v)
	}
	if n < 0 || n > len(v) {
		ts.Fatalf("prefix2env: %q has no prefix of length %s", v, args[2])
	}
	ts.Setenv(args[0], v[:n])
}

// json PATH [WANT] asserts that the last command's stdout is one JSON
// object holding PATH (dot-separated keys and array indexes; a final "@len"
// is the length of an array or object) and, with WANT, that its value
// renders as WANT (a string as itself, anything else as compact JSON).
// With "!", PATH must be absent, or hold something other than WANT.
func cmdJSON(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: json PATH [WANT]")
	}
	got, ok := lookupJSON(ts, ts.ReadFile("stdout"), args[0])
	switch {
	case len(args) == 1 && neg && ok:
		ts.Fatalf("json %s: present (%s), want absent", args[0], got)
	case len(args) == 1 && !neg && !ok:
		ts.Fatalf("json %s: absent", args[0])
	case len(args) == 2 && !neg && (!ok || got != args[1]):
		if !ok {
			got = "<absent>"
		}
		ts.Fatalf("json %s: got %s, want %s", args[0], got, args[1])
	case len(args) == 2 && neg && ok && got == args[1]:
		ts.Fatalf("json %s: got %s, want anything else", args[0], got)
	}
}

// json2env NAME PATH sets NAME to the value at PATH of the last command's
// JSON stdout.
func cmdJSON2Env(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: json2env NAME PATH")
	}
	v, ok := lookupJSON(ts, ts.ReadFile("stdout"), args[1])
	if !ok {
		ts.Fatalf("json2env: %s absent", args[1])
	}
	ts.Setenv(args[0], v)
}

func lookupJSON(ts *testscript.TestScript, text, path string) (string, bool) {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		ts.Fatalf("stdout is not JSON: %v\n%s", err, text)
	}
	if dec.More() {
		ts.Fatalf("stdout holds more than one JSON value:\n%s", text)
	}
	if _, ok := v.(map[string]any); !ok {
		ts.Fatalf("stdout is not a JSON object:\n%s", text)
	}
	for _, key := range strings.Split(path, ".") {
		switch cur := v.(type) {
		case map[string]any:
			if key == "@len" {
				v = json.Number(strconv.Itoa(len(cur)))
				continue
			}
			next, ok := cur[key]
			if !ok {
				return "", false
			}
			v = next
		case []any:
			if key == "@len" {
				v = json.Number(strconv.Itoa(len(cur)))
				continue
			}
			i, err := strconv.Atoi(key)
			if err != nil || i < 0 || i >= len(cur) {
				return "", false
			}
			v = cur[i]
		default:
			return "", false
		}
	}
	if s, ok := v.(string); ok {
		return s, true
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		ts.Fatalf("json %s: %v", path, err)
	}
	return strings.TrimSuffix(out.String(), "\n"), true
}

// snap DIR FILE writes the complete description of the tree at DIR to
// FILE: every path's type, permission bits, content digest or link target.
func cmdSnap(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: snap DIR FILE")
	}
	desc, err := describeTree(ts.MkAbs(args[0]))
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), []byte(desc), 0o644))
}

// samesnap DIR FILE asserts that the tree at DIR is exactly the one that
// snap recorded in FILE. With "!", it asserts that it differs.
func cmdSameSnap(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: samesnap DIR FILE")
	}
	got, err := describeTree(ts.MkAbs(args[0]))
	ts.Check(err)
	want := ts.ReadFile(args[1])
	compareTrees(ts, neg, args[0], got, args[1], want)
}

// sametree A B asserts that the trees at A and B are identical in types,
// contents, permission bits and link targets. With "!", that they differ.
func cmdSameTree(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: sametree DIR1 DIR2")
	}
	a, err := describeTree(ts.MkAbs(args[0]))
	ts.Check(err)
	b, err := describeTree(ts.MkAbs(args[1]))
	ts.Check(err)
	compareTrees(ts, neg, args[0], a, args[1], b)
}

func compareTrees(ts *testscript.TestScript, neg bool, aName, a, bName, b string) {
	if neg {
		if a == b {
			ts.Fatalf("%s and %s are the same tree, want a difference", aName, bName)
		}
		return
	}
	if a == b {
		return
	}
	al, bl := lineSet(a), lineSet(b)
	var diff []string
	for l := range al {
		if !bl[l] {
			diff = append(diff, "- "+l)
		}
	}
	for l := range bl {
		if !al[l] {
			diff = append(diff, "+ "+l)
		}
	}
	sort.Slice(diff, func(i, j int) bool { return diff[i][2:] < diff[j][2:] })
	ts.Fatalf("tree %s differs from %s (- only in %s, + only in %s):\n%s", aName, bName, aName, bName, strings.Join(diff, "\n"))
}

func lineSet(s string) map[string]bool {
	m := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		m[l] = true
	}
	return m
}

// describeTree lists every path under root (not root itself), sorted, one
// line each: "path: dir PERM", "path: file PERM SHA256" (or "unreadable"),
// "path: symlink -> TARGET" or "path: special TYPE". Links are never
// followed.
func describeTree(root string) (string, error) {
	var lines []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		line, err := describeEntry(p, rel)
		if err != nil {
			return err
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("describe %s: %w", root, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n") + "\n", nil
}

func describeEntry(p, name string) (string, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	m := fi.Mode()
	switch {
	case m.IsDir():
		return fmt.Sprintf("%s: dir %04o", name, m.Perm()), nil
	case m.IsRegular():
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Sprintf("%s: file %04o unreadable", name, m.Perm()), nil
		}
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: file %04o %x", name, m.Perm(), sha256.Sum256(data)), nil
	case m&fs.ModeSymlink != 0:
		t, err := os.Readlink(p)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s: symlink -> %s", name, t), nil
	}
	return fmt.Sprintf("%s: special %v", name, m.Type()), nil
}

// entry PATH DESC asserts what PATH is, without following a link: DESC is
// "absent", "dir PERM", "file PERM" or "symlink -> TARGET" (one argument).
func cmdEntry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: entry PATH DESC")
	}
	p := ts.MkAbs(args[0])
	got := "absent"
	if _, err := os.Lstat(p); err == nil {
		line, err := describeEntry(p, "")
		ts.Check(err)
		got = strings.TrimPrefix(line, ": ")
		if strings.HasPrefix(got, "file ") {
			got = got[:len("file 0000")]
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		ts.Check(err)
	}
	if got != args[1] {
		ts.Fatalf("%s is %q, want %q", args[0], got, args[1])
	}
}

// noshare A B asserts that no regular file under A is the same inode as a
// regular file under B.
func cmdNoShare(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: noshare DIR1 DIR2")
	}
	a, err := inodes(ts.MkAbs(args[0]))
	ts.Check(err)
	b, err := inodes(ts.MkAbs(args[1]))
	ts.Check(err)
	if len(a) == 0 || len(b) == 0 {
		ts.Fatalf("noshare: %s or %s holds no regular file to compare", args[0], args[1])
	}
	for id, pa := range a {
		if pb, ok := b[id]; ok {
			ts.Fatalf("%s/%s and %s/%s are the same inode", args[0], pa, args[1], pb)
		}
	}
}

type fileID struct{ dev, ino uint64 }

func inodes(root string) (map[fileID]string, error) {
	out := map[fileID]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no inode number on this platform", p)
		}
		rel, _ := filepath.Rel(root, p)
		out[fileID{uint64(st.Dev), uint64(st.Ino)}] = rel
		return nil
	})
	return out, err
}

// TestC_001_PathWithNUL checks the one boundary case a child process cannot
// be given: a --path holding a NUL byte is refused as refusal.boundary
// before anything is written.
func TestC_001_PathWithNUL(t *testing.T) {
	work := t.TempDir()
	ws := filepath.Join(work, "ws")
	stateDir := filepath.Join(work, "state")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := func(k string) string {
		switch k {
		case "WTX_STATE_DIR":
			return stateDir
		case "HOME":
			return work
		}
		return ""
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := cli.Run(t.Context(), append([]string{"-C", ws, "--json"}, args...),
			cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errb}, env)
		return code, out.String()
	}
	if code, out := run("run", "--", "sh", "-c", "echo b > a.txt; echo new > n.txt"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, out)
	}
	before, err := describeTree(ws)
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range [][]string{
		{"apply", "--path", "a.txt\x00"},
		{"apply", "--path", "n.txt\x00/../../x"},
		{"diff", "--path", "\x00"},
	} {
		code, out := run(cmd...)
		var got struct {
			Error struct {
				Code     string `json:"code"`
				ExitCode int    `json:"exit_code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%q: stdout is not JSON: %v: %s", cmd, err, out)
		}
		if code != 2 || got.Error.Code != "refusal.boundary" || got.Error.ExitCode != 2 {
			t.Errorf("%q: exit %d, code %q (exit_code %d), want exit 2, refusal.boundary", cmd, code, got.Error.Code, got.Error.ExitCode)
		}
		after, err := describeTree(ws)
		if err != nil {
			t.Fatal(err)
		}
		if after != before {
			t.Errorf("%q changed the workspace:\n%s\nwant\n%s", cmd, after, before)
		}
	}
}
