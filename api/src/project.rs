//! Follows the chain stream from the store's checkpoint and writes it into the store:
//! a block's events are buffered until its commit arrives, then applied with the new
//! checkpoint in one transaction; a retraction drops buffered events and undoes the
//! orphaned blocks. The checkpoint only ever names a commit, a retraction or a finality
//! message, so after a crash the events of an uncommitted block are simply read again.

use std::time::Duration;

use async_nats::jetstream;
use gantry_protocol::api::NodeView;
use gantry_protocol::chain_stream::{AssembleError, Assembled, BlockAssembler, DecodeError};
use gantry_runtime::chain_stream::{ChainStreamReader, ReadError};
use gantry_runtime::nats::NatsError;
use tokio_util::sync::CancellationToken;

use crate::live::{BlockInfo, Live, LiveEvent};
use crate::store::{Store, StoreError};

/// Why the projection stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("the {0} stream consumer ended")]
    Ended(&'static str),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("chain stream message {seq}")]
    Decode {
        seq: u64,
        #[source]
        source: DecodeError,
    },
    #[error("chain stream message {seq}")]
    Assemble {
        seq: u64,
        #[source]
        source: AssembleError,
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

/// Projects the chain stream of `chain_id` into `store` until `shutdown`.
pub async fn run(
    js: jetstream::Context,
    chain_id: u64,
    store: Store,
    progress: tokio::sync::watch::Sender<Progress>,
    live: Live,
    shutdown: CancellationToken,
) -> Result<(), ProjectError> {
    let start = store.checkpoint().await?;
    let last_block = store.last_block().await?;
    progress.send_modify(|p| {
        p.checkpoint = start;
        p.block = last_block;
    });
    let Some(mut reader) = ChainStreamReader::open(&js, chain_id, start, &shutdown).await? else {
        return Ok(());
    };
    tracing::info!(chain_id, from = start + 1, "projecting the chain stream");
    let mut assembler = BlockAssembler::new();
    loop {
        let read = tokio::select! {
            () = shutdown.cancelled() => return Ok(()),
            read = reader.next() => read,
        };
        let (seq, decoded) = match read {
            Some(Ok(message)) => message,
            Some(Err(ReadError::Nats(e))) => {
                tracing::warn!(error = %e, "chain stream");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Some(Err(ReadError::Decode { sequence, source })) => {
                return Err(ProjectError::Decode {
                    seq: sequence,
                    source,
                });
            }
            None => return Err(ProjectError::Ended("chain")),
        };
        let pushed = assembler
            .push(decoded)
            .map_err(|source| ProjectError::Assemble { seq, source })?;
        match pushed {
            Assembled::Held => {}
            Assembled::Block { commit, events } => {
                let applied = store.apply_block(&events, &commit, seq).await?;
                crate::metrics::events_projected(events.len());
                progress.send_modify(|p| {
                    p.checkpoint = seq;
                    p.block = commit.block_number;
                });
                for row in applied.jobs.into_values() {
                    live.send(LiveEvent::Job(Box::new(row)));
                }
                let now = crate::model::now(commit.block_timestamp);
                for row in applied.nodes.into_values() {
                    live.send(LiveEvent::Node(Box::new(NodeView::new(row, now))));
                }
                live.send(LiveEvent::Block(BlockInfo {
                    number: commit.block_number,
                    timestamp: commit.block_timestamp,
                }));
            }
            Assembled::Retracted(retraction) => {
                store.retract(&retraction, seq).await?;
                crate::metrics::retractions();
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
