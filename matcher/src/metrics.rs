//! The services' Prometheus metrics, declared in one place. Labels come from bounded
//! sets only: call kinds, outcomes, constraint names.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

/// `outcome`: assign, unplaceable.
pub fn decisions(outcome: &'static str, count: u64) {
    counter!("gantry_matcher_decisions_total", "outcome" => outcome).increment(count);
}

/// Time from the JobPosted (or JobRequeued) event reaching the matcher to its assign
/// transaction being sent.
pub fn event_to_assign(elapsed: Duration) {
    histogram!("gantry_matcher_event_to_assign_seconds").record(elapsed.as_secs_f64());
}

/// Open jobs this replica holds and cannot place, by the constraint that rules out most
/// nodes (`Constraint::name`s, or `none` when no node exists).
pub fn pending_jobs(reason: &str, count: usize) {
    gauge!("gantry_matcher_pending_jobs", "reason" => reason.to_owned()).set(count as f64);
}

/// Open jobs this replica holds through the shared consumer.
pub fn claimed_jobs(count: usize) {
    gauge!("gantry_matcher_claimed_jobs").set(count as f64);
}

/// Explanations written to (or deleted from) the KV bucket.
pub fn explanations_written() {
    counter!("gantry_matcher_explanations_written_total").increment(1);
}

/// The newest block the service's view has applied.
pub fn view_block(service: &'static str, block: u64) {
    gauge!("gantry_matcher_view_block", "service" => service).set(block as f64);
}

/// `call`: assign, mark_inactive, reclaim, expire, finalize.
pub fn tx_sent(call: &'static str) {
    counter!("gantry_matcher_tx_sent_total", "call" => call).increment(1);
}

pub fn tx_replaced(call: &'static str) {
    counter!("gantry_matcher_tx_replaced_total", "call" => call).increment(1);
}

/// `outcome`: confirmed, reverted, dropped (`sender::Outcome::label`).
pub fn tx_outcome(call: &'static str, outcome: &'static str) {
    counter!("gantry_matcher_tx_outcomes_total", "call" => call, "outcome" => outcome).increment(1);
}

pub fn sender_stuck(stuck: bool) {
    gauge!("gantry_sender_stuck").set(if stuck { 1.0 } else { 0.0 });
}

pub fn rpc_error() {
    counter!("gantry_matcher_tx_rpc_errors_total").increment(1);
}

/// 1 while this liveness replica holds the keeper lease.
pub fn leader(is_leader: bool) {
    gauge!("gantry_liveness_leader").set(if is_leader { 1.0 } else { 0.0 });
}

/// Actions the keeper found due and sent, by kind.
pub fn keeper_actions(kind: &'static str) {
    counter!("gantry_liveness_actions_total", "kind" => kind).increment(1);
}

/// View snapshots, by `outcome`: written, write_failed, restored, missing, or why one was
/// refused (malformed, version, foreign, signature, body, position, inconsistent, read).
pub fn snapshots(service: &'static str, outcome: &'static str) {
    counter!("gantry_snapshots_total", "service" => service, "outcome" => outcome).increment(1);
}
