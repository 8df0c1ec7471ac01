//go:build !linux

package wtx

// stageOfMount finds overlay views on Linux only; elsewhere no backend
// mounts one.
func stageOfMount(path, stateDir string) string { return "" }
