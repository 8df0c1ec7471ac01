//go:build !linux

package stage

import "os/exec"

// tieToCaller does nothing where the kernel has no parent-death signal.
func tieToCaller(cmd *exec.Cmd) (untie func()) { return func() {} }
