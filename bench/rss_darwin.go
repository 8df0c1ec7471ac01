package main

import (
	"os"
	"syscall"
)

// maxRSS is the peak resident set size of a finished child, in bytes
// (macOS reports bytes).
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
