package semantic

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// stagedDigest is the staged digest status --json gives path, "" when the
// path is not in the change set.
func stagedDigest(t *testing.T, r wtxResult, path string) string {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("wtx status: %v", r)
	}
	var st struct {
		Changes []struct {
			Path   string `json:"path"`
			Digest string `json:"digest"`
		} `json:"changes"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.stdout)
	}
	for _, c := range st.Changes {
		if c.Path == path {
			return c.Digest
		}
	}
	return ""
}

// digestCacheCase stages a rewrite of f, reads the stage's status twice
// (the second from the stage's digest cache), then rewrites f in the stage
// in place with the same size and its mtime put back, and returns the
// digest status gives f then, and what an apply leaves in the workspace.
func digestCacheCase(t *testing.T, backend string, failpoint bool, env ...string) (string, string, wtxResult) {
	t.Helper()
	ws, state := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "f"), []byte("base\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wtx := func(args ...string) wtxResult { return wtxWith(t, failpoint, env, ws, state, args...) }
	if r := wtx("run", "--backend", backend, "--name", "s", "--", "sh", "-c", "printf aaaa > f"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	time.Sleep(30 * time.Millisecond) // past the file system clock's tick: f is no longer racy
	for i := range 2 {
		if got := stagedDigest(t, wtx("status", "--json", "s"), "f"); got != sha("aaaa") {
			t.Fatalf("status %d: f staged as %s, want %s", i+1, got, sha("aaaa"))
		}
	}
	if r := wtx("run", "--tx", "s", "--", "sh", "-c", "cp -p f .r && printf bbbb > f && touch -r .r f && rm .r"); r.code != 0 {
		t.Fatalf("wtx run --tx: %v", r)
	}
	got := stagedDigest(t, wtx("status", "--json", "s"), "f")
	r := wtx("apply", "s")
	data, err := os.ReadFile(filepath.Join(ws, "f"))
	if err != nil {
		t.Fatal(err)
	}
	return got, string(data), r
}

// TestDigestCacheFollowsInPlaceEdits: status keeps the digests it computed
// for the next call, keyed by each file's stat tuple, so that it reads only
// what moved. A staged file rewritten in place with its size and mtime
// put back is still seen (its change time moved): status gives the new
// digest and apply lands the new content, on every backend here. With the
// tuple check off (WTX_DISABLE=digest-cache) status gives the old digest,
// which shows the test sees the cache.
func TestDigestCacheFollowsInPlaceEdits(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	backends := []string{"copy"}
	if reason := overlayUsable(t, bin); reason == "" {
		backends = append(backends, "overlay")
	} else {
		t.Logf("overlay left out: %s", reason)
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			got, ws, r := digestCacheCase(t, b, false)
			if got != sha("bbbb") {
				t.Errorf("after an in-place edit: f staged as %s, want %s", got, sha("bbbb"))
			}
			if r.code != 0 || ws != "bbbb" {
				t.Errorf("apply: %v; f = %q, want bbbb", r, ws)
			}
			got, _, _ = digestCacheCase(t, b, true, "WTX_DISABLE=digest-cache")
			if got != sha("aaaa") {
				t.Errorf("negative control (digest-cache off): f staged as %s, want the stale %s", got, sha("aaaa"))
			}
		})
	}
}

// TestDigestCacheKeepsDrift: a workspace file whose base digest the cache
// holds is still drift once it is rewritten in place with its size and
// mtime put back: the cache keys the base digest by the base's stat tuple,
// never trusts it for the file now, and the apply is refused (exit 2)
// with the edit kept.
func TestDigestCacheKeepsDrift(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	backends := []string{"copy"}
	if reason := overlayUsable(t, bin); reason == "" {
		backends = append(backends, "overlay")
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			ws, state := t.TempDir(), t.TempDir()
			f := filepath.Join(ws, "f")
			if err := os.WriteFile(f, []byte("base\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			old, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			if r := runWtx(t, ws, state, "run", "--backend", b, "--name", "s", "--", "sh", "-c", "printf aaaa > f"); r.code != 0 {
				t.Fatalf("wtx run: %v", r)
			}
			for range 2 {
				if r := runWtx(t, ws, state, "status", "s"); r.code != 0 {
					t.Fatalf("wtx status: %v", r)
				}
			}
			if err := os.WriteFile(f, []byte("EDIT\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chtimes(f, old.ModTime(), old.ModTime()); err != nil {
				t.Fatal(err)
			}
			r := runWtx(t, ws, state, "apply", "s")
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if r.code != 2 || string(data) != "EDIT\n" {
				t.Errorf("apply over a drifted file: %v; f = %q, want a refusal (2) and the edit kept", r, data)
			}
		})
	}
}

// mmapWhileRunning stages f, then, while `run --tx` keeps a command alive
// in the stage, writes f's first byte twice through one shared mapping of
// the staged file with a status between the writes: the second write
// lands on a page that is still dirty, so f's mtime and ctime stay as the
// status saw them. It returns the digest a status gives f afterwards. The
// state root is on a tmpfs (no writeback cleans the page in between).
func mmapWhileRunning(t *testing.T, backend string, failpoint bool, env ...string) string {
	t.Helper()
	shm, err := os.MkdirTemp(filepath.Join("/", "dev", "shm"), "wtx-mmap-")
	if err != nil {
		t.Skipf("no tmpfs at /dev/shm: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	ws, state := t.TempDir(), filepath.Join(shm, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	wtx := func(args ...string) wtxResult { return wtxWith(t, failpoint, env, ws, state, args...) }
	if r := wtx("run", "--backend", backend, "--name", "s", "--", "sh", "-c", "printf zzzzzzzz > f"); r.code != 0 {
		t.Fatalf("wtx run: %v", r)
	}
	time.Sleep(30 * time.Millisecond)
	staged, err := filepath.Glob(filepath.Join(state, "stages", "tx-*", "*", "f"))
	if err != nil || len(staged) != 1 {
		t.Fatalf("staged f: %v %v", staged, err)
	}
	// The command says when it runs and then waits until the test lets it
	// end, however slowly the machine goes.
	sig := t.TempDir()
	running, done := filepath.Join(sig, "running"), filepath.Join(sig, "done")
	run := exec.Command(wtxtest.Binary(t, failpoint), "-C", ws, "run", "--tx", "s", "--",
		"sh", "-c", `: > "$1"; while [ ! -e "$2" ]; do sleep 0.01; done`, "sh", running, done)
	run.Env = append(append(os.Environ(), "WTX_STATE_DIR="+state), env...)
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- run.Wait() }()
	t.Cleanup(func() {
		_ = os.WriteFile(done, nil, 0o644) // lets a command left by a failed test end
	})
	for waiting := true; waiting; {
		select {
		case err := <-ended:
			t.Fatalf("wtx run --tx ended before its command said it runs: %v", err)
		case <-time.After(10 * time.Millisecond):
			_, err := os.Stat(running)
			waiting = err != nil
		}
	}
	fd, err := syscall.Open(staged[0], syscall.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	m, err := syscall.Mmap(fd, 0, 8, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	syscall.Close(fd)
	if err != nil {
		t.Fatal(err)
	}
	m[0] = 'A'
	time.Sleep(30 * time.Millisecond)
	if r := wtx("status", "s"); r.code != 0 {
		t.Fatalf("status while the command runs: %v", r)
	}
	m[0] = 'B' // the page is still dirty: no time moves
	if err := syscall.Munmap(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(done, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := <-ended; err != nil {
		t.Fatalf("wtx run --tx: %v", err)
	}
	return stagedDigest(t, wtx("status", "--json", "s"), "f")
}

// TestDigestCacheKeepsNothingWhileACommandRuns: a status taken while a
// command runs in the stage keeps no digest of the view, since a write
// through a shared mapping to a page already dirty moves no time and would
// leave such a digest naming content the file no longer holds. With the
// view lock ignored (WTX_DISABLE=digest-cache-busy) the status keeps it and
// the next one reports the stale digest.
func TestDigestCacheKeepsNothingWhileACommandRuns(t *testing.T) {
	t.Parallel()
	bin := wtxtest.Binary(t, false)
	backends := []string{"copy"}
	if reason := overlayUsable(t, bin); reason == "" {
		backends = append(backends, "overlay")
	}
	for _, b := range backends {
		t.Run(b, func(t *testing.T) {
			if got := mmapWhileRunning(t, b, false); got != sha("Bzzzzzzz") {
				t.Errorf("after the mapped writes: f staged as %s, want %s (Bzzzzzzz)", got, sha("Bzzzzzzz"))
			}
			if got := mmapWhileRunning(t, b, true, "WTX_DISABLE=digest-cache-busy"); got != sha("Azzzzzzz") {
				t.Errorf("negative control (view lock ignored): f staged as %s, want the stale %s", got, sha("Azzzzzzz"))
			}
		})
	}
}
