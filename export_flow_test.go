package wtx

import (
	"context"
	"encoding/json"
)

// RecordOpRecord records an op from its record as a journal carries it,
// as recovery does when it finds the op committed.
func RecordOpRecord(ctx context.Context, w *Workspace, data []byte) error {
	var rec opRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return err
	}
	return w.recordOp(ctx, rec)
}

// WorkspaceID is the workspace's id, as its records name it.
func WorkspaceID(w *Workspace) string { return w.id }
