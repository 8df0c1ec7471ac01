-- The undoes column kept by whatever program writes an op: a wtx that
-- opened the database before migration 006 (a process already running
-- when a newer one migrated it) inserts ops without it, and its undos
-- would then look like applies to whoever finds an op by the links. The
-- triggers fill the column from the body on every insert and every change
-- of the body; the update fills the rows written so meanwhile.

CREATE TRIGGER ops_undoes_insert AFTER INSERT ON ops
	WHEN json_extract(NEW.body, '$.undoes') <> ''
BEGIN
	UPDATE ops SET undoes = json_extract(NEW.body, '$.undoes') WHERE id = NEW.id;
END;

CREATE TRIGGER ops_undoes_update AFTER UPDATE OF body ON ops
BEGIN
	UPDATE ops SET undoes = NULLIF(json_extract(NEW.body, '$.undoes'), '') WHERE id = NEW.id;
END;

UPDATE ops SET undoes = json_extract(body, '$.undoes')
	WHERE undoes IS NULL AND json_extract(body, '$.undoes') <> '';
