package cli

import (
	"fmt"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wtx-dev/wtx"
)

// Progress lines: a long command (apply, undo, diff, gc, fork, a copy
// backend's staging) says how far it got on a terminal stderr once it has
// taken progressDelay, redrawn every progressEvery; never on a pipe, under
// --json or --quiet.
const (
	progressDelay = time.Second
	progressEvery = 200 * time.Millisecond
)

// meter holds the latest report of the library (wtx.Options.Progress),
// which it writes from any goroutine.
type meter struct {
	phase, done, total atomic.Int64
	// recovered: opening the workspace reported recovery work (an earlier
	// apply's journal being finished or rolled back).
	recovered atomic.Bool
}

func (m *meter) report(p wtx.Progress) {
	if p.Phase == wtx.PhaseRecover {
		m.recovered.Store(true)
	}
	m.phase.Store(int64(p.Phase))
	m.done.Store(int64(p.Done))
	m.total.Store(int64(p.Total))
}

// work is one long command's progress line; end clears it.
type work struct {
	g     *globals
	what  string
	start time.Time
	stop  chan struct{}
	ended chan struct{}
	once  sync.Once
	drawn bool // read after ended is closed
}

// longWork starts the progress line of what (e.g. "applying"). It draws
// nothing before progressDelay; end must be called (it is idempotent).
func (g *globals) longWork(what string) *work {
	w := &work{g: g, what: what, start: time.Now()}
	if !g.io.ErrTTY || g.quiet || g.json {
		return w
	}
	g.meter.report(wtx.Progress{})
	w.stop, w.ended = make(chan struct{}), make(chan struct{})
	go w.loop()
	return w
}

func (w *work) loop() {
	defer close(w.ended)
	t := time.NewTimer(progressDelay)
	defer t.Stop()
	select {
	case <-w.stop:
		return
	case <-t.C:
	}
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	for {
		w.draw()
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
	}
}

func (w *work) draw() {
	m := &w.g.meter
	line := "wtx: " + w.what
	if ph := wtx.Phase(m.phase.Load()); ph != 0 {
		line += ": " + ph.String()
		switch done, total := m.done.Load(), m.total.Load(); {
		case total > 0:
			line += fmt.Sprintf(" %d/%d (%d%%)", done, total, done*100/total)
		case done > 0:
			line += fmt.Sprintf(" %d", done)
		}
	}
	line += fmt.Sprintf(", %ds", int(time.Since(w.start).Seconds()))
	fmt.Fprint(w.g.io.Err, "\r\x1b[K"+line)
	w.drawn = true
}

// end stops the line and clears it if it was drawn.
func (w *work) end() {
	if w.stop == nil {
		return
	}
	w.once.Do(func() {
		close(w.stop)
		<-w.ended
		if w.drawn {
			fmt.Fprint(w.g.io.Err, "\r\x1b[K")
		}
	})
}

// writer returns out wrapped so that the first write ends the progress
// line (output on the same terminal must not mix with it).
func (w *work) writer(out io.Writer) io.Writer {
	if w.stop == nil {
		return out
	}
	return endingWriter{w: w, out: out}
}

type endingWriter struct {
	w   *work
	out io.Writer
}

func (e endingWriter) Write(p []byte) (int, error) {
	e.w.end()
	return e.out.Write(p)
}

func fsMode(m uint64) fs.FileMode { return fs.FileMode(m) }
