-- Flows: durable multi-step runs. A run pins its definition (the file's
-- bytes and their digest); each step attempt is one row, whose result is
-- written in the same transaction as the op it applied (W-001).

CREATE TABLE flow_runs (
	id                TEXT PRIMARY KEY,
	workspace_id      TEXT NOT NULL REFERENCES workspaces(id),
	name              TEXT CHECK (name IS NULL OR name <> ''),
	created_at        TEXT NOT NULL,
	definition_digest TEXT NOT NULL,
	definition        BLOB NOT NULL,
	base_digest       TEXT,
	forked_from       TEXT REFERENCES flow_runs(id),
	forked_at         INTEGER,
	abandoned         INTEGER NOT NULL DEFAULT 0 CHECK (abandoned IN (0, 1))
) STRICT;

CREATE UNIQUE INDEX flow_runs_name ON flow_runs(workspace_id, name) WHERE name IS NOT NULL;
CREATE INDEX flow_runs_by_workspace ON flow_runs(workspace_id, created_at, id);

CREATE TABLE flow_steps (
	run_id     TEXT NOT NULL REFERENCES flow_runs(id),
	step       INTEGER NOT NULL CHECK (step >= 0),
	attempt    INTEGER NOT NULL CHECK (attempt > 0),
	status     INTEGER NOT NULL,
	stage_id   TEXT,
	op_id      TEXT,
	created_at TEXT NOT NULL,
	updated_at TEXT NOT NULL,
	result     TEXT CHECK (result IS NULL OR json_valid(result)),
	PRIMARY KEY (run_id, step, attempt)
) STRICT;
