-- A workspace is one directory however it is reached (a bind mount, a
-- symbolic link): it is known by its device and inode as well as by the
-- path it was first opened through. Existing rows keep their ids; their
-- device and inode are filled in when they are next opened.

ALTER TABLE workspaces ADD COLUMN dev INTEGER;
ALTER TABLE workspaces ADD COLUMN ino INTEGER;
CREATE UNIQUE INDEX workspaces_by_ident ON workspaces(dev, ino) WHERE dev IS NOT NULL;

-- Every canonical path a workspace was opened through.
CREATE TABLE workspace_paths (
	path         TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id),
	seen_at      TEXT NOT NULL
) STRICT;

INSERT INTO workspace_paths (path, workspace_id, seen_at)
	SELECT path, id, created_at FROM workspaces;
