-- The first schema of the wtx state database.
-- Times are RFC 3339 UTC text with nine fractional digits, so that text
-- order is time order. JSON columns hold structured records.

CREATE TABLE workspaces (
	id         TEXT PRIMARY KEY,
	path       TEXT NOT NULL UNIQUE,
	created_at TEXT NOT NULL
) STRICT;

CREATE TABLE stages (
	id           TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id),
	name         TEXT CHECK (name IS NULL OR name <> ''),
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL,
	backend      TEXT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('open', 'applied', 'dropped')),
	config       TEXT CHECK (config IS NULL OR json_valid(config)),
	base_digest  TEXT
) STRICT;

-- A name picks out one open stage of a workspace; settled stages keep
-- their names without blocking reuse.
CREATE UNIQUE INDEX stages_open_name ON stages(workspace_id, name)
	WHERE state = 'open' AND name IS NOT NULL;
CREATE INDEX stages_by_workspace ON stages(workspace_id, created_at, id);

CREATE TABLE ops (
	id           TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id),
	stage_id     TEXT REFERENCES stages(id),
	kind         TEXT NOT NULL CHECK (kind IN ('apply', 'undo')),
	state        TEXT NOT NULL,
	created_at   TEXT NOT NULL,
	body         TEXT CHECK (body IS NULL OR json_valid(body))
) STRICT;

CREATE INDEX ops_by_workspace ON ops(workspace_id, created_at, id);
CREATE INDEX ops_by_stage ON ops(stage_id);

CREATE TABLE receipts (
	id           TEXT PRIMARY KEY,
	kind         TEXT NOT NULL CHECK (kind IN ('run', 'apply', 'undo')),
	workspace_id TEXT NOT NULL REFERENCES workspaces(id),
	stage_id     TEXT NOT NULL REFERENCES stages(id),
	op_id        TEXT REFERENCES ops(id),
	created_at   TEXT NOT NULL,
	body         TEXT CHECK (body IS NULL OR json_valid(body))
) STRICT;

CREATE INDEX receipts_by_stage ON receipts(stage_id, created_at, id);
CREATE INDEX receipts_by_op ON receipts(op_id);
