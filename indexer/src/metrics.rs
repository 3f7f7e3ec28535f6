//! The indexer's Prometheus metrics, declared in one place.

use metrics::{counter, gauge};

/// Blocks between the chain head and the last committed block.
pub fn head_lag(blocks: u64) {
    gauge!("gantry_indexer_head_lag_blocks").set(blocks as f64);
}

pub fn events_published(count: u64) {
    counter!("gantry_indexer_events_published_total").increment(count);
}

/// A log published as an `Unreadable` marker instead of its event; `reason`: undecodable,
/// too_large.
pub fn unreadable_event(reason: &'static str) {
    counter!("gantry_indexer_unreadable_events_total", "reason" => reason).increment(1);
}

pub fn blocks_committed(count: u64) {
    counter!("gantry_indexer_blocks_committed_total").increment(count);
}

pub fn reorg(depth: u64) {
    counter!("gantry_indexer_reorgs_total").increment(1);
    counter!("gantry_indexer_retracted_blocks_total").increment(depth);
}

pub fn retraction() {
    counter!("gantry_indexer_retractions_total").increment(1);
}

/// `kind`: too_large, timeout, transport, rpc, other.
pub fn rpc_error(kind: &'static str) {
    counter!("gantry_indexer_rpc_errors_total", "kind" => kind).increment(1);
}

/// `kind`: conflict, nats.
pub fn stream_error(kind: &'static str) {
    counter!("gantry_indexer_stream_errors_total", "kind" => kind).increment(1);
}

/// 1 while this instance holds the writer lease.
pub fn leader(is_leader: bool) {
    gauge!("gantry_indexer_leader").set(if is_leader { 1.0 } else { 0.0 });
}
