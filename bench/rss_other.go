//go:build !linux && !darwin

package main

import "os"

// maxRSS is unknown on this platform: 0.
func maxRSS(*os.ProcessState) int64 { return 0 }
