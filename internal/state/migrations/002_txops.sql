-- Per-file operations inside a stage, and what the stage has read.

CREATE TABLE tx_ops (
	stage_id   TEXT NOT NULL REFERENCES stages(id),
	seq        INTEGER NOT NULL CHECK (seq > 0),
	kind       TEXT NOT NULL CHECK (kind IN ('write', 'edit', 'rm', 'read', 'run')),
	created_at TEXT NOT NULL,
	body       TEXT NOT NULL CHECK (json_valid(body)),
	PRIMARY KEY (stage_id, seq)
) STRICT;

-- One row per path a stage read: the digest of the content it was given.
CREATE TABLE read_set (
	stage_id TEXT NOT NULL REFERENCES stages(id),
	path     TEXT NOT NULL,
	digest   TEXT NOT NULL,
	seq      INTEGER NOT NULL,
	read_at  TEXT NOT NULL,
	PRIMARY KEY (stage_id, path)
) STRICT;
