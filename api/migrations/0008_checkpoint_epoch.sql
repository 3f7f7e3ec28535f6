-- The projection's epoch: a projector that finds the stored projection is not of the
-- chain stream (its newest block is not the stream's commit at that sequence) empties it
-- and starts again from the stream under a new epoch; a projector still writing under the
-- old one can claim nothing any more (it stops, and its restart reads the new checkpoint).
ALTER TABLE checkpoint ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
