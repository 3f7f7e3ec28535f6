-- What workers publish (stream GANTRY_JOBS_<chain>): the latest progress per job, log
-- lines (the newest 10,000 per job are kept) and completion reports.

CREATE TABLE reports_checkpoint (
    id BIGINT PRIMARY KEY,
    stream_seq BIGINT NOT NULL
);

CREATE TABLE progress (
    job_id BIGINT PRIMARY KEY,
    body TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);

CREATE TABLE logs (
    job_id BIGINT NOT NULL,
    stream_seq BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    stream TEXT NOT NULL,
    line TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (job_id, stream_seq)
);

CREATE TABLE completions (
    job_id BIGINT NOT NULL,
    attempt BIGINT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (job_id, attempt)
);
