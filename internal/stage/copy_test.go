//go:build unix

package stage_test

import (
	"testing"

	"github.com/wtx-dev/wtx/internal/stage"
	"github.com/wtx-dev/wtx/internal/stage/stagetest"
)

func TestCopyConformance(t *testing.T) {
	stagetest.Run(t, stage.Copy{})
}
