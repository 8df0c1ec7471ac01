package flow

import (
	"errors"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx"
)

// The numbers of StepStatus are stored: they never change meaning.
func TestStepStatusPersistedNumbers(t *testing.T) {
	want := map[StepStatus]int{StepStarted: 1, StepDone: 2, StepFailed: 3, StepInterrupted: 4, StepSkipped: 5, StepReview: 6, StepStaged: 7}
	for s, n := range want {
		if int(s) != n {
			t.Errorf("%s = %d, stored as %d", s, int(s), n)
		}
	}
	if len(stepStatusNames) != len(want) {
		t.Errorf("%d statuses named, %d pinned here", len(stepStatusNames), len(want))
	}
}

func TestParseFlowRefuses(t *testing.T) {
	ok := "version = 1\n[[steps]]\nname = \"a\"\nkind = \"run\"\ncommand = [\"true\"]\n"
	if _, err := Parse([]byte(ok)); err != nil {
		t.Fatalf("a minimal flow: %v", err)
	}
	cases := map[string]string{
		"unknown key":      ok + "colour = \"red\"\n",
		"no version":       strings.Replace(ok, "version = 1\n", "", 1),
		"version 2":        strings.Replace(ok, "version = 1", "version = 2", 1),
		"no steps":         "version = 1\n",
		"bad kind":         strings.Replace(ok, `"run"`, `"shell"`, 1),
		"duplicate name":   ok + "[[steps]]\nname = \"a\"\nkind = \"run\"\ncommand = [\"true\"]\n",
		"agent no allow":   strings.Replace(ok, `"run"`, `"agent"`, 1),
		"batch first prev": "version = 1\n[[steps]]\nname = \"a\"\nkind = \"batch\"\nfrom = \"previous\"\n",
		"bad op":           "version = 1\n[[steps]]\nname = \"a\"\nkind = \"batch\"\n[[steps.ops]]\ncommand = \"chmod\"\npath = \"x\"\n",
		"bad timeout":      ok + "timeout = \"soon\"\n",
		"bad selector":     ok + "exclude = [\"/abs\"]\n",
		"bad name":         strings.Replace(ok, `name = "a"`, `name = "a b"`, 1),
		"not toml":         "version = = 1",
	}
	for name, src := range cases {
		_, err := Parse([]byte(src))
		if !errors.Is(err, wtx.ErrUsage) {
			t.Errorf("%s: got %v, want a usage error", name, err)
		}
	}
}

func TestIdempotentDefault(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		s    Step
		want bool
	}{
		{Step{}, true},
		{Step{Effects: []string{"network"}}, false},
		{Step{Effects: []string{"network"}, Idempotent: &yes}, true},
		{Step{Idempotent: &no}, false},
	} {
		if got := c.s.IsIdempotent(); got != c.want {
			t.Errorf("%+v: idempotent %v, want %v", c.s, got, c.want)
		}
	}
}
