package wtx

import (
	"os"
	"testing"

	"github.com/wtx-dev/wtx/internal/sandbox"
)

// TestMain lets this test binary serve as the helper it starts to run
// commands in views (see sandbox.Main).
func TestMain(m *testing.M) {
	if sandbox.Main() {
		return
	}
	os.Exit(m.Run())
}
