//go:build !wtxfailpoint

package failpoint

// Enabled reports whether this build arms failpoints.
const Enabled = false

// Hit marks a crash point; it does nothing in an ordinary build.
func Hit(name string) {}
