//! Reading the chain stream: one decoder of its messages and one assembler of its blocks,
//! pure, used by every consumer (the matcher, the liveness keeper, the API, the indexer's
//! tests). Nothing else parses chain-stream subjects or buffers events.
//!
//! ```text
//!  (subject, payload) ──ChainMessage::decode──▶ Event | Commit | Retraction | Finality
//!                                                   │
//!                         BlockAssembler::push ◀────┘
//!                                │
//!        Held (an event, kept until its commit)
//!        Block { commit, events }   apply these, in order
//!        Retracted(retraction)      undo the orphaned blocks
//!        Final(watermark)           blocks up to it never change again
//! ```
//!
//! The rule for buffered events: a commit takes every event buffered since the previous
//! commit or retraction, and each of them must belong to the committed block (its number
//! and hash) and their number must be the commit's `event_count`; otherwise the stream is
//! malformed and the consumer stops with [`AssembleError`] rather than guess. The indexer
//! never leaves stray events behind: a block whose events it published without a commit is
//! either continued (same hash: it skips what is already there) or retracted (another hash)
//! before anything else, and a retraction drops whatever is buffered.

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

/// A commit that does not match the events before it.
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
}

/// Buffers a block's events until its commit.
#[derive(Debug, Default)]
pub struct BlockAssembler {
    buffered: Vec<EventEnvelope>,
}

impl BlockAssembler {
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether events wait for a commit (a consumer's checkpoint must not pass them).
    pub fn is_idle(&self) -> bool {
        self.buffered.is_empty()
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
                check_block(&commit, &events)?;
                Ok(Assembled::Block { commit, events })
            }
            ChainMessage::Retraction(retraction) => {
                self.buffered.clear();
                Ok(Assembled::Retracted(retraction))
            }
            ChainMessage::Finality(watermark) => Ok(Assembled::Final(watermark)),
        }
    }
}

fn check_block(commit: &BlockCommit, events: &[EventEnvelope]) -> Result<(), AssembleError> {
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
                data: serde_json::json!({"jobId": index}),
            },
        }
    }

    fn commit(number: u64, branch: u64, count: u32) -> BlockCommit {
        BlockCommit {
            v: ENVELOPE_VERSION,
            chain_id: CHAIN,
            block_number: number,
            block_hash: hash(number, branch),
            parent_hash: B256::ZERO,
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
            self.publish(
                names::block_commit(CHAIN, number),
                commit(number, self.branch, count),
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
        assembler.push(ChainMessage::Event(event(5, 0, 0))).unwrap();
        assert_eq!(
            assembler.push(ChainMessage::Commit(commit(5, 0, 2))),
            Err(AssembleError::CountMismatch {
                block: 5,
                expected: 2,
                received: 1
            })
        );
        assert!(assembler.is_idle());
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
