-- A stage whose change set was empty when a run or an apply settled it is
-- "empty": settled, with nothing to apply. SQLite cannot change a CHECK
-- constraint in place, so the table is rebuilt; the rows go back in after
-- the new table exists, which satisfies the deferred foreign keys of the
-- ops, receipts, tx_ops and read_set that refer to them.

PRAGMA defer_foreign_keys = ON;

CREATE TEMP TABLE stages_copy AS SELECT * FROM stages;
DROP TABLE stages;

CREATE TABLE stages (
	id           TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces(id),
	name         TEXT CHECK (name IS NULL OR name <> ''),
	created_at   TEXT NOT NULL,
	updated_at   TEXT NOT NULL,
	backend      TEXT NOT NULL,
	state        TEXT NOT NULL CHECK (state IN ('open', 'applied', 'dropped', 'empty')),
	config       TEXT CHECK (config IS NULL OR json_valid(config)),
	base_digest  TEXT
) STRICT;

INSERT INTO stages (id, workspace_id, name, created_at, updated_at, backend, state, config, base_digest)
	SELECT id, workspace_id, name, created_at, updated_at, backend, state, config, base_digest FROM stages_copy;
DROP TABLE stages_copy;

CREATE UNIQUE INDEX stages_open_name ON stages(workspace_id, name)
	WHERE state = 'open' AND name IS NOT NULL;
CREATE INDEX stages_by_workspace ON stages(workspace_id, created_at, id);
