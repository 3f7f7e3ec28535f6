//! Integration tests against real anvil and nats-server 2.15, started per test.
//!
//! - `lifecycle`: every event of a scripted lifecycle appears exactly once and in order,
//!   checked against `eth_getLogs`.
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
//! - `credentials`: against the production NATS config (a user per service), the indexer
//!   connects with the user and password in its `--nats-url` and publishes the stream.

mod crash;
mod credentials;
mod failover;
mod handoff;
mod harness;
mod lifecycle;
mod poison;
mod reorg;
