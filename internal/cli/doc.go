// Package cli is the wtx command: a thin client of package wtx. It parses
// flags, finds the state root from the environment, and renders results as
// human text (stdout), notices (stderr) or one JSON object (--json).
package cli
