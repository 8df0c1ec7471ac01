package cli

import (
	"strconv"
	"strings"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/internal/quote"
)

// withCommands renders, for each repair the library gave as data only, the
// command a person types. Repairs that carry a command already keep it.
func withCommands(e *wtx.Error) *wtx.Error {
	need := false
	for _, r := range e.Repairs {
		if r.Command == "" && repairCommand(r) != "" {
			need = true
		}
	}
	if !need {
		return e
	}
	out := *e
	out.Repairs = make([]wtx.Repair, len(e.Repairs))
	for i, r := range e.Repairs {
		if r.Command == "" {
			r.Command = repairCommand(r)
		}
		out.Repairs[i] = r
	}
	return &out
}

// repairCommand is the command line of a repair ("" when it has none).
func repairCommand(r wtx.Repair) string {
	switch r.Action {
	case wtx.RepairTrustKey:
		return "wtx receipt trust add PUBKEY.pem"
	case wtx.RepairNewKey:
		return "wtx receipt key new"
	case wtx.RepairPrivateKey:
		if len(r.Paths) == 1 {
			return "chmod 600 " + quote.Shell(r.Paths[0])
		}
	}
	if r.Op != "" {
		return undoRepairCommand(r)
	}
	if r.Stage == "" {
		return ""
	}
	tx := quote.Shell(r.Stage)
	switch r.Action {
	case wtx.RepairExclude:
		var b strings.Builder
		for _, p := range r.Paths {
			b.WriteString(" --exclude " + quote.Shell(wtx.LiteralSelector(p)))
		}
		return "wtx apply " + tx + b.String()
	case wtx.RepairRebase:
		return "wtx rebase " + tx
	case wtx.RepairRebaseMerge:
		return "wtx rebase " + tx + " --merge"
	case wtx.RepairReread:
		if len(r.Paths) == 0 {
			return ""
		}
		return "wtx read --tx " + tx + " -- " + quote.Shell(r.Paths[0]) // read takes one path
	case wtx.RepairIgnoreStale:
		return "wtx apply " + tx + " --ignore-stale-reads"
	case wtx.RepairApprove:
		return "wtx apply " + tx + " --approve"
	case wtx.RepairRestage:
		return "wtx drop " + tx
	case wtx.RepairReview:
		return "wtx diff " + tx
	case wtx.RepairDropOp:
		return "wtx drop-op " + tx + " " + strconv.Itoa(r.TxOp)
	case wtx.RepairResolve:
		if len(r.Paths) == 0 {
			return "wtx status " + tx
		}
		return "wtx resolve " + tx + " --ours -- " + quote.Shell(r.Paths[0]) // or --theirs; or edit the markers out
	}
	return ""
}

// undoRepairCommand is the command line of a repair of an undo of r.Op.
func undoRepairCommand(r wtx.Repair) string {
	op := quote.Shell(r.Op)
	switch r.Action {
	case wtx.RepairApprove:
		return "wtx undo " + op + " --approve"
	case wtx.RepairExclude:
		var b strings.Builder
		for _, p := range r.Paths {
			b.WriteString(" --exclude " + quote.Shell(wtx.LiteralSelector(p)))
		}
		return "wtx undo " + op + b.String()
	}
	return ""
}
