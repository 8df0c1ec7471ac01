//go:build !linux

package main

// scratchFS is not known on this platform.
func scratchFS(string) filesystem { return filesystem{} }
