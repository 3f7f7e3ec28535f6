-- What the dashboard and the stats need: figures per job in columns (so they can be
-- summed in SQL), progress history for the charts, and events by name and time for the
-- per-minute history.

ALTER TABLE jobs ADD COLUMN gpus BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN gpu_seconds BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN bounty TEXT NOT NULL DEFAULT '0';
ALTER TABLE jobs ADD COLUMN payout TEXT;

CREATE INDEX events_name_time ON events (name, block_timestamp);

-- Every progress update (the newest 2,000 per job are kept), for the charts.
CREATE TABLE progress_samples (
    job_id BIGINT NOT NULL,
    stream_seq BIGINT NOT NULL,
    at_ms BIGINT NOT NULL,
    gpu_utilization DOUBLE PRECISION,
    body TEXT NOT NULL,
    PRIMARY KEY (job_id, stream_seq)
);
CREATE INDEX progress_samples_time ON progress_samples (at_ms);
