//! Matcher and liveness against a real chain (anvil), nats-server and indexer.
//!
//! - `placement`: heterogeneous nodes and jobs, each placed where the strategy prefers,
//!   and an impossible job explained in KV.
//! - `replicas`: a replica SIGKILLed while holding every claim; the other assigns all ten
//!   jobs exactly once.
//! - `batching`: ten jobs placeable at once are assigned by one `assignBatch`, and paid
//!   by one `finalizeBatch` once their windows close together.
//! - `keeper`: a node that stops heartbeating is marked inactive, its job reclaimed,
//!   reassigned and its stake slashed; a job past its deadline is expired and refunded and
//!   a result finalized after its window, by the standby keeper after the leader was
//!   killed.
//! - `sender`: a transaction un-mined by a reorganisation does not wedge the sender: the
//!   emptied nonce is filled and the next transaction lands.

mod batching;
mod harness;
mod keeper;
mod placement;
mod replicas;
mod sender;
