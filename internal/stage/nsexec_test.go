package stage

import (
	"reflect"
	"testing"
)

// TestSpecKeepsBytes checks that the helper's arguments keep every byte
// of paths, selectors and the command's arguments (I-001).
func TestSpecKeepsBytes(t *testing.T) {
	odd := "w\xff\xfe s,:\\\n\x01é"
	s := &nsSpec{View: true, Workspace: "/" + odd, Lower: "/l" + odd, Upper: "/u", Work: "/w", Merged: "/m", Hidden: "/h",
		UserXattr: true, Share: []string{odd}, HideDirs: []string{odd, "b"}, HideFiles: []string{"\xff"},
		ReadOnly: true, PIDNS: true, Wait: true, GraceMillis: 2000, ReportFD: 3, ControlFD: 4, HoldFD: 5, CmdPgid: 77,
		Cwd: "/" + odd, Path: "./" + odd, Args: []string{odd, "", "\xff"}, Isolate: true, Keep: "/k" + odd, Confine: true}
	got, err := decodeSpec(s.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("decodeSpec(encode(s)) = %+v, want %+v", got, s)
	}
	if _, err := decodeSpec(s.encode()[:20]); err == nil {
		t.Error("a truncated argument decodes")
	}
}

// TestReportRoundTrip checks the supervisor's report, command names with
// any byte included.
func TestReportRoundTrip(t *testing.T) {
	r := &report{exitCode: 137, signal: 9, containment: ContainSubreaper, confined: true,
		stopped: []Proc{{PID: 7, Comm: "sleep"}, {PID: 9, Comm: "a\xffb"}}, execErr: &ExecError{NotFound: true, Message: "x: not found"}}
	got, err := decodeReport(r.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, r) {
		t.Errorf("decodeReport(encode(r)) = %+v, want %+v", got, r)
	}
}
