-- The op each undo takes back, kept beside the ops: finding one op among
-- many (undo, show, status) reads ids, kinds and this, never the bodies,
-- so its cost does not grow with the size of the history's change sets.
--
-- A table rather than a column of ops: adding a column to ops makes SQLite
-- test every row against the table's checks, and one body damaged past its
-- JSON check would then stop the migration, and every command, where fsck
-- should report it. Triggers keep the table, whatever program writes an op
-- (a wtx that opened the database before this migration too); a body that
-- is not valid JSON gives no row and no error.

CREATE TABLE op_undoes (
	op_id  TEXT PRIMARY KEY,
	undoes TEXT NOT NULL CHECK (undoes <> '')
) STRICT;

CREATE TRIGGER ops_undoes_insert AFTER INSERT ON ops
	WHEN CASE WHEN json_valid(NEW.body) THEN json_extract(NEW.body, '$.undoes') <> '' ELSE 0 END
BEGIN
	INSERT OR REPLACE INTO op_undoes (op_id, undoes) VALUES (NEW.id, json_extract(NEW.body, '$.undoes'));
END;

CREATE TRIGGER ops_undoes_update AFTER UPDATE OF body ON ops
BEGIN
	DELETE FROM op_undoes WHERE op_id = NEW.id;
	INSERT INTO op_undoes (op_id, undoes) SELECT NEW.id, json_extract(NEW.body, '$.undoes')
		WHERE CASE WHEN json_valid(NEW.body) THEN json_extract(NEW.body, '$.undoes') <> '' ELSE 0 END;
END;

CREATE TRIGGER ops_undoes_delete AFTER DELETE ON ops
BEGIN
	DELETE FROM op_undoes WHERE op_id = OLD.id;
END;

INSERT INTO op_undoes (op_id, undoes)
	SELECT id, json_extract(body, '$.undoes') FROM ops
	WHERE CASE WHEN json_valid(body) THEN json_extract(body, '$.undoes') <> '' ELSE 0 END;
