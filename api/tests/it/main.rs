//! The projection against a real chain (anvil), nats-server and the indexer.

mod http;
mod projection;
