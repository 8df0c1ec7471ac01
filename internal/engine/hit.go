package engine

import "github.com/wtx-dev/wtx/internal/failpoint"

// testHit, when set by a test, runs at every failpoint after
// failpoint.Hit: the engine's own crash test stops its process there.
var testHit func(name string)

// hit marks a crash point (failpoint.Hit), which a test may act on.
func hit(name string) {
	failpoint.Hit(name)
	if testHit != nil {
		testHit(name)
	}
}
