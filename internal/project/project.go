// Package project names the workspace's project file, .wtx.toml at the
// workspace root, for the command line: the file is read by the library
// whenever a stage opens (wtx.LoadProject, wtx.BeginOptions.NoProject);
// the command line reads it too, to show it in status.
package project

import "github.com/wtx-dev/wtx"

// FileName is the project file's name at the workspace root.
const FileName = wtx.ProjectFileName

// Backends are the values backend may take.
var Backends = wtx.ProjectBackends

// File is a parsed project file.
type File = wtx.ProjectFile

// Load reads root/.wtx.toml (nil and no error when there is none).
func Load(root string) (*File, error) { return wtx.LoadProject(root) }

// Parse parses the contents of the project file at path p.
func Parse(p string, data []byte) (*File, error) { return wtx.ParseProject(p, data) }
