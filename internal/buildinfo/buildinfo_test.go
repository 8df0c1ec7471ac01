package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := fromBuildInfo(bi, Info{Version: "(devel)", Platform: "linux/amd64"})
	want := Info{Version: "v1.2.0", Commit: "0123456789abcdef0123", CommitTime: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8", Platform: "linux/amd64"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if s := got.Short(); s != "v1.2.0 (commit 0123456789ab, modified, go1.26.8, linux/amd64)" {
		t.Errorf("Short() = %q", s)
	}
	bare := fromBuildInfo(&debug.BuildInfo{}, Info{Version: "(devel)", GoVersion: "go1.26.8", Platform: "darwin/arm64"})
	if s := bare.Short(); s != "(devel) (go1.26.8, darwin/arm64)" {
		t.Errorf("Short() without vcs = %q", s)
	}
}

func TestStampedWins(t *testing.T) {
	old := Stamped
	t.Cleanup(func() { Stamped = old })
	Stamped = "v9.9.9"
	if v := Read().Version; v != "v9.9.9" {
		t.Fatalf("Read().Version = %q with Stamped set", v)
	}
}
