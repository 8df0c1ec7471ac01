//go:build !wtxfailpoint

package failpoint

// Fault reports the error injected into the mutating file-system call op;
// never in an ordinary build.
func Fault(op string) error { return nil }
