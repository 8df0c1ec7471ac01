package main

import (
	"os"
	"syscall"
)

// maxRSS is the peak resident set size of a finished child, in bytes
// (Linux reports KiB).
func maxRSS(ps *os.ProcessState) int64 {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss << 10
	}
	return 0
}
