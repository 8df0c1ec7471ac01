package stage

// HelperArg is the first argument with which wtx re-executes itself as the
// namespace helper of the overlay backend (see [NamespaceMain]).
const HelperArg = "__stage-exec"

// helperEnv marks the environment of a helper process; the helper removes
// it before it executes the command.
const helperEnv = "WTX_STAGE_HELPER"

// nsSpec is what the namespace helper is told to set up, passed as one
// JSON argument.
type nsSpec struct {
	Workspace string   `json:"workspace"`
	Lower     string   `json:"lower"`
	Upper     string   `json:"upper"`
	Work      string   `json:"work"`
	Merged    string   `json:"merged"`
	Hidden    string   `json:"hidden,omitempty"` // where excluded directories are backed
	UserXattr bool     `json:"userxattr,omitempty"`
	Share     []string `json:"share,omitempty"`
	HideDirs  []string `json:"hide_dirs,omitempty"`
	HideFiles []string `json:"hide_files,omitempty"`
	ReadOnly  bool     `json:"read_only,omitempty"`
	NoNetwork bool     `json:"no_network,omitempty"`
	Cwd       string   `json:"cwd,omitempty"`
	Path      string   `json:"path,omitempty"`
	Args      []string `json:"args,omitempty"`
	// Probe asks for a self-test instead of a command: see probeOverlay.
	Probe bool `json:"probe,omitempty"`
}
