-- The op an undo takes back, as its own column: finding one op among many
-- (undo, show) reads each op's id, kind and this, never the bodies, so
-- its cost does not grow with the size of the history's change sets.

ALTER TABLE ops ADD COLUMN undoes TEXT CHECK (undoes IS NULL OR undoes <> '');

UPDATE ops SET undoes = json_extract(body, '$.undoes')
	WHERE body IS NOT NULL AND json_extract(body, '$.undoes') <> '';
