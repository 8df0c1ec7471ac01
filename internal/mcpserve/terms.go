package mcpserve

import (
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/answer"
)

// The library's errors speak to a person at a command line: messages may
// name a flag (--path) or a command ('wtx list'), and each repair carries
// a command line. An agent talks to tools: renderError says the same in
// tool arguments and tool calls. A repair only a person can make (approve
// a protected path, repair the state root) keeps its command line and is
// marked as a person's.

// flagTerms maps the command-line flags library messages name to the
// arguments of the tools that take them.
var flagTerms = []struct{ flag, arg string }{
	{"--ignore-stale-reads", "ignore_stale_reads"},
	{"--expect-hash", "expect_hash"},
	{"--expect", "expect"},
	{"--approve", "approve"},
	{"--exclude", "exclude"},
	{"--protect", "protect"},
	{"--share", "share (not offered here)"},
	{"--hunks", "hunks"},
	{"--path", "paths"},
	{"--old", "old"},
	{"--new", "new"},
	{"--all", "all"},
	{"--merge", "merge"},
}

// commandTerms maps the commands library messages quote to tool calls.
var commandTerms = []struct {
	re   *regexp.Regexp
	tool string
}{
	{regexp.MustCompile(`'wtx run -- CMD' or 'wtx begin'`), "the begin or run tool"},
	{regexp.MustCompile(`'wtx diff --hunks --path [^']*'`), "the diff tool with number_hunks"},
	{regexp.MustCompile(`'wtx list'`), "the list tool"},
	{regexp.MustCompile(`'wtx log'`), "the log tool"},
	{regexp.MustCompile(`'wtx diff( [^']*)?'`), "the diff tool"},
	{regexp.MustCompile(`'wtx status( [^']*)?'`), "the status tool"},
	{regexp.MustCompile(`'wtx rebase( [^']*)?'`), "the rebase tool"},
}

// flagRE finds a flag where a message names one: after a space, a quote
// or an opening parenthesis (or at the start), never inside a word or a
// path such as "x--all".
var flagRE = regexp.MustCompile(`(^|[\s('"])--[a-z][a-z-]*`)

// toolMessage rewrites a library message into tool terms.
func toolMessage(msg string) string {
	for _, c := range commandTerms {
		msg = c.re.ReplaceAllString(msg, c.tool)
	}
	return flagRE.ReplaceAllStringFunc(msg, func(m string) string {
		i := strings.Index(m, "--")
		for _, t := range flagTerms {
			if m[i:] == t.flag {
				return m[:i] + t.arg
			}
		}
		return m
	})
}

// renderError is e as a tool answers it; tx is the stage the call named
// (the id in e's repairs is used when the call named none).
func renderError(e *wtx.Error, tx string, has func(tool string) bool) answer.Error {
	out := answer.NewError(e, e.ExitCode())
	out.Message = answer.Text(toolMessage(e.Message))
	out.Repairs = []answer.Repair{}
	for _, r := range e.Repairs {
		rr := toolRepair(r, stageOf(r, tx), e)
		switch {
		case rr.Tool != "" && has != nil && !has(rr.Tool):
			// This server does not offer the tool (propose-only): a person
			// does it.
			rr = answer.Repair{Action: string(r.Action), Detail: r.Detail + " (a person does this: this server does not offer the " + rr.Tool + " tool)",
				Command: r.Command, Person: r.Command != ""}
		case rr.Arguments != nil && rr.Arguments.IgnoreStaleReads && has != nil && !has("ignore_stale_reads"):
			rr = answer.Repair{Action: string(r.Action), Detail: r.Detail + " (a person does this: this server does not let an agent ignore stale reads)",
				Command: r.Command, Person: r.Command != ""}
		}
		out.Repairs = append(out.Repairs, rr)
	}
	for i := range out.Conflicts {
		out.Conflicts[i].Detail = toolMessage(out.Conflicts[i].Detail)
	}
	for i := range out.Diagnostics {
		out.Diagnostics[i].Message = toolMessage(out.Diagnostics[i].Message)
	}
	return out
}

// stageOf is the stage a repair is about: the call's, else the id its
// command names.
func stageOf(r wtx.Repair, tx string) string {
	if tx != "" {
		return tx
	}
	for _, f := range strings.Fields(r.Command) {
		if strings.HasPrefix(f, "tx-") {
			return f
		}
	}
	return ""
}

// opOf is the op id a repair's command names.
func opOf(command string) string {
	for _, f := range strings.Fields(command) {
		if strings.HasPrefix(f, "op-") {
			return f
		}
	}
	return ""
}

// toolRepair is one repair as a tool call, or as a person's step.
func toolRepair(r wtx.Repair, tx string, e *wtx.Error) answer.Repair {
	call := func(tool, detail string, args answer.ToolArgs) answer.Repair {
		return answer.Repair{Action: string(r.Action), Detail: detail, Tool: tool, Arguments: &args}
	}
	switch string(r.Action) {
	case "rebase":
		return call("rebase", r.Detail, answer.ToolArgs{Tx: tx})
	case "merge", "rebase-merge":
		return call("rebase", r.Detail, answer.ToolArgs{Tx: tx, Merge: true})
	case "select":
		return call("apply", "call apply with paths naming only the paths that did not change outside the stage", answer.ToolArgs{Tx: tx})
	case "restage", "drop":
		return call("drop", r.Detail, answer.ToolArgs{Tx: tx})
	case "review":
		return call("diff", r.Detail, answer.ToolArgs{Tx: tx})
	case "ignore":
		return call("apply", r.Detail, answer.ToolArgs{Tx: tx, IgnoreStaleReads: true})
	case "re-read":
		args := answer.ToolArgs{Tx: tx}
		if len(e.Conflicts) > 0 {
			args.Path, args.PathB64 = answer.Name(e.Conflicts[0].Path)
		}
		return call("read", r.Detail, args)
	case "undo":
		return call("log", "find the op that applied it with the log tool, then call undo with it", answer.ToolArgs{})
	case "begin":
		return call("begin", r.Detail, answer.ToolArgs{})
	case "undo-later":
		if op := opOf(r.Command); op != "" {
			return call("undo", r.Detail, answer.ToolArgs{Op: op})
		}
	case "undo-approve":
		if op := opOf(r.Command); op != "" {
			return call("undo", r.Detail, answer.ToolArgs{Op: op, Approve: true})
		}
	case "undo-part":
		// Take back the rest: every path that changed since left out,
		// literally (a name that is not UTF-8 is a person's to leave out).
		var ex []string
		for _, c := range e.Conflicts {
			sel := wtx.LiteralSelector(c.Path)
			if !utf8.ValidString(sel) {
				ex = nil
				break
			}
			ex = append(ex, sel)
		}
		if op := opOf(r.Command); op != "" && len(ex) > 0 {
			return call("undo", "call undo with exclude naming the paths that changed since: it takes back the others", answer.ToolArgs{Op: op, Exclude: ex, Approve: strings.HasSuffix(r.Command, " --approve")})
		}
	case "exclude":
		// Apply the rest: every conflicting path left out, literally. A
		// name that is not UTF-8 cannot be an argument here; a person
		// excludes it.
		var ex []string
		for _, c := range e.Conflicts {
			sel := wtx.LiteralSelector(c.Path)
			if !utf8.ValidString(sel) {
				ex = nil
				break
			}
			ex = append(ex, sel)
		}
		if len(ex) > 0 {
			return call("apply", r.Detail, answer.ToolArgs{Tx: tx, Exclude: ex})
		}
	case "approve":
		if r.Command == "" {
			return call("apply", r.Detail, answer.ToolArgs{Tx: tx, Approve: true})
		}
	case "wait":
		return answer.Repair{Action: string(r.Action), Detail: r.Detail}
	case "resolve":
		args := answer.ToolArgs{Tx: tx}
		if len(r.Paths) > 0 {
			args.Path, args.PathB64 = answer.Name(r.Paths[0])
		}
		return call("write", "read the file, and write it back with the conflict markers replaced by the content it should hold", args)
	}
	// Nothing a tool can do: a person's step at the command line.
	return answer.Repair{Action: string(r.Action), Detail: toolMessage(r.Detail), Command: r.Command, Person: r.Command != ""}
}
