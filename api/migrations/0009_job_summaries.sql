-- A job's summary for lists (`JobBrief` as JSON), kept ready beside its row: a page of
-- jobs is those texts put together, nothing parsed or serialised on the way out. Rows
-- folded before have none: the chain projection starts again from the stream, under a
-- new epoch (as `Store::empty_projection` does). The workers' reports stay.
ALTER TABLE jobs ADD COLUMN summary TEXT NOT NULL DEFAULT '';
UPDATE checkpoint SET stream_seq = 0, epoch = epoch + 1;
DELETE FROM blocks;
DELETE FROM events;
DELETE FROM jobs;
DELETE FROM nodes;
DELETE FROM accounts;
DELETE FROM policies;
