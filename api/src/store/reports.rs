//! The workers' reports in SQL: progress samples, log lines and completion reports, with
//! the jobs stream's checkpoint.

use std::collections::BTreeSet;

use gantry_protocol::jobs::{self, CompletionReport, JobReport as Report, LogLine, ProgressUpdate};
use sqlx::Row;

use super::rows::{Columns, bigint, bodies, body};
use super::{Checkpoint, Store, StoreError, claim};

/// Log lines kept per job.
pub const LOG_LINES_KEPT: i64 = 10_000;
/// Progress updates kept per job (the charts' history).
pub const PROGRESS_SAMPLES_KEPT: i64 = 2_000;

impl Store {
    /// The node of each attempt of job `job_id` the chain projection knows, in order
    /// (attempt `i + 1`'s is `[i]`): whose reports are taken (design 19, §2). Empty for a
    /// job it does not know (yet).
    pub async fn attempt_nodes(&self, job_id: u64) -> Result<Vec<u64>, StoreError> {
        let row = sqlx::query("SELECT body FROM jobs WHERE job_id = $1")
            .bind(bigint(job_id)?)
            .fetch_optional(self.pool())
            .await?;
        let Some(row) = row else {
            return Ok(Vec::new());
        };
        let body: String = row.get(0);
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Attempts {
            #[serde(default)]
            attempt_rows: Vec<Held>,
        }
        #[derive(serde::Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Held {
            attempt: u64,
            node_id: u64,
        }
        let mut attempts: Attempts = serde_json::from_str(&body)?;
        attempts.attempt_rows.sort_by_key(|held| held.attempt);
        Ok(attempts
            .attempt_rows
            .iter()
            .map(|held| held.node_id)
            .collect())
    }

    /// Writes a batch of reports (with their stream sequences) and the new checkpoint in
    /// one transaction, then trims the logs of the jobs it touched.
    pub async fn apply_reports(&self, batch: &[(u64, Report)], seq: u64) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        // The jobs whose documents the batch changes (their progress, their completions).
        let documents = batch.iter().filter_map(|(_, report)| match report {
            Report::Progress(_) | Report::Done(_) => Some(report.job_id()),
            Report::Log(_) => None,
        });
        if !claim(&mut tx, Checkpoint::Reports, seq).await? {
            // Another projector sharing the database stored this batch (committed: the
            // claim waited for it).
            tx.rollback().await?;
            self.documents.forget(documents);
            return Ok(());
        }
        let mut logged = BTreeSet::new();
        let mut sampled = BTreeSet::new();
        for (stream_seq, report) in batch {
            match report {
                Report::Progress(update) => {
                    let body = serde_json::to_string(update)?;
                    sqlx::query(
                        "INSERT INTO progress (job_id, body, at_ms) VALUES ($1, $2, $3) \
                         ON CONFLICT (job_id) DO UPDATE SET body = $2, at_ms = $3",
                    )
                    .bind(bigint(update.job_id)?)
                    .bind(&body)
                    .bind(bigint(update.at_ms)?)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO progress_samples (job_id, stream_seq, at_ms, gpu_utilization, \
                         body) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id, stream_seq) DO NOTHING",
                    )
                    .bind(bigint(update.job_id)?)
                    .bind(bigint(*stream_seq)?)
                    .bind(bigint(update.at_ms)?)
                    .bind(update.gpu_utilization)
                    .bind(body)
                    .execute(&mut *tx)
                    .await?;
                    sampled.insert(bigint(update.job_id)?);
                }
                Report::Log(line) => {
                    let stream = match line.stream {
                        jobs::LogStream::Stdout => "stdout",
                        jobs::LogStream::Stderr => "stderr",
                    };
                    sqlx::query(
                        "INSERT INTO logs (job_id, stream_seq, attempt, stream, line, at_ms) \
                         VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (job_id, stream_seq) DO NOTHING",
                    )
                    .bind(bigint(line.job_id)?)
                    .bind(bigint(*stream_seq)?)
                    .bind(i64::from(line.attempt))
                    .bind(stream)
                    .bind(&line.line)
                    .bind(bigint(line.at_ms)?)
                    .execute(&mut *tx)
                    .await?;
                    logged.insert(bigint(line.job_id)?);
                }
                Report::Done(report) => {
                    sqlx::query(
                        "INSERT INTO completions (job_id, attempt, body) VALUES ($1, $2, $3) \
                         ON CONFLICT (job_id, attempt) DO UPDATE SET body = $3",
                    )
                    .bind(bigint(report.job_id)?)
                    .bind(i64::from(report.attempt))
                    .bind(serde_json::to_string(report)?)
                    .execute(&mut *tx)
                    .await?;
                }
            }
        }
        for job in logged {
            sqlx::query(
                "DELETE FROM logs WHERE job_id = $1 AND stream_seq <= (SELECT stream_seq FROM logs \
                 WHERE job_id = $1 ORDER BY stream_seq DESC LIMIT 1 OFFSET $2)",
            )
            .bind(job)
            .bind(LOG_LINES_KEPT)
            .execute(&mut *tx)
            .await?;
        }
        for job in sampled {
            sqlx::query(
                "DELETE FROM progress_samples WHERE job_id = $1 AND stream_seq <= (SELECT \
                 stream_seq FROM progress_samples WHERE job_id = $1 ORDER BY stream_seq DESC \
                 LIMIT 1 OFFSET $2)",
            )
            .bind(job)
            .bind(PROGRESS_SAMPLES_KEPT)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        self.documents.forget(documents);
        Ok(())
    }

    pub async fn reports_checkpoint(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT stream_seq FROM reports_checkpoint WHERE id = 1")
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map(|r| r.unsigned(0)).transpose()?.unwrap_or(0))
    }

    /// The latest progress of a job.
    pub async fn progress(&self, job_id: u64) -> Result<Option<ProgressUpdate>, StoreError> {
        let row = sqlx::query("SELECT body FROM progress WHERE job_id = $1")
            .bind(bigint(job_id)?)
            .fetch_optional(self.pool())
            .await?;
        body(row)
    }

    /// The progress updates of a job, oldest first (the newest `limit`).
    pub async fn progress_history(
        &self,
        job_id: u64,
        limit: u32,
    ) -> Result<Vec<ProgressUpdate>, StoreError> {
        let rows = sqlx::query(
            "SELECT body FROM progress_samples WHERE job_id = $1 ORDER BY stream_seq DESC LIMIT $2",
        )
        .bind(bigint(job_id)?)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        let mut updates: Vec<ProgressUpdate> = bodies(&rows)?;
        updates.reverse();
        Ok(updates)
    }

    /// The completion reports of a job, by attempt.
    pub async fn completions(&self, job_id: u64) -> Result<Vec<CompletionReport>, StoreError> {
        let rows = sqlx::query("SELECT body FROM completions WHERE job_id = $1 ORDER BY attempt")
            .bind(bigint(job_id)?)
            .fetch_all(self.pool())
            .await?;
        bodies(&rows)
    }

    /// The last `tail` log lines of a job after stream sequence `after`, oldest first,
    /// with their stream sequences.
    pub async fn logs(
        &self,
        job_id: u64,
        after: u64,
        tail: u32,
    ) -> Result<Vec<(u64, LogLine)>, StoreError> {
        let rows = sqlx::query(
            "SELECT attempt, stream, line, at_ms, stream_seq FROM logs WHERE job_id = $1 \
             AND stream_seq > $2 ORDER BY stream_seq DESC LIMIT $3",
        )
        .bind(bigint(job_id)?)
        .bind(bigint(after)?)
        .bind(i64::from(tail))
        .fetch_all(self.pool())
        .await?;
        let mut lines = rows
            .iter()
            .map(|r| {
                let line = LogLine {
                    v: jobs::JOBS_VERSION,
                    job_id,
                    attempt: u8::try_from(r.get::<i64, _>(0)).unwrap_or(u8::MAX),
                    stream: if r.get::<String, _>(1) == "stderr" {
                        jobs::LogStream::Stderr
                    } else {
                        jobs::LogStream::Stdout
                    },
                    line: r.get(2),
                    at_ms: r.unsigned(3)?,
                };
                Ok((r.unsigned(4)?, line))
            })
            .collect::<Result<Vec<(u64, LogLine)>, StoreError>>()?;
        lines.reverse();
        Ok(lines)
    }
}
