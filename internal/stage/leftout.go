package stage

import (
	"sort"
	"sync"

	"github.com/wtx-dev/wtx/internal/fsx"
)

// LeftOut is a path of a view that an exclude selector covers although the
// stage's view never showed it there: a command wrote it. It never enters
// the change set; the run summary and its receipt say it was left out.
// Nothing beneath a left-out directory is read.
type LeftOut struct {
	Path string
	Dir  bool
}

// LeftOutReporter is a View whose Scan records the paths it left out
// because an exclude selector covers them.
type LeftOutReporter interface {
	// LeftOut lists the paths the last Scan left out, sorted, topmost only.
	LeftOut() []LeftOut
}

// leftOutSet collects left-out paths during a scan.
type leftOutSet struct {
	mu    sync.Mutex // a parallel walk adds from several goroutines
	paths []LeftOut
}

func (l *leftOutSet) add(rel string, st fsx.Stat) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.paths = append(l.paths, LeftOut{Path: rel, Dir: st.Mode.IsDir()})
}

func (l *leftOutSet) reset() { l.paths = nil }

// LeftOut returns the collected paths, sorted.
func (l *leftOutSet) LeftOut() []LeftOut {
	out := append([]LeftOut(nil), l.paths...)
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// excludedVisit returns a view walk callback that records every excluded
// path it is given.
func (l *leftOutSet) excludedVisit() visitFunc {
	return func(rel string, d *fsx.Dir, name string, st fsx.Stat) error {
		l.add(rel, st)
		return nil
	}
}
