package stage

import (
	"context"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// parallelWalk visits the tree under root like walk, never following a
// symlink, but reads directories on several goroutines: visit may be called
// concurrently and in any order (parents still before their children).
// skip is called for every entry before visit; an entry it skips is not
// visited and nothing beneath it is read. Names are not filtered: skip
// decides.
func parallelWalk(ctx context.Context, root *fsx.Root, workers int, skip func(rel string, st fsx.Stat) bool, visit visitFunc) error {
	return walkTree(ctx, root, &walkOpts{keepReserved: true, skip: skip, workers: workers}, visit)
}
