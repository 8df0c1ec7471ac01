//go:build unix

package stage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// ProbeCacheName is the file, in the state root, where ProbeCached keeps
// probe results.
const ProbeCacheName = "probe-cache.json"

type probeResult struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Boot   string `json:"boot,omitempty"`
}

// ProbeCached is b.Probe, remembered in stateDir/ProbeCacheName per backend
// and pair of devices (the workspace's and the state root's) until the
// machine restarts. fresh reports whether the probe ran now rather than
// coming from the cache. A failed probe is returned as an error wrapping
// ErrUnsupported that says why.
func ProbeCached(ctx context.Context, b Backend, workspace, stateDir string) (fresh bool, err error) {
	wsi, err := os.Stat(workspace)
	if err != nil {
		return false, err
	}
	sti, err := os.Stat(stateDir)
	if err != nil {
		return false, err
	}
	key := fmt.Sprintf("%s:%d:%d", b.Name(), devOf(wsi), devOf(sti))
	path := stateDir + "/" + ProbeCacheName
	cache := map[string]probeResult{}
	if raw, err := os.ReadFile(path); err == nil {
		json.Unmarshal(raw, &cache) // a damaged cache is probed again
	}
	boot := bootID()
	if r, ok := cache[key]; ok && r.Boot == boot {
		if r.OK {
			return false, nil
		}
		return false, fmt.Errorf("%s: %w", r.Reason, ErrUnsupported)
	}
	perr := b.Probe(ctx, workspace, stateDir)
	if perr != nil && !errors.Is(perr, ErrUnsupported) {
		return true, perr // not a verdict on the backend: do not remember it
	}
	r := probeResult{OK: perr == nil, Boot: boot}
	if perr != nil {
		r.Reason = strings.TrimSuffix(perr.Error(), ": "+ErrUnsupported.Error())
	}
	cache[key] = r
	if raw, err := json.MarshalIndent(cache, "", "  "); err == nil {
		fsx.WriteFileAtomic(path, raw, 0o600) // only a cache: a failed write probes again next time
	}
	return true, perr
}

// bootID names the current boot of the machine, "" where unknown.
func bootID() string {
	raw, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(raw))
}
