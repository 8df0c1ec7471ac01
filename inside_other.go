//go:build !linux

package wtx

// stageOfMount finds overlay views on Linux only; elsewhere no backend
// mounts one.
func stageOfMount(path, stateDir string) string { return "" }

// stageOfAncestor finds a stage's supervisor among the ancestors on Linux
// only.
func stageOfAncestor() InStage { return InStage{} }
