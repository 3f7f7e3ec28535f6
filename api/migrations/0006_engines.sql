-- Engines: a job's (`JobRow::engine`, from its terms) and a node's (`NodeRow::engines`,
-- from its capabilities). Rows folded before they were kept have neither, and the market
-- that emits them is a new one (its terms and capabilities carry the engine): the chain
-- projection starts again from the stream, as in 0004 and 0005. The workers' reports stay
-- (their format did not change).
DELETE FROM checkpoint;
DELETE FROM blocks;
DELETE FROM events;
DELETE FROM jobs;
DELETE FROM nodes;
DELETE FROM accounts;
DELETE FROM policies;
