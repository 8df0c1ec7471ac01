// Command bench measures wtx on a real-sized tree, each figure beside the
// tool a user would otherwise reach for, run in the same process on the
// same tree.
//
// Run it from the module root (Linux; it needs sh, cp, xargs and sync, and
// git for the change-scan baseline):
//
//	go run ./bench                        # 20,000-file synthetic tree, 3 runs
//	go run ./bench -files 50000 -runs 5
//	go run ./bench -tree ~/src/project    # any tree: copied, never changed
//	go run ./bench -json > bench.json     # the same figures for machines
//
// The tree is, in order: -tree DIR; else the Linux 6.1 source when the
// Debian package linux-source-6.1 has installed
// /usr/src/linux-source-6.1.tar.xz (extracted once into the user cache
// directory; -files does not apply); else a synthetic tree of -files regular
// files, reproducible from -seed: most files 1-16 KiB, 2% 100 KiB-1 MiB, 3%
// empty, directories up to 8 deep, about one symlink per 1,000 files.
//
// The tree is copied into a scratch workspace, and wtx keeps its state
// beside it (WTX_STATE_DIR). Each scenario runs -runs times; the table
// gives the median wall time of the wtx command and of its baseline, their
// ratio (wtx / baseline: below 1 means wtx is faster), and the wtx command's
// peak memory (max RSS of the wtx process, from its rusage). A scenario
// whose samples have already taken longer than -budget stops early and says
// so in the n column (samples taken):
//
//   - open+run+scan: 'wtx run -- true' opens a stage, runs true in it and
//     scans the change set; baseline 'cp -a' of the workspace.
//   - change scan, N changed: 'wtx status' on a stage where a script has
//     appended to N files; baseline 'git status' in a git repository of the
//     same tree with the same N files changed (skipped without git).
//   - durable apply, N changed: 'wtx apply' of a stage that changed N files
//     (journal, fsyncs, renames); baseline 'cp -a' of the same N files over
//     a copy of the tree, then 'sync'. Dirty data from staging is synced
//     before either is timed.
//
// Flags: -files, -seed, -runs, -budget, -tree, -wtx PATH (default: build ./cmd/wtx
// with the go command), -keep (leave the scratch directory and print its
// path), -json.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// linuxTarball is where Debian's linux-source-6.1 package puts the source.
const linuxTarball = "/usr/src/linux-source-6.1.tar.xz"

// mutate appends one byte to each file named, one a line, in the file $1.
const mutate = `while IFS= read -r f; do printf x >> "$f"; done < "$1"`

func main() {
	var cfg config
	flag.IntVar(&cfg.files, "files", 20000, "regular files in the synthetic tree")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the synthetic tree and of the choice of changed files")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each scenario; the table shows medians")
	flag.DurationVar(&cfg.budget, "budget", 30*time.Second, "stop repeating a scenario once its runs took this long")
	flag.StringVar(&cfg.tree, "tree", "", "benchmark a copy of `DIR` instead of the Linux source or a synthetic tree")
	flag.StringVar(&cfg.wtx, "wtx", "", "the wtx binary to measure (default: go build ./cmd/wtx)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the scratch directory")
	flag.BoolVar(&cfg.json, "json", false, "print the report as JSON")
	flag.Parse()
	if cfg.runs < 1 || cfg.files < 1 {
		fmt.Fprintln(os.Stderr, "bench: -runs and -files must be at least 1")
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

type config struct {
	files, runs int
	seed        uint64
	tree, wtx   string
	keep, json  bool
	budget      time.Duration
}

// report is the whole output, as -json prints it.
type report struct {
	Tree    string    `json:"tree"`
	Stats   treeStats `json:"stats"`
	Runs    int       `json:"runs"`
	OS      string    `json:"os"`
	CPUs    int       `json:"cpus"`
	Results []result  `json:"results"`
	Took    float64   `json:"took_seconds"`
}

// result is one scenario: the wtx command against its baseline.
type result struct {
	Scenario        string    `json:"scenario"`
	Runs            int       `json:"runs"`
	Command         string    `json:"command"`
	Seconds         float64   `json:"seconds"`
	Samples         []float64 `json:"samples"`
	MaxRSS          int64     `json:"max_rss_bytes"`
	Baseline        string    `json:"baseline,omitempty"`
	BaselineSeconds float64   `json:"baseline_seconds,omitempty"`
	BaselineSamples []float64 `json:"baseline_samples,omitempty"`
	Ratio           float64   `json:"ratio,omitempty"`
}

// bench holds one benchmark session's scratch layout.
type bench struct {
	cfg     config
	wtx     string
	work    string // scratch root
	ws      string // the workspace, a copy of the tree
	state   string // WTX_STATE_DIR
	spare   string // a copy of the tree the baselines may change; "" until made
	order   []string
	nLists  int
	results []result
}

func run(cfg config) error {
	start := time.Now()
	work, err := os.MkdirTemp("", "wtx-bench-")
	if err != nil {
		return err
	}
	if cfg.keep {
		defer fmt.Fprintf(os.Stderr, "bench: scratch directory kept: %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	b := &bench{cfg: cfg, work: work, ws: filepath.Join(work, "ws"), state: filepath.Join(work, "state"), wtx: cfg.wtx}
	if b.wtx == "" {
		b.wtx = filepath.Join(work, "wtx")
		progress("building wtx")
		if out, err := exec.Command("go", "build", "-o", b.wtx, "github.com/wtx-dev/wtx/cmd/wtx").CombinedOutput(); err != nil {
			return fmt.Errorf("build wtx (run from the module, or pass -wtx): %w\n%s", err, out)
		}
	} else if b.wtx, err = filepath.Abs(b.wtx); err != nil {
		return err
	}

	src, label, err := b.source()
	if err != nil {
		return err
	}
	progress("copying %s into the workspace", label)
	if _, err := b.exec("", "cp", "-a", src, b.ws); err != nil {
		return err
	}
	stats, err := statTree(b.ws)
	if err != nil {
		return err
	}
	b.order = slices.Clone(stats.Files)
	r := rand.New(rand.NewPCG(cfg.seed, 0xc4a9))
	r.Shuffle(len(b.order), func(i, j int) { b.order[i], b.order[j] = b.order[j], b.order[i] })

	for _, step := range []func() error{b.openRun, b.changeScan, b.durableApply} {
		if err := step(); err != nil {
			return err
		}
	}
	rep := report{Tree: label, Stats: *stats, Runs: cfg.runs, OS: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(), Results: b.results, Took: time.Since(start).Seconds()}
	if cfg.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printTable(os.Stdout, rep)
	return nil
}

// source returns the tree to benchmark and a label for it, generating the
// synthetic tree or extracting the Linux source when needed.
func (b *bench) source() (string, string, error) {
	if b.cfg.tree != "" {
		dir, err := filepath.Abs(b.cfg.tree)
		return dir, dir, err
	}
	if _, err := os.Stat(linuxTarball); err == nil {
		dir, err := extractLinux()
		return dir, "linux-source-6.1", err
	}
	dir := filepath.Join(b.work, "synthetic")
	b.spare = dir // generated here: the baselines may change it
	progress("generating a synthetic tree of %d files (seed %d)", b.cfg.files, b.cfg.seed)
	err := writeSynthetic(dir, synthSpec{Files: b.cfg.files, Seed: b.cfg.seed})
	return dir, fmt.Sprintf("synthetic (seed %d)", b.cfg.seed), err
}

// extractLinux extracts the Linux source tarball once into the user cache
// directory and returns the tree's root.
func extractLinux() (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	base := filepath.Join(cache, "wtx-bench")
	dir := filepath.Join(base, "linux-source-6.1")
	if _, err := os.Stat(filepath.Join(base, "linux-source-6.1.complete")); err == nil {
		return dir, nil
	}
	progress("extracting %s into %s (once)", linuxTarball, base)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command("tar", "-xJf", linuxTarball, "-C", base).CombinedOutput(); err != nil {
		return "", fmt.Errorf("extract %s: %w\n%s", linuxTarball, err, out)
	}
	if err := os.WriteFile(filepath.Join(base, "linux-source-6.1.complete"), nil, 0o644); err != nil {
		return "", err
	}
	return dir, nil
}

// spareTree returns a copy of the tree that the baselines may change,
// making one if the source cannot serve.
func (b *bench) spareTree() (string, error) {
	if b.spare == "" {
		dir := filepath.Join(b.work, "spare")
		if _, err := b.exec("", "cp", "-a", b.ws, dir); err != nil {
			return "", err
		}
		b.spare = dir
	}
	return b.spare, nil
}

// settle flushes dirty data left by untimed steps, so that it does not land
// on the next timed command.
func (b *bench) settle() error {
	_, err := b.exec("", "sync")
	return err
}

// openRun times 'wtx run -- true' against 'cp -a' of the workspace.
func (b *bench) openRun() error {
	progress("open+run+scan")
	res := result{Scenario: "open+run+scan", Command: "wtx run -- true", Baseline: "cp -a"}
	dst := filepath.Join(b.work, "cp-a")
	for res.more(b.cfg) {
		if err := b.settle(); err != nil {
			return err
		}
		s, err := b.wtxCmd("--json", "run", "--", "true")
		if err != nil {
			return err
		}
		res.add(s)
		if err := b.drop(s); err != nil {
			return err
		}
		if err := b.settle(); err != nil {
			return err
		}
		c, err := b.exec("", "cp", "-a", b.ws, dst)
		if err != nil {
			return err
		}
		res.addBaseline(c)
		if err := os.RemoveAll(dst); err != nil {
			return err
		}
	}
	b.results = append(b.results, res.done())
	return nil
}

// changeScan times 'wtx status' on one stage as it accumulates 1, 100 and
// 10,000 changed files, against 'git status' with the same changes.
func (b *bench) changeScan() error {
	var git string
	if _, err := exec.LookPath("git"); err == nil {
		progress("change scan: committing the tree to a git repository")
		if git, err = b.spareTree(); err != nil {
			return err
		}
		for _, args := range [][]string{
			{"init", "-q"},
			{"-c", "core.compression=0", "add", "-A", "-f"}, // -f: a tree may ignore itself (Debian's kernel source does)
			{"-c", "user.name=wtx-bench", "-c", "user.email=bench@wtx.invalid", "commit", "-q", "-m", "tree"},
			{"status", "--porcelain"}, // refreshes the index, as a user's repository would be
		} {
			if _, err := b.exec(git, "git", args...); err != nil {
				return err
			}
		}
	} else {
		progress("change scan: no git in PATH, no baseline")
	}
	tx, prev := "", 0
	for _, n := range b.counts(1, 100, 10000) {
		progress("change scan, %d changed", n)
		list, err := b.list(prev, n)
		if err != nil {
			return err
		}
		args := []string{"--json", "run"}
		if tx != "" {
			args = append(args, "--tx", tx)
		}
		s, err := b.wtxCmd(append(args, "--", "sh", "-c", mutate, "sh", list)...)
		if err != nil {
			return err
		}
		if tx, err = txOf(s); err != nil {
			return err
		}
		res := result{Scenario: fmt.Sprintf("change scan, %d changed", n), Command: "wtx status"}
		if _, err := b.wtxCmd("status", tx); err != nil { // warm-up, like git's below
			return err
		}
		for range b.cfg.runs {
			s, err := b.wtxCmd("status", tx)
			if err != nil {
				return err
			}
			res.add(s)
		}
		if git != "" {
			res.Baseline = "git status"
			if _, err := b.exec(git, "sh", "-c", mutate, "sh", list); err != nil {
				return err
			}
			if _, err := b.exec(git, "git", "status", "--porcelain"); err != nil {
				return err
			}
			for range b.cfg.runs {
				s, err := b.exec(git, "git", "status", "--porcelain")
				if err != nil {
					return err
				}
				res.addBaseline(s)
			}
		}
		b.results = append(b.results, res.done())
		prev = n
	}
	_, err := b.wtxCmd("drop", tx)
	return err
}

// durableApply times 'wtx apply' of 1,000 and 10,000 changed files against
// 'cp -a' of the same files over a copy of the tree, then sync.
func (b *bench) durableApply() error {
	dst, err := b.spareTree()
	if err != nil {
		return err
	}
	const copyFiles = `xargs -d '\n' cp -a --parents -t "$1" < "$2" && sync`
	for _, n := range b.counts(1000, 10000) {
		progress("durable apply, %d changed", n)
		list, err := b.list(0, n)
		if err != nil {
			return err
		}
		res := result{Scenario: fmt.Sprintf("durable apply, %d changed", n), Command: "wtx apply",
			Baseline: "cp -a + sync"}
		for res.more(b.cfg) {
			s, err := b.wtxCmd("--json", "run", "--", "sh", "-c", mutate, "sh", list)
			if err != nil {
				return err
			}
			tx, err := txOf(s)
			if err != nil {
				return err
			}
			if err := b.settle(); err != nil {
				return err
			}
			a, err := b.wtxCmd("apply", tx)
			if err != nil {
				return err
			}
			res.add(a)
			if err := b.settle(); err != nil {
				return err
			}
			c, err := b.exec(b.ws, "sh", "-c", copyFiles, "sh", dst, list)
			if err != nil {
				return err
			}
			res.addBaseline(c)
		}
		b.results = append(b.results, res.done())
	}
	return nil
}

// counts caps the wanted change counts at the tree's number of files.
func (b *bench) counts(want ...int) []int {
	var out []int
	for _, n := range want {
		n = min(n, len(b.order))
		if len(out) == 0 || out[len(out)-1] != n {
			out = append(out, n)
		}
	}
	return out
}

// list writes the files order[from:to], one a line, to a new file outside
// the workspace and returns its path.
func (b *bench) list(from, to int) (string, error) {
	b.nLists++
	p := filepath.Join(b.work, fmt.Sprintf("list-%d-%d-%d", b.nLists, from, to))
	return p, os.WriteFile(p, []byte(strings.Join(b.order[from:to], "\n")+"\n"), 0o644)
}

// sample is one finished child: its wall time, peak memory and stdout.
type sample struct {
	took   time.Duration
	rss    int64
	stdout []byte
}

// exec runs a child in dir (the current directory when empty) and times it;
// a non-zero exit is an error carrying its stderr.
func (b *bench) exec(dir, name string, args ...string) (sample, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+b.state, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		return sample{}, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, errb.Bytes())
	}
	return sample{took: took, rss: maxRSS(cmd.ProcessState), stdout: out.Bytes()}, nil
}

func (b *bench) wtxCmd(args ...string) (sample, error) {
	return b.exec("", b.wtx, append([]string{"-C", b.ws}, args...)...)
}

func (b *bench) drop(s sample) error {
	tx, err := txOf(s)
	if err != nil {
		return err
	}
	_, err = b.wtxCmd("drop", tx)
	return err
}

// txOf reads the stage id from a 'wtx --json run' answer.
func txOf(s sample) (string, error) {
	var a struct {
		Tx string `json:"tx"`
	}
	if err := json.Unmarshal(s.stdout, &a); err != nil || a.Tx == "" {
		return "", errors.Join(fmt.Errorf("wtx run --json: no stage id in %q", s.stdout), err)
	}
	return a.Tx, nil
}

// more reports whether another run is due: fewer than cfg.runs so far, and
// the runs so far took less than cfg.budget.
func (r *result) more(cfg config) bool {
	var spent float64
	for _, x := range append(slices.Clone(r.Samples), r.BaselineSamples...) {
		spent += x
	}
	return len(r.Samples) < cfg.runs && (len(r.Samples) == 0 || spent < cfg.budget.Seconds())
}

func (r *result) add(s sample) {
	r.Samples = append(r.Samples, s.took.Seconds())
	r.MaxRSS = max(r.MaxRSS, s.rss)
}

func (r *result) addBaseline(s sample) {
	r.BaselineSamples = append(r.BaselineSamples, s.took.Seconds())
}

func (r result) done() result {
	r.Runs = len(r.Samples)
	r.Seconds = median(r.Samples)
	if len(r.BaselineSamples) > 0 {
		r.BaselineSeconds = median(r.BaselineSamples)
		if r.BaselineSeconds > 0 {
			r.Ratio = r.Seconds / r.BaselineSeconds
		}
	}
	return r
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printTable(w io.Writer, rep report) {
	fmt.Fprintf(w, "wtx bench: %s: %d files, %d dirs, %d symlinks, %s, depth %d; %s, %d CPUs; up to %d runs each\n\n",
		rep.Tree, rep.Stats.NFiles, rep.Stats.Dirs, rep.Stats.Symlinks, bytesIEC(rep.Stats.Bytes), rep.Stats.Depth,
		rep.OS, rep.CPUs, rep.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tn\twtx command\ttime\tmax RSS\tbaseline\ttime\tratio\t")
	for _, r := range rep.Results {
		base, bt, ratio := "-", "-", "-"
		if r.Baseline != "" {
			base, bt, ratio = r.Baseline, seconds(r.BaselineSeconds), fmt.Sprintf("%.2fx", r.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Runs, r.Command, seconds(r.Seconds),
			bytesIEC(r.MaxRSS), base, bt, ratio)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nn = runs taken; time = median; ratio = wtx time / baseline time; max RSS = peak memory of the wtx process; total %.0fs\n", rep.Took)
}

func seconds(s float64) string {
	if s < 1 {
		return fmt.Sprintf("%.0fms", s*1000)
	}
	return fmt.Sprintf("%.2fs", s)
}

func bytesIEC(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
}
