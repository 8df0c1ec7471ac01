// Command bench measures wtx on a real-sized tree, each figure beside the
// tool a user would otherwise reach for, run in the same process on the
// same tree, so that the ratios hold on any machine.
//
// Run it from the module root (Linux; it needs sh, cp, xargs, rm and sync,
// git for the change-scan baselines, and strace, better with perf, for the
// syscall count):
//
//	go run ./bench                        # 20,000-file synthetic tree, 3 runs
//	go run ./bench -files 50000 -runs 5
//	go run ./bench -tree ~/src/project    # any tree: copied, never changed
//	go run ./bench -scale 100000,300000,1000000   # adds the scale trees
//	go run ./bench -json > bench.json     # the same figures for machines
//
// The full run of the performance targets is
//
//	go run ./bench -scale 100000,300000,1000000
//
// (about 20 GB free on the scratch filesystem and most of an hour on two
// cores); -dirty 0 skips the dirty-data scenarios, -scale "" (the default)
// the scale trees.
//
// The tree is, in order: -tree DIR; else the Linux 6.1 source when the
// Debian package linux-source-6.1 has installed
// /usr/src/linux-source-6.1.tar.xz (extracted once into the user cache
// directory; -files does not apply); else a synthetic tree of -files regular
// files, reproducible from -seed: most files 1-16 KiB, 2% 100 KiB-1 MiB, 3%
// empty, directories up to 8 deep, about one symlink per 1,000 files. A
// version-control directory (.git) in the tree is copied but never changed.
//
// The tree is copied into a scratch workspace (under -scratch, default the
// system's temporary directory), and wtx keeps its state beside it
// (WTX_STATE_DIR). The header names the filesystem that holds it, and for
// ext4 whether it keeps a journal: without one, ext4 skips recently freed
// inodes one by one when it makes a file, so the rows that create and
// remove many files depend on what ran before them (a note says so). Each scenario runs -runs times; the table gives the
// median wall time of the wtx command and of its baseline, their ratio (wtx
// / baseline: below 1 means wtx is faster), the target ratio and whether it
// is met, and the wtx command's peak memory (max RSS of the wtx process,
// from its rusage). A scenario whose samples have already taken longer than
// -budget stops early and says so in the n column (samples taken).
//
//   - open+run+scan: 'wtx run -- true' opens a stage, runs true in it and
//     scans the change set; baseline 'git status' in a git repository of
//     the same tree (and 'try -n true' when try is installed).
//   - status, diff --stat, diff with N changed (N = 1,000, 10,000,
//     20,000, capped at the tree's files): one stage where a script has
//     appended a byte to N files; baselines 'git status', 'git diff
//     --stat' and 'git diff' with the same N files changed.
//   - durable apply, N modified (N = 1,000 and 10,000): 'wtx apply' of a
//     stage that changed N files (journal, fsyncs, renames); baseline 'cp
//     -a' of the same N files over a copy of the tree, then 'sync'. Then
//     'wtx undo' of that op against the same copy again.
//   - durable apply, N new: a stage that copied a package-like tree of
//     -pkgfiles small files into the workspace; baseline 'cp -a' of it
//     into the copy and 'sync'; its undo against 'rm -rf' of it and 'sync'.
//   - syscalls per changed file: the apply of 1,000 modified files counted
//     by the kernel's tracepoint ('perf stat -e raw_syscalls:sys_enter',
//     where perf can read it: tracefs mounted at /sys/kernel/tracing),
//     and under 'strace -c -f' for the calls by name (not measured
//     without strace). strace holds the process at every call, which
//     multiplies the Go runtime's own scheduling calls.
//   - with dirty data: -dirty bytes of unrelated data written (not synced)
//     on the scratch filesystem just before 'wtx run -- true' and a
//     1,000-file apply, against the same command without it.
//   - scale (-scale N,…): a synthetic tree of N small files as its own
//     workspace: open+run+scan, status after 100 changes, and a 1,000-file
//     apply (against cp -a + sync), with the peak RSS of each beside the
//     budget of 100 MB + 200 bytes per tree entry.
//
// Dirty data left by untimed steps is synced before each timed command.
//
// Flags: -files, -pkgfiles, -seed, -runs, -budget, -tree, -scratch,
// -dirty, -scale, -only G,… (run only these scenario groups: openrun, scan,
// apply, new, syscalls, dirty, scale), -wtx PATH (default: build ./cmd/wtx with the go command),
// -keep (leave the scratch directory and print its path), -json; -from
// FILE prints the table of a report -json saved.
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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// linuxTarball is where Debian's linux-source-6.1 package puts the source.
const linuxTarball = "/usr/src/linux-source-6.1.tar.xz"

// mutate appends one byte to each file named, one a line, in the file $1.
const mutate = `while IFS= read -r f; do printf x >> "$f"; done < "$1"`

// copyFiles copies the files named in $2 (relative to the current
// directory) to the same names under $1, then syncs: the baseline of a
// durable apply.
const copyFiles = `xargs -d '\n' cp -a --parents -t "$1" < "$2" && sync`

func main() {
	var cfg config
	var scale string
	flag.IntVar(&cfg.files, "files", 20000, "regular files in the synthetic tree")
	flag.IntVar(&cfg.pkgFiles, "pkgfiles", 20000, "files of the package-like tree the new-files apply adds")
	flag.Uint64Var(&cfg.seed, "seed", 1, "seed of the synthetic trees and of the choice of changed files")
	flag.IntVar(&cfg.runs, "runs", 3, "runs of each scenario; the table shows medians")
	flag.DurationVar(&cfg.budget, "budget", 30*time.Second, "stop repeating a scenario once its runs took this long")
	flag.StringVar(&cfg.tree, "tree", "", "benchmark a copy of `DIR` instead of the Linux source or a synthetic tree")
	flag.StringVar(&cfg.scratch, "scratch", "", "make the scratch directory under `DIR` (default: the temporary directory)")
	flag.Int64Var(&cfg.dirty, "dirty", 1536<<20, "bytes of unrelated dirty data for the dirty-data scenarios (0: skip them)")
	flag.StringVar(&scale, "scale", "", "comma-separated sizes `N,…` of synthetic scale trees (e.g. 100000,300000,1000000)")
	flag.StringVar(&cfg.wtx, "wtx", "", "the wtx binary to measure (default: go build ./cmd/wtx)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the scratch directory")
	flag.BoolVar(&cfg.json, "json", false, "print the report as JSON")
	only := flag.String("only", "", "run only the scenario groups `G,…` (openrun, scan, apply, new, syscalls, dirty, scale)")
	from := flag.String("from", "", "print the table of the report `FILE` that -json wrote, measuring nothing")
	flag.Parse()
	if *from != "" {
		if err := printSaved(*from); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	for _, f := range strings.Split(scale, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1000 {
			fmt.Fprintf(os.Stderr, "bench: -scale %q: sizes are numbers of files, at least 1000\n", f)
			os.Exit(2)
		}
		cfg.scale = append(cfg.scale, n)
	}
	for _, g := range strings.Split(*only, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if !slices.Contains(groups, g) {
			fmt.Fprintf(os.Stderr, "bench: -only %q: the groups are %s\n", g, strings.Join(groups, ", "))
			os.Exit(2)
		}
		if cfg.only == nil {
			cfg.only = map[string]bool{}
		}
		cfg.only[g] = true
	}
	if cfg.runs < 1 || cfg.files < 1 || cfg.pkgFiles < 0 || cfg.dirty < 0 {
		fmt.Fprintln(os.Stderr, "bench: -runs and -files must be at least 1, -pkgfiles and -dirty not negative")
		os.Exit(2)
	}
	if err := run(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

type config struct {
	files, pkgFiles, runs int
	seed                  uint64
	tree, wtx, scratch    string
	keep, json            bool
	budget                time.Duration
	dirty                 int64
	scale                 []int
	only                  map[string]bool // scenario groups to run; empty: all
}

// groups names the scenario groups -only chooses from, in the order they run.
var groups = []string{"openrun", "scan", "apply", "new", "syscalls", "dirty", "scale"}

// report is the whole output, as -json prints it.
type report struct {
	Tree    string     `json:"tree"`
	Stats   treeStats  `json:"stats"`
	Runs    int        `json:"runs"`
	OS      string     `json:"os"`
	CPUs    int        `json:"cpus"`
	FS      filesystem `json:"filesystem"`
	Results []result   `json:"results"`
	Counts  []count    `json:"counts"`
	Notes   []string   `json:"notes"`
	Took    float64    `json:"took_seconds"`
}

// result is one scenario: the wtx command against its baseline.
type result struct {
	Scenario        string    `json:"scenario"`
	Runs            int       `json:"runs"`
	Command         string    `json:"command"`
	Seconds         float64   `json:"seconds"`
	Samples         []float64 `json:"samples"`
	MaxRSS          int64     `json:"max_rss_bytes"`
	RSSBudget       int64     `json:"rss_budget_bytes,omitempty"`
	Baseline        string    `json:"baseline,omitempty"`
	BaselineSeconds float64   `json:"baseline_seconds,omitempty"`
	BaselineSamples []float64 `json:"baseline_samples,omitempty"`
	Ratio           float64   `json:"ratio,omitempty"`
	// Target is the ratio the scenario should stay at or under (0: none).
	Target float64 `json:"target,omitempty"`
}

// met reports whether the ratio and the memory budget are within target.
func (r result) met() (bool, bool) {
	set := false
	ok := true
	if r.Target > 0 && r.Baseline != "" {
		set = true
		ok = ok && r.Ratio <= r.Target
	}
	if r.RSSBudget > 0 {
		set = true
		ok = ok && r.MaxRSS <= r.RSSBudget
	}
	return ok, set
}

// count is a figure that is a number rather than a time.
type count struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target float64 `json:"target,omitempty"` // at most; 0: none
	Detail string  `json:"detail,omitempty"`
}

// bench holds one benchmark session's scratch layout.
type bench struct {
	cfg     config
	wtx     string
	work    string // scratch root
	ws      string // the workspace, a copy of the tree
	state   string // WTX_STATE_DIR
	spare   string // a copy of the tree the baselines may change; "" until made
	git     string // a git repository of the tree; "" until made or without git
	order   []string
	nLists  int
	results []result
	figures []count
	notes   []string
}

func run(cfg config) error {
	start := time.Now()
	work, err := os.MkdirTemp(cfg.scratch, "wtx-bench-")
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
	fs := scratchFS(work)
	if fs.Journal == "no" {
		b.note("the scratch directory is on %s: ext4 then gives no new file an inode freed in the last minute or more, and each creation skips those one by one, so creating files soon after many were removed is slow for wtx and the baselines alike, and the new-file rows depend on what ran before them", fs)
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

	for _, step := range []struct {
		name string
		run  func() error
	}{
		{"openrun", b.openRun}, {"scan", b.changeScan}, {"apply", b.durableApply}, {"new", b.newFiles},
		{"syscalls", b.syscalls}, {"dirty", b.dirtyData}, {"scale", b.scaleTrees},
	} {
		if len(cfg.only) > 0 && !cfg.only[step.name] {
			continue
		}
		if err := step.run(); err != nil {
			return err
		}
	}
	rep := report{Tree: label, Stats: *stats, Runs: cfg.runs, OS: runtime.GOOS + "/" + runtime.GOARCH,
		CPUs: runtime.NumCPU(), FS: fs, Results: b.results, Counts: b.figures, Notes: b.notes, Took: time.Since(start).Seconds()}
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

// gitTree returns a git repository of the tree, with its index refreshed
// as a user's would be, or "" without git. It is always a new repository:
// every .git of the copy is removed first (a worktree's or submodule's .git
// file points at the real repository, which git init and commit would
// otherwise change; a nested repository would hide its files from git).
func (b *bench) gitTree() (string, error) {
	if b.git != "" {
		return b.git, nil
	}
	if _, err := exec.LookPath("git"); err != nil {
		b.note("no git in PATH: the git baselines are not measured")
		return "", nil
	}
	progress("committing the tree to a git repository")
	dir := filepath.Join(b.work, "git")
	if _, err := b.exec("", "cp", "-a", b.ws, dir); err != nil {
		return "", err
	}
	if err := removeGit(dir); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"-c", "core.compression=0", "add", "-A", "-f"}, // -f: a tree may ignore itself (Debian's kernel source does)
		{"-c", "user.name=wtx-bench", "-c", "user.email=bench@wtx.invalid", "commit", "-q", "--no-verify", "-m", "tree"},
		{"status", "--porcelain"}, // refreshes the index, as a user's repository would be
	} {
		if _, err := b.exec(dir, "git", args...); err != nil {
			return "", err
		}
	}
	b.git = dir
	return dir, nil
}

// settle flushes dirty data left by untimed steps, so that it does not land
// on the next timed command.
func (b *bench) settle() error {
	_, err := b.exec("", "sync")
	return err
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
	return b.writeList(b.order[from:to])
}

func (b *bench) writeList(names []string) (string, error) {
	b.nLists++
	p := filepath.Join(b.work, fmt.Sprintf("list-%d-%d", b.nLists, len(names)))
	return p, os.WriteFile(p, []byte(strings.Join(names, "\n")+"\n"), 0o644)
}

func (b *bench) note(format string, args ...any) {
	b.notes = append(b.notes, fmt.Sprintf(format, args...))
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
	return b.execIn(b.state, dir, name, args...)
}

// execIn is exec with the state root given.
func (b *bench) execIn(state, dir, name string, args ...string) (sample, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "WTX_STATE_DIR="+state, "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_PAGER=cat", "PAGER=cat", "NO_COLOR=1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	err := cmd.Run()
	took := time.Since(t0)
	if err != nil {
		return sample{}, fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tailOf(errb.Bytes()))
	}
	return sample{took: took, rss: maxRSS(cmd.ProcessState), stdout: out.Bytes()}, nil
}

func tailOf(b []byte) []byte {
	if len(b) > 4000 {
		return b[len(b)-4000:]
	}
	return b
}

func (b *bench) wtxCmd(args ...string) (sample, error) {
	return b.exec("", b.wtx, append([]string{"-C", b.ws}, args...)...)
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

// opOf reads the op id from a 'wtx --json apply' or 'undo' answer.
func opOf(s sample) (string, error) {
	var a struct {
		Op string `json:"op_id"`
	}
	if err := json.Unmarshal(s.stdout, &a); err != nil || a.Op == "" {
		return "", errors.Join(fmt.Errorf("wtx --json: no op id in %q", s.stdout), err)
	}
	return a.Op, nil
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
	fmt.Fprintf(w, "wtx bench: %s: %d files, %d dirs, %d symlinks, %s, depth %d; %s, %d CPUs, %s; up to %d runs each\n\n",
		rep.Tree, rep.Stats.NFiles, rep.Stats.Dirs, rep.Stats.Symlinks, bytesIEC(rep.Stats.Bytes), rep.Stats.Depth,
		rep.OS, rep.CPUs, rep.FS, rep.Runs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tn\twtx command\ttime\tmax RSS\tbaseline\ttime\tratio\ttarget\tmet\t")
	for _, r := range rep.Results {
		base, bt, ratio := "-", "-", "-"
		if r.Baseline != "" {
			base, bt, ratio = r.Baseline, seconds(r.BaselineSeconds), fmt.Sprintf("%.2fx", r.Ratio)
		}
		var target []string
		if r.Target > 0 {
			target = append(target, fmt.Sprintf("≤%.1fx", r.Target))
		}
		rss := bytesIEC(r.MaxRSS)
		if r.RSSBudget > 0 {
			target = append(target, "RSS ≤"+bytesIEC(r.RSSBudget))
		}
		met := "-"
		if ok, set := r.met(); set && ok {
			met = "yes"
		} else if set {
			met = "NO"
		}
		tgt := strings.Join(target, ", ")
		if tgt == "" {
			tgt = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Runs, r.Command, seconds(r.Seconds),
			rss, base, bt, ratio, tgt, met)
	}
	tw.Flush()
	for _, c := range rep.Counts {
		line := fmt.Sprintf("\n%s: %.1f", c.Name, c.Value)
		if c.Target > 0 {
			met := "met"
			if c.Value > c.Target {
				met = "NOT met"
			}
			line += fmt.Sprintf(" (target ≤ %.0f: %s)", c.Target, met)
		}
		if c.Detail != "" {
			line += "; " + c.Detail
		}
		fmt.Fprint(w, line)
	}
	if len(rep.Counts) > 0 {
		fmt.Fprintln(w)
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\nnote: %s", n)
	}
	fmt.Fprintf(w, "\n\nn = runs taken; time = median; ratio = wtx time / baseline time; max RSS = peak memory of the wtx process; total %.0fs\n", rep.Took)
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

// printSaved prints the table of a report saved by -json.
func printSaved(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var rep report
	if err := json.Unmarshal(data, &rep); err != nil {
		return fmt.Errorf("%s: not a bench report: %w", path, err)
	}
	printTable(os.Stdout, rep)
	return nil
}

// record adds finished results and says each on stderr as it comes (a long
// run shows what it has measured so far).
func (b *bench) record(rs ...result) {
	for _, r := range rs {
		line := fmt.Sprintf("%s: %s %s, max RSS %s", r.Scenario, r.Command, seconds(r.Seconds), bytesIEC(r.MaxRSS))
		if r.Baseline != "" {
			line += fmt.Sprintf("; %s %s; ratio %.2fx", r.Baseline, seconds(r.BaselineSeconds), r.Ratio)
		}
		progress("%s", line)
	}
	b.results = append(b.results, rs...)
}
