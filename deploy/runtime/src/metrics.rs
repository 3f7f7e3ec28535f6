//! The runtime's Prometheus metrics, declared in one place: how each chain-stream reader
//! fares (`service`: the consumer, from a fixed set: matcher, liveness, api).

use ::metrics::{counter, gauge};

/// 1 while the reader is stalled on a block that did not arrive whole, else 0.
pub fn chain_stream_stalled(service: &'static str, stalled: bool) {
    gauge!("gantry_chain_stream_stalled", "service" => service).set(if stalled {
        1.0
    } else {
        0.0
    });
}

/// The block a stalled reader waits for (0 while the stream is whole).
pub fn chain_stream_missing_block(service: &'static str, block: u64) {
    gauge!("gantry_chain_stream_missing_block", "service" => service).set(block as f64);
}

/// Damaged blocks refused, by kind (`AssembleError::kind`: count_mismatch, foreign_event,
/// unreadable_event, discontinuous).
pub fn chain_stream_damaged_block(service: &'static str, kind: &'static str) {
    counter!("gantry_chain_stream_damaged_blocks_total", "service" => service, "kind" => kind)
        .increment(1);
}

/// Messages skipped, by reason: undecodable (bad payload), foreign_subject, stalled (a
/// block or retraction not applied while stalled), repeated (a block applied already).
pub fn chain_stream_skipped(service: &'static str, reason: &'static str) {
    counter!("gantry_chain_stream_skipped_messages_total", "service" => service, "reason" => reason)
        .increment(1);
}
