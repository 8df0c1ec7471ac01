package wtx

import (
	"testing"

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/receipt"
)

// Package receipt reads a receipt's containment by its persisted name: it
// must call complete exactly the containments the sandbox calls complete,
// or a run receipt would be refused (or pass) for its disclaimer wrongly.
func TestReceiptContainmentAgrees(t *testing.T) {
	for _, c := range []stage.Containment{stage.ContainPIDNamespace, stage.ContainSubreaper, stage.ContainProcessGroup, stage.ContainNone, stage.ContainBroken} {
		if got := receipt.ContainmentComplete(string(c)); got != c.Complete() {
			t.Errorf("containment %q: receipt says complete=%v, the sandbox %v", c, got, c.Complete())
		}
	}
}
