package answer

import (
	"github.com/wtx-dev/wtx/internal/buildinfo"
	"github.com/wtx-dev/wtx/internal/project"
)

// Version answers version (and --version --json).
type Version struct {
	buildinfo.Info
}

// Where is where the workspace is and how it was found from the directory
// wtx was started in; status carries it as "workspace".
type Where struct {
	Path    string `json:"path"`
	PathB64 string `json:"path_b64,omitempty"`
	// Found is given (-C), workspace (the nearest directory with open
	// stages at or above the current one, nearer than any root), git-root,
	// project-file (a directory holding .wtx.toml) or directory.
	Found string `json:"found"`
	// From is the current directory relative to the workspace ("." at its
	// root).
	From    string `json:"from"`
	FromB64 string `json:"from_b64,omitempty"`
}

// NewWhere renders a workspace's path, how it was found and the directory
// relative to it that wtx was started in.
func NewWhere(path, found, from string) Where {
	w := Where{Found: found}
	w.Path, w.PathB64 = Name(path)
	w.From, w.FromB64 = Name(from)
	return w
}

// Project is the workspace's project file (.wtx.toml) in status.
type Project struct {
	Path       string   `json:"path"`
	PathB64    string   `json:"path_b64,omitempty"`
	Backend    string   `json:"backend,omitempty"`
	Exclude    []string `json:"exclude"`
	ExcludeB64 []string `json:"exclude_b64,omitempty"`
	Protect    []string `json:"protect"`
	ProtectB64 []string `json:"protect_b64,omitempty"`
}

// NewProject renders a project file; nil without one.
func NewProject(f *project.File) *Project {
	if f == nil {
		return nil
	}
	p := &Project{Backend: f.Backend}
	p.Path, p.PathB64 = Name(f.Path)
	p.Exclude, p.ExcludeB64 = Names(f.Exclude)
	p.Protect, p.ProtectB64 = Names(f.Protect)
	return p
}

// StatusContext follows status's own fields: the workspace and its project
// file (null without one).
type StatusContext struct {
	Workspace Where    `json:"workspace"`
	Project   *Project `json:"project"`
}
