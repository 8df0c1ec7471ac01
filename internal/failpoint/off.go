//go:build !wtxfailpoint

package failpoint

// Enabled reports whether this build arms failpoints.
const Enabled = false

// Hit marks a crash point; it does nothing in an ordinary build.
func Hit(name string) {}

// Disabled reports whether a protection is switched off for a negative
// control; never in an ordinary build.
func Disabled(protection string) bool { return false }

// Tally counts an operation for a test of how much work a command does; it
// does nothing in an ordinary build.
func Tally(name string) {}
