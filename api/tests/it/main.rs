//! The projection against a real chain (anvil), nats-server and the indexer.

mod crash;
mod dashboard;
mod harness;
mod http;
mod live;
mod projection;
