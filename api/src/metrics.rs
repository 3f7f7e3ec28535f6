//! The API's Prometheus metrics, declared in one place. Labels come from bounded sets
//! only: matched routes (the router's patterns, `other` for none) and status codes.

use std::time::Duration;

use metrics::{counter, gauge, histogram};

/// Contract events written into the store.
pub fn events_projected(count: usize) {
    counter!("gantry_api_events_projected_total").increment(count as u64);
}

/// Retractions applied (blocks undone).
pub fn retractions() {
    counter!("gantry_api_retractions_total").increment(1);
}

/// Worker reports (progress, log lines, completions) written into the store.
pub fn reports_projected(count: usize) {
    counter!("gantry_api_reports_projected_total").increment(count as u64);
}

/// A worker's report not written (design 19, §2): `malformed` (not a report, or its
/// payload names another job or node than its subject), `not_the_attempts_node` (the
/// chain never assigned that attempt to the node whose subject it came on).
pub fn report_dropped(reason: &'static str) {
    counter!("gantry_api_reports_dropped_total", "reason" => reason).increment(1);
}

/// One request served, by route and status.
pub fn request(route: String, status: &str, elapsed: Duration) {
    histogram!("gantry_api_http_request_seconds", "route" => route.clone())
        .record(elapsed.as_secs_f64());
    counter!("gantry_api_http_requests_total", "route" => route, "status" => status.to_owned())
        .increment(1);
}

/// Stream messages the projection trails the chain stream by (set by `/readyz`).
pub fn projection_lag(messages: u64) {
    gauge!("gantry_api_projection_lag_messages").set(messages as f64);
}

/// The stored projection was found not to be of the chain stream and emptied (folded again
/// from the stream's start).
pub fn projection_emptied() {
    counter!("gantry_api_projection_emptied_total").increment(1);
}
