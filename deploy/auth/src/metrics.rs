//! The auth service's Prometheus metrics, declared in one place.

use std::time::Duration;

use metrics::{counter, histogram};

/// A handshake admitted.
pub fn admitted() {
    counter!("gantry_auth_admitted_total").increment(1);
}

/// A handshake refused; `reason` is `handshake::Refusal::reason`, or `no_token`,
/// `bad_request`, `unavailable` (the chain or NATS did not answer: refused, never
/// admitted unchecked).
pub fn refused(reason: &'static str) {
    counter!("gantry_auth_refused_total", "reason" => reason).increment(1);
}

/// From the server's request to the answer sent.
pub fn answered(elapsed: Duration) {
    histogram!("gantry_auth_answer_seconds").record(elapsed.as_secs_f64());
}
