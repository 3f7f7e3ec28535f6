//! Matcher and liveness against a real chain (anvil), nats-server and indexer.

mod harness;
mod keeper;
mod placement;
mod replicas;
