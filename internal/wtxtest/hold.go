package wtxtest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A Hold stops a failpoint build of wtx at a named point until the test
// lets it go on (WTX_FAILPOINT_HOLD), so that the test acts while the
// command stands there, however slowly either of them runs.
type Hold struct {
	t   testing.TB
	dir string
}

// NewHold returns a hold at the failpoint named point.
func NewHold(t testing.TB, point string) (*Hold, []string) {
	t.Helper()
	h := &Hold{t: t, dir: t.TempDir()}
	t.Cleanup(h.Release) // a command still held when the test ends goes on
	return h, []string{"WTX_FAILPOINT_HOLD=" + point + "@" + h.dir}
}

// Wait waits until the command p has reached the point. It fails the test
// when p ends first, or when the test's patience runs out.
func (h *Hold) Wait(t testing.TB, p *os.Process) {
	t.Helper()
	deadline := time.Now().Add(Patience(t))
	for {
		if _, err := os.Stat(filepath.Join(h.dir, "reached")); err == nil {
			return
		}
		if ended(p) {
			if _, err := os.Stat(filepath.Join(h.dir, "reached")); err == nil {
				return
			}
			t.Fatal("the command ended without reaching its held failpoint")
		}
		if time.Now().After(deadline) {
			_ = p.Kill() // the test fails; the command must not outlive it
			t.Fatal("the command did not reach its held failpoint")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ended reports whether p has exited (a zombie not yet waited for
// included), as its /proc entry says.
func ended(p *os.Process) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid))
	if err != nil {
		return true
	}
	// The state follows the command name, which ends with the last ')'.
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] == 'Z' || data[i+2] == 'X'
}

// Release lets the held command go on.
func (h *Hold) Release() {
	if err := os.WriteFile(filepath.Join(h.dir, "release"), nil, 0o600); err != nil && !os.IsExist(err) {
		h.t.Errorf("release the held failpoint: %v", err)
	}
}

// Patience is how long a test waits for something that must happen, such
// as a command reaching a point or an answer arriving: until shortly
// before the test binary's deadline, so that a slow or busy machine makes
// the test slower and never fails it, and a hang still fails with what it
// waited for.
func Patience(t testing.TB) time.Duration {
	var dl time.Time
	ok := false
	if d, is := t.(interface{ Deadline() (time.Time, bool) }); is {
		dl, ok = d.Deadline()
	}
	if !ok {
		return 10 * time.Minute
	}
	return max(time.Until(dl)-20*time.Second, 5*time.Second)
}
