package semantic

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var (
	seedFlag    = flag.Uint64("seed", 0, "S-STAGE-004: replay only this script seed")
	scriptsFlag = flag.Int("scripts", 30, "S-STAGE-004: number of random scripts (seeds 1..N)")
)

// TestS_STAGE_004_RandomScripts checks S-STAGE-004: applying everything
// yields the same complete tree (types, contents, permission bits, link
// targets) as running the command directly in the workspace. Each seed
// builds a random starting tree twice, runs one random sh script directly in
// the first copy and through 'wtx run' + 'wtx apply' in the second, and
// compares the two trees path by path. It also checks that the workspace did
// not change between run and apply, and that the script exits alike.
func TestS_STAGE_004_RandomScripts(t *testing.T) {
	t.Parallel()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	seeds := make([]uint64, 0, *scriptsFlag)
	if *seedFlag != 0 {
		seeds = append(seeds, *seedFlag)
	} else {
		for s := 1; s <= *scriptsFlag; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			checkRandomScript(t, sh, seed)
		})
	}
}

func checkRandomScript(t *testing.T, sh string, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	base := t.TempDir()
	direct, ws, state := filepath.Join(base, "direct"), filepath.Join(base, "workspace"), filepath.Join(base, "state")
	scriptPath := filepath.Join(base, "script.sh")

	m := newModel()
	entries := genTree(r, m)
	for _, dir := range []string{direct, ws} {
		if err := materialize(dir, entries); err != nil {
			t.Fatal(err)
		}
	}
	script := genScript(r, m)
	if err := os.WriteFile(scriptPath, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d (replay: go test ./tests/semantic -run 'S_STAGE_004' -seed %d): %s\nscript:\n%s",
			seed, seed, fmt.Sprintf(format, args...), script)
	}

	before := mustSnapshot(t, ws)

	cmd := exec.Command(sh, scriptPath)
	cmd.Dir = direct
	var directErr bytes.Buffer
	cmd.Stderr = &directErr
	directCode := 0
	if err := cmd.Run(); err != nil {
		if cmd.ProcessState == nil {
			t.Fatalf("run script directly: %v", err)
		}
		directCode = cmd.ProcessState.ExitCode()
	}

	run := runWtx(t, ws, state, "--json", "run", "--", "sh", scriptPath)
	if run.code != directCode {
		fail("wtx run exited %d, the direct run %d\nwtx stderr:\n%s\ndirect stderr:\n%s",
			run.code, directCode, run.stderr, directErr.String())
	}
	var answer struct {
		Status string `json:"status"`
		Tx     string `json:"tx"`
	}
	if err := json.Unmarshal([]byte(run.stdout), &answer); err != nil || answer.Status != "ok" || answer.Tx == "" {
		fail("wtx run --json: want an ok answer naming the stage, got %q (%v)\nstderr:\n%s", run.stdout, err, run.stderr)
	}
	if d := diffSnapshots(before, mustSnapshot(t, ws)); len(d) > 0 {
		fail("the workspace changed before apply:\n%s", formatDiff(d, 20))
	}

	apply := runWtx(t, ws, state, "apply", answer.Tx)
	if apply.code != 0 {
		fail("wtx apply exited %d\nstdout:\n%s\nstderr:\n%s", apply.code, apply.stdout, apply.stderr)
	}
	if d := diffSnapshots(mustSnapshot(t, direct), mustSnapshot(t, ws)); len(d) > 0 {
		fail("after apply the workspace differs from the direct run (got = workspace, want = direct):\n%s", formatDiff(d, 30))
	}
}

func mustSnapshot(t *testing.T, root string) map[string]node {
	t.Helper()
	s, err := snapshot(root)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// model tracks the type of every path of the tree a script works on, so
// that each generated operation is valid when it runs. The root is "".
type model struct {
	kinds map[string]byte // 'f' file, 'd' dir, 'l' symlink
}

func newModel() *model { return &model{kinds: map[string]byte{}} }

// list returns the sorted paths of kind k; "" (the root) counts as a dir
// only when withRoot is set.
func (m *model) list(k byte, withRoot bool) []string {
	var out []string
	if k == 'd' && withRoot {
		out = append(out, "")
	}
	for p, kk := range m.kinds {
		if kk == k {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func (m *model) remove(p string) {
	for q := range m.kinds {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m.kinds, q)
		}
	}
}

func (m *model) move(src, dst string) {
	moved := map[string]byte{}
	for q, k := range m.kinds {
		if q == src || strings.HasPrefix(q, src+"/") {
			moved[dst+strings.TrimPrefix(q, src)] = k
			delete(m.kinds, q)
		}
	}
	for q, k := range moved {
		m.kinds[q] = k
	}
}

var namePool = []string{"a", "b", "c.txt", "data.bin", "src", "lib", ".hidden", "with space",
	"ünïcode", "x-y_z", "README", "Makefile", "deep", "n", "#weird", "v1.2"}

// newName returns a path under dir that the model does not hold.
func (m *model) newName(r *rand.Rand, dir string) string {
	for {
		name := namePool[r.IntN(len(namePool))]
		if r.IntN(2) == 0 {
			name += fmt.Sprint(r.IntN(50))
		}
		p := join(dir, name)
		if _, ok := m.kinds[p]; !ok {
			return p
		}
	}
}

func pick(r *rand.Rand, xs []string) string { return xs[r.IntN(len(xs))] }

func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

func depth(p string) int {
	if p == "" {
		return 0
	}
	return strings.Count(p, "/") + 1
}

// relTarget is the relative symlink target that, from a link at linkPath,
// names the tree path to.
func relTarget(linkPath, to string) string {
	rel, err := filepath.Rel(filepath.FromSlash("/"+path.Dir("/"+linkPath)), filepath.FromSlash("/"+to))
	if err != nil {
		return to
	}
	return filepath.ToSlash(rel)
}

// entry is one path of a generated starting tree.
type entry struct {
	path    string
	kind    byte
	mode    os.FileMode
	content []byte
	target  string
}

// genTree generates a random starting tree and records it in m: nested
// dirs, files of random sizes (empty, text, binary, up to a few hundred KiB)
// and modes (exec bits, read-only), symlinks to files and dirs, dangling
// ones, an absolute one and a loop.
func genTree(r *rand.Rand, m *model) []entry {
	var es []entry
	for range 2 + r.IntN(7) {
		dirs := m.list('d', true)
		parent := pick(r, dirs)
		if depth(parent) >= 4 {
			parent = ""
		}
		p := m.newName(r, parent)
		m.kinds[p] = 'd'
		es = append(es, entry{path: p, kind: 'd', mode: []os.FileMode{0o755, 0o755, 0o700, 0o750, 0o775}[r.IntN(5)]})
	}
	for range 5 + r.IntN(26) {
		p := m.newName(r, pick(r, m.list('d', true)))
		m.kinds[p] = 'f'
		es = append(es, entry{path: p, kind: 'f', content: randomContent(r),
			mode: []os.FileMode{0o644, 0o644, 0o644, 0o755, 0o755, 0o600, 0o444, 0o444, 0o555, 0o640}[r.IntN(10)]})
	}
	for range 1 + r.IntN(6) {
		p := m.newName(r, pick(r, m.list('d', true)))
		es = append(es, entry{path: p, kind: 'l', target: randomTarget(r, m, p)})
		m.kinds[p] = 'l'
	}
	return es
}

func randomContent(r *rand.Rand) []byte {
	var n int
	switch k := r.IntN(20); {
	case k < 2:
		return nil
	case k < 9:
		var b strings.Builder
		for i := range 1 + r.IntN(40) {
			fmt.Fprintf(&b, "line %d of %d\n", i, r.IntN(1000))
		}
		if r.IntN(4) == 0 {
			return []byte(strings.TrimSuffix(b.String(), "\n"))
		}
		return []byte(b.String())
	case k < 15:
		n = 1 + r.IntN(4096)
	case k < 19:
		n = 4096 + r.IntN(60*1024)
	default:
		n = 100*1024 + r.IntN(200*1024)
	}
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// randomTarget picks a symlink target for a link at p: an existing file or
// dir (relative), a dangling relative or absolute path, a loop, or "..".
func randomTarget(r *rand.Rand, m *model, p string) string {
	switch r.IntN(7) {
	case 0, 1:
		if fs := m.list('f', false); len(fs) > 0 {
			return relTarget(p, pick(r, fs))
		}
	case 2, 3:
		if ds := m.list('d', false); len(ds) > 0 {
			return relTarget(p, pick(r, ds))
		}
	case 4:
		return "/nonexistent-wtx-target/x"
	case 5:
		return path.Base(p) // a loop: the link names itself
	}
	if r.IntN(2) == 0 {
		return ".."
	}
	return "missing/target.txt"
}

// materialize writes the entries under dir, which it creates.
func materialize(dir string, es []entry) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, e := range es {
		p := filepath.Join(dir, filepath.FromSlash(e.path))
		var err error
		switch e.kind {
		case 'd':
			err = os.Mkdir(p, 0o700)
		case 'f':
			err = os.WriteFile(p, e.content, 0o600)
		case 'l':
			err = os.Symlink(e.target, p)
		}
		if err != nil {
			return err
		}
	}
	for _, e := range es {
		if e.kind != 'l' {
			if err := os.Chmod(filepath.Join(dir, filepath.FromSlash(e.path)), e.mode); err != nil {
				return err
			}
		}
	}
	return nil
}

// q quotes a tree path for sh, always starting with ./ so that no name can
// read as an option.
func q(p string) string { return "'./" + p + "'" }

// writer returns a sh command whose stdout is a random content.
func writer(r *rand.Rand) string {
	switch r.IntN(5) {
	case 0:
		return "printf ''"
	case 1, 2:
		return fmt.Sprintf("printf '%%s\\n' 'text %d'", r.IntN(1e6))
	case 3:
		var b strings.Builder
		b.WriteString("printf '")
		for range 1 + r.IntN(64) {
			fmt.Fprintf(&b, "\\%03o", r.IntN(256))
		}
		b.WriteString("'")
		return b.String()
	default:
		return fmt.Sprintf("awk 'BEGIN{for(i=0;i<%d;i++)printf \"%%d %s\\n\", i}'", 1+r.IntN(5000), "row")
	}
}

// genScript generates a sh script of 5 to 30 operations, each valid in the
// tree the model describes at that point, and updates the model.
func genScript(r *rand.Rand, m *model) string {
	var b strings.Builder
	b.WriteString("umask 022\n")
	want := 5 + r.IntN(26)
	for n := 0; n < want; {
		if line, ok := genOp(r, m); ok {
			b.WriteString(line)
			b.WriteString("\n")
			n++
		}
	}
	return b.String()
}

// genOp generates one operation, or reports false when the chosen kind has
// nothing to act on.
func genOp(r *rand.Rand, m *model) (string, bool) {
	files, links := m.list('f', false), m.list('l', false)
	dirs, dirsRoot := m.list('d', false), m.list('d', true)
	shallow := func() string { // a dir to create something in, not too deep
		for {
			if d := pick(r, dirsRoot); depth(d) < 7 {
				return d
			}
		}
	}
	switch r.IntN(22) {
	case 0: // create a file
		p := m.newName(r, shallow())
		m.kinds[p] = 'f'
		return writer(r) + " > " + q(p), true
	case 1: // overwrite a file
		if len(files) == 0 {
			return "", false
		}
		return writer(r) + " > " + q(pick(r, files)), true
	case 2: // append to a file
		if len(files) == 0 {
			return "", false
		}
		return writer(r) + " >> " + q(pick(r, files)), true
	case 3: // delete a file or symlink
		xs := append(slices.Clone(files), links...)
		if len(xs) == 0 {
			return "", false
		}
		p := pick(r, xs)
		m.remove(p)
		return "rm -f " + q(p), true
	case 4: // delete a dir
		if len(dirs) == 0 {
			return "", false
		}
		p := pick(r, dirs)
		m.remove(p)
		return "rm -rf " + q(p), true
	case 5: // rename a file or symlink, maybe into another dir
		xs := append(slices.Clone(files), links...)
		if len(xs) == 0 {
			return "", false
		}
		src, dst := pick(r, xs), m.newName(r, shallow())
		m.move(src, dst)
		return "mv " + q(src) + " " + q(dst), true
	case 6: // rename a dir, maybe into another dir
		if len(dirs) == 0 {
			return "", false
		}
		src := pick(r, dirs)
		parent := shallow()
		if parent == src || strings.HasPrefix(parent, src+"/") {
			return "", false
		}
		dst := m.newName(r, parent)
		m.move(src, dst)
		return "mv " + q(src) + " " + q(dst), true
	case 7: // rename a file over another file
		if len(files) < 2 {
			return "", false
		}
		src, dst := pick(r, files), pick(r, files)
		if src == dst {
			return "", false
		}
		m.remove(src)
		return "mv -f " + q(src) + " " + q(dst), true
	case 8: // change a file's mode
		if len(files) == 0 {
			return "", false
		}
		return "chmod " + pick(r, []string{"+x", "-x", "444", "600", "755", "u+x", "go-r"}) + " " + q(pick(r, files)), true
	case 9: // change a dir's mode (the owner keeps rwx)
		if len(dirs) == 0 {
			return "", false
		}
		return "chmod " + pick(r, []string{"700", "755", "750", "711"}) + " " + q(pick(r, dirs)), true
	case 10: // a new symlink
		p := m.newName(r, shallow())
		t := randomTarget(r, m, p)
		m.kinds[p] = 'l'
		return "ln -s '" + t + "' " + q(p), true
	case 11: // a file becomes a dir
		if len(files) == 0 {
			return "", false
		}
		p := pick(r, files)
		m.kinds[p] = 'd'
		c := m.newName(r, p)
		m.kinds[c] = 'f'
		return "rm -f " + q(p) + " && mkdir " + q(p) + " && " + writer(r) + " > " + q(c), true
	case 12: // a dir becomes a file
		if len(dirs) == 0 {
			return "", false
		}
		p := pick(r, dirs)
		m.remove(p)
		m.kinds[p] = 'f'
		return "rm -rf " + q(p) + " && " + writer(r) + " > " + q(p), true
	case 13: // a symlink becomes a file
		if len(links) == 0 {
			return "", false
		}
		p := pick(r, links)
		m.kinds[p] = 'f'
		return "rm -f " + q(p) + " && " + writer(r) + " > " + q(p), true
	case 14: // a file becomes a symlink
		if len(files) == 0 {
			return "", false
		}
		p := pick(r, files)
		delete(m.kinds, p)
		t := randomTarget(r, m, p)
		m.kinds[p] = 'l'
		return "rm -f " + q(p) + " && ln -s '" + t + "' " + q(p), true
	case 15: // created, then deleted: no net change
		p := m.newName(r, shallow())
		if r.IntN(2) == 0 {
			return writer(r) + " > " + q(p) + " && rm -f " + q(p), true
		}
		return "mkdir -p " + q(p+"/x/y") + " && " + writer(r) + " > " + q(p+"/x/y/f") + " && rm -rf " + q(p), true
	case 16: // mkdir -p of a deep new chain, maybe with a file at the bottom
		parent := pick(r, dirsRoot)
		if depth(parent) > 4 {
			return "", false
		}
		p := parent
		for range 2 + r.IntN(8-depth(parent)-1) {
			p = m.newName(r, p)
			m.kinds[p] = 'd'
		}
		line := "mkdir -p " + q(p)
		if r.IntN(2) == 0 {
			f := m.newName(r, p)
			m.kinds[f] = 'f'
			line += " && " + writer(r) + " > " + q(f)
		}
		return line, true
	case 17: // copy a file to a new name
		if len(files) == 0 {
			return "", false
		}
		src, dst := pick(r, files), m.newName(r, shallow())
		m.kinds[dst] = 'f'
		return "cp " + q(src) + " " + q(dst), true
	case 18: // touch: times change, nothing S-STAGE-004 compares does
		if len(files) == 0 {
			return "", false
		}
		return "touch " + q(pick(r, files)), true
	case 19: // rewrite a file with the same bytes
		if len(files) == 0 {
			return "", false
		}
		p := pick(r, files)
		if _, ok := m.kinds[p+".tmp"]; ok {
			return "", false
		}
		return "cat " + q(p) + " > " + q(p+".tmp") + " && cat " + q(p+".tmp") + " > " + q(p) + " && rm -f " + q(p+".tmp"), true
	case 20: // a symlink becomes a dir, or a dir a symlink
		if len(links) > 0 && r.IntN(2) == 0 {
			p := pick(r, links)
			m.kinds[p] = 'd'
			c := m.newName(r, p)
			m.kinds[c] = 'f'
			return "rm -f " + q(p) + " && mkdir " + q(p) + " && " + writer(r) + " > " + q(c), true
		}
		if len(dirs) == 0 {
			return "", false
		}
		p := pick(r, dirs)
		m.remove(p)
		t := randomTarget(r, m, p)
		m.kinds[p] = 'l'
		return "rm -rf " + q(p) + " && ln -s '" + t + "' " + q(p), true
	default: // an operation that fails, the same way in both runs
		switch r.IntN(3) {
		case 0:
			return "rm " + q("no-such-dir/x") + " 2>/dev/null || true", true
		case 1:
			return "mkdir " + q(pick(r, dirsRoot)) + " 2>/dev/null || true", true
		default:
			return "cat " + q("missing") + " > /dev/null 2>&1 || true", true
		}
	}
}
