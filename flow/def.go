package flow

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/flowlink"
	"github.com/wtx-dev/wtx/internal/tree"
)

// StepKind is what a flow step does.
type StepKind string

// Step kinds.
const (
	// StepRun runs a command in a stage.
	StepRun StepKind = "run"
	// StepBatch performs per-file ops (the batch language) in a stage.
	StepBatch StepKind = "batch"
	// StepAgent runs a command in a read-only view and executes the
	// per-file ops it proposes on its stdout, within an allowlist.
	StepAgent StepKind = "agent"
)

// OnSuccess is what a run step does with its stage when its command
// succeeds.
type OnSuccess string

// What a succeeded run step does.
const (
	// OnSuccessApply applies the stage: the step is one op.
	OnSuccessApply OnSuccess = "apply"
	// OnSuccessReview stops the run with the stage open for review; a
	// resume applies it.
	OnSuccessReview OnSuccess = "review"
	// OnSuccessKeep leaves the stage open and goes on with the next step.
	OnSuccessKeep OnSuccess = "keep"
)

// FromPrevious is a batch step's From that takes the step's ops from the
// previous step's standard output (JSON lines).
const FromPrevious = "previous"

// Defaults and bounds of a flow definition.
const (
	// DefaultKeepOutput is how many bytes of each of a step's stdout and
	// stderr its result keeps (the digests cover all of it).
	DefaultKeepOutput = 256 << 10
	// MaxKeepOutput bounds KeepOutput.
	MaxKeepOutput = 16 << 20
	// DefaultProposalBytes bounds the content one proposed op writes.
	DefaultProposalBytes = 1 << 20
	// DefaultProposalOps bounds the ops of one proposal.
	DefaultProposalOps = 1000
	// maxFlowFile bounds a flow file.
	maxFlowFile = 4 << 20
)

// Def is a parsed flow definition. Digest is the digest of the bytes it
// was parsed from; a run keeps those bytes.
type Def struct {
	Version int    `toml:"version"`
	Name    string `toml:"name"`
	Steps   []Step `toml:"steps"`
	// Digest is "sha256:…" of the definition's bytes.
	Digest string `toml:"-"`

	src []byte // the bytes it was parsed from: what a run keeps
}

// Step is one step of a flow definition.
type Step struct {
	Name    string   `toml:"name"`
	Kind    StepKind `toml:"kind"`
	Command []string `toml:"command"`
	// OnSuccess (run steps): apply (default), review or keep.
	OnSuccess OnSuccess `toml:"on_success"`
	// Ops (batch steps) are the per-file ops, unless From is "previous".
	Ops  []BatchOp `toml:"ops"`
	From string    `toml:"from"`
	// Allow (agent steps) bounds what a proposal may do.
	Allow *Allow `toml:"allow"`
	// Stage flags.
	Exclude   []string `toml:"exclude"`
	Protect   []string `toml:"protect"`
	Share     []string `toml:"share"`
	ReadOnly  bool     `toml:"read_only"`
	NoNetwork bool     `toml:"no_network"`
	Backend   string   `toml:"backend"`
	Approve   bool     `toml:"approve"`
	// Timeout is a Go duration ("30s", "5m"); empty: none.
	Timeout string `toml:"timeout"`
	// Effects names what the step does outside the workspace (network,
	// services…); a step with effects is not idempotent unless it says so.
	Effects    []string `toml:"effects"`
	Idempotent *bool    `toml:"idempotent"`
	// KeepOutput bounds the bytes of stdout and stderr the result keeps.
	KeepOutput int `toml:"keep_output"`

	timeout time.Duration
}

// BatchOp is one per-file op of a batch step, as in the batch language.
type BatchOp struct {
	Command    string  `toml:"command"`
	Path       string  `toml:"path"`
	PathB64    string  `toml:"path_b64"`
	Content    *string `toml:"content"`
	ContentB64 *string `toml:"content_b64"`
	Old        string  `toml:"old"`
	OldB64     string  `toml:"old_b64"`
	New        *string `toml:"new"`
	NewB64     *string `toml:"new_b64"`
	All        bool    `toml:"all"`
	ExpectHash string  `toml:"expect_hash"`
}

// Allow is an agent step's allowlist: the selectors a proposed op's
// path must match, the op kinds it may use, and size limits.
type Allow struct {
	Paths    []string `toml:"paths"`
	Ops      []string `toml:"ops"`
	MaxBytes int64    `toml:"max_bytes"`
	MaxOps   int      `toml:"max_ops"`
}

// IsIdempotent says whether the step may run again after an interruption
// that left no result: yes unless it says no, or declares external effects
// without saying yes.
func (s *Step) IsIdempotent() bool {
	if s.Idempotent != nil {
		return *s.Idempotent
	}
	return len(s.Effects) == 0
}

// TimeoutDuration is the step's parsed timeout (0: none).
func (s *Step) TimeoutDuration() time.Duration { return s.timeout }

var stepNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Parse parses and checks a flow definition: TOML, every key known,
// every step complete and consistent. Nothing about the workspace is looked
// at; everything that can be checked without it is checked before a run
// starts.
func Parse(data []byte) (*Def, error) {
	if len(data) > maxFlowFile {
		return nil, errorf(wtx.CodeUsage, "flow file: %d bytes, more than the %d a flow file may have", len(data), maxFlowFile)
	}
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var def Def
	if err := dec.Decode(&def); err != nil {
		var de *toml.DecodeError
		var se *toml.StrictMissingError
		switch {
		case errors.As(err, &se):
			var keys []string
			for _, e := range se.Errors {
				row, col := e.Position()
				keys = append(keys, fmt.Sprintf("%d:%d: %s", row, col, strings.Join(e.Key(), ".")))
			}
			return nil, errorf(wtx.CodeUsage, "flow file: unknown key(s): %s", strings.Join(keys, "; "))
		case errors.As(err, &de):
			row, col := de.Position()
			return nil, errorf(wtx.CodeUsage, "flow file:%d:%d: %s", row, col, de.Error())
		}
		return nil, errorf(wtx.CodeUsage, "flow file: %v", err)
	}
	if def.Version != 1 {
		return nil, errorf(wtx.CodeUsage, "flow file: version = %d; this wtx reads version = 1", def.Version)
	}
	if len(def.Steps) == 0 {
		return nil, errorf(wtx.CodeUsage, "flow file: no [[steps]]")
	}
	seen := map[string]bool{}
	for i := range def.Steps {
		if err := checkFlowStep(&def.Steps[i], i); err != nil {
			return nil, err
		}
		if seen[def.Steps[i].Name] {
			return nil, errorf(wtx.CodeUsage, "flow file: step %d: the name %q is taken by an earlier step", i+1, def.Steps[i].Name)
		}
		seen[def.Steps[i].Name] = true
	}
	def.Digest = fmt.Sprintf("sha256:%x", sha256.Sum256(data))
	def.src = append([]byte(nil), data...)
	return &def, nil
}

// checkFlowStep checks step i of a definition and fills in its defaults.
func checkFlowStep(s *Step, i int) error {
	bad := func(format string, args ...any) error {
		return errorf(wtx.CodeUsage, "flow file: step %d (%s): %s", i+1, s.Name, fmt.Sprintf(format, args...))
	}
	if !stepNameRE.MatchString(s.Name) {
		return errorf(wtx.CodeUsage, "flow file: step %d: name %q: use 1-64 letters, digits, '.', '_' or '-'", i+1, s.Name)
	}
	if err := checkStepKind(s, i, bad); err != nil {
		return err
	}
	switch s.OnSuccess {
	case "":
		s.OnSuccess = OnSuccessApply
	case OnSuccessApply:
	case OnSuccessReview, OnSuccessKeep:
		if s.Kind != StepRun {
			return bad("on_success = %q is for run steps", s.OnSuccess)
		}
	default:
		return bad("on_success = %q; use apply, review or keep", s.OnSuccess)
	}
	if err := checkStepAllow(s, bad); err != nil {
		return err
	}
	return checkStepOptions(s, bad)
}

// checkStepKind checks what step i does: its kind and what the kind needs.
func checkStepKind(s *Step, i int, bad func(format string, args ...any) error) error {
	switch s.Kind {
	case StepRun, StepAgent:
		if len(s.Command) == 0 || s.Command[0] == "" {
			return bad("a %s step needs command = [\"program\", \"arg\", …]", s.Kind)
		}
		if len(s.Ops) > 0 || s.From != "" {
			return bad("ops and from belong to batch steps")
		}
	case StepBatch:
		if len(s.Command) > 0 {
			return bad("a batch step has ops, not a command")
		}
		switch {
		case s.From != "" && s.From != FromPrevious:
			return bad("from = %q; the only source is %q", s.From, FromPrevious)
		case s.From == FromPrevious && len(s.Ops) > 0:
			return bad("give ops or from = %q, not both", FromPrevious)
		case s.From == "" && len(s.Ops) == 0:
			return bad("a batch step needs [[steps.ops]] or from = %q", FromPrevious)
		case s.From == FromPrevious && i == 0:
			return bad("the first step has no previous step to take ops from")
		}
		for j, op := range s.Ops {
			if _, err := op.item(); err != nil {
				return bad("op %d: %v", j+1, err)
			}
		}
		if s.ReadOnly || s.NoNetwork {
			return bad("read_only and no_network confine a command; a batch step runs none")
		}
	case "":
		return bad("kind is required: run, batch or agent")
	default:
		return bad("kind = %q; use run, batch or agent", s.Kind)
	}
	return nil
}

// checkStepAllow checks an agent step's allowlist (and that no other step
// has one), filling in its defaults.
func checkStepAllow(s *Step, bad func(format string, args ...any) error) error {
	if s.Kind == StepAgent {
		if s.Allow == nil || len(s.Allow.Paths) == 0 {
			return bad("an agent step needs [steps.allow] with paths = [selectors it may change]")
		}
		if s.ReadOnly {
			return bad("an agent step's command always runs read-only; leave read_only out")
		}
		// An agent only proposes (W-005) and never writes a protected path
		// (T-003): a shared path would let its command write the workspace
		// itself, and approve has nothing an agent may approve.
		if len(s.Share) > 0 {
			return bad("an agent step shares nothing: its command writes nothing itself, it proposes; leave share out")
		}
		if s.Approve {
			return bad("an agent step never writes a protected path, approved or not (a person does); leave approve out")
		}
		if _, err := tree.ParseSelectors(s.Allow.Paths); err != nil {
			return bad("allow.paths: %v", err)
		}
		if len(s.Allow.Ops) == 0 {
			s.Allow.Ops = []string{"write", "edit", "rm"}
		}
		for _, k := range s.Allow.Ops {
			if !slices.Contains([]string{"write", "edit", "rm", "read"}, k) {
				return bad("allow.ops: %q is no op (write, edit, rm, read)", k)
			}
		}
		if s.Allow.MaxBytes < 0 || s.Allow.MaxOps < 0 {
			return bad("allow.max_bytes and allow.max_ops cannot be negative")
		}
		if s.Allow.MaxBytes == 0 {
			s.Allow.MaxBytes = DefaultProposalBytes
		}
		if s.Allow.MaxOps == 0 {
			s.Allow.MaxOps = DefaultProposalOps
		}
	} else if s.Allow != nil {
		return bad("allow belongs to agent steps")
	}
	return nil
}

// checkStepOptions checks the step's stage flags, timeout, output bound and
// effects, filling in their defaults.
func checkStepOptions(s *Step, bad func(format string, args ...any) error) error {
	for _, sel := range [][]string{s.Exclude, s.Protect, s.Share} {
		if _, err := tree.ParseSelectors(sel); err != nil {
			return bad("%v", err)
		}
	}
	switch s.Backend {
	case "", "auto", "overlay", "clone", "copy":
	default:
		return bad("backend = %q; use auto, overlay, clone or copy", s.Backend)
	}
	if s.Timeout != "" {
		d, err := time.ParseDuration(s.Timeout)
		if err != nil || d <= 0 {
			return bad("timeout = %q; give a positive duration such as \"30s\" or \"5m\"", s.Timeout)
		}
		if s.Kind == StepBatch {
			return bad("a batch step runs no command to time out")
		}
		s.timeout = d
	}
	switch {
	case s.KeepOutput < 0 || s.KeepOutput > MaxKeepOutput:
		return bad("keep_output = %d; between 0 and %d bytes", s.KeepOutput, MaxKeepOutput)
	case s.KeepOutput == 0:
		s.KeepOutput = DefaultKeepOutput
	}
	for _, e := range s.Effects {
		if e == "" {
			return bad("effects: an empty name")
		}
	}
	return nil
}

// item converts the op to a batch item, checking it as the batch language
// does.
func (o BatchOp) item() (wtx.BatchItem, error) {
	it, err := link().BatchItem(flowlink.BatchOp(o))
	if err != nil {
		return it, err
	}
	return it, checkBatchItem(it)
}

// checkBatchItem checks that it is a known command with its fields.
func checkBatchItem(it wtx.BatchItem) error {
	if it.Path == "" {
		return errors.New("\"path\" (or \"path_b64\") is required")
	}
	switch it.Command {
	case "write":
		if it.Content == nil {
			return errors.New("write needs \"content\"")
		}
	case "edit":
		if it.Old == "" || it.New == nil {
			return errors.New("edit needs \"old\" (non-empty) and \"new\"")
		}
	case "rm", "read":
	default:
		return fmt.Errorf("unknown command %q (write, edit, rm, read)", it.Command)
	}
	return nil
}
