-- The chain projection. The same SQL runs on SQLite and PostgreSQL: BIGINT and TEXT
-- only, amounts as decimal text, JSON as text, no autoincrement.

-- The stream sequence of the last message whose effects are stored (one row).
CREATE TABLE checkpoint (
    id BIGINT PRIMARY KEY,
    stream_seq BIGINT NOT NULL
);

-- Blocks whose events are applied, to undo them on a retraction.
CREATE TABLE blocks (
    number BIGINT PRIMARY KEY,
    hash TEXT NOT NULL,
    timestamp BIGINT NOT NULL,
    stream_seq BIGINT NOT NULL
);

-- Every applied event, in chain order: the timeline, and what rows are refolded from.
CREATE TABLE events (
    block_number BIGINT NOT NULL,
    log_index BIGINT NOT NULL,
    block_hash TEXT NOT NULL,
    block_timestamp BIGINT NOT NULL,
    tx_hash TEXT NOT NULL,
    name TEXT NOT NULL,
    event_key TEXT NOT NULL,
    job_id BIGINT,
    node_id BIGINT,
    data TEXT NOT NULL,
    PRIMARY KEY (block_number, log_index)
);
CREATE INDEX events_job ON events (job_id, block_number, log_index);
CREATE INDEX events_node ON events (node_id, block_number, log_index);

CREATE TABLE jobs (
    job_id BIGINT PRIMARY KEY,
    body TEXT NOT NULL,
    submitter TEXT NOT NULL,
    status TEXT NOT NULL,
    node_id BIGINT,
    priority BIGINT NOT NULL,
    posted_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL
);
CREATE INDEX jobs_status ON jobs (status, job_id);
CREATE INDEX jobs_submitter ON jobs (submitter, job_id);
CREATE INDEX jobs_node ON jobs (node_id, job_id);

CREATE TABLE nodes (
    node_id BIGINT PRIMARY KEY,
    body TEXT NOT NULL,
    status TEXT NOT NULL
);
