package wtx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/wtx-dev/wtx/internal/jsonname"
	"github.com/wtx-dev/wtx/internal/quote"
)

// BatchItem is one line of a batch: a per-file command. In JSON, path,
// content, old and new each have a byte-safe form (path_b64, content_b64,
// old_b64, new_b64: standard base64) for names and texts that are not valid
// UTF-8; a JSON string that is not valid UTF-8 is refused, never
// substituted (I-001).
type BatchItem struct {
	Command    string  `json:"command"` // write, edit, rm, read
	Path       string  `json:"path"`
	Content    *string `json:"content,omitempty"`
	Old        string  `json:"old,omitempty"`
	New        *string `json:"new,omitempty"`
	All        bool    `json:"all,omitempty"`
	ExpectHash string  `json:"expect_hash,omitempty"`
}

// batchItemJSON is a batch line as JSON.
type batchItemJSON struct {
	Command    string  `json:"command"`
	Path       string  `json:"path"`
	PathB64    string  `json:"path_b64"`
	Content    *string `json:"content"`
	ContentB64 *string `json:"content_b64"`
	Old        string  `json:"old"`
	OldB64     string  `json:"old_b64"`
	New        *string `json:"new"`
	NewB64     *string `json:"new_b64"`
	All        bool    `json:"all"`
	ExpectHash string  `json:"expect_hash"`
}

func (j batchItemJSON) item() (BatchItem, error) {
	it := BatchItem{Command: j.Command, Path: j.Path, Content: j.Content, Old: j.Old, New: j.New, All: j.All, ExpectHash: j.ExpectHash}
	b64 := func(field string, s string) (string, error) {
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "", fmt.Errorf("%s: not standard base64: %v", field, err)
		}
		return string(b), nil
	}
	// A field given both ways is ambiguous: which bytes were meant?
	switch {
	case j.Path != "" && j.PathB64 != "":
		return it, errors.New("give path or path_b64, not both")
	case j.Content != nil && j.ContentB64 != nil:
		return it, errors.New("give content or content_b64, not both")
	case j.Old != "" && j.OldB64 != "":
		return it, errors.New("give old or old_b64, not both")
	case j.New != nil && j.NewB64 != nil:
		return it, errors.New("give new or new_b64, not both")
	}
	var err error
	if j.PathB64 != "" {
		if it.Path, err = b64("path_b64", j.PathB64); err != nil {
			return it, err
		}
	}
	if j.ContentB64 != nil {
		c, err := b64("content_b64", *j.ContentB64)
		if err != nil {
			return it, err
		}
		it.Content = &c
	}
	if j.OldB64 != "" {
		if it.Old, err = b64("old_b64", j.OldB64); err != nil {
			return it, err
		}
	}
	if j.NewB64 != nil {
		nw, err := b64("new_b64", *j.NewB64)
		if err != nil {
			return it, err
		}
		it.New = &nw
	}
	return it, nil
}

// BatchItemResult answers one item of a batch.
type BatchItemResult struct {
	Index   int    `json:"index"`
	Command string `json:"command"`
	Path    string `json:"path" jsonname:"b64"`
	TxOp    int    `json:"tx_op"`
	Digest  string `json:"digest,omitempty"`
	Content string `json:"content,omitempty" jsonname:"b64"` // for read (content_b64 too when it is not UTF-8)
}

// MarshalJSON writes the result with a byte-safe path and content.
func (r BatchItemResult) MarshalJSON() ([]byte, error) { return jsonname.Marshal(r) }

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
	var diags []Diagnostic
	var first *Error
	bad := func(n int, it *BatchItem, e *Error) {
		d := Diagnostic{Index: len(diags) + 1, Line: n, Status: DiagError, Code: e.Code, Message: e.Message}
		if it != nil {
			d.Command, d.Path = it.Command, it.Path
		}
		diags = append(diags, d)
		if first == nil {
			first = e
		}
	}
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		it, err := parseBatchLine(n, line)
		if err != nil {
			bad(n, it, err)
			continue
		}
		items = append(items, *it)
		diags = append(diags, Diagnostic{Index: len(diags) + 1, Line: n, Command: it.Command, Path: it.Path, Status: DiagOK})
	}
	if err := sc.Err(); err != nil {
		return nil, errorf(CodeUsage, "batch: %v", err)
	}
	if first != nil {
		out := *first
		errs := 0
		for _, d := range diags {
			if d.Status == DiagError {
				errs++
			}
		}
		if errs > 1 {
			out.Message = fmt.Sprintf("%s (and %d more line(s) with errors: see diagnostics)", first.Message, errs-1)
		}
		out.Diagnostics = diags
		return nil, &out
	}
	if len(items) == 0 {
		return nil, errorf(CodeUsage, "batch: no commands on stdin")
	}
	return items, nil
}

// parseBatchLine reads line n of a batch.
func parseBatchLine(n int, line []byte) (*BatchItem, *Error) {
	// Checked on the raw bytes: decoding would replace what is not
	// UTF-8 with U+FFFD and write the substitute.
	if err := jsonname.Check(line); err != nil {
		return nil, errorf(CodeUsage, "batch line %d: %v; give such names and texts in path_b64, content_b64, old_b64 or new_b64", n, err)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var j batchItemJSON
	if err := dec.Decode(&j); err != nil {
		return nil, errorf(CodeUsage, "batch line %d: %v", n, err)
	}
	if dec.More() {
		return nil, errorf(CodeUsage, "batch line %d: more than one JSON value", n)
	}
	it, err := j.item()
	if err != nil {
		return nil, errorf(CodeUsage, "batch line %d: %v", n, err)
	}
	if it.Path == "" {
		return &it, errorf(CodeUsage, "batch line %d: \"path\" (or \"path_b64\") is required", n)
	}
	switch it.Command {
	case "write":
		if it.Content == nil {
			return &it, errorf(CodeUsage, "batch line %d: write needs \"content\"", n)
		}
	case "edit":
		if it.Old == "" || it.New == nil {
			return &it, errorf(CodeUsage, "batch line %d: edit needs \"old\" (non-empty) and \"new\"", n)
		}
	case "rm", "read":
	default:
		return &it, errorf(CodeUsage, "batch line %d: unknown command %q (write, edit, rm, read)", n, it.Command)
	}
	return &it, nil
}

// Batch runs items in one new stage and applies the result, all or
// nothing: if any item fails, or the apply is refused, the stage is dropped
// and the workspace is untouched; the error is the first failure's.
func (w *Workspace) Batch(ctx context.Context, items []BatchItem, begin BeginOptions, apply ApplyOptions) (*BatchResult, error) {
	// The caller's choices are asked about as they were made, before the
	// project file's are added.
	if err := w.authorizeBegin(begin); err != nil {
		return nil, err
	}
	// The project file's excludes take part in the check before the stage
	// opens; Begin is then told not to add them twice.
	begin, err := w.withProject(begin)
	if err != nil {
		return nil, err
	}
	begin.NoProject, begin.projectMerged = true, true
	if err := checkBatch(items, begin); err != nil {
		return nil, err
	}
	st, err := w.begin(ctx, begin)
	if err != nil {
		return nil, err
	}
	res := &BatchResult{Tx: st.ID(), Items: []BatchItemResult{}}
	diags := make([]Diagnostic, 0, len(items))
	firstFailed := -1
	var firstErr *Error
	fail := func(i int, err error) (*BatchResult, error) {
		_ = st.drop(context.WithoutCancel(ctx)) // a stage left open is dropped by the next 'drop --empty'; the error told is the batch's
		e := AsError(err)
		out := *e
		if i >= 0 {
			out.Message = fmt.Sprintf("batch item %d (%s %s): %s; nothing was applied", i+1, items[i].Command, quote.Path(items[i].Path), e.Message)
			if n := errorCount(diags); n > 1 {
				out.Message += fmt.Sprintf(" (%d items failed: see diagnostics)", n)
			}
			out.Diagnostics = diags
		}
		return nil, &out
	}
	// Every item runs, after a failure too, so that each one's fate is
	// known (diagnostics); a failure anywhere applies nothing.
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
		d := Diagnostic{Index: i + 1, Command: it.Command, Path: it.Path, Status: DiagOK}
		if err != nil {
			e := AsError(err)
			d.Status, d.Code, d.Message = DiagError, e.Code, e.Message
			diags = append(diags, d)
			if firstFailed < 0 {
				firstFailed, firstErr = i, e
			}
			if ctx.Err() != nil {
				break
			}
			continue
		}
		diags = append(diags, d)
		r := BatchItemResult{Index: i + 1, Command: it.Command, Path: it.Path, TxOp: fr.TxOp, Digest: fr.Digest}
		if it.Command == "read" {
			r.Content = string(fr.Content)
		}
		res.Items = append(res.Items, r)
	}
	if firstFailed >= 0 {
		for i := len(diags); i < len(items); i++ {
			diags = append(diags, Diagnostic{Index: i + 1, Command: items[i].Command, Path: items[i].Path, Status: DiagSkipped})
		}
		return fail(firstFailed, firstErr)
	}
	ar, err := st.Apply(ctx, apply)
	if err != nil {
		return fail(-1, err)
	}
	res.OpID, res.Apply = ar.OpID, ar
	return res, nil
}

func errorCount(ds []Diagnostic) int {
	n := 0
	for _, d := range ds {
		if d.Status == DiagError {
			n++
		}
	}
	return n
}
