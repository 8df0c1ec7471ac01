package cli

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// defaultPager is what git uses when neither $PAGER nor a configuration
// names one: quit if one screen, raw colours, no screen clearing.
const defaultPager = "less -FRX"

// pager is a running pager process that output is written to.
type pager struct {
	cmd *exec.Cmd
	in  io.WriteCloser
}

// startPager starts the pager for command output, or returns nil when
// output goes straight to stdout: stdout is not a terminal, --json, or
// noPager, or the pager ($WTX_PAGER, else $PAGER, else less -FRX) is "cat"
// or cannot be started.
func (g *globals) startPager(noPager bool) *pager {
	if noPager || g.json || !g.io.OutTTY {
		return nil
	}
	spec := strings.TrimSpace(g.getenv("WTX_PAGER"))
	if spec == "" {
		spec = strings.TrimSpace(g.getenv("PAGER"))
	}
	if spec == "" {
		spec = defaultPager
	}
	if spec == "cat" {
		return nil
	}
	cmd := exec.Command("/bin/sh", "-c", spec)
	cmd.Stdout = g.io.Out
	cmd.Stderr = g.io.Err
	cmd.Env = os.Environ()
	if g.getenv("LESS") == "" {
		cmd.Env = append(cmd.Env, "LESS=FRX")
	}
	if g.getenv("LV") == "" {
		cmd.Env = append(cmd.Env, "LV=-c")
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil
	}
	if err := cmd.Start(); err != nil {
		return nil
	}
	return &pager{cmd: cmd, in: in}
}

// Write sends p to the pager. A pager that quit early (the reader had seen
// enough) is not an error: the rest is dropped.
func (p *pager) Write(b []byte) (int, error) {
	n, err := p.in.Write(b)
	if err != nil && (errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed)) {
		return len(b), nil
	}
	return n, err
}

// wait closes the pager's input and waits for the reader to quit it.
func (p *pager) wait() {
	p.in.Close()
	p.cmd.Wait()
}
