package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// ANSI colours, as git uses them.
const (
	sgrReset  = "\x1b[m"
	sgrYellow = "\x1b[33m"
	sgrGreen  = "\x1b[32m"
	sgrRed    = "\x1b[31m"
	sgrCyan   = "\x1b[36m"
	sgrBold   = "\x1b[1m"
	sgrDim    = "\x1b[2m"
)

// paint wraps s in the colour sgr when on is set.
func paint(on bool, sgr, s string) string {
	if !on || s == "" {
		return s
	}
	return sgr + s + sgrReset
}

// stageLabel is how a stage is named to people: its name when it has one,
// else its id.
func stageLabel(id, name string) string {
	if name != "" {
		return name
	}
	return id
}

// showArgv renders a command line for a person: each argument quoted as a
// shell would need it, control characters and invalid UTF-8 escaped.
func showArgv(argv []string) string {
	parts := make([]string, len(argv))
	for i, a := range argv {
		parts[i] = shellWord(a)
	}
	return quote.Text(strings.Join(parts, " "))
}

func shellWord(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_./=:,+@%", c) >= 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// txOpSummary is one line for a stage's op: "run make fmt", "write a.txt".
func txOpSummary(op wtx.TxOp) string {
	switch op.Kind {
	case "run":
		s := showArgv(op.Argv)
		switch {
		case op.Status == wtx.RunInterrupted:
			s += " (interrupted)"
		case op.Status == wtx.RunCancelled && op.Signal != "":
			s += " (cancelled, " + op.Signal + ")"
		case op.Status == wtx.RunCancelled:
			s += " (cancelled)"
		}
		return s
	default:
		var names []string
		for _, f := range op.Files {
			names = append(names, quote.Path(f.Path))
		}
		if len(names) == 0 && len(op.Argv) > 0 {
			return showArgv(op.Argv)
		}
		return op.Kind + " " + strings.Join(names, " ")
	}
}

// stageCommand summarises what made a stage's change: its first op, and
// how many more there were.
func stageCommand(ops []wtx.TxOp) string {
	if len(ops) == 0 {
		return ""
	}
	s := txOpSummary(ops[0])
	if len(ops) > 1 {
		s += fmt.Sprintf(" (+%d more)", len(ops)-1)
	}
	return s
}

// logRow is one op of wtx log as a person sees it.
type logRow struct {
	op      *wtx.Op
	stage   string
	command string
}

// logRows lists the ops newest first (oldest first with reverse), with the
// name of each op's stage and the command that made its change.
func logRows(ctx context.Context, ws *wtx.Workspace, ops []*wtx.Op, reverse bool) []logRow {
	stages := map[string]*wtx.Stage{}
	if all, err := ws.Stages(ctx); err == nil {
		for _, s := range all {
			stages[s.ID()] = s
		}
	}
	cmds := map[string]string{}
	rows := make([]logRow, 0, len(ops))
	for _, op := range ops {
		r := logRow{op: op, stage: op.Tx}
		if st := stages[op.Tx]; st != nil {
			r.stage = stageLabel(st.ID(), st.Name())
			c, ok := cmds[op.Tx]
			if !ok {
				// A stage whose ops cannot be read shows no command; the
				// log itself is still right.
				if txops, err := st.TxOps(ctx); err == nil {
					c = stageCommand(txops)
				}
				cmds[op.Tx] = c
			}
			if op.Kind == "apply" {
				r.command = c
			}
		}
		rows = append(rows, r)
	}
	if !reverse {
		for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
			rows[i], rows[j] = rows[j], rows[i]
		}
	}
	return rows
}

// writeLog prints the rows as aligned columns; colour marks the op ids and
// the undo notes.
func writeLog(w io.Writer, rows []logRow, color bool, now time.Time) {
	head := []string{"OP", "KIND", "WHEN", "STAGE", "PATHS", "COMMAND"}
	table := [][]string{head}
	for _, r := range rows {
		when := r.op.Created.Local().Format(time.DateTime) + " (" + age(now.Sub(r.op.Created)) + " ago)"
		cmd := r.command
		switch {
		case r.op.UndoneBy != "":
			cmd = strings.TrimSpace(cmd + "  [undone by " + r.op.UndoneBy + "]")
		case len(r.op.PartlyUndoneBy) > 0:
			cmd = strings.TrimSpace(cmd + "  [partly undone by " + strings.Join(r.op.PartlyUndoneBy, ", ") + "]")
		case r.op.Undoes != "":
			cmd = "undoes " + r.op.Undoes
		}
		table = append(table, []string{r.op.ID, r.op.Kind, when, quote.Text(r.stage), fmt.Sprint(len(r.op.Written)), cmd})
	}
	widths := make([]int, len(head))
	for _, row := range table {
		for i, cell := range row {
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for n, row := range table {
		var b strings.Builder
		for i, cell := range row {
			pad := ""
			if i < len(row)-1 {
				pad = strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2)
			}
			switch {
			case n == 0:
				cell = paint(color, sgrBold, cell)
			case i == 0:
				cell = paint(color, sgrYellow, cell)
			case i == 5 && rows[n-1].op.UndoneBy != "":
				cell = paint(color, sgrDim, cell)
			case i == 1 && row[1] == "undo":
				cell = paint(color, sgrRed, cell)
			}
			b.WriteString(cell + pad)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// writeTxOps lists a stage's own ops with the numbers drop-op takes.
func writeTxOps(w io.Writer, ops []wtx.TxOp, color bool) {
	if len(ops) == 0 {
		return
	}
	fmt.Fprintf(w, "tx ops   %d (wtx drop-op N forgets op N and every later one)\n", len(ops))
	width := len(fmt.Sprint(ops[len(ops)-1].Seq))
	for _, op := range ops {
		num := fmt.Sprintf("%*d", width, op.Seq)
		fmt.Fprintf(w, "  %s  %-5s %s  %s\n", paint(color, sgrYellow, num), op.Kind,
			op.Created.Local().Format(time.TimeOnly), txOpLine(op))
	}
}

// txOpLine is a tx op without its kind (the list shows that apart).
func txOpLine(op wtx.TxOp) string {
	s := txOpSummary(op)
	if op.Kind != "run" {
		s = strings.TrimPrefix(s, op.Kind+" ")
	}
	return s
}

// stageRef is how messages name a stage so that a person can type it: its
// name (quoted for a shell when it needs to be) when it has one, else its
// id. Terminal-safe: control bytes are escaped.
func stageRef(st *wtx.Stage) string {
	if st.Name() != "" {
		return quote.Text(shellWord(st.Name()))
	}
	return st.ID()
}

// paintAction colours a change letter as git colours a status: additions
// green, deletions red, the rest yellow.
func paintAction(color bool, letter string) string {
	switch letter {
	case "A":
		return paint(color, sgrGreen, letter)
	case "D":
		return paint(color, sgrRed, letter)
	}
	return paint(color, sgrYellow, letter)
}
