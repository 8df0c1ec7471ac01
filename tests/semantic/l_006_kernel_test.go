//go:build linux

package semantic

import (
	"os"
	"testing"
)

// kernelScript opens kernel settings for writing (writing nothing, so a
// failure of the protection changes nothing on the host) and reads files
// that must show empty. Each names a file every Linux has.
const kernelScript = `
try() { name=$1; shift; if "$@" >/dev/null 2>&1; then echo "$name=ESCAPED"; else echo "$name=held"; fi; }
T="$L006_TOOL_PATH"
try sysctl-core-pattern "$T" openw /proc/sys/kernel/core_pattern
try sysctl-core-uses-pid "$T" openw /proc/sys/kernel/core_uses_pid
try sysctl-net "$T" openw /proc/sys/net/ipv4/ip_forward
try sysrq-trigger "$T" openw /proc/sysrq-trigger
try sys-uevent "$T" openw /sys/kernel/uevent_helper
try sys-kexec "$T" openw /sys/kernel/mm/transparent_hugepage/enabled
try timer-list "$T" read /proc/timer_list
`

// kernelEscapes are the attempts that root could make without the
// protection (the last two where the system has the files).
var kernelEscapes = []string{"sysctl-core-pattern", "sysctl-core-uses-pid", "sysctl-net", "sysrq-trigger", "timer-list"}

// TestL006_KernelSettingsReadOnly checks L-006 for the kernel's settings:
// on every run in a view (no switch; --read-only --no-network), as root
// and as an ordinary user, the command cannot open /proc/sys (here
// kernel.core_pattern, whose program the kernel would run as full root
// outside every namespace), /proc/sysrq-trigger or /sys for writing, and
// /proc/timer_list shows empty. Runs whose command could not have done it
// anyway (an ordinary user) pass trivially; the negative control below
// shows what root gets without the protection.
func TestL006_KernelSettingsReadOnly(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, false)
			for _, flags := range [][]string{nil, {"--read-only", "--no-network"}} {
				res := r.runScript(t, kernelScript, nil, flags...)
				overlayOrRefused(t, res)
				for _, name := range kernelEscapes {
					if _, ok := res.outcomes[name]; !ok {
						t.Errorf("%v: %s did not run", flags, name)
					}
				}
				for name, v := range res.outcomes {
					if v != "held" {
						t.Errorf("%v: %s got through (as %s)", flags, name, id.name)
					}
				}
				if t.Failed() {
					t.Logf("stderr:\n%s", res.stderr)
				}
			}
		})
	}
}

// TestL006_KernelNegativeControl leaves /proc and /sys as they are
// (failpoint build, WTX_DISABLE=confine-kernel): root's command must then
// open kernel.core_pattern for writing, even under --read-only
// --no-network, or the test above could not fail. (An ordinary user
// cannot, with or without the protection: it only runs.)
func TestL006_KernelNegativeControl(t *testing.T) {
	for _, id := range identities(t) {
		t.Run(id.name, func(t *testing.T) {
			t.Parallel()
			r := newEscapeRig(t, id, true)
			res := r.runScript(t, kernelScript, []string{"WTX_DISABLE=confine-kernel"}, "--read-only", "--no-network")
			overlayOrRefused(t, res)
			if id.uid != 0 || os.Geteuid() != 0 {
				t.Logf("as an ordinary user: %v", res.outcomes)
				return
			}
			for _, name := range []string{"sysctl-core-pattern", "sysctl-net", "timer-list"} {
				if res.outcomes[name] != "ESCAPED" {
					t.Errorf("with /proc left writable, %s was still stopped\n%s", name, res.stderr)
				}
			}
		})
	}
}
