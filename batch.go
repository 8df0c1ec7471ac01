package wtx

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// BatchItem is one line of a batch: a per-file command.
type BatchItem struct {
	Command    string  `json:"command"` // write, edit, rm, read
	Path       string  `json:"path"`
	Content    *string `json:"content,omitempty"`
	Old        string  `json:"old,omitempty"`
	New        *string `json:"new,omitempty"`
	All        bool    `json:"all,omitempty"`
	ExpectHash string  `json:"expect_hash,omitempty"`
}

// BatchItemResult answers one item of a batch.
type BatchItemResult struct {
	Index   int    `json:"index"`
	Command string `json:"command"`
	Path    string `json:"path"`
	TxOp    int    `json:"tx_op"`
	Digest  string `json:"digest,omitempty"`
	Content string `json:"content,omitempty"` // for read, as UTF-8 text
}

// BatchResult reports an atomic batch.
type BatchResult struct {
	Tx      string            `json:"tx"`
	OpID    string            `json:"op_id"`
	Items   []BatchItemResult `json:"items"`
	Apply   *ApplyResult      `json:"-"`
	Failure *BatchFailure     `json:"failure,omitempty"`
}

// BatchFailure says which item failed.
type BatchFailure struct {
	Index int    `json:"index"`
	Code  string `json:"code"`
}

// MaxBatchLine bounds one JSON line of a batch.
const MaxBatchLine = 64 << 20

// ParseBatch reads JSON lines (blank lines skipped) into items, checking
// each is a known command with its required fields.
func ParseBatch(r io.Reader) ([]BatchItem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxBatchLine)
	var items []BatchItem
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var it BatchItem
		if err := dec.Decode(&it); err != nil {
			return nil, errorf(CodeUsage, "batch line %d: %v", n, err)
		}
		if dec.More() {
			return nil, errorf(CodeUsage, "batch line %d: more than one JSON value", n)
		}
		if it.Path == "" {
			return nil, errorf(CodeUsage, "batch line %d: \"path\" is required", n)
		}
		switch it.Command {
		case "write":
			if it.Content == nil {
				return nil, errorf(CodeUsage, "batch line %d: write needs \"content\"", n)
			}
		case "edit":
			if it.Old == "" || it.New == nil {
				return nil, errorf(CodeUsage, "batch line %d: edit needs \"old\" (non-empty) and \"new\"", n)
			}
		case "rm", "read":
		default:
			return nil, errorf(CodeUsage, "batch line %d: unknown command %q (write, edit, rm, read)", n, it.Command)
		}
		items = append(items, it)
	}
	if err := sc.Err(); err != nil {
		return nil, errorf(CodeUsage, "batch: %v", err)
	}
	if len(items) == 0 {
		return nil, errorf(CodeUsage, "batch: no commands on stdin")
	}
	return items, nil
}

// Batch runs items in one new stage and applies the result, all or
// nothing: if any item fails, or the apply is refused, the stage is dropped
// and the workspace is untouched; the error is the first failure's.
func (w *Workspace) Batch(ctx context.Context, items []BatchItem, begin BeginOptions, apply ApplyOptions) (*BatchResult, error) {
	if err := checkBatch(items, begin); err != nil {
		return nil, err
	}
	st, err := w.Begin(ctx, begin)
	if err != nil {
		return nil, err
	}
	res := &BatchResult{Tx: st.ID(), Items: []BatchItemResult{}}
	fail := func(i int, err error) (*BatchResult, error) {
		st.Drop(context.WithoutCancel(ctx))
		e := AsError(err)
		out := *e
		if i >= 0 {
			out.Message = fmt.Sprintf("batch item %d (%s %s): %s; nothing was applied", i+1, items[i].Command, items[i].Path, e.Message)
		}
		return nil, &out
	}
	for i, it := range items {
		var fr *FileResult
		var err error
		switch it.Command {
		case "write":
			fr, err = st.Write(ctx, it.Path, []byte(*it.Content), WriteOptions{ExpectHash: it.ExpectHash})
		case "edit":
			fr, err = st.Edit(ctx, it.Path, it.Old, *it.New, it.All, it.ExpectHash)
		case "rm":
			fr, err = st.Remove(ctx, it.Path, it.ExpectHash)
		case "read":
			fr, err = st.Read(ctx, it.Path)
		}
		if err != nil {
			return fail(i, err)
		}
		r := BatchItemResult{Index: i + 1, Command: it.Command, Path: it.Path, TxOp: fr.TxOp, Digest: fr.Digest}
		if it.Command == "read" {
			r.Content = string(fr.Content)
		}
		res.Items = append(res.Items, r)
	}
	ar, err := st.Apply(ctx, apply)
	if err != nil {
		return fail(-1, err)
	}
	res.OpID, res.Apply = ar.OpID, ar
	return res, nil
}
