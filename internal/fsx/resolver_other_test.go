//go:build unix && !linux

package fsx

import "testing"

// eachResolver runs fn with the component walk, the only resolver here.
func eachResolver(t *testing.T, fn func(t *testing.T)) {
	t.Helper()
	t.Run("walk", fn)
}
