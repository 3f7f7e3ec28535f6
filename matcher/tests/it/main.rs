//! Matcher and liveness against a real chain (anvil), nats-server and indexer.
//!
//! - `placement`: heterogeneous nodes and jobs, each placed where the strategy prefers,
//!   and an impossible job explained in KV.
//! - `replicas`: a replica SIGKILLed while holding every claim; the other assigns all ten
//!   jobs exactly once. A replica whose account can pay for nothing gives its claims
//!   back once its sender is stuck, and the other assigns them.
//! - `batching`: ten jobs placeable at once are assigned by one `assignBatch`, and paid
//!   by one `finalizeBatch` once their windows close together.
//! - `keeper`: a node that stops heartbeating is marked inactive, its job reclaimed,
//!   reassigned and its stake slashed; a job past its deadline is expired and refunded and
//!   a result finalized after its window, by the standby keeper after the leader was
//!   killed.
//!   A keeper whose transactions are not mined (its account cannot pay) gives the lease
//!   up to the standby, which acts.
//! - `stall`: the keeper binary over a hand-written stream with a block whose event was
//!   lost and messages that do not decode: it does not exit, `/readyz` says 503 and the
//!   metrics say stalled while its view stays at the last good block; once the block is
//!   published again whole it catches up by itself.
//! - `sender`: a transaction un-mined by a reorganisation does not wedge the sender: the
//!   emptied nonce is filled and the next transaction lands.
//! - `snapshot`: over a hand-written stream, a view restored from its snapshot and the
//!   stream's tail (a reorganisation across the snapshot's block included) equals a
//!   replay; a snapshot changed anywhere, signed by another account, of another market or
//!   not matching the stream at its position is refused.
//! - `reorg`: an assignment a reorganisation undoes is placed again (claims are held
//!   until the placement is final); a finalize a reorganisation undoes is sent again.

mod batching;
mod harness;
mod keeper;
mod placement;
mod refereed;
mod reorg;
mod replicas;
mod sender;
mod snapshot;
mod stall;
