//! The worker against real components: anvil, nats-server, dockerd, the indexer, the
//! matcher and the liveness keeper; the worker runs as its binary.

mod claim;
mod harness;
mod hostile;
mod operator;
mod outage;
mod pipeline;
mod reorg;
mod resume;
mod start;
