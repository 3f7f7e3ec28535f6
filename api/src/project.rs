//! Follows the chain stream from the store's checkpoint and writes it into the store:
//! a block's events are buffered until its commit arrives, then applied with the new
//! checkpoint in one transaction; a retraction drops buffered events and undoes the
//! orphaned blocks. The checkpoint only ever names a commit, a retraction or a finality
//! message, so after a crash the events of an uncommitted block are simply read again.
//!
//! A damaged stream ends nothing: a message that does not decode is skipped, and a block
//! that did not arrive whole stalls the projection (`gantry_protocol::chain_stream`): the
//! store keeps the last good block and its checkpoint (so a restart reads the damaged
//! block again rather than past it), [`Progress::stalled`] names the missing block
//! (`/readyz` answers 503), the runtime's `StreamReport` logs and counts it, and the
//! projection goes on by itself once the block is published again whole.

use std::time::Duration;

use async_nats::jetstream;
use gantry_protocol::api::NodeView;
use gantry_protocol::chain_stream::{Assembled, BlockAssembler};
use gantry_protocol::envelope::{BlockCommit, EventEnvelope};
use gantry_protocol::names;
use gantry_runtime::chain_stream::{
    AtSequence, AtSequenceError, ChainStreamReader, ReadError, StreamReport, at_sequence,
};
use gantry_runtime::nats::{NatsError, wait_for_stream};
use tokio_util::sync::CancellationToken;

use crate::live::{BlockInfo, Live, LiveEvent};
use crate::store::{CommittedBlock, Store, StoreError};

/// Why the projection stopped.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("the {0} stream consumer ended")]
    Ended(&'static str),
    #[error(
        "the chain stream's message {sequence}, where the stored projection stands, does not read"
    )]
    Unreadable {
        sequence: u64,
        #[source]
        source: gantry_protocol::chain_stream::DecodeError,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What the projection reports as it goes (for readiness and tests).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Stream sequence stored.
    pub checkpoint: u64,
    /// Stream sequence read, applied or not (past the checkpoint while events wait for
    /// their commit, or while the projection is stalled).
    pub read: u64,
    /// Whether everything read is applied (no events wait for their commit, no block is
    /// missing): the store then holds the stream up to `read`, checkpointed or not (a
    /// finality message past a quiet head moves no checkpoint).
    pub idle: bool,
    /// Last block applied.
    pub block: u64,
    /// While the stream is damaged: the block the projection waits for (it applies
    /// nothing newer until that block arrives whole).
    pub stalled: Option<u64>,
}

/// The stored projection is this service's snapshot of the stream: before reading on from
/// its checkpoint, its newest block must be the stream's commit at the sequence it was
/// applied from. One that is not (the stream was made again, the database is another
/// network's, a block's hash changed) is emptied and the stream projected from its start,
/// never read on from. `false` when `shutdown` fired while waiting for the stream.
async fn check_against_stream(
    js: &jetstream::Context,
    chain_id: u64,
    store: &Store,
    shutdown: &CancellationToken,
) -> Result<bool, ProjectError> {
    let Some((number, hash, seq)) = store.newest_block().await? else {
        return Ok(true);
    };
    let name = names::stream_name(chain_id);
    let Some(stream) = wait_for_stream(js, &name, shutdown, |_| {}).await else {
        return Ok(false);
    };
    // Only a stream that answers, and answers something else than that commit, empties
    // the projection: an error (NATS restarting, a leader election) or a message this
    // build cannot read stops the start instead (the service restarts and checks again).
    let found = match at_sequence(&stream, chain_id, seq).await {
        Ok(AtSequence::Commit(commit))
            if commit.block_number == number && commit.block_hash == hash =>
        {
            return Ok(true);
        }
        Ok(AtSequence::Commit(commit)) => format!(
            "the commit of block {} ({})",
            commit.block_number, commit.block_hash
        ),
        Ok(AtSequence::Other) => "not a commit".to_string(),
        Ok(AtSequence::Missing) => "no message".to_string(),
        Err(AtSequenceError::Nats(e)) => return Err(e.into()),
        Err(AtSequenceError::Decode { sequence, source }) => {
            return Err(ProjectError::Unreadable { sequence, source });
        }
    };
    tracing::error!(
        block = number,
        %hash,
        sequence = seq,
        %found,
        "the stored projection is not of this chain stream: emptying it and projecting the stream from its start"
    );
    crate::metrics::projection_emptied();
    store.empty_projection().await?;
    Ok(true)
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
    if !check_against_stream(&js, chain_id, &store, &shutdown).await? {
        return Ok(());
    }
    let start = store.checkpoint().await?;
    let last_block = store.last_block().await?;
    // A block another projector committed between the two reads is not applied (nor
    // read back) here: what the router kept before it is forgotten.
    store.forget_all_documents();
    progress.send_modify(|p| {
        p.checkpoint = start;
        p.read = start;
        p.block = last_block;
    });
    let Some(mut reader) = ChainStreamReader::open(&js, chain_id, start, &shutdown).await? else {
        return Ok(());
    };
    tracing::info!(chain_id, from = start + 1, "projecting the chain stream");
    // A block at or below the stored one is not applied twice; 0 is no block yet.
    let mut assembler = if last_block > 0 {
        BlockAssembler::resuming_after(last_block)
    } else {
        BlockAssembler::new()
    };
    let mut report = StreamReport::new("api");
    // Blocks read while more messages wait (catching up) are applied together, in one
    // transaction; once no message waits (live), each block as it comes.
    let mut pending: Vec<(Vec<EventEnvelope>, BlockCommit, u64)> = Vec::new();
    loop {
        let read = match reader.next_ready() {
            Some(read) => Some(read),
            None => {
                if !pending.is_empty() {
                    apply(&store, &mut pending, &progress, &live).await?;
                    progress.send_modify(|p| p.idle = assembler.is_idle());
                }
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    read = reader.next() => read,
                }
            }
        };
        let (seq, decoded) = match read {
            Some(Ok(message)) => message,
            Some(Err(ReadError::Nats(e))) => {
                apply(&store, &mut pending, &progress, &live).await?;
                tracing::warn!(error = %e, "chain stream");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            Some(Err(ReadError::Decode { sequence, source })) => {
                report.skipped(sequence, &source);
                progress.send_modify(|p| p.read = sequence);
                continue;
            }
            None => return Err(ProjectError::Ended("chain")),
        };
        let pushed = match assembler.push(decoded) {
            Ok(pushed) => pushed,
            Err(refused) => {
                apply(&store, &mut pending, &progress, &live).await?;
                report.refused(seq, &refused, assembler.stall());
                progress.send_modify(|p| {
                    p.read = seq;
                    p.stalled = assembler.stall().map(|s| s.missing);
                });
                continue;
            }
        };
        match pushed {
            Assembled::Held => {}
            Assembled::Block { commit, events } => {
                pending.push((events, commit, seq));
                let events: usize = pending.iter().map(|(events, _, _)| events.len()).sum();
                if pending.len() >= MAX_BATCH_BLOCKS || events >= MAX_BATCH_EVENTS {
                    apply(&store, &mut pending, &progress, &live).await?;
                }
            }
            Assembled::Retracted(retraction) => {
                apply(&store, &mut pending, &progress, &live).await?;
                store.retract(&retraction, seq).await?;
                crate::metrics::retractions();
                progress.send_modify(|p| p.checkpoint = seq);
                live.send(LiveEvent::Reorg {
                    common_ancestor: retraction.common_ancestor,
                });
            }
            Assembled::Final(_) => {
                apply(&store, &mut pending, &progress, &live).await?;
                // Only with nothing buffered or missing: the checkpoint must not pass
                // unapplied events, nor a damaged block (a restart would read past it).
                if assembler.is_idle() {
                    store.advance(seq).await?;
                    progress.send_modify(|p| p.checkpoint = seq);
                }
            }
        }
        report.settled(seq, assembler.stall());
        progress.send_modify(|p| {
            p.read = seq;
            p.idle = assembler.is_idle() && pending.is_empty();
            p.stalled = assembler.stall().map(|s| s.missing);
        });
    }
}

/// Blocks applied in one transaction at most while catching up, and events.
pub const MAX_BATCH_BLOCKS: usize = 256;
pub const MAX_BATCH_EVENTS: usize = 4_096;

/// Applies the blocks read (in one transaction), then tells the live feed what each
/// changed, block by block.
async fn apply(
    store: &Store,
    pending: &mut Vec<(Vec<EventEnvelope>, BlockCommit, u64)>,
    progress: &tokio::sync::watch::Sender<Progress>,
    live: &Live,
) -> Result<(), ProjectError> {
    if pending.is_empty() {
        return Ok(());
    }
    let blocks: Vec<CommittedBlock<'_>> = pending
        .iter()
        .map(|(events, commit, seq)| CommittedBlock {
            events,
            commit,
            seq: *seq,
        })
        .collect();
    let applied = store.apply_blocks(&blocks).await?;
    let events: usize = pending.iter().map(|(events, _, _)| events.len()).sum();
    crate::metrics::events_projected(events);
    let (_, last, seq) = pending.last().expect("not empty");
    progress.send_modify(|p| {
        p.checkpoint = *seq;
        p.block = last.block_number;
    });
    for (applied, (_, commit, _)) in applied.into_iter().zip(pending.iter()) {
        for row in applied.jobs.into_values() {
            live.send(LiveEvent::Job(Box::new(row)));
        }
        let now = crate::model::now(commit.block_timestamp);
        let min_stake = match applied.nodes.is_empty() {
            true => None,
            false => store.min_stake().await?,
        };
        for row in applied.nodes.into_values() {
            let view = NodeView::new(row, now, min_stake.as_deref());
            live.send(LiveEvent::Node(Box::new(view)));
        }
        live.send(LiveEvent::Block(BlockInfo {
            number: commit.block_number,
            timestamp: commit.block_timestamp,
        }));
    }
    pending.clear();
    Ok(())
}
