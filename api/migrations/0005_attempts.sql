-- A job's attempts (`JobRow::attemptRows`: node, outcome, whose fault, why, the slash and
-- the treasury it went to) are folded from its events; rows folded before they were kept
-- have none. The chain projection starts again from the stream, as in 0004, and refolds
-- every row with them. The workers' reports stay (their format did not change).
DELETE FROM checkpoint;
DELETE FROM blocks;
DELETE FROM events;
DELETE FROM jobs;
DELETE FROM nodes;
DELETE FROM accounts;
DELETE FROM policies;
