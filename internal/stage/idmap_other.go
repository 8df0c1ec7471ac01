//go:build !linux

package stage

import "os/exec"

// startHelper starts a helper command (no user namespace to map here).
func startHelper(cmd *exec.Cmd) error { return cmd.Start() }
