//! The worker's Prometheus metrics, declared in one place. Labels come from bounded sets
//! only: outcomes, stages, directions; never a job id.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

/// 1 while the node takes work, 0 while a node fault keeps it from doing so.
pub fn healthy(is_healthy: bool) {
    gauge!("gantry_worker_healthy").set(if is_healthy { 1.0 } else { 0.0 });
}

/// 1 while the worker waits at start-up for the indexer to create the chain stream.
pub fn waiting_for_chain_stream(waiting: bool) {
    gauge!("gantry_worker_waiting_for_chain_stream").set(if waiting { 1.0 } else { 0.0 });
}

/// Heartbeat transactions that landed.
pub fn result_resubmitted() {
    counter!("gantry_worker_results_resubmitted_total").increment(1);
}

pub fn heartbeat_sent() {
    counter!("gantry_worker_heartbeats_total").increment(1);
}

/// 1 while the node's stake is below the registry's minimum (it gets no new jobs).
pub fn stake_below_minimum(low: bool) {
    gauge!("gantry_worker_stake_below_minimum").set(if low { 1.0 } else { 0.0 });
}

/// 1 for the reason the node takes no new work (`health::NoWork::label`), 0 for every
/// other; all 0 while it takes work.
pub fn not_taking_work(reason: Option<&'static str>) {
    for label in crate::health::NoWork::LABELS {
        let on = reason == Some(label);
        gauge!("gantry_worker_not_taking_work", "reason" => label).set(if on { 1.0 } else { 0.0 });
    }
}

/// Claim mode's claims, by `outcome`: claimed, refused.
pub fn claim(outcome: &'static str) {
    counter!("gantry_worker_claims_total", "outcome" => outcome).increment(1);
}

/// A job started running on this node (it took a slot).
pub fn job_started() {
    gauge!("gantry_worker_running_jobs").increment(1.0);
}

/// A job that ran on this node ended (its slot is free).
pub fn job_stopped() {
    gauge!("gantry_worker_running_jobs").decrement(1.0);
}

/// An assignment of this node was handled, with its `outcome` (`Outcome::label`): run and
/// answered, given back at once, or not ours.
pub fn job_outcome(outcome: &'static str) {
    counter!("gantry_worker_jobs_total", "outcome" => outcome).increment(1);
}

/// Time from the chain check to the answer, by `outcome` (`Outcome::label`).
pub fn job_seconds(outcome: &'static str, elapsed: Duration) {
    histogram!("gantry_worker_job_seconds", "outcome" => outcome).record(elapsed.as_secs_f64());
}

/// Time from the assignment message to the job's container running.
pub fn start_seconds(elapsed: Duration) {
    histogram!("gantry_worker_start_seconds").record(elapsed.as_secs_f64());
}

/// Time one stage of a job took, by `stage`: download, execute, upload.
pub fn stage_seconds(stage: &'static str, elapsed: Duration) {
    histogram!("gantry_worker_stage_seconds", "stage" => stage).record(elapsed.as_secs_f64());
}

/// Checkpoints uploaded (only those that changed).
pub fn checkpoint_uploaded() {
    counter!("gantry_worker_checkpoints_total").increment(1);
}

/// A checkpoint found and not restored (design 19, §2): `unsigned`, `not_signed` (not its
/// node's agent's over those bytes: tampered or forged), `not_held` (an attempt its node
/// did not hold), `foreign` (metadata naming another node's chunks), `damaged` (not the
/// bytes its metadata names), `too_large`.
pub fn checkpoint_refused(reason: &'static str) {
    counter!("gantry_worker_checkpoints_refused_total", "reason" => reason).increment(1);
}

/// Log lines a job printed over the rate limit, not forwarded.
pub fn log_lines_dropped(count: u64) {
    counter!("gantry_worker_log_lines_dropped_total").increment(count);
}

/// The latest GPU utilisation sampled for a running job, 0–100.
pub fn gpu_utilization(utilization: f64) {
    gauge!("gantry_worker_gpu_utilization").set(utilization);
}

/// Bytes moved through the object stores (results, checkpoints), by `direction`: in, out.
pub fn object_bytes(direction: &'static str, bytes: u64) {
    counter!("gantry_worker_bytes_total", "direction" => direction).increment(bytes);
}

/// An input found in the cache (no download).
pub fn cache_hit() {
    counter!("gantry_worker_cache_hits_total").increment(1);
}

/// An input not in the cache (downloaded).
pub fn cache_miss() {
    counter!("gantry_worker_cache_misses_total").increment(1);
}

/// Bytes of inputs downloaded.
pub fn input_bytes(bytes: u64) {
    counter!("gantry_worker_input_bytes_total").increment(bytes);
}
