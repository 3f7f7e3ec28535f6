-- A job's `spec` and `requirements` are JSON objects (they were JSON text inside the
-- JSON), and its row carries the packed `terms` and `state` the market's calls take.
-- Rows folded before have neither: the chain projection starts again from the stream,
-- as in 0004 to 0006. The workers' reports stay (their format did not change).
DELETE FROM checkpoint;
DELETE FROM blocks;
DELETE FROM events;
DELETE FROM jobs;
DELETE FROM nodes;
DELETE FROM accounts;
DELETE FROM policies;
