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
            // Every job a report read names, taken here or not: another projector sharing
            // the database may have taken one this one drops (its gate read the attempts
            // at another time), and its document changed.
            let named: Vec<u64> = read
                .iter()
                .filter(|(_, _, report)| !matches!(report, Report::Log(_)))
                .map(|(_, _, report)| report.job_id())
                .collect();
            let batch = gate.admit(read, &shutdown).await?;
            store.apply_reports(&batch, last).await?;
            store.forget_documents(named);
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

/// Whether a report of node `node` is heard, the job's attempts being `nodes` (attempt
/// `i + 1` held by `nodes[i]`): a completion report about an attempt the node held;
/// progress and log lines about the job's current attempt, from its node only (an earlier
/// holder may not write over the running attempt's progress or push its logs out).
pub fn heard(nodes: &[u64], node: u64, report: &Report) -> bool {
    let attempt = usize::from(report.attempt());
    let holder = attempt.checked_sub(1).and_then(|i| nodes.get(i));
    match report {
        Report::Done(_) => holder == Some(&node),
        Report::Progress(_) | Report::Log(_) => holder == Some(&node) && attempt == nodes.len(),
    }
}

/// Whose reports the projection takes ([`heard`]).
struct Gate {
    js: jetstream::Context,
    chain_stream: String,
    store: Store,
    chain: tokio::sync::watch::Receiver<crate::project::Progress>,
}

impl Gate {
    /// The reports of `read` (stream sequence, subject's node, report) that are heard, in
    /// order; the rest are dropped and counted. The jobs' attempts are read once per batch
    /// (none kept between batches: a retraction may give an attempt to another node).
    async fn admit(
        &mut self,
        read: Vec<(u64, u64, Report)>,
        shutdown: &CancellationToken,
    ) -> Result<Vec<(u64, Report)>, crate::project::ProjectError> {
        let mut attempts: HashMap<u64, Vec<u64>> = HashMap::new();
        self.read_attempts(&read, &mut attempts, |_| true).await?;
        let unplaced: Vec<u64> = read
            .iter()
            .filter(|(_, node, report)| !heard(&attempts[&report.job_id()], *node, report))
            .map(|(_, _, report)| report.job_id())
            .collect();
        if !unplaced.is_empty() {
            self.catch_up(shutdown).await;
            self.read_attempts(&read, &mut attempts, |job| unplaced.contains(&job))
                .await?;
        }
        let mut batch = Vec::with_capacity(read.len());
        for (seq, node, report) in read {
            if heard(&attempts[&report.job_id()], node, &report) {
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

    /// Reads the attempts of the jobs of `read` that `again` picks into `attempts`.
    async fn read_attempts(
        &self,
        read: &[(u64, u64, Report)],
        attempts: &mut HashMap<u64, Vec<u64>>,
        again: impl Fn(u64) -> bool,
    ) -> Result<(), crate::project::ProjectError> {
        let mut done = std::collections::HashSet::new();
        for (_, _, report) in read {
            let job = report.job_id();
            if (attempts.contains_key(&job) && !again(job)) || !done.insert(job) {
                continue;
            }
            attempts.insert(job, self.store.attempt_nodes(job).await?);
        }
        Ok(())
    }

    /// Waits until the chain projection holds the chain stream as far as it reaches now
    /// (every assignment a worker could have seen): for as long as the projection moves (a
    /// rebuild reads a long history), [`CATCH_UP`] at most without a move; if the stream's
    /// end cannot be read, [`CATCH_UP`].
    async fn catch_up(&mut self, shutdown: &CancellationToken) {
        let end = match self.js.get_stream(&self.chain_stream).await {
            Ok(mut stream) => stream
                .info()
                .await
                .map(|info| info.state.last_sequence)
                .ok(),
            Err(_) => None,
        };
        let Some(end) = end else {
            tracing::warn!("the chain stream's end unread: reports wait for the projection");
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = tokio::time::sleep(CATCH_UP) => {}
            }
            return;
        };
        let holds = |p: &crate::project::Progress| p.checkpoint >= end || (p.read >= end && p.idle);
        loop {
            let before = self.chain.borrow().read;
            let held = tokio::select! {
                () = shutdown.cancelled() => return,
                waited = tokio::time::timeout(CATCH_UP, self.chain.wait_for(holds)) => waited.is_ok(),
            };
            match held {
                true => return,
                false if self.chain.borrow().read == before => {
                    tracing::warn!(end, "the chain projection does not move: reports go on");
                    return;
                }
                false => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gantry_protocol::jobs::{LogLine, LogStream};

    fn log(attempt: u8) -> Report {
        Report::Log(LogLine {
            v: 1,
            job_id: 7,
            attempt,
            stream: LogStream::Stdout,
            line: "x".into(),
            at_ms: 1,
        })
    }

    #[test]
    fn only_the_current_attempts_node_is_heard_on_progress_and_logs() {
        // Node 3 held attempt 1, node 4 holds attempt 2.
        let nodes = [3, 4];
        assert!(heard(&nodes, 4, &log(2)));
        assert!(
            !heard(&nodes, 3, &log(1)),
            "an earlier holder on the running job"
        );
        assert!(!heard(&nodes, 3, &log(2)), "another node's attempt");
        assert!(!heard(&nodes, 5, &log(3)), "an attempt not begun");
        assert!(!heard(&[], 3, &log(1)), "a job not known");
        assert!(!heard(&nodes, 3, &log(0)));
    }
}
