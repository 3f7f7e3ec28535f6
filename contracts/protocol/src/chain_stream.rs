//! Reading the chain stream: one decoder of its messages and one assembler of its blocks,
//! pure, used by every consumer (the matcher, the liveness keeper, the API, the indexer's
//! tests). Nothing else parses chain-stream subjects or buffers events.
//!
//! ```text
//!  (subject, payload) ──ChainMessage::decode──▶ Event | Commit | Retraction | Finality
//!         │ (does not decode: skip it, see below)       │
//!                         BlockAssembler::push ◀────────┘
//!                                │
//!        Ok(Held)                an event, kept until its commit
//!        Ok(Block{commit,events}) apply these, in order
//!        Ok(Retracted(..))       undo the orphaned blocks
//!        Ok(Final(..))           blocks up to it never change again
//!        Err(AssembleError)      apply nothing; `stall()` says whether the stream is
//!                                missing a block (the reader waits for it)
//! ```
//!
//! The rule for buffered events: a commit takes every event buffered since the previous
//! commit or retraction, and each of them must belong to the committed block (its number
//! and hash), their number must be the commit's `event_count` and each must read as a
//! typed event. The block must also continue the last one applied: a higher number, and
//! the applied block's hash as parent when it is the next number (a backfill commits only
//! some blocks, so numbers may jump). The indexer never leaves stray events behind: a
//! block whose events it published without a commit is either continued (same hash: it
//! skips what is already there) or retracted (another hash) before anything else, and a
//! retraction drops whatever is buffered.
//!
//! A stream that breaks these rules is damaged, and the reader never guesses nor skips
//! past a block it did not get whole (its state would silently diverge from the chain's):
//! the assembler **stalls**. It answers `Err` for the damaged block, keeps the consumer's
//! last good state (nothing partial is yielded) and refuses every later block too
//! ([`AssembleError::Stalled`]), remembering the blocks with events it had to pass over.
//! It is whole again, and yields blocks again, when either
//!
//! - the damaged block and every block with events it passed over since are published
//!   again whole, in order (a repair re-publishing the blocks from the damage on, as a
//!   backfill would: empty blocks may be left out), or
//! - a retraction orphans the damaged block (common ancestor below it): the blocks that
//!   replace it follow, as after any reorganisation.
//!
//! A block that is never repaired keeps the reader stalled: it says so (the consumers log
//! it, count it, and report not ready) rather than continue on a state the chain does not
//! have. A block at or below the last applied one without a retraction before it (a
//! re-publication) is refused without a stall ([`AssembleError::Repeated`]): its events
//! were applied already. A message that does not decode at all (bad JSON, a subject not of
//! the chain) is no block data a reader could use: consumers log it, count it and skip it;
//! if it was one of a block's events, the block's commit counts it missing, and that block
//! stalls the reader as above.

use std::collections::BTreeSet;

use alloy::primitives::B256;
use serde::de::DeserializeOwned;

use crate::envelope::{BlockCommit, EventEnvelope, FinalityWatermark, Retraction};

/// One message of a chain stream.
#[derive(Debug, Clone, PartialEq)]
pub enum ChainMessage {
    Event(EventEnvelope),
    Commit(BlockCommit),
    Retraction(Retraction),
    Finality(FinalityWatermark),
}

/// Why a chain-stream message could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("subject {subject} is not on chain {chain_id}'s stream")]
    ForeignSubject { chain_id: u64, subject: String },
    #[error("{what} on {subject} does not parse")]
    Payload {
        what: &'static str,
        subject: String,
        #[source]
        source: serde_json::Error,
    },
}

impl ChainMessage {
    /// Reads the message published on `subject` of chain `chain_id`'s stream.
    pub fn decode(chain_id: u64, subject: &str, payload: &[u8]) -> Result<Self, DecodeError> {
        let foreign = || DecodeError::ForeignSubject {
            chain_id,
            subject: subject.to_owned(),
        };
        let rest = subject
            .strip_prefix("gantry.")
            .and_then(|s| s.strip_prefix(chain_id.to_string().as_str()))
            .and_then(|s| s.strip_prefix('.'))
            .ok_or_else(foreign)?;
        if rest.starts_with("ev.") {
            parse("event", subject, payload).map(ChainMessage::Event)
        } else if rest.starts_with("block.") {
            parse("block commit", subject, payload).map(ChainMessage::Commit)
        } else if rest == "retract" {
            parse("retraction", subject, payload).map(ChainMessage::Retraction)
        } else if rest == "final" {
            parse("finality watermark", subject, payload).map(ChainMessage::Finality)
        } else {
            Err(foreign())
        }
    }
}

fn parse<T: DeserializeOwned>(
    what: &'static str,
    subject: &str,
    payload: &[u8],
) -> Result<T, DecodeError> {
    serde_json::from_slice(payload).map_err(|source| DecodeError::Payload {
        what,
        subject: subject.to_owned(),
        source,
    })
}

/// What one message amounts to.
#[derive(Debug, Clone, PartialEq)]
pub enum Assembled {
    /// An event, held until its block's commit.
    Held,
    /// A committed block: apply its events, in order.
    Block {
        commit: BlockCommit,
        events: Vec<EventEnvelope>,
    },
    /// Undo the orphaned blocks (anything buffered is dropped).
    Retracted(Retraction),
    /// Blocks up to the watermark can no longer be orphaned.
    Final(FinalityWatermark),
}

/// A block a consumer has applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockRef {
    pub number: u64,
    /// Unknown after a retraction (it names only the common ancestor's number) or when a
    /// consumer resumes from a stored block number.
    pub hash: Option<B256>,
}

/// Why a message was refused: nothing of it is to be applied. The first four are damage
/// (they stall the assembler); [`Stalled`](Self::Stalled) is a message refused while
/// stalled; [`Repeated`](Self::Repeated) a block applied already.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssembleError {
    #[error("commit of block {block} counts {expected} events but {received} arrived")]
    CountMismatch {
        block: u64,
        expected: u32,
        received: usize,
    },
    #[error(
        "commit of block {block} ({hash}) follows an event of block {event_block} ({event_hash})"
    )]
    ForeignEvent {
        block: u64,
        hash: B256,
        event_block: u64,
        event_hash: B256,
    },
    #[error("event {name} of block {block} does not read: {reason}")]
    UnreadableEvent {
        block: u64,
        name: String,
        reason: String,
    },
    #[error(
        "block {block} has parent {parent_hash}, not the applied block {applied} ({applied_hash})"
    )]
    Discontinuous {
        block: u64,
        parent_hash: B256,
        applied: u64,
        applied_hash: B256,
    },
    #[error("block {block} is not applied: block {missing} has not arrived whole")]
    Stalled { block: u64, missing: u64 },
    #[error("block {block} is not applied: block {applied} was applied already")]
    Repeated { block: u64, applied: u64 },
}

impl AssembleError {
    /// Whether the message is damage (a block that did not arrive whole, or does not
    /// continue the applied ones): it stalls the assembler.
    pub fn is_damage(&self) -> bool {
        !matches!(self, Self::Stalled { .. } | Self::Repeated { .. })
    }

    /// A label for metrics, from a fixed set.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::CountMismatch { .. } => "count_mismatch",
            Self::ForeignEvent { .. } => "foreign_event",
            Self::UnreadableEvent { .. } => "unreadable_event",
            Self::Discontinuous { .. } => "discontinuous",
            Self::Stalled { .. } => "stalled",
            Self::Repeated { .. } => "repeated",
        }
    }

    /// The block the message was about (a retraction refused while stalled: the first
    /// block it replaces).
    pub fn block(&self) -> u64 {
        match self {
            Self::CountMismatch { block, .. }
            | Self::ForeignEvent { block, .. }
            | Self::UnreadableEvent { block, .. }
            | Self::Discontinuous { block, .. }
            | Self::Stalled { block, .. }
            | Self::Repeated { block, .. } => *block,
        }
    }
}

/// What a stalled assembler waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stall {
    /// The oldest block with events that did not arrive whole (or was refused since).
    pub missing: u64,
    /// The newest such block: the stall ends once it is applied (or retracted).
    pub through: u64,
    /// What was wrong with the last damaged block.
    pub damage: AssembleError,
}

/// Buffers a block's events until its commit, and refuses what would not leave the
/// consumer with the chain's state (see the module's documentation).
#[derive(Debug, Default)]
pub struct BlockAssembler {
    buffered: Vec<EventEnvelope>,
    applied: Option<BlockRef>,
    /// Blocks with events that were refused since the last block applied: damaged ones,
    /// and the whole ones passed over while stalled. Stalled while not empty.
    waiting: BTreeSet<u64>,
    damage: Option<AssembleError>,
}

impl BlockAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// An assembler for a consumer that has applied blocks up to `number` (its hash
    /// unknown) and reads on after them.
    pub fn resuming_after(number: u64) -> Self {
        Self {
            applied: Some(BlockRef { number, hash: None }),
            ..Self::default()
        }
    }

    /// An assembler for a consumer that has applied blocks up to `number`, whose hash is
    /// `hash` (a snapshot taken at its commit), and reads on after it: the next block must
    /// name it as its parent.
    pub fn resuming_at(number: u64, hash: B256) -> Self {
        Self {
            applied: Some(BlockRef {
                number,
                hash: Some(hash),
            }),
            ..Self::default()
        }
    }

    /// Whether a consumer's checkpoint may pass this point: no events wait for a commit
    /// and no block is missing.
    pub fn is_idle(&self) -> bool {
        self.buffered.is_empty() && self.waiting.is_empty()
    }

    /// The last block yielded.
    pub fn applied(&self) -> Option<BlockRef> {
        self.applied
    }

    /// What the assembler waits for, while a block is missing.
    pub fn stall(&self) -> Option<Stall> {
        let missing = *self.waiting.first()?;
        let through = *self.waiting.last()?;
        let damage = self.damage.clone()?;
        Some(Stall {
            missing,
            through,
            damage,
        })
    }

    /// Takes the next message, in stream order.
    pub fn push(&mut self, message: ChainMessage) -> Result<Assembled, AssembleError> {
        match message {
            ChainMessage::Event(event) => {
                self.buffered.push(event);
                Ok(Assembled::Held)
            }
            ChainMessage::Commit(commit) => {
                let events = std::mem::take(&mut self.buffered);
                self.commit(commit, events)
            }
            ChainMessage::Retraction(retraction) => {
                self.buffered.clear();
                self.retract(retraction)
            }
            ChainMessage::Finality(watermark) => Ok(Assembled::Final(watermark)),
        }
    }

    fn commit(
        &mut self,
        commit: BlockCommit,
        events: Vec<EventEnvelope>,
    ) -> Result<Assembled, AssembleError> {
        let number = commit.block_number;
        if let Some(applied) = self.applied
            && number <= applied.number
        {
            return Err(AssembleError::Repeated {
                block: number,
                applied: applied.number,
            });
        }
        if let Err(damage) = check_block(&commit, &events, self.applied) {
            self.waiting.insert(number);
            let applied = self.applied.map_or(0, |a| a.number);
            self.waiting.extend(
                events
                    .iter()
                    .map(|e| e.block_number)
                    .filter(|n| self.applied.is_none() || *n > applied),
            );
            self.damage = Some(damage.clone());
            return Err(damage);
        }
        if let Some(&missing) = self.waiting.first()
            && number > missing
        {
            if commit.event_count > 0 {
                self.waiting.insert(number);
            }
            return Err(AssembleError::Stalled {
                block: number,
                missing,
            });
        }
        self.waiting.retain(|n| *n > number);
        if self.waiting.is_empty() {
            self.damage = None;
        }
        self.applied = Some(BlockRef {
            number,
            hash: Some(commit.block_hash),
        });
        Ok(Assembled::Block { commit, events })
    }

    fn retract(&mut self, retraction: Retraction) -> Result<Assembled, AssembleError> {
        let ancestor = retraction.common_ancestor;
        if let Some(&missing) = self.waiting.first()
            && missing <= ancestor
        {
            // The missing block stays canonical; nothing applied is orphaned (every
            // applied block is older than it), so there is nothing to undo either.
            self.waiting.retain(|n| *n <= ancestor);
            return Err(AssembleError::Stalled {
                block: ancestor + 1,
                missing,
            });
        }
        self.waiting.clear();
        self.damage = None;
        if self.applied.is_some_and(|a| a.number > ancestor) {
            self.applied = Some(BlockRef {
                number: ancestor,
                hash: None,
            });
        }
        Ok(Assembled::Retracted(retraction))
    }
}

fn check_block(
    commit: &BlockCommit,
    events: &[EventEnvelope],
    applied: Option<BlockRef>,
) -> Result<(), AssembleError> {
    if let Some(stray) = events
        .iter()
        .find(|e| e.block_number != commit.block_number || e.block_hash != commit.block_hash)
    {
        return Err(AssembleError::ForeignEvent {
            block: commit.block_number,
            hash: commit.block_hash,
            event_block: stray.block_number,
            event_hash: stray.block_hash,
        });
    }
    if events.len() != commit.event_count as usize {
        return Err(AssembleError::CountMismatch {
            block: commit.block_number,
            expected: commit.event_count,
            received: events.len(),
        });
    }
    for event in events {
        if let Err(error) = event.event.typed() {
            return Err(AssembleError::UnreadableEvent {
                block: commit.block_number,
                name: event.event.name.clone(),
                reason: error.source.to_string(),
            });
        }
    }
    if let Some(BlockRef {
        number,
        hash: Some(hash),
    }) = applied
        && commit.block_number == number + 1
        && commit.parent_hash != hash
    {
        return Err(AssembleError::Discontinuous {
            block: commit.block_number,
            parent_hash: commit.parent_hash,
            applied: number,
            applied_hash: hash,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{ENVELOPE_VERSION, OrphanedBlock};
    use crate::events::{ContractKind, DecodedEvent};
    use crate::names;
    use proptest::prelude::*;

    const CHAIN: u64 = 31337;

    fn hash(number: u64, branch: u64) -> B256 {
        B256::left_padding_from(&(number * 1_000 + branch).to_be_bytes())
    }

    fn event(number: u64, branch: u64, index: u64) -> EventEnvelope {
        EventEnvelope {
            v: ENVELOPE_VERSION,
            chain_id: CHAIN,
            block_number: number,
            block_hash: hash(number, branch),
            block_timestamp: number,
            tx_hash: B256::ZERO,
            log_index: index,
            event: DecodedEvent {
                contract: ContractKind::Market,
                name: "JobCancelled".into(),
                key: index.to_string(),
                data: serde_json::json!({"jobId": index, "refund": "0x0"}),
            },
        }
    }

    fn commit(number: u64, branch: u64, count: u32) -> BlockCommit {
        BlockCommit {
            v: ENVELOPE_VERSION,
            chain_id: CHAIN,
            block_number: number,
            block_hash: hash(number, branch),
            parent_hash: hash(number - 1, branch),
            block_timestamp: number,
            event_count: count,
        }
    }

    /// Publishes like the indexer: what it writes, as (subject, payload).
    #[derive(Default)]
    struct Indexer {
        canonical: Vec<(u64, B256, u32)>,
        published: Vec<(String, Vec<u8>)>,
        branch: u64,
    }

    impl Indexer {
        fn publish(&mut self, subject: String, payload: impl serde::Serialize) {
            self.published
                .push((subject, serde_json::to_vec(&payload).unwrap()));
        }

        fn events(&mut self, number: u64, count: u32) {
            for i in 0..u64::from(count) {
                let e = event(number, self.branch, i);
                self.publish(names::event(CHAIN, &e.event.name, &e.event.key), e);
            }
        }

        fn block(&mut self, count: u32) {
            let number = self.canonical.len() as u64 + 1;
            self.events(number, count);
            let parent_hash = self
                .canonical
                .last()
                .map_or(B256::ZERO, |(_, hash, _)| *hash);
            self.publish(
                names::block_commit(CHAIN, number),
                BlockCommit {
                    parent_hash,
                    ..commit(number, self.branch, count)
                },
            );
            self.canonical
                .push((number, hash(number, self.branch), count));
        }

        /// A reorg of `depth` blocks, with `partial` events of an uncommitted block of the
        /// old branch left before it (a writer that died mid-block).
        fn reorg(&mut self, depth: usize, partial: u32) {
            let mut orphaned = Vec::new();
            if partial > 0 {
                let number = self.canonical.len() as u64 + 1;
                self.events(number, partial);
                orphaned.push(OrphanedBlock {
                    number,
                    hash: hash(number, self.branch),
                });
            }
            let keep = self.canonical.len().saturating_sub(depth);
            for (number, hash, _) in self.canonical.drain(keep..).rev() {
                orphaned.push(OrphanedBlock { number, hash });
            }
            self.branch += 1;
            self.publish(
                names::retraction(CHAIN),
                Retraction {
                    v: ENVELOPE_VERSION,
                    chain_id: CHAIN,
                    common_ancestor: keep as u64,
                    orphaned,
                },
            );
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Block(u32),
        Reorg(usize, u32),
        Final,
    }

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            4 => (0u32..4).prop_map(Step::Block),
            1 => (0usize..4, 0u32..3).prop_map(|(d, p)| Step::Reorg(d, p)),
            1 => Just(Step::Final),
        ]
    }

    proptest! {
        #[test]
        fn any_interleaving_of_commits_and_retractions_folds_to_the_canonical_chain(
            steps in proptest::collection::vec(step(), 0..40)
        ) {
            let mut indexer = Indexer::default();
            for step in steps {
                match step {
                    Step::Block(count) => indexer.block(count),
                    Step::Reorg(depth, partial) => indexer.reorg(depth, partial),
                    Step::Final => {
                        let number = indexer.canonical.len() as u64;
                        indexer.publish(names::finality(CHAIN), FinalityWatermark {
                            v: ENVELOPE_VERSION, chain_id: CHAIN, block_number: number, block_hash: B256::ZERO,
                        });
                    }
                }
            }
            let mut assembler = BlockAssembler::new();
            let mut folded: Vec<(u64, B256, u32)> = Vec::new();
            for (subject, payload) in &indexer.published {
                let message = ChainMessage::decode(CHAIN, subject, payload).unwrap();
                match assembler.push(message).unwrap() {
                    Assembled::Held | Assembled::Final(_) => {}
                    Assembled::Block { commit, events } => {
                        prop_assert!(events.iter().enumerate().all(|(i, e)| e.log_index == i as u64));
                        folded.push((commit.block_number, commit.block_hash, events.len() as u32));
                    }
                    Assembled::Retracted(retraction) => folded
                        .retain(|(_, hash, _)| retraction.orphaned.iter().all(|o| o.hash != *hash)),
                }
            }
            prop_assert_eq!(folded, indexer.canonical);
        }
    }

    #[test]
    fn a_commit_after_a_stray_event_or_with_the_wrong_count_is_refused() {
        let mut assembler = BlockAssembler::new();
        assembler.push(ChainMessage::Event(event(4, 0, 0))).unwrap();
        assert!(!assembler.is_idle());
        assert_eq!(
            assembler.push(ChainMessage::Commit(commit(5, 0, 1))),
            Err(AssembleError::ForeignEvent {
                block: 5,
                hash: hash(5, 0),
                event_block: 4,
                event_hash: hash(4, 0)
            })
        );
        assert_eq!(
            assembler.stall().map(|s| (s.missing, s.through)),
            Some((4, 5))
        );
        assembler.push(ChainMessage::Event(event(5, 0, 0))).unwrap();
        assert_eq!(
            assembler.push(ChainMessage::Commit(commit(5, 0, 2))),
            Err(AssembleError::CountMismatch {
                block: 5,
                expected: 2,
                received: 1
            })
        );
        assert!(
            assembler.buffered.is_empty(),
            "a refused commit drops its events"
        );
        assert!(
            !assembler.is_idle(),
            "stalled: a checkpoint must not pass block 4"
        );
    }

    /// Feeds `messages` (events as `(block, count)` then the commit, or a retraction) and
    /// returns what each commit or retraction amounted to: the block applied, or the error.
    fn run(assembler: &mut BlockAssembler, steps: &[Msg]) -> Vec<Result<u64, AssembleError>> {
        let mut out = Vec::new();
        for step in steps {
            let messages = match *step {
                Msg::Block(number, arrived, counted) => {
                    let mut messages: Vec<ChainMessage> = (0..u64::from(arrived))
                        .map(|i| ChainMessage::Event(event(number, 0, i)))
                        .collect();
                    messages.push(ChainMessage::Commit(commit(number, 0, counted)));
                    messages
                }
                Msg::Retract(ancestor, top) => vec![ChainMessage::Retraction(Retraction {
                    v: ENVELOPE_VERSION,
                    chain_id: CHAIN,
                    common_ancestor: ancestor,
                    orphaned: (ancestor + 1..=top)
                        .rev()
                        .map(|number| OrphanedBlock {
                            number,
                            hash: hash(number, 0),
                        })
                        .collect(),
                })],
            };
            for message in messages {
                match assembler.push(message) {
                    Ok(Assembled::Held | Assembled::Final(_)) => {}
                    Ok(Assembled::Block { commit, .. }) => out.push(Ok(commit.block_number)),
                    Ok(Assembled::Retracted(r)) => out.push(Ok(r.common_ancestor)),
                    Err(e) => out.push(Err(e)),
                }
            }
        }
        out
    }

    #[derive(Clone, Copy)]
    enum Msg {
        /// Block `number` with `arrived` events published and `counted` in its commit.
        Block(u64, u32, u32),
        /// A retraction to the common ancestor, orphaning the blocks above it up to `top`.
        Retract(u64, u64),
    }

    fn stalled(block: u64, missing: u64) -> Result<u64, AssembleError> {
        Err(AssembleError::Stalled { block, missing })
    }

    #[test]
    fn a_damaged_block_stalls_until_it_and_the_blocks_passed_over_are_published_again() {
        use Msg::Block;
        let mut assembler = BlockAssembler::new();
        // Given blocks 1 and 2, block 3's event lost, and blocks 4 (empty) and 5 after it,
        let out = run(
            &mut assembler,
            &[
                Block(1, 1, 1),
                Block(2, 1, 1),
                Block(3, 0, 1),
                Block(4, 0, 0),
                Block(5, 2, 2),
            ],
        );
        // then 3 is refused and the blocks after it too: nothing past block 2 applies.
        assert_eq!(
            out,
            [
                Ok(1),
                Ok(2),
                Err(AssembleError::CountMismatch {
                    block: 3,
                    expected: 1,
                    received: 0
                }),
                stalled(4, 3),
                stalled(5, 3),
            ]
        );
        let stall = assembler.stall().expect("stalled");
        assert_eq!((stall.missing, stall.through), (3, 5));
        assert_eq!(assembler.applied().map(|a| a.number), Some(2));

        // When only block 3 is published again, it applies, and block 6 still waits for
        // block 5 (the empty block 4 is not needed);
        let out = run(&mut assembler, &[Block(3, 1, 1), Block(6, 1, 1)]);
        assert_eq!(out, [Ok(3), stalled(6, 5)]);
        // a repeated block is refused without changing the stall, and once 5 and 6 are
        // published again the stream is whole.
        let out = run(
            &mut assembler,
            &[
                Block(2, 1, 1),
                Block(5, 2, 2),
                Block(6, 1, 1),
                Block(7, 0, 0),
            ],
        );
        assert_eq!(
            out,
            [
                Err(AssembleError::Repeated {
                    block: 2,
                    applied: 3
                }),
                Ok(5),
                Ok(6),
                Ok(7)
            ]
        );
        assert!(assembler.stall().is_none());
        assert!(assembler.is_idle());
    }

    #[test]
    fn a_retraction_of_the_damaged_block_ends_the_stall_and_one_above_it_does_not() {
        use Msg::{Block, Retract};
        let mut assembler = BlockAssembler::new();
        let out = run(
            &mut assembler,
            &[
                Block(1, 1, 1),
                Block(2, 1, 2),
                Block(3, 1, 1),
                Retract(2, 3),
            ],
        );
        // Block 2 stays canonical: the retraction of 3 is refused too (nothing to undo).
        assert_eq!(out[3], stalled(3, 2));
        assert!(assembler.stall().is_some());
        // A retraction below block 2 orphans it: the replacements apply.
        let out = run(
            &mut assembler,
            &[Retract(1, 2), Block(2, 1, 1), Block(3, 0, 0)],
        );
        assert_eq!(out, [Ok(1), Ok(2), Ok(3)]);
        assert!(assembler.is_idle());
    }

    #[test]
    fn an_unreadable_event_or_a_block_on_another_parent_is_damage() {
        let mut assembler = BlockAssembler::resuming_after(1);
        let mut bad = event(2, 0, 0);
        bad.event.name = "JobTeleported".into();
        assembler.push(ChainMessage::Event(bad)).unwrap();
        let refused = assembler.push(ChainMessage::Commit(commit(2, 0, 1)));
        assert!(
            matches!(&refused, Err(AssembleError::UnreadableEvent { block: 2, name, .. }) if name == "JobTeleported"),
            "{refused:?}"
        );
        assert!(refused.unwrap_err().is_damage());

        let mut assembler = BlockAssembler::new();
        assembler
            .push(ChainMessage::Commit(commit(1, 0, 0)))
            .unwrap();
        let refused = assembler.push(ChainMessage::Commit(commit(2, 1, 0)));
        assert_eq!(
            refused,
            Err(AssembleError::Discontinuous {
                block: 2,
                parent_hash: hash(1, 1),
                applied: 1,
                applied_hash: hash(1, 0)
            })
        );
        // Numbers may jump (a backfill commits only some blocks): no parent to check.
        let mut assembler = BlockAssembler::new();
        assembler
            .push(ChainMessage::Commit(commit(1, 0, 0)))
            .unwrap();
        assert!(
            assembler
                .push(ChainMessage::Commit(commit(9, 1, 0)))
                .is_ok()
        );
    }

    proptest! {
        #[test]
        fn a_lost_event_stalls_the_fold_and_a_republication_completes_it(
            counts in proptest::collection::vec(0u32..3, 1..20),
            damaged in any::<proptest::sample::Index>(),
        ) {
            let mut indexer = Indexer::default();
            let mut starts = Vec::new();
            for count in &counts {
                starts.push(indexer.published.len());
                indexer.block(*count);
            }
            let whole = indexer.published.clone();
            // Block `k`'s first message is lost (its first event, or its commit when empty).
            let k = damaged.index(counts.len());
            let mut published = whole.clone();
            published.remove(starts[k]);
            // The repair publishes the blocks from the damaged one on again.
            let repair = &whole[starts[k]..];

            let mut assembler = BlockAssembler::new();
            let mut folded = Vec::new();
            let mut fold = |assembler: &mut BlockAssembler, messages: &[(String, Vec<u8>)]| {
                for (subject, payload) in messages {
                    let message = ChainMessage::decode(CHAIN, subject, payload).unwrap();
                    if let Ok(Assembled::Block { commit, events }) = assembler.push(message) {
                        folded.push((commit.block_number, commit.block_hash, events.len() as u32));
                    }
                }
                folded.clone()
            };
            let before = fold(&mut assembler, &published);
            // Nothing at or past the damaged block applied, except when it was an empty
            // block's lost commit (then its events were none, and nothing is missing).
            let lost_empty_commit = counts[k] == 0;
            if !lost_empty_commit {
                prop_assert_eq!(&before[..], &indexer.canonical[..k]);
                prop_assert!(assembler.stall().is_some());
            }
            let after = fold(&mut assembler, repair);
            let mut expected = indexer.canonical.clone();
            if lost_empty_commit && k + 1 < counts.len() {
                // Its republication comes after its successors: a repeat, refused.
                expected.remove(k);
            }
            prop_assert_eq!(after, expected);
            prop_assert!(assembler.is_idle());
        }
    }

    #[test]
    fn subjects_of_other_chains_and_bad_payloads_are_errors() {
        let payload = serde_json::to_vec(&commit(1, 0, 0)).unwrap();
        assert!(ChainMessage::decode(CHAIN, &names::block_commit(CHAIN, 1), &payload).is_ok());
        assert!(matches!(
            ChainMessage::decode(1, &names::block_commit(CHAIN, 1), &payload),
            Err(DecodeError::ForeignSubject { .. })
        ));
        assert!(matches!(
            ChainMessage::decode(CHAIN, &names::block_commit(CHAIN, 1), b"{"),
            Err(DecodeError::Payload { .. })
        ));
    }
}
