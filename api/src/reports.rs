//! Follows what workers publish — progress, log lines, completion reports (stream
//! `GANTRY_JOBS_<chain>`) — into the store, in batches written with their checkpoint in
//! one transaction (`Store::apply_reports`). Logs keep the newest
//! [`crate::store::LOG_LINES_KEPT`] lines per job.

use gantry_protocol::names;
use std::time::Duration;

use async_nats::jetstream;
use futures::StreamExt;
use gantry_runtime::nats::NatsError;

use tokio_util::sync::CancellationToken;

use crate::live::{Live, LiveEvent};
use crate::store::Store;
pub use crate::store::{LOG_LINES_KEPT, PROGRESS_SAMPLES_KEPT};

/// Messages written per transaction at most.
const BATCH: usize = 512;

pub use gantry_protocol::jobs::JobReport as Report;

/// Follows the jobs stream of `chain_id` into `store` until `shutdown`. Waits for the
/// stream to exist (a worker creates it).
/// `checkpoint` is told each stored stream sequence.
pub async fn run(
    js: jetstream::Context,
    chain_id: u64,
    store: Store,
    checkpoint: tokio::sync::watch::Sender<u64>,
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
    loop {
        // Wait for one message, then take what else is already there, up to a batch.
        let first = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            message = messages.next() => message,
        };
        let mut batch = Vec::new();
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
                    if let Some(report) = Report::decode(message.subject.as_str(), &message.payload)
                    {
                        batch.push((seq, report));
                    }
                }
                Some(Err(e)) => tracing::warn!(error = %e, "jobs stream"),
                None => return Err(ProjectError::Ended("jobs")),
            }
            if batch.len() >= BATCH {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(5), messages.next()).await {
                Ok(message) => next = message,
                Err(_) => break,
            }
        }
        if last > 0 {
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
