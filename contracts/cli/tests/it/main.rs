//! The `gantry` binary as a process against a real chain (anvil, the market deployed), and
//! where it reads, nats-server, the indexer and the API in-process.

mod harness;
mod money;
mod node;
mod reads;
mod submit;
