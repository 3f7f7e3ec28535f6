//! Integration tests against real anvil and nats-server 2.15, started per test.
//!
//! - `lifecycle`: every event of a scripted lifecycle appears exactly once and in order,
//!   checked against `eth_getLogs`; a stream made before atomic batches is updated to
//!   allow them and stays append-only.
//! - `crash`: SIGKILL at random points of a 12k-event backfill loses and duplicates
//!   nothing.
//! - `failover`: two racing indexers write exactly once and the standby takes over at the
//!   leader's death; a NATS restart mid-run loses and duplicates nothing.
//! - `reorg`: `anvil_reorg` of depth 1–5 while following; each is retracted and consumers
//!   converge on the canonical chain.
//! - `handoff`: the switch from backfill to following the head neither skips nor
//!   duplicates; the finality watermark follows the finalized block.
//! - `poison`: the largest event the market allows is published as it is; an oversized
//!   log and one the ABI does not know become bounded `Unreadable` markers, and the indexer
//!   goes on.
//! - `deposed`: the race of a NATS restart under a leader (issue 16): a block buffered
//!   by a deposed writer and sent when it reconnects is refused whole; a leader cut off
//!   with publishes in flight while NATS is killed, the standby taking over and the old
//!   leader reconnecting mid-backfill leave every event once, each commit right after its
//!   own events.
//! - `repair`: a block's commit stored without its events stalls every reader;
//!   `--repair` publishes it and the later blocks again whole from the chain, readers
//!   then hold exactly the chain's events, and the indexer resumes after it.
//! - `credentials`: against the production NATS config (a user per service), the indexer
//!   connects with the user and password in its `--nats-url` and publishes the stream.

mod crash;
mod credentials;
mod deposed;
mod failover;
mod handoff;
mod harness;
mod lifecycle;
mod link;
mod poison;
mod reorg;
mod repair;
