//! Follows what workers publish — progress, log lines, completion reports (stream
//! `GANTRY_JOBS_<chain>`) — into the store, in batches written with their checkpoint in
//! one transaction (`Store::apply_reports`). Logs keep the newest
//! [`crate::store::LOG_LINES_KEPT`] lines per job.
//!
//! Only the node that holds (or held) an attempt reports on it (design 19, §2): a report
//! comes on its node's subject (the permissions hold a worker to its own), and is taken
//! only if the chain projection says that node was assigned that attempt of that job.
//! A worker reports only after the chain stream brought it the assignment, so a report
//! the projection cannot place yet waits until the projection has stored the chain
//! stream as far as it reached when the report was read; then it is taken or dropped
//! (`gantry_api_reports_dropped_total{reason}`).

use gantry_protocol::names;
use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use gantry_runtime::nats::NatsError;
use std::collections::HashMap;

use tokio_util::sync::CancellationToken;

use crate::live::{Live, LiveEvent};
use crate::store::Store;
pub use crate::store::{LOG_LINES_KEPT, PROGRESS_SAMPLES_KEPT};

/// Messages written per transaction at most.
const BATCH: usize = 512;
/// A report the chain projection cannot place waits this long at most for it to catch up
/// (a stalled projection must not stall the reports for good).
const CATCH_UP: Duration = Duration::from_secs(30);
/// Confirmed (job, attempt) → node pairs kept; forgotten all at once past this.
const HOLDERS_KEPT: usize = 100_000;

pub use gantry_protocol::jobs::JobReport as Report;

/// Follows the jobs stream of `chain_id` into `store` until `shutdown`. Waits for the
/// stream to exist (a worker creates it).
/// `checkpoint` is told each stored stream sequence; `chain` is the chain projection's
/// progress (whose attempts say whose reports to take).
pub async fn run(
    js: jetstream::Context,
    chain_id: u64,
    store: Store,
    checkpoint: tokio::sync::watch::Sender<u64>,
    chain: tokio::sync::watch::Receiver<crate::project::Progress>,
    live: Live,
    shutdown: CancellationToken,
) -> Result<(), crate::project::ProjectError> {
    use crate::project::ProjectError;
    let name = names::jobs_stream_name(chain_id);
    let Some(stream) = gantry_runtime::nats::wait_for_stream(&js, &name, &shutdown, |_| {}).await
    else {
        return Ok(());
    };
    let start = store.reports_checkpoint().await?;
    let mut messages = gantry_runtime::chain_stream::ordered_after(&stream, start).await?;
    tracing::info!(
        chain_id,
        from = start + 1,
        "projecting progress, logs and reports"
    );
    let mut gate = Gate {
        js: js.clone(),
        chain_stream: names::stream_name(chain_id),
        store: store.clone(),
        chain,
        holders: HashMap::new(),
    };
    loop {
        // Wait for one message, then take what else is already there, up to a batch.
        let first = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            message = messages.next() => message,
        };
        let mut read = Vec::new();
        let mut last = 0;
        let mut next = first;
        loop {
            match next {
                Some(Ok(message)) => {
                    let seq = message
                        .info()
                        .map_err(|e| NatsError::new("message info", e))?
                        .stream_sequence;
                    last = seq;
                    match Report::decode(message.subject.as_str(), &message.payload) {
                        Some((node, report)) => read.push((seq, node, report)),
                        None => crate::metrics::report_dropped("malformed"),
                    }
                }
                Some(Err(e)) => tracing::warn!(error = %e, "jobs stream"),
                None => return Err(ProjectError::Ended("jobs")),
            }
            if read.len() >= BATCH {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(5), messages.next()).await {
                Ok(message) => next = message,
                Err(_) => break,
            }
        }
        if last > 0 {
            let batch = gate.admit(read, &shutdown).await?;
            store.apply_reports(&batch, last).await?;
            checkpoint.send_replace(last);
            crate::metrics::reports_projected(batch.len());
            for (seq, report) in batch {
                live.send(match report {
                    Report::Progress(update) => LiveEvent::Progress(update),
                    Report::Log(line) => LiveEvent::Log { seq, line },
                    Report::Done(_) => continue,
                });
            }
        }
    }
}

/// Whose reports the projection takes: the node of the attempt each is about.
struct Gate {
    js: jetstream::Context,
    chain_stream: String,
    store: Store,
    chain: tokio::sync::watch::Receiver<crate::project::Progress>,
    /// (job, attempt) → the node the projection says holds it, as confirmed.
    holders: HashMap<(u64, u8), u64>,
}

impl Gate {
    /// The reports of `read` (stream sequence, subject's node, report) whose node holds
    /// the attempt they are about, in order; the rest are dropped and counted.
    async fn admit(
        &mut self,
        read: Vec<(u64, u64, Report)>,
        shutdown: &CancellationToken,
    ) -> Result<Vec<(u64, Report)>, crate::project::ProjectError> {
        let mut verdicts = Vec::with_capacity(read.len());
        let mut doubtful = false;
        for (_, node, report) in &read {
            let held = self.holder(report.job_id(), report.attempt()).await?;
            doubtful |= held != Some(*node);
            verdicts.push(held == Some(*node));
        }
        if doubtful {
            self.catch_up(shutdown).await?;
        }
        let mut batch = Vec::with_capacity(read.len());
        for ((seq, node, report), taken) in read.into_iter().zip(verdicts) {
            let taken =
                taken || self.holder(report.job_id(), report.attempt()).await? == Some(node);
            if taken {
                batch.push((seq, report));
            } else {
                tracing::debug!(
                    node,
                    job = report.job_id(),
                    attempt = report.attempt(),
                    "a report from a node that does not hold the attempt, dropped"
                );
                crate::metrics::report_dropped("not_the_attempts_node");
            }
        }
        Ok(batch)
    }

    /// The node the projection says holds `attempt` of `job`.
    async fn holder(
        &mut self,
        job: u64,
        attempt: u8,
    ) -> Result<Option<u64>, crate::project::ProjectError> {
        if let Some(node) = self.holders.get(&(job, attempt)) {
            return Ok(Some(*node));
        }
        let node = self.store.attempt_node(job, attempt).await?;
        if let Some(node) = node {
            if self.holders.len() >= HOLDERS_KEPT {
                self.holders.clear();
            }
            self.holders.insert((job, attempt), node);
        }
        Ok(node)
    }

    /// Waits until the chain projection has stored the chain stream as far as it reaches
    /// now (every assignment a worker could have seen), [`CATCH_UP`] at most.
    async fn catch_up(
        &mut self,
        shutdown: &CancellationToken,
    ) -> Result<(), crate::project::ProjectError> {
        let end = match self.js.get_stream(&self.chain_stream).await {
            Ok(mut stream) => match stream.info().await {
                Ok(info) => info.state.last_sequence,
                Err(e) => return Err(NatsError::new("the chain stream's info", e).into()),
            },
            Err(e) => return Err(NatsError::new("the chain stream", e).into()),
        };
        let wait = self.chain.wait_for(|progress| progress.checkpoint >= end);
        tokio::select! {
            () = shutdown.cancelled() => {}
            _ = tokio::time::timeout(CATCH_UP, wait) => {}
        }
        Ok(())
    }
}
