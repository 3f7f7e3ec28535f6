//! Follows the chain stream from the store's checkpoint and writes it into the store:
//! a block's events are buffered until its commit arrives, then applied with the new
//! checkpoint in one transaction; a retraction drops buffered events and undoes the
//! orphaned blocks. The checkpoint only ever names a commit, a retraction or a finality
//! message, so after a crash the events of an uncommitted block are simply read again.

use std::time::Duration;

use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use gantry_protocol::api::NodeView;
use gantry_protocol::chain_stream::{Assembled, BlockAssembler, ChainMessage};
use gantry_protocol::names;
use tokio_util::sync::CancellationToken;

use crate::live::{BlockInfo, Live, LiveEvent};
use crate::store::{Store, StoreError};

/// Why the projection stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error("nats: {0}")]
    Nats(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("message {seq} on {subject}: {reason}")]
    Bad {
        seq: u64,
        subject: String,
        reason: String,
    },
}

/// What the projection reports as it goes (for readiness and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Stream sequence stored.
    pub checkpoint: u64,
    /// Last block applied.
    pub block: u64,
}

/// How often to look for a stream that is not there yet.
const STREAM_POLL: Duration = Duration::from_secs(1);

/// The stream `name` once it exists (its writer creates it, and may start after us);
/// `None` on shutdown.
pub(crate) async fn stream_when_there(
    js: &jetstream::Context,
    name: &str,
    shutdown: &CancellationToken,
) -> Option<jetstream::stream::Stream> {
    let mut logged = false;
    loop {
        match js.get_stream(name).await {
            Ok(stream) => return Some(stream),
            Err(error) => {
                if !logged {
                    tracing::info!(stream = name, %error, "waiting for the stream");
                    logged = true;
                }
                tokio::select! {
                    () = shutdown.cancelled() => return None,
                    () = tokio::time::sleep(STREAM_POLL) => {}
                }
            }
        }
    }
}

/// The messages of `stream` after sequence `checkpoint`, in order (an ordered consumer:
/// nothing to clean up, recreated by the client on gaps).
pub(crate) async fn ordered_after(
    stream: &jetstream::stream::Stream,
    checkpoint: u64,
) -> Result<consumer::pull::Ordered, ProjectError> {
    stream
        .create_consumer(consumer::pull::OrderedConfig {
            deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                start_sequence: checkpoint + 1,
            },
            ..Default::default()
        })
        .await
        .map_err(|e| ProjectError::Nats(e.to_string()))?
        .messages()
        .await
        .map_err(|e| ProjectError::Nats(e.to_string()))
}

/// Projects the chain stream of `chain_id` into `store` until `shutdown`.
pub async fn run(
    js: jetstream::Context,
    chain_id: u64,
    store: Store,
    progress: tokio::sync::watch::Sender<Progress>,
    live: Live,
    shutdown: CancellationToken,
) -> Result<(), ProjectError> {
    let Some(stream) = stream_when_there(&js, &names::stream_name(chain_id), &shutdown).await
    else {
        return Ok(());
    };
    let start = store.checkpoint().await?;
    let last_block = store.last_block().await?;
    progress.send_modify(|p| {
        p.checkpoint = start;
        p.block = last_block;
    });
    let mut messages = ordered_after(&stream, start).await?;
    tracing::info!(chain_id, from = start + 1, "projecting the chain stream");
    let mut assembler = BlockAssembler::new();
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            message = messages.next() => message,
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "chain stream");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            None => return Err(ProjectError::Nats("the chain stream consumer ended".into())),
        };
        let seq = message
            .info()
            .map_err(|e| ProjectError::Nats(e.to_string()))?
            .stream_sequence;
        let subject = message.subject.as_str();
        let bad = |reason: String| ProjectError::Bad {
            seq,
            subject: subject.to_owned(),
            reason,
        };
        let decoded = ChainMessage::decode(chain_id, subject, &message.payload)
            .map_err(|e| bad(format!("{e}: {}", error_source(&e))))?;
        match assembler.push(decoded).map_err(|e| bad(e.to_string()))? {
            Assembled::Held => {}
            Assembled::Block { commit, events } => {
                let applied = store.apply_block(&events, &commit, seq).await?;
                metrics::counter!("gantry_api_events_projected_total")
                    .increment(events.len() as u64);
                progress.send_modify(|p| {
                    p.checkpoint = seq;
                    p.block = commit.block_number;
                });
                for row in applied.jobs.into_values() {
                    live.send(LiveEvent::Job(row));
                }
                let now = crate::model::now(commit.block_timestamp);
                for row in applied.nodes.into_values() {
                    live.send(LiveEvent::Node(NodeView::new(row, now)));
                }
                live.send(LiveEvent::Block(BlockInfo {
                    number: commit.block_number,
                    timestamp: commit.block_timestamp,
                }));
            }
            Assembled::Retracted(retraction) => {
                store.retract(&retraction, seq).await?;
                metrics::counter!("gantry_api_retractions_total").increment(1);
                progress.send_modify(|p| p.checkpoint = seq);
                live.send(LiveEvent::Reorg {
                    common_ancestor: retraction.common_ancestor,
                });
            }
            Assembled::Final(_) => {
                // Only with nothing buffered: the checkpoint must not pass unapplied events.
                if assembler.is_idle() {
                    store.advance(seq).await?;
                    progress.send_modify(|p| p.checkpoint = seq);
                }
            }
        }
    }
}

fn error_source(error: &dyn std::error::Error) -> String {
    error.source().map_or_else(String::new, ToString::to_string)
}
