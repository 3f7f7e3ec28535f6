//! `gantry-indexer`: contract events into NATS JetStream, exactly once, in order,
//! resumable and reorg-safe.
//!
//! ```text
//!   chain (JSON-RPC) ──logs──▶ decode (gantry_protocol::events) ──▶ GANTRY_<chain> stream
//! ```
//!
//! Not built yet: issue 3 fills this crate. The stream layout it will publish is fixed
//! in `gantry_protocol::{subjects, envelope}`.
