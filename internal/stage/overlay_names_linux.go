package stage

import (
	"encoding/json"
	"fmt"

	"github.com/wtx-dev/wtx/internal/jsonname"
)

// overlay.json keeps names byte-exactly (I-001): each name field has its
// X_b64 sibling when it is not valid UTF-8 (internal/jsonname). A workspace
// whose path is not UTF-8 would otherwise never match its own stage.

type overlayConfigJSON struct {
	Workspace    string   `json:"workspace"`
	WorkspaceB64 string   `json:"workspace_b64,omitempty"`
	UserXattr    bool     `json:"userxattr"`
	Exclude      []string `json:"exclude,omitempty"`
	ExcludeB64   []string `json:"exclude_b64,omitempty"`
	Share        []string `json:"share,omitempty"`
	ShareB64     []string `json:"share_b64,omitempty"`
	ShareAt      []string `json:"share_at,omitempty"`
	ShareAtB64   []string `json:"share_at_b64,omitempty"`
	HideDirs     []string `json:"hide_dirs,omitempty"`
	HideDirsB64  []string `json:"hide_dirs_b64,omitempty"`
	HideFiles    []string `json:"hide_files,omitempty"`
	HideFilesB64 []string `json:"hide_files_b64,omitempty"`
}

// MarshalJSON writes the configuration with byte-safe names.
func (c overlayConfig) MarshalJSON() ([]byte, error) {
	return json.Marshal(overlayConfigJSON{
		jsonname.Text(c.Workspace), jsonname.B64(c.Workspace), c.UserXattr,
		jsonname.Texts(c.Exclude), jsonname.B64s(c.Exclude), jsonname.Texts(c.Share), jsonname.B64s(c.Share),
		jsonname.Texts(c.ShareAt), jsonname.B64s(c.ShareAt), jsonname.Texts(c.HideDirs), jsonname.B64s(c.HideDirs),
		jsonname.Texts(c.HideFiles), jsonname.B64s(c.HideFiles)})
}

// UnmarshalJSON reads what MarshalJSON writes (and files without the _b64
// fields).
func (c *overlayConfig) UnmarshalJSON(data []byte) error {
	var j overlayConfigJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	out := overlayConfig{UserXattr: j.UserXattr}
	var err error
	if out.Workspace, err = jsonname.Name(j.Workspace, j.WorkspaceB64); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	for _, f := range []struct {
		dst        *[]string
		texts, b64 []string
	}{
		{&out.Exclude, j.Exclude, j.ExcludeB64}, {&out.Share, j.Share, j.ShareB64}, {&out.ShareAt, j.ShareAt, j.ShareAtB64},
		{&out.HideDirs, j.HideDirs, j.HideDirsB64}, {&out.HideFiles, j.HideFiles, j.HideFilesB64},
	} {
		if *f.dst, err = jsonname.Names(f.texts, f.b64); err != nil {
			return err
		}
	}
	*c = out
	return nil
}
