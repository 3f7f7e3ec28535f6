//! Following the chain into the stream: resume from the stream's tail, backfill in
//! adaptive `eth_getLogs` ranges, then block by block near the head with reorg checks.
//!
//! Fetching is pipelined with publishing: up to `Settings::prefetch` ranges (or blocks,
//! near the head) are fetched, each in its own task, while the one before is published.
//! Publishing stays one batch at a time and in chain order; what was fetched ahead is
//! used only in order, its blocks checked against the window at their turn, and dropped
//! when the follower goes back (a reorg) or the head does.

use std::collections::{BTreeMap, VecDeque};

use alloy::eips::BlockNumberOrTag;
use alloy::primitives::B256;
use alloy::rpc::types::Log;
use async_nats::HeaderMap;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use gantry_protocol::envelope::{
    BlockCommit, ENVELOPE_VERSION, EventEnvelope, FinalityWatermark, MAX_EVENT_BYTES,
    OrphanedBlock, Retraction, headers,
};
use gantry_protocol::events::{Contracts, DecodedEvent, UnreadableReason, decode};
use gantry_protocol::names;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tokio_util::task::AbortOnDropHandle;

use crate::chain::{Chain, Header};
use crate::error::{ChainError, IndexerError, StreamError};
use crate::metrics;
use crate::stream::{ChainStream, Outgoing, Publisher};
use crate::window::{BlockRef, Continuity, Window};

/// How to follow; see `Config` for each field's meaning.
#[derive(Debug, Clone)]
pub struct Settings {
    pub start_block: u64,
    pub confirmations: u64,
    pub finality: Option<BlockNumberOrTag>,
    pub reorg_window: usize,
    pub min_range: u64,
    pub max_range: u64,
    pub initial_range: u64,
    pub prefetch: usize,
    pub max_batch: usize,
    pub poll_interval: std::time::Duration,
}

/// Backfill aims for about this many logs per `eth_getLogs` call.
const TARGET_LOGS_PER_CALL: usize = 5_000;
/// Headers fetched at once during a backfill.
const HEADER_CONCURRENCY: usize = 16;

/// Follows until `cancel` fires (shutdown, or the writer lease lost) or an error. After
/// an error nothing is assumed: the caller calls again and it resumes from the stream's
/// tail. `cancel` stops it at once, even inside a step: no further batch is sent, and the
/// one in flight, if any, lands whole right after the tail it was built on or not at all.
pub async fn follow(
    chain: &Chain,
    stream: &ChainStream,
    contracts: Contracts,
    settings: &Settings,
    cancel: &CancellationToken,
) -> Result<(), IndexerError> {
    let mut follower = tokio::select! {
        biased;
        () = cancel.cancelled() => return Ok(()),
        resumed = Follower::resume(chain, stream, contracts, settings) => resumed?,
    };
    loop {
        let progressed = tokio::select! {
            biased;
            () = cancel.cancelled() => return Ok(()),
            stepped = follower.step() => stepped?,
        };
        if !progressed {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                () = tokio::time::sleep(settings.poll_interval) => {}
            }
        }
    }
}

struct Follower<'a> {
    chain: &'a Chain,
    contracts: Contracts,
    settings: &'a Settings,
    chain_id: u64,
    publisher: Publisher,
    window: Window,
    /// The next block to index.
    next: u64,
    /// Current `eth_getLogs` range, blocks.
    range: u64,
    /// A block whose first events are already in the stream (the writer stopped mid-block).
    partial: Option<(BlockRef, u64)>,
    /// Newest finality watermark published.
    finalized: Option<u64>,
    /// Backfill ranges being fetched, in order, the first starting at `next`: the one to
    /// publish next and up to `settings.prefetch` behind it.
    ranges: VecDeque<(u64, u64, AbortOnDropHandle<FetchedRange>)>,
    /// Blocks near the head being fetched, in order, the first `next`: the same, block by
    /// block.
    blocks: VecDeque<(u64, AbortOnDropHandle<FetchedBlock>)>,
    /// Closed once the fetch queued last is done with the RPC node.
    last_fetch: Option<oneshot::Receiver<()>>,
}

impl<'a> Follower<'a> {
    async fn resume(
        chain: &'a Chain,
        stream: &'a ChainStream,
        contracts: Contracts,
        settings: &'a Settings,
    ) -> Result<Self, IndexerError> {
        let tail = stream.tail().await?;
        let mut window = Window::new(settings.reorg_window);

        // The newest block the stream holds as canonical: the newest commit, unless a later
        // retraction orphaned it, in which case the retraction's common ancestor.
        let top = match (tail.last_commit, &tail.last_retraction) {
            (Some((commit, commit_seq)), Some((retraction, retraction_seq)))
                if *retraction_seq > commit_seq && commit.number > retraction.common_ancestor =>
            {
                Some(retraction.common_ancestor)
            }
            (Some((commit, _)), _) => Some(commit.number),
            (None, Some((retraction, _))) => Some(retraction.common_ancestor),
            (None, None) => None,
        };
        if let Some(top) = top {
            // Rebuild the window from the stream's commits, newest first.
            // Looks at most four windows' worth of heights: a backfill commits only
            // blocks with events, so commits can be sparse.
            let retraction = tail.last_retraction.as_ref();
            let lowest = top
                .saturating_sub(4 * settings.reorg_window as u64)
                .max(settings.start_block);
            let mut found = Vec::new();
            for number in (lowest..=top).rev() {
                if found.len() == settings.reorg_window {
                    break;
                }
                let Some((commit, seq)) = stream.commit_of(number, tail.last_sequence).await?
                else {
                    continue;
                };
                let orphaned =
                    retraction.is_some_and(|(r, r_seq)| seq < *r_seq && number > r.common_ancestor);
                if !orphaned {
                    found.push(BlockRef {
                        number,
                        hash: commit.block_hash,
                    });
                }
            }
            for block in found.into_iter().rev() {
                window.push(block);
            }
        }
        let after_top = top.map_or(settings.start_block, |top| {
            (top + 1).max(settings.start_block)
        });
        // A backfill commits only blocks with events and the end of each range: events of a
        // later block than the one after the newest commit mean the blocks between had none
        // (a writer stopped, or a batch seen while the server was still storing it).
        let next = match tail.partial {
            Some((block, _)) if block.number < after_top => {
                return Err(StreamError::Corrupt(format!(
                    "uncommitted events of block {} but block {} is already committed",
                    block.number,
                    after_top - 1
                ))
                .into());
            }
            Some((block, _)) => block.number,
            None => after_top,
        };
        tracing::info!(
            chain_id = stream.chain_id(),
            next_block = next,
            last_sequence = tail.last_sequence,
            partial_events = tail.partial.map_or(0, |(_, n)| n),
            "resuming from the stream tail"
        );
        Ok(Self {
            chain,
            contracts,
            settings,
            chain_id: stream.chain_id(),
            publisher: stream.publisher(tail.last_sequence, settings.max_batch),
            window,
            next,
            range: settings
                .initial_range
                .clamp(settings.min_range, settings.max_range),
            partial: tail.partial,
            finalized: tail.last_finality.map(|f| f.block_number),
            ranges: VecDeque::new(),
            blocks: VecDeque::new(),
            last_fetch: None,
        })
    }

    /// Indexes what is next; `false` when caught up with the head.
    async fn step(&mut self) -> Result<bool, IndexerError> {
        let Some(head) = self.chain.header_at(BlockNumberOrTag::Latest).await? else {
            return Err(ChainError::Rpc("node has no latest block".into()).into());
        };
        let target = head.number.saturating_sub(self.settings.confirmations);
        metrics::head_lag(target.saturating_sub(self.next.saturating_sub(1)));
        if self.next > target {
            // Caught up: a reorg that replaced the newest blocks at the same height (or made
            // the chain shorter) shows only here, before any new block arrives. Nothing
            // fetched ahead of a head that went back is kept.
            self.drop_prefetched();
            self.check_newest_still_canonical().await?;
            self.publish_finality().await?;
            return Ok(false);
        }
        // Blocks this close to the head can still be reorganised: take them one at a time.
        let live_from = target.saturating_sub(self.settings.reorg_window as u64) + 1;
        if self.next < live_from && self.partial.is_none() {
            self.blocks.clear();
            self.backfill(live_from - 1).await?;
        } else {
            // Prefetched backfill ranges, if the head went back (a reorg to a shorter chain)
            // after they were planned, are fetched again block by block.
            self.ranges.clear();
            self.follow_block(self.next, target).await?;
        }
        self.publish_finality().await?;
        Ok(true)
    }

    /// Indexes the next `eth_getLogs` range up to `end`. Up to `settings.prefetch` ranges
    /// behind it are fetched and encoded meanwhile, each in its own task.
    #[tracing::instrument(level = "debug", skip(self), fields(chain_id = self.chain_id, from = self.next))]
    async fn backfill(&mut self, end: u64) -> Result<(), IndexerError> {
        if self
            .ranges
            .front()
            .is_some_and(|(start, _, _)| *start != self.next)
        {
            self.ranges.clear();
        }
        // A range planned when the head was higher (it went back since: a reorg to a
        // shorter chain) could reach blocks that must now be checked one at a time.
        while self.ranges.back().is_some_and(|(_, stop, _)| *stop > end) {
            self.ranges.pop_back();
        }
        let mut start = self
            .ranges
            .back()
            .map_or(self.next, |(_, stop, _)| stop + 1);
        while start <= end && self.ranges.len() <= self.settings.prefetch {
            let stop = (start + self.range - 1).min(end);
            let (chain, contracts, chain_id) = (self.chain.clone(), self.contracts, self.chain_id);
            let turn = self.take_turn();
            let task = tokio::spawn(fetch_range(chain, contracts, chain_id, start, stop, turn));
            self.ranges
                .push_back((start, stop, AbortOnDropHandle::new(task)));
            start = stop + 1;
        }
        let Some((start, stop, fetch)) = self.ranges.pop_front() else {
            return Ok(());
        };
        debug_assert_eq!(start, self.next);
        let fetched = fetch
            .await
            .map_err(|e| IndexerError::Fatal(format!("range fetch task: {e}")))?;
        let (blocks, log_count) = match fetched {
            Ok(fetched) => fetched,
            Err(IndexerError::Chain(
                ChainError::RangeTooLarge(reason) | ChainError::Timeout(reason),
            )) if stop > start => {
                // The fetches behind it are dropped (and aborted): they start where this
                // one should have ended.
                self.ranges.clear();
                self.range = (stop - start).div_ceil(2).max(self.settings.min_range);
                tracing::debug!(start, stop, range = self.range, %reason, "shrinking the log range");
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if log_count < TARGET_LOGS_PER_CALL / 4 {
            self.range = (self.range * 2).min(self.settings.max_range);
        } else if log_count > TARGET_LOGS_PER_CALL * 2 {
            self.range = (self.range / 2).max(self.settings.min_range);
        }
        for batch in batches(blocks, self.publisher.max_batch()) {
            self.publish_prepared(batch).await?;
        }
        self.next = stop + 1;
        Ok(())
    }

    /// Indexes block `number` after checking it continues what the stream holds. Up to
    /// `settings.prefetch` blocks after it, up to `target`, are fetched meanwhile; each is
    /// checked at its own turn.
    #[tracing::instrument(level = "debug", skip(self), fields(chain_id = self.chain_id))]
    async fn follow_block(&mut self, number: u64, target: u64) -> Result<(), IndexerError> {
        if self
            .blocks
            .front()
            .is_some_and(|(queued, _)| *queued != number)
        {
            self.blocks.clear();
        }
        while self
            .blocks
            .back()
            .is_some_and(|(queued, _)| *queued > target)
        {
            self.blocks.pop_back();
        }
        let mut ahead = self.blocks.back().map_or(number, |(queued, _)| queued + 1);
        while ahead <= target && self.blocks.len() <= self.settings.prefetch {
            // Events of the block the stream ends inside are left out; should the block
            // have been replaced, it is retracted and this fetch is not used.
            let skip = self
                .partial
                .filter(|(block, _)| block.number == ahead)
                .map_or(0, |(_, count)| count);
            let (chain, contracts, chain_id) = (self.chain.clone(), self.contracts, self.chain_id);
            let turn = self.take_turn();
            let task = tokio::spawn(fetch_block(chain, contracts, chain_id, ahead, skip, turn));
            self.blocks.push_back((ahead, AbortOnDropHandle::new(task)));
            ahead += 1;
        }
        let fetched = match self.blocks.pop_front() {
            Some((_, fetch)) => fetch
                .await
                .map_err(|e| IndexerError::Fatal(format!("block fetch task: {e}")))??,
            // Not reached: `number` is at most `target`, so it was queued above.
            None => {
                return Err(IndexerError::Fatal(format!(
                    "block {number} was not fetched"
                )));
            }
        };
        let Some((header, prepared)) = fetched else {
            // The chain became shorter between the head poll and now.
            self.blocks.clear();
            return self.check_newest_still_canonical().await;
        };
        let partial = self.partial.filter(|(block, _)| block.number == number);
        let partial_orphaned = partial.is_some_and(|(block, _)| block.hash != header.hash);
        let forked = match self.window.continuity(number, header.parent_hash) {
            Continuity::Extends => false,
            Continuity::Forked => true,
            Continuity::Unchecked => !self.newest_is_canonical().await?,
        };
        if forked || partial_orphaned {
            let extra = partial.filter(|_| partial_orphaned).map(|(b, _)| b);
            return self.unwind(extra).await;
        }
        self.publish_prepared(vec![prepared]).await?;
        self.partial = None;
        self.next = number + 1;
        Ok(())
    }

    /// The next fetch's turn at the RPC node: after the one queued last. Fetches ahead
    /// take turns so that the one to publish next is not slowed by those behind it; each
    /// one's encoding still overlaps the next one's calls.
    fn take_turn(&mut self) -> Turn {
        let (done, next) = oneshot::channel();
        Turn {
            after: self.last_fetch.replace(next),
            done,
        }
    }

    /// Drops (and aborts) every fetch made ahead.
    fn drop_prefetched(&mut self) {
        self.ranges.clear();
        self.blocks.clear();
    }

    async fn check_newest_still_canonical(&mut self) -> Result<(), IndexerError> {
        if self.newest_is_canonical().await? {
            Ok(())
        } else {
            self.unwind(None).await
        }
    }

    async fn newest_is_canonical(&self) -> Result<bool, IndexerError> {
        let Some(newest) = self.window.newest() else {
            return Ok(true);
        };
        let canonical = self.chain.header_by_number(newest.number).await?;
        Ok(canonical.is_some_and(|h| h.hash == newest.hash))
    }

    /// Walks back to the newest block the stream and the chain share, publishes a
    /// retraction of everything above it (plus `uncommitted`, a block whose events were
    /// published but never committed), and continues after the ancestor.
    #[tracing::instrument(skip(self), fields(chain_id = self.chain_id, block = self.next))]
    async fn unwind(&mut self, uncommitted: Option<BlockRef>) -> Result<(), IndexerError> {
        // What was fetched ahead may be of the orphaned branch; the follower goes back anyway.
        self.drop_prefetched();
        let mut ancestor = None;
        for block in self.window.iter_newest_first().collect::<Vec<_>>() {
            let canonical = self.chain.header_by_number(block.number).await?;
            if canonical.is_some_and(|h| h.hash == block.hash) {
                ancestor = Some(block.number);
                break;
            }
        }
        let ancestor = match (ancestor, self.window.is_empty(), uncommitted) {
            (Some(ancestor), _, _) => ancestor,
            (None, true, Some(block)) => block.number.saturating_sub(1),
            _ => {
                return Err(IndexerError::Fatal(format!(
                    "reorg deeper than the {}-block window: no common ancestor with the stream",
                    self.settings.reorg_window
                )));
            }
        };
        let mut orphaned: Vec<OrphanedBlock> = uncommitted
            .into_iter()
            .map(|b| OrphanedBlock {
                number: b.number,
                hash: b.hash,
            })
            .collect();
        orphaned.extend(self.window.retract_above(ancestor));
        tracing::warn!(
            chain_id = self.chain_id,
            common_ancestor = ancestor,
            depth = orphaned.len(),
            "reorg: retracting orphaned blocks"
        );
        metrics::reorg(orphaned.len() as u64);
        let retraction = Retraction {
            v: ENVELOPE_VERSION,
            chain_id: self.chain_id,
            common_ancestor: ancestor,
            orphaned,
        };
        self.publisher
            .append(vec![Outgoing {
                subject: names::retraction(self.chain_id),
                headers: HeaderMap::new(),
                payload: to_json(&retraction),
            }])
            .await?;
        metrics::retraction();
        self.partial = None;
        self.next = ancestor + 1;
        Ok(())
    }

    /// Appends `blocks`, each its events then its commit, in one batch when they fit.
    async fn publish_prepared(&mut self, blocks: Vec<PreparedBlock>) -> Result<(), IndexerError> {
        if blocks.is_empty() {
            return Ok(());
        }
        let mut messages = Vec::with_capacity(blocks.iter().map(|b| b.messages.len()).sum());
        let mut committed = Vec::with_capacity(blocks.len());
        for block in blocks {
            messages.extend(block.messages);
            committed.push((block.block, block.events));
        }
        self.publisher.append(messages).await?;
        for (block, events) in committed {
            tracing::debug!(block = block.number, events, "block published");
            metrics::events_published(events);
            metrics::blocks_committed(1);
            self.window.push(block);
        }
        Ok(())
    }

    /// Publishes the finality watermark when the finalized block advanced and is indexed.
    async fn publish_finality(&mut self) -> Result<(), IndexerError> {
        let Some(tag) = self.settings.finality else {
            return Ok(());
        };
        let Some(finalized) = self.chain.header_at(tag).await? else {
            return Ok(());
        };
        // Only blocks the stream covers: from the start block up to the last indexed one.
        let indexed = finalized.number >= self.settings.start_block && finalized.number < self.next;
        let advanced = self.finalized.is_none_or(|last| finalized.number > last);
        if !(indexed && advanced) {
            return Ok(());
        }
        let watermark = FinalityWatermark {
            v: ENVELOPE_VERSION,
            chain_id: self.chain_id,
            block_number: finalized.number,
            block_hash: finalized.hash,
        };
        self.publisher
            .append(vec![Outgoing {
                subject: names::finality(self.chain_id),
                headers: HeaderMap::new(),
                payload: to_json(&watermark),
            }])
            .await?;
        self.finalized = Some(finalized.number);
        Ok(())
    }
}

/// A fetch's place in line at the RPC node: it starts once `after` is closed (the fetch
/// before it is done with the node, or was dropped) and closes `done` when it is.
struct Turn {
    after: Option<oneshot::Receiver<()>>,
    done: oneshot::Sender<()>,
}

impl Turn {
    async fn wait(&mut self) {
        if let Some(after) = self.after.take() {
            // An error only says the fetch before was dropped: the node is free as well.
            let _ = after.await;
        }
    }
}

/// A range's prepared blocks and how many logs it had.
type FetchedRange = Result<(Vec<PreparedBlock>, usize), IndexerError>;
/// A block's header and prepared messages; `None` when the chain has no such block (it
/// became shorter).
type FetchedBlock = Result<Option<(Header, PreparedBlock)>, IndexerError>;

/// A block's messages, its events then its commit, ready to append.
#[derive(Debug)]
pub struct PreparedBlock {
    block: BlockRef,
    events: u64,
    messages: Vec<Outgoing>,
}

impl PreparedBlock {
    /// The block's events then its commit.
    pub fn into_messages(self) -> Vec<Outgoing> {
        self.messages
    }
}

/// Groups a range's blocks into what one `Publisher::append` takes: whole blocks, as many
/// as fit `max_batch` messages, so that many small blocks cost one round trip; a block
/// larger than that goes alone and the publisher cuts it.
pub fn batches(blocks: Vec<PreparedBlock>, max_batch: usize) -> Vec<Vec<PreparedBlock>> {
    let mut batches = Vec::new();
    let (mut batch, mut batch_messages) = (Vec::new(), 0);
    for block in blocks {
        if !batch.is_empty() && batch_messages + block.messages.len() > max_batch {
            batches.push(std::mem::take(&mut batch));
            batch_messages = 0;
        }
        batch_messages += block.messages.len();
        batch.push(block);
    }
    if !batch.is_empty() {
        batches.push(batch);
    }
    batches
}

/// Fetches the logs of `from..=to` and the headers of the blocks to commit, and prepares
/// their messages. Runs as its own task, so that ranges are fetched and encoded while
/// earlier ones are published.
async fn fetch_range(
    chain: Chain,
    contracts: Contracts,
    chain_id: u64,
    from: u64,
    to: u64,
    mut turn: Turn,
) -> FetchedRange {
    turn.wait().await;
    let logs = chain.logs(from, to).await?;
    let log_count = logs.len();
    let mut blocks: BTreeMap<u64, (B256, Vec<Log>)> = BTreeMap::new();
    for log in logs {
        let (Some(number), Some(hash)) = (log.block_number, log.block_hash) else {
            return Err(ChainError::Inconsistent("log without block number or hash".into()).into());
        };
        let entry = blocks.entry(number).or_insert_with(|| (hash, Vec::new()));
        if entry.0 != hash {
            return Err(ChainError::Inconsistent(format!(
                "logs of block {number} from two branches"
            ))
            .into());
        }
        entry.1.push(log);
    }
    // The range's last block is committed even without events: it is the checkpoint.
    let mut wanted: Vec<(u64, Option<B256>)> =
        blocks.iter().map(|(n, (h, _))| (*n, Some(*h))).collect();
    if !blocks.contains_key(&to) {
        wanted.push((to, None));
    }
    let chain = &chain;
    let headers: Vec<Header> = futures::stream::iter(wanted)
        .map(|(number, hash)| async move {
            let header = match hash {
                Some(hash) => chain.header_by_hash(hash).await?,
                None => chain.header_by_number(number).await?,
            };
            header.ok_or_else(|| ChainError::Inconsistent(format!("block {number} not found")))
        })
        .buffered(HEADER_CONCURRENCY)
        .try_collect()
        .await?;
    drop(turn.done);
    let blocks = headers
        .into_iter()
        .map(|header| {
            let logs = blocks.remove(&header.number).map(|(_, logs)| logs);
            (header, logs.unwrap_or_default(), 0)
        })
        .collect();
    Ok((encode(chain_id, contracts, blocks).await?, log_count))
}

/// Fetches block `number`'s header and its logs, by its hash (no race with a reorg), and
/// prepares its messages, the first `skip` events left out. Runs as its own task, so that
/// blocks near the head are fetched while earlier ones are published.
async fn fetch_block(
    chain: Chain,
    contracts: Contracts,
    chain_id: u64,
    number: u64,
    skip: u64,
    mut turn: Turn,
) -> FetchedBlock {
    turn.wait().await;
    let Some(header) = chain.header_by_number(number).await? else {
        return Ok(None);
    };
    let logs = chain.logs_at(header.hash).await?;
    drop(turn.done);
    let mut prepared = encode(chain_id, contracts, vec![(header, logs, skip)]).await?;
    Ok(prepared.pop().map(|block| (header, block)))
}

/// Prepares the messages of `blocks` (each a header, its logs and how many of them to
/// leave out) on the blocking pool: encoding thousands of events takes milliseconds of
/// CPU, which would hold up the runtime's threads, the publishing follower's included.
async fn encode(
    chain_id: u64,
    contracts: Contracts,
    blocks: Vec<(Header, Vec<Log>, u64)>,
) -> Result<Vec<PreparedBlock>, IndexerError> {
    tokio::task::spawn_blocking(move || {
        blocks
            .iter()
            .map(|(header, logs, skip)| prepare_block(chain_id, &contracts, header, logs, *skip))
            .collect()
    })
    .await
    .map_err(|e| IndexerError::Fatal(format!("encoding task: {e}")))?
}

/// Encodes a block's events (after the first `skip`) and its commit.
pub fn prepare_block(
    chain_id: u64,
    contracts: &Contracts,
    header: &Header,
    logs: &[Log],
    skip: u64,
) -> Result<PreparedBlock, IndexerError> {
    let mut messages = Vec::with_capacity(logs.len() + 1);
    // The block's identity headers, the same on each of its events, rendered once.
    let (chain_id_header, number_header, hash_header) = (
        chain_id.to_string(),
        header.number.to_string(),
        header.hash.to_string(),
    );
    for log in logs.iter().skip(skip as usize) {
        if log.block_hash != Some(header.hash) {
            return Err(ChainError::Inconsistent(format!(
                "log of block {} not in its header",
                header.number
            ))
            .into());
        }
        let (Some(tx_hash), Some(log_index)) = (log.transaction_hash, log.log_index) else {
            return Err(
                ChainError::Inconsistent("log without transaction hash or index".into()).into(),
            );
        };
        let mut envelope = EventEnvelope {
            v: ENVELOPE_VERSION,
            chain_id,
            block_number: header.number,
            block_hash: header.hash,
            block_timestamp: header.timestamp,
            tx_hash,
            log_index,
            event: decode(contracts, &log.inner).unwrap_or_else(|e| {
                tracing::error!(block = header.number, tx = %tx_hash, log_index, error = %e,
                    "a log does not decode: publishing an Unreadable marker in its place");
                metrics::unreadable_event("undecodable");
                DecodedEvent::unreadable(contracts, &log.inner, UnreadableReason::Undecodable)
            }),
        };
        let mut payload = to_json(&envelope);
        if payload.len() > MAX_EVENT_BYTES {
            // The stream would refuse it and the indexer would retry the block forever.
            tracing::error!(block = header.number, tx = %tx_hash, log_index, bytes = payload.len(),
                event = %envelope.event.name,
                "an event is too large to publish: publishing an Unreadable marker in its place");
            metrics::unreadable_event("too_large");
            envelope.event =
                DecodedEvent::unreadable(contracts, &log.inner, UnreadableReason::TooLarge);
            payload = to_json(&envelope);
        }
        let subject = names::event(chain_id, &envelope.event.name, &envelope.event.key);
        let mut identity = HeaderMap::new();
        identity.insert(headers::CHAIN_ID, chain_id_header.as_str());
        identity.insert(headers::BLOCK_NUMBER, number_header.as_str());
        identity.insert(headers::BLOCK_HASH, hash_header.as_str());
        identity.insert(headers::TX_HASH, tx_hash.to_string().as_str());
        identity.insert(headers::LOG_INDEX, log_index.to_string().as_str());
        messages.push(Outgoing {
            subject,
            headers: identity,
            payload,
        });
    }
    let commit = BlockCommit {
        v: ENVELOPE_VERSION,
        chain_id,
        block_number: header.number,
        block_hash: header.hash,
        parent_hash: header.parent_hash,
        block_timestamp: header.timestamp,
        event_count: u32::try_from(logs.len()).expect("fewer than 2^32 logs in a block"),
    };
    messages.push(Outgoing {
        subject: names::block_commit(chain_id, header.number),
        headers: HeaderMap::new(),
        payload: to_json(&commit),
    });
    let events = logs.len() as u64 - skip.min(logs.len() as u64);
    Ok(PreparedBlock {
        block: BlockRef {
            number: header.number,
            hash: header.hash,
        },
        events,
        messages,
    })
}

fn to_json<T: serde::Serialize>(value: &T) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("stream messages serialize"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block of `events` events (and its commit): `events + 1` messages.
    fn block(number: u64, events: u64) -> PreparedBlock {
        let message = Outgoing {
            subject: format!("block.{number}"),
            headers: HeaderMap::new(),
            payload: Bytes::new(),
        };
        PreparedBlock {
            block: BlockRef {
                number,
                hash: B256::with_last_byte(number as u8),
            },
            events,
            messages: vec![message; events as usize + 1],
        }
    }

    /// Given blocks of these event counts and a batch size, the blocks of each append.
    fn check(events: &[u64], max_batch: usize, expected: &[&[u64]]) {
        let blocks = (1..).zip(events).map(|(n, e)| block(n, *e)).collect();
        let appends: Vec<Vec<u64>> = batches(blocks, max_batch)
            .into_iter()
            .map(|append| append.into_iter().map(|b| b.block.number).collect())
            .collect();
        assert_eq!(
            appends, expected,
            "events {events:?}, max_batch {max_batch}"
        );
    }

    #[test]
    fn whole_blocks_share_an_append_while_they_fit() {
        check(&[], 10, &[]);
        check(&[0, 0, 0], 10, &[&[1, 2, 3]]);
        check(&[4, 4], 10, &[&[1, 2]]);
        check(&[4, 5], 10, &[&[1], &[2]]);
        check(&[2, 20, 2, 2], 10, &[&[1], &[2], &[3, 4]]);
        // A block larger than a batch goes alone; the publisher cuts it.
        check(&[1_000, 1_000], 1_000, &[&[1], &[2]]);
        check(&[0; 5], 1, &[&[1], &[2], &[3], &[4], &[5]]);
    }
}
