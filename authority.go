package wtx

// Authority (T-003): who may do what to a workspace is one table, below,
// and one gate that every way in asks: Apply, UndoWith, Drop, DropTxOps and
// Begin's choices, on behalf of the Actor the Workspace was opened for
// (Options.Actor), and a flow's agent step on its own behalf. Whether an op
// touches a protected path is computed from the paths it writes, for every
// kind of op, never taken from a stored count.

import (
	"fmt"
	"strings"

	"github.com/wtx-dev/wtx/internal/failpoint"
	"github.com/wtx-dev/wtx/internal/quote"
	"github.com/wtx-dev/wtx/internal/tree"
)

// Actor is who asks wtx to act: a row of the authority table. The numbers
// are fixed; a receipt names the actor by its String.
type Actor uint8

// Actors. The zero Actor is a person: a program that links the library and
// names no actor is its own user's, as the command line is.
const (
	// ActorPerson is a person at the command line.
	ActorPerson Actor = 0
	// ActorAgent is an agent over MCP, on a server started without
	// --allow-approve.
	ActorAgent Actor = 1
	// ActorApprovingAgent is an agent over MCP on a server started with
	// --allow-approve: a person delegated approval to it.
	ActorApprovingAgent Actor = 2
	// ActorProposingAgent is an agent over MCP on a --propose-only server.
	ActorProposingAgent Actor = 3
	// ActorFlowAgent is a flow's agent step: its command proposes ops, wtx
	// executes them as the step's transaction.
	ActorFlowAgent Actor = 4
	// ActorReceived is a change set received from elsewhere (a bundle, a
	// git commit). It does nothing by itself: every action on it is the
	// importer's, and nothing it carries chooses a setting.
	ActorReceived Actor = 5
)

var actorNames = [...]string{
	ActorPerson:         "person",
	ActorAgent:          "mcp-agent",
	ActorApprovingAgent: "mcp-agent-approving",
	ActorProposingAgent: "mcp-agent-propose-only",
	ActorFlowAgent:      "flow-agent-step",
	ActorReceived:       "received-change-set",
}

// String names the actor as receipts record it.
func (a Actor) String() string {
	if int(a) < len(actorNames) {
		return actorNames[a]
	}
	return fmt.Sprintf("actor(%d)", uint8(a))
}

var actorPhrases = [...]string{
	ActorPerson:         "a person",
	ActorAgent:          "an agent over MCP",
	ActorApprovingAgent: "an agent over MCP, on a server that approves,",
	ActorProposingAgent: "an agent over MCP, on a server that only proposes,",
	ActorFlowAgent:      "a flow's agent step",
	ActorReceived:       "a received change set",
}

// phrase names the actor in a sentence.
func (a Actor) phrase() string {
	if int(a) < len(actorPhrases) {
		return actorPhrases[a]
	}
	return a.String()
}

// Action is what an actor asks for: a column of the authority table.
type Action uint8

// Actions. The numbers are fixed.
const (
	// ActionStage: run a command, or a per-file op, in a stage.
	ActionStage Action = 1
	// ActionApply: apply, undo or undo an undo, writing no protected path.
	ActionApply Action = 2
	// ActionWriteProtected: apply, undo or undo an undo writing a
	// protected path (a protect selector, .git, the project file).
	ActionWriteProtected Action = 3
	// ActionDrop: drop a stage, or drop ops of it (drop-op).
	ActionDrop Action = 4
	// ActionBackend: choose a stage's backend.
	ActionBackend Action = 5
	// ActionShare: share a path with a stage, written straight through to
	// the workspace, untransacted and unreviewed.
	ActionShare Action = 6
	// ActionExclude: leave paths out of a stage (exclude), or protect
	// more: both only narrow what can land.
	ActionExclude Action = 7
	// ActionIgnoreProject: open a stage without the project file's
	// excludes and protects.
	ActionIgnoreProject Action = 8
	// ActionIgnoreStaleReads: apply although files the stage read changed
	// in the workspace since.
	ActionIgnoreStaleReads Action = 9
	// ActionLand: queue a stage to land.
	ActionLand Action = 10
)

var actionNames = [...]string{
	ActionStage:            "run or change files in a stage",
	ActionApply:            "apply or undo",
	ActionWriteProtected:   "write a protected path",
	ActionDrop:             "drop a stage or its ops",
	ActionBackend:          "choose the backend",
	ActionShare:            "share a path",
	ActionExclude:          "exclude or protect paths",
	ActionIgnoreProject:    "leave out the project file's settings",
	ActionIgnoreStaleReads: "ignore stale reads",
	ActionLand:             "land a stage",
}

// String says what the action is, for a person.
func (a Action) String() string {
	if int(a) < len(actionNames) && actionNames[a] != "" {
		return actionNames[a]
	}
	return fmt.Sprintf("action(%d)", uint8(a))
}

// Verdict is a cell of the authority table.
type Verdict uint8

// Verdicts.
const (
	// Refused: the actor may not do it.
	Refused Verdict = 1
	// Allowed: the actor may do it.
	Allowed Verdict = 2
	// WithApproval: the actor may do it when its call approves (--approve,
	// approve: true).
	WithApproval Verdict = 3
)

// authorityTable is T-003's table, the one place it is written. An
// agent's choices are "within what the server was started with": the
// server shares nothing and always applies the project file, so an agent
// may not share or leave the project file out; excludes and protects only
// narrow what can land, so it may add them; every backend confines alike or
// refuses the run (T-002), so the choice of one changes speed, not
// authority. Ignoring stale reads overrides a check as approving does, so
// it goes with --allow-approve. A flow agent step chooses nothing: its
// settings are its flow file's, and its proposal holds per-file ops only.
var authorityTable = map[Actor]map[Action]Verdict{
	ActorPerson: {
		ActionStage: Allowed, ActionApply: Allowed, ActionWriteProtected: WithApproval, ActionDrop: Allowed,
		ActionBackend: Allowed, ActionShare: Allowed, ActionExclude: Allowed, ActionIgnoreProject: Allowed,
		ActionIgnoreStaleReads: Allowed, ActionLand: Allowed,
	},
	ActorAgent: {
		ActionStage: Allowed, ActionApply: Allowed, ActionWriteProtected: Refused, ActionDrop: Allowed,
		ActionBackend: Allowed, ActionShare: Refused, ActionExclude: Allowed, ActionIgnoreProject: Refused,
		ActionIgnoreStaleReads: Refused, ActionLand: Refused,
	},
	ActorApprovingAgent: {
		ActionStage: Allowed, ActionApply: Allowed, ActionWriteProtected: WithApproval, ActionDrop: Allowed,
		ActionBackend: Allowed, ActionShare: Refused, ActionExclude: Allowed, ActionIgnoreProject: Refused,
		ActionIgnoreStaleReads: Allowed, ActionLand: WithApproval,
	},
	ActorProposingAgent: {
		ActionStage: Allowed, ActionApply: Refused, ActionWriteProtected: Refused, ActionDrop: Refused,
		ActionBackend: Allowed, ActionShare: Refused, ActionExclude: Allowed, ActionIgnoreProject: Refused,
		ActionIgnoreStaleReads: Refused, ActionLand: Refused,
	},
	ActorFlowAgent: {
		ActionStage: Allowed, ActionApply: Allowed, ActionWriteProtected: Refused, ActionDrop: Refused,
		ActionBackend: Refused, ActionShare: Refused, ActionExclude: Refused, ActionIgnoreProject: Refused,
		ActionIgnoreStaleReads: Refused, ActionLand: Refused,
	},
	ActorReceived: {
		ActionStage: Refused, ActionApply: Refused, ActionWriteProtected: Refused, ActionDrop: Refused,
		ActionBackend: Refused, ActionShare: Refused, ActionExclude: Refused, ActionIgnoreProject: Refused,
		ActionIgnoreStaleReads: Refused, ActionLand: Refused,
	},
}

// String is the verdict as the table in the docs writes it.
func (v Verdict) String() string {
	switch v {
	case Allowed:
		return "yes"
	case WithApproval:
		return "with approve"
	}
	return "no"
}

// authorityMarkdown renders authorityTable as docs/design.md shows it:
// actions down, actors across.
func authorityMarkdown() string {
	var b strings.Builder
	b.WriteString("| action |")
	for a := range actorNames {
		b.WriteString(" " + Actor(a).String() + " |")
	}
	b.WriteString("\n|---|")
	for range actorNames {
		b.WriteString("---|")
	}
	for act := ActionStage; act <= ActionLand; act++ {
		b.WriteString("\n| " + act.String() + " |")
		for a := range actorNames {
			b.WriteString(" " + authorityTable[Actor(a)][act].String() + " |")
		}
	}
	return b.String() + "\n"
}

// VerdictOf is the authority table's cell for actor and action; an actor
// or action the table does not know is refused.
func VerdictOf(actor Actor, action Action) Verdict {
	if failpoint.Disabled("authority") {
		return Allowed // negative control: the table is not asked
	}
	if v, ok := authorityTable[actor][action]; ok {
		return v
	}
	return Refused
}

// Authorize is the gate: nil when actor may take action, approved saying
// whether its call approves; else a refusal (refusal.not-permitted, or
// refusal.protected for a protected write) that says who may.
func Authorize(actor Actor, action Action, approved bool) error {
	switch VerdictOf(actor, action) {
	case Allowed:
		return nil
	case WithApproval:
		if approved {
			return nil
		}
		if action == ActionWriteProtected {
			return &Error{Code: CodeProtected, Message: fmt.Sprintf("%s: it needs approval", action),
				Repairs: []Repair{{Action: RepairApprove, Class: ClassProtected, Detail: "approve it"}}}
		}
		return &Error{Code: CodeNotPermitted, Message: fmt.Sprintf("%s may %s only when its call approves", actor.phrase(), action),
			Repairs: []Repair{{Action: RepairApprove, Detail: "approve it"}}}
	}
	code := CodeNotPermitted
	if action == ActionWriteProtected {
		code = CodeProtected
	}
	return &Error{Code: code, Message: fmt.Sprintf("%s may not %s; a person does that", actor.phrase(), action),
		Repairs: []Repair{{Action: RepairPerson, Detail: "a person does this"}}}
}

// mayWriteProtected reports whether actor, its call approving or not, may
// write protected paths.
func mayWriteProtected(actor Actor, approved bool) bool {
	return Authorize(actor, ActionWriteProtected, approved) == nil
}

// approves reports whether actor's call gives approval for protected
// writes that counts: what a receipt records as approved.
func approves(actor Actor, approved bool) bool {
	return approved && VerdictOf(actor, ActionWriteProtected) != Refused
}

// authorize is Authorize for the workspace's actor.
func (w *Workspace) authorize(action Action, approved bool) error {
	return Authorize(w.actor, action, approved)
}

// Actor is who the workspace acts for (Options.Actor).
func (w *Workspace) Actor() Actor { return w.actor }

// authorizeBegin checks what a new stage's options choose against the
// actor's authority; a protect or exclude only narrows, a backend only
// changes speed, share and leaving the project file out widen.
func (w *Workspace) authorizeBegin(opts BeginOptions) error {
	checks := []struct {
		on     bool
		action Action
	}{
		{len(opts.Share) > 0, ActionShare},
		{opts.NoProject, ActionIgnoreProject},
		{len(opts.Exclude) > 0 || len(opts.Protect) > 0, ActionExclude},
		{opts.Backend != "" && opts.Backend != "auto", ActionBackend},
	}
	for _, c := range checks {
		if c.on {
			if err := w.authorize(c.action, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// authorizeRun asks the gate whether the workspace's actor may run a
// command in s: a stage that shares paths is one only an actor that may
// share runs in, since there the command writes the workspace itself.
func (s *Stage) authorizeRun() error {
	if err := s.ws.authorize(ActionStage, false); err != nil {
		return err
	}
	if len(s.cfg.Share) == 0 {
		return nil
	}
	if err := s.ws.authorize(ActionShare, false); err != nil {
		return &Error{Code: CodeNotPermitted, Err: err,
			Message: fmt.Sprintf("stage %s shares %d path(s) (first: %s): a command run in it writes the workspace there directly, and %s may not share a path; run in a stage of its own", s.ID(), len(s.cfg.Share), quote.Path(s.cfg.Share[0]), s.ws.actor.phrase()),
			Repairs: []Repair{{Action: "begin", Detail: "run in a new stage, which shares nothing"}}}
	}
	return nil
}

// liveProtection reads the project file's protects as they are now into
// s, for the gate: a write the gate judges is made now, so what the
// workspace protects now protects it, besides what the stage opened with.
// Without it a stage opened (or an op applied) before the file protected
// a path would write that path unasked, for an actor that may not. A
// stage a person opened without the project file is judged without it,
// unless undo says (an undo is a new write, whoever's the op was).
func (s *Stage) liveProtection(undo bool) error {
	if s.cfg.NoProject && !undo || failpoint.Disabled("live-protect") || failpoint.Disabled("project-defaults") {
		return nil
	}
	f, err := s.ws.Project()
	if err != nil || f == nil {
		return err
	}
	sels, err := tree.ParseSelectors(f.Protect)
	if err != nil {
		return &Error{Code: CodeProjectFile, Message: fmt.Sprintf("project file %s: protect: %v", quote.Path(f.Path), err), Err: err}
	}
	s.live = sels
	return nil
}

// protection is what makes a path protected: protect selectors, and the
// defaults every stage has (.git, the project file).
type protection struct {
	sels tree.Selectors
	// unknown: what protects the paths cannot be known (the stage's record
	// is gone), so every path is protected.
	unknown bool
}

// of says whether p is protected, and why.
func (pr protection) of(p string) (ProtectedPath, bool) {
	if pr.unknown {
		return ProtectedPath{Path: p, Reason: ProtectUnknown, Selector: LiteralSelector(p)}, true
	}
	for _, sel := range pr.sels {
		if sel.Match(p) {
			return ProtectedPath{Path: p, Reason: ProtectSelector, Selector: sel.String()}, true
		}
	}
	if r, ok := gitRoot(p); ok {
		return ProtectedPath{Path: p, Reason: ProtectGit, Selector: r}, true
	}
	if projectPath(p) {
		return ProtectedPath{Path: p, Reason: ProtectProject, Selector: LiteralSelector(p)}, true
	}
	return ProtectedPath{}, false
}

// writes lists the protected paths among changes: the paths an op writes.
func (pr protection) writes(changes []tree.Change) []ProtectedPath {
	var out []ProtectedPath
	for i := range changes {
		if pp, ok := pr.of(changes[i].Path); ok {
			out = append(out, pp)
		}
	}
	return out
}

// without returns changes less those whose path is in done.
func without(changes, done []tree.Change) []tree.Change {
	if len(done) == 0 {
		return changes
	}
	skip := make(map[string]bool, len(done))
	for i := range done {
		skip[done[i].Path] = true
	}
	out := make([]tree.Change, 0, len(changes))
	for _, c := range changes {
		if !skip[c.Path] {
			out = append(out, c)
		}
	}
	return out
}
