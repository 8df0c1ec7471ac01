// Package buildinfo reads what the Go toolchain recorded about the wtx
// binary: the module version, the commit it was built from and the Go
// version. The CLI's version command and the MCP server report the same.
package buildinfo

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped is, when set at link time (-X github.com/wtx-dev/wtx/internal/buildinfo.Stamped=v1.2.3),
// is the version of a release build; it wins over the module version.
var Stamped string

// Info is what is known about the build.
type Info struct {
	// Version is the module version: a tag (v1.2.0), a pseudo-version, or
	// "(devel)" for a build from a work tree without a tag.
	Version string `json:"version"`
	// Commit is the VCS revision, empty when the build did not record it
	// (-buildvcs=false, or a build outside a repository).
	Commit string `json:"commit"`
	// CommitTime is the commit's time as the VCS gives it (RFC 3339), or empty.
	CommitTime string `json:"commit_time"`
	// Modified says the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Read returns the build's information.
func Read() Info {
	info := Info{Version: "(devel)", GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		info = fromBuildInfo(bi, info)
	}
	if Stamped != "" {
		info.Version = Stamped
	}
	return info
}

func fromBuildInfo(bi *debug.BuildInfo, info Info) Info {
	if v := bi.Main.Version; v != "" {
		info.Version = v
	}
	if bi.GoVersion != "" {
		info.GoVersion = bi.GoVersion
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Commit = s.Value
		case "vcs.time":
			info.CommitTime = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// Short is the one-line form: "v1.2.0 (commit 0123abcd, go1.26.8)".
func (i Info) Short() string {
	var b strings.Builder
	b.WriteString(i.Version)
	b.WriteString(" (")
	if i.Commit != "" {
		c := i.Commit
		if len(c) > 12 {
			c = c[:12]
		}
		b.WriteString("commit " + c)
		if i.Modified {
			b.WriteString(", modified")
		}
		b.WriteString(", ")
	}
	b.WriteString(i.GoVersion + ", " + i.Platform + ")")
	return b.String()
}
