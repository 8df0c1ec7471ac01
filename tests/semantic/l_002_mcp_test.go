//go:build linux

package semantic

import (
	"strings"
	"testing"

	"github.com/wtx-dev/wtx/internal/wtxtest"
)

// mcpRunOut is what the MCP run tool answers about the command's
// processes and the paths --exclude left out.
type mcpRunOut struct {
	Tx          string `json:"tx"`
	ExitCode    int    `json:"exit_code"`
	Containment string `json:"containment"`
	Stopped     []struct {
		PID  int    `json:"pid"`
		Comm string `json:"comm"`
	} `json:"stopped"`
	LeftOut []struct {
		Path string `json:"path"`
		Type string `json:"type"`
	} `json:"left_out"`
}

// mcpLeaveSleep runs, over a real 'wtx mcp' on stdio, a command that
// writes under an excluded directory and leaves a sleep behind, and
// returns the run's answer and the sleep's marker.
func mcpLeaveSleep(t *testing.T, bin string, env []string) (mcpRunOut, string) {
	ws, state := mcpWorkspace(t, map[string]string{"a.txt": "a\n"})
	s := startMCP(t, bin, ws, state, env)
	tx := s.beginStage(map[string]any{"exclude": []string{"ex"}})
	m := marker(t)
	t.Cleanup(func() { killToken("sleep " + m) })
	var out mcpRunOut
	// The command ends only once its background child has become sleep:
	// a child still between its fork and its exec would be stopped as sh.
	s.call("run", map[string]any{"tx": tx, "argv": []string{"sh", "-c",
		"mkdir ex && echo x > ex/f && echo y > b.txt; sleep " + m + " >/dev/null 2>&1 & p=$!; i=0; " +
			"while [ \"$(cat /proc/$p/comm 2>/dev/null)\" != sleep ] && [ $i -lt 500 ]; do i=$((i+1)); done"}}).decode(t, &out)
	return out, m
}

// TestL002_MCPRunNamesStopped checks that the MCP run tool answers as
// 'wtx run --json' does: the processes the command left running that were
// stopped after it (sleep), the containment that held them, and the paths
// --exclude left out.
func TestL002_MCPRunNamesStopped(t *testing.T) {
	out, m := mcpLeaveSleep(t, wtxtest.Binary(t, false), nil)
	sleeps := 0
	for _, p := range out.Stopped {
		if p.Comm == "sleep" && p.PID > 0 {
			sleeps++
		}
	}
	if out.ExitCode != 0 || sleeps != 1 {
		t.Errorf("run answer: exit %d, stopped %+v; want 0 and the one sleep left behind", out.ExitCode, out.Stopped)
	}
	switch out.Containment {
	case "pid-namespace", "subreaper":
	default:
		t.Errorf("run answer: containment %q; want pid-namespace or subreaper", out.Containment)
	}
	if len(out.LeftOut) != 1 || out.LeftOut[0].Path != "ex" || out.LeftOut[0].Type != "dir" {
		t.Errorf("run answer: left_out %+v; want the excluded directory ex", out.LeftOut)
	}
	if pids := pidsWith("sleep " + m); len(pids) != 0 {
		t.Errorf("the sleep left behind is still alive: %v", pids)
	}
}

// TestL002_MCPRunNamesStoppedNegativeControl switches containment off
// (WTX_DISABLE=contain, failpoint build): the sleep outlives the run and
// the answer names nothing stopped, which the test above would see.
func TestL002_MCPRunNamesStoppedNegativeControl(t *testing.T) {
	out, m := mcpLeaveSleep(t, wtxtest.Binary(t, true), []string{"WTX_DISABLE=contain"})
	if len(out.Stopped) != 0 || strings.Contains(out.Containment, "pid-namespace") {
		t.Errorf("with containment off the answer still says stopped %+v, containment %q", out.Stopped, out.Containment)
	}
	if len(pidsWith("sleep "+m)) == 0 {
		t.Errorf("with containment off the sleep left behind is gone")
	}
}
