//! The workers' reports in SQL: progress samples, log lines and completion reports, with
//! the jobs stream's checkpoint.

use std::collections::BTreeSet;

use gantry_protocol::jobs::{self, CompletionReport, JobReport as Report, LogLine, ProgressUpdate};
use sqlx::Row;

use super::{Checkpoint, Store, StoreError, claim};

/// Log lines kept per job.
pub const LOG_LINES_KEPT: i64 = 10_000;
/// Progress updates kept per job (the charts' history).
pub const PROGRESS_SAMPLES_KEPT: i64 = 2_000;

impl Store {
    /// Writes a batch of reports (with their stream sequences) and the new checkpoint in
    /// one transaction, then trims the logs of the jobs it touched.
    pub async fn apply_reports(&self, batch: &[(u64, Report)], seq: u64) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        if !claim(&mut tx, Checkpoint::Reports, seq).await? {
            // Another projector sharing the database stored this batch.
            tx.rollback().await?;
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
                    .bind(update.job_id as i64)
                    .bind(&body)
                    .bind(update.at_ms as i64)
                    .execute(&mut *tx)
                    .await?;
                    sqlx::query(
                        "INSERT INTO progress_samples (job_id, stream_seq, at_ms, gpu_utilization, \
                         body) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (job_id, stream_seq) DO NOTHING",
                    )
                    .bind(update.job_id as i64)
                    .bind(*stream_seq as i64)
                    .bind(update.at_ms as i64)
                    .bind(update.gpu_utilization)
                    .bind(body)
                    .execute(&mut *tx)
                    .await?;
                    sampled.insert(update.job_id as i64);
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
                    .bind(line.job_id as i64)
                    .bind(*stream_seq as i64)
                    .bind(i64::from(line.attempt))
                    .bind(stream)
                    .bind(&line.line)
                    .bind(line.at_ms as i64)
                    .execute(&mut *tx)
                    .await?;
                    logged.insert(line.job_id as i64);
                }
                Report::Done(report) => {
                    sqlx::query(
                        "INSERT INTO completions (job_id, attempt, body) VALUES ($1, $2, $3) \
                         ON CONFLICT (job_id, attempt) DO UPDATE SET body = $3",
                    )
                    .bind(report.job_id as i64)
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
        Ok(())
    }

    pub async fn reports_checkpoint(&self) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT stream_seq FROM reports_checkpoint WHERE id = 1")
            .fetch_optional(self.pool())
            .await?;
        Ok(row.map_or(0, |r| r.get::<i64, _>(0) as u64))
    }

    /// The latest progress of a job.
    pub async fn progress(&self, job_id: u64) -> Result<Option<ProgressUpdate>, StoreError> {
        let row = sqlx::query("SELECT body FROM progress WHERE job_id = $1")
            .bind(job_id as i64)
            .fetch_optional(self.pool())
            .await?;
        Ok(match row {
            Some(row) => Some(serde_json::from_str(&row.get::<String, _>(0))?),
            None => None,
        })
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
        .bind(job_id as i64)
        .bind(i64::from(limit))
        .fetch_all(self.pool())
        .await?;
        let mut updates = rows
            .iter()
            .map(|r| Ok(serde_json::from_str(&r.get::<String, _>(0))?))
            .collect::<Result<Vec<ProgressUpdate>, StoreError>>()?;
        updates.reverse();
        Ok(updates)
    }

    /// The completion reports of a job, by attempt.
    pub async fn completions(&self, job_id: u64) -> Result<Vec<CompletionReport>, StoreError> {
        let rows = sqlx::query("SELECT body FROM completions WHERE job_id = $1 ORDER BY attempt")
            .bind(job_id as i64)
            .fetch_all(self.pool())
            .await?;
        rows.iter()
            .map(|r| Ok(serde_json::from_str(&r.get::<String, _>(0))?))
            .collect()
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
        .bind(job_id as i64)
        .bind(after as i64)
        .bind(i64::from(tail))
        .fetch_all(self.pool())
        .await?;
        let mut lines: Vec<(u64, LogLine)> = rows
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
                    at_ms: r.get::<i64, _>(3) as u64,
                };
                (r.get::<i64, _>(4) as u64, line)
            })
            .collect();
        lines.reverse();
        Ok(lines)
    }
}
