package wtx_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/wtx-dev/wtx"
	"github.com/wtx-dev/wtx/flow"
	"github.com/wtx-dev/wtx/internal/flowlink"
)

// oldFlowOpRecord is an op record with a flow step as the code before
// ApplyOptions.Annotate wrote it in a journal (its flow step was a private
// field of the root package then); the ids are set to a real workspace's.
const oldFlowOpRecord = `{"op":{"ID":"op-20260301T120000-aaaa","WorkspaceID":"ws-1","StageID":"tx-1","Kind":"apply","State":"committed","Body":{"stage":"tx-1"},"CreatedAt":"2026-03-01T12:00:00.123456789Z"},"receipt":{"schema_version":0,"id":"rc-1","kind":"apply","workspace":"","tx":"","op_id":"","created_at":"0001-01-01T00:00:00Z","backend":"","command":null,"exit_code":null,"base_digest":"","result_digest":"","changeset_digest":"","counts":{"added":0,"modified":0,"deleted":0},"paths":null,"refusal":null,"exclusions":0,"protections":0,"protected_paths":0,"approved":false,"not_transactional":null,"digest":""},"flow_step":{"run_id":"run-20260301T115900-bbbb","step":1,"attempt":2,"status":2,"created_at":"2026-03-01T11:59:00.123456789Z","result":{"step":"fix \u003cit\u003e \u0026 go","kind":"run","command":["sh","-c","echo hi"],"exit_code":0,"stdout_size":5,"stderr_size":2,"stdout_digest":"sha256:01","stderr_digest":"sha256:02","base_digest":"sha256:03","changeset_digest":"sha256:04","result_digest":"sha256:05","counts":{"added":1,"modified":2,"deleted":0},"stage_id":"tx-1","op_id":"op-20260301T120000-aaaa","receipts":["rc-0","rc-1"],"not_transactional":["declared effect: net"],"effects":["net"],"repairs":[{"action":"review","detail":"look","tx":"tx-1"}],"stdout":"\"out\\377\\n\"","stdout_b64":"b3V0/wo=","stderr":"é","written":["a.txt","\"b\\376.txt\""],"written_b64":["YS50eHQ=","Yv4udHh0"]}}}`

// oldFlowStepBody is the result body that code stored in the step's row.
const oldFlowStepBody = `{"step":"fix \u003cit\u003e \u0026 go","kind":"run","command":["sh","-c","echo hi"],"exit_code":0,"stdout_size":5,"stderr_size":2,"stdout_digest":"sha256:01","stderr_digest":"sha256:02","base_digest":"sha256:03","changeset_digest":"sha256:04","result_digest":"sha256:05","counts":{"added":1,"modified":2,"deleted":0},"stage_id":"tx-1","op_id":"op-20260301T120000-aaaa","receipts":["rc-0","rc-1"],"not_transactional":["declared effect: net"],"effects":["net"],"repairs":[{"action":"review","detail":"look","tx":"tx-1"}],"stdout":"\"out\\377\\n\"","stdout_b64":"b3V0/wo=","stderr":"é","written":["a.txt","\"b\\376.txt\""],"written_b64":["YS50eHQ=","Yv4udHh0"]}`

const compatFlow = `version = 1
[[steps]]
name = "make"
kind = "batch"
backend = "copy"
[[steps.ops]]
command = "write"
path = "one.txt"
content = "one\n"
[[steps]]
name = "more"
kind = "batch"
backend = "copy"
[[steps.ops]]
command = "edit"
path = "missing.txt"
old = "x"
new = "y"
`

// compatRun starts compatFlow, whose second step fails, and returns the
// run and the old op record set to complete that step as its attempt 2.
func compatRun(t *testing.T) (context.Context, *wtx.Workspace, *flow.Run, string) {
	t.Helper()
	ctx := context.Background()
	ws, err := wtx.Open(ctx, t.TempDir(), wtx.Options{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	def, err := flow.Parse([]byte(compatFlow))
	if err != nil {
		t.Fatal(err)
	}
	run, err := flow.Start(ctx, ws, def, flow.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != flow.RunFailed || len(run.Steps[1].Attempts) != 1 {
		t.Fatalf("the run is %s with %d attempt(s) of its second step, want failed with 1", run.Status, len(run.Steps[1].Attempts))
	}
	stage := run.Steps[1].Attempts[0].StageID
	old := strings.NewReplacer(`"ws-1"`, `"`+wtx.WorkspaceID(ws)+`"`, `"tx-1"`, `"`+stage+`"`, `"tx":""`, `"tx":"`+stage+`"`,
		"run-20260301T115900-bbbb", run.ID, `"created_at":"0001-01-01T00:00:00Z"`, `"created_at":"2026-03-01T12:00:00Z"`).Replace(oldFlowOpRecord)
	return ctx, ws, run, old
}

// TestW_001_OldJournalRecordsFlowStep recovers an op whose journal the
// code before the Annotate hook wrote: recording it writes the flow step's
// row, in the op's transaction, with the same bytes that code stored.
func TestW_001_OldJournalRecordsFlowStep(t *testing.T) {
	ctx, ws, run, old := compatRun(t)
	stage := run.Steps[1].Attempts[0].StageID
	if err := wtx.RecordOpRecord(ctx, ws, []byte(old)); err != nil {
		t.Fatalf("recording the old op record: %v", err)
	}
	got, err := flow.Show(ctx, ws, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	a := got.Steps[1].Attempts
	if got.Status != flow.RunDone || len(a) != 2 || a[1].Status != flow.StepDone || a[1].OpID != "op-20260301T120000-aaaa" {
		t.Fatalf("after recording: run %s, step 2 attempts %+v; want the run done by attempt 2 of op-20260301T120000-aaaa", got.Status, a)
	}
	if r := a[1].Result; r == nil || string(r.Stdout) != "out\xff\n" || len(r.Written) != 2 || r.Written[1] != "b\xfe.txt" {
		t.Fatalf("the recorded result lost bytes: %+v", r)
	}
	l := flowlink.Root.(*flowlink.Link[*wtx.Workspace, *wtx.Stage, *wtx.ChangeSet, *wtx.ApplyOptions, wtx.BatchItem])
	rows, err := l.DB(ws).FlowSteps(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(`"tx-1"`, `"`+stage+`"`).Replace(oldFlowStepBody)
	for _, r := range rows {
		if r.Step == 1 && r.Attempt == 2 {
			if !bytes.Equal(r.Result, []byte(want)) {
				t.Fatalf("the step's row holds\n%s\nthe code before stored\n%s", r.Result, want)
			}
			if r.Status != 2 || r.OpID != "op-20260301T120000-aaaa" || r.StageID != stage {
				t.Fatalf("the step's row is %+v", r)
			}
			return
		}
	}
	t.Fatal("no row for attempt 2 of step 2")
}

// TestW_001_DamagedFlowStepInJournal: a journal whose flow step is damaged
// records neither the op nor the step (io.corrupt, the journal stays for
// a person), and one whose flow step is null records the op alone, as a
// journal without one does.
func TestW_001_DamagedFlowStepInJournal(t *testing.T) {
	ctx, ws, run, old := compatRun(t)
	damaged := strings.Replace(old, `"attempt":2,"status":2`, `"attempt":2,"status":"done"`, 1)
	if damaged == old {
		t.Fatal("the record has no status to damage")
	}
	err := wtx.RecordOpRecord(ctx, ws, []byte(damaged))
	if !errors.Is(err, wtx.ErrIO) || wtx.AsError(err).Code != wtx.CodeCorrupt {
		t.Fatalf("recording a damaged flow step: %v, want io.corrupt", err)
	}
	if _, err := ws.Op(ctx, "op-20260301T120000-aaaa"); wtx.AsError(err).Code != wtx.CodeOpNotFound {
		t.Fatalf("the op of a damaged flow step was recorded without it: %v", err)
	}
	null := old[:strings.Index(old, `"flow_step":`)] + `"flow_step":null}`
	if err := wtx.RecordOpRecord(ctx, ws, []byte(null)); err != nil {
		t.Fatalf("recording an op whose flow step is null: %v", err)
	}
	if _, err := ws.Op(ctx, "op-20260301T120000-aaaa"); err != nil {
		t.Fatalf("the op whose flow step is null: %v", err)
	}
	got, err := flow.Show(ctx, ws, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Steps[1].Attempts); n != 1 || got.Status != flow.RunFailed {
		t.Fatalf("a null flow step left the run %s with %d attempts of step 2", got.Status, n)
	}
}
