//! Whose fault a failure is, which decides what the worker does with the job:
//!
//! | class       | examples                                        | the worker              |
//! |-------------|-------------------------------------------------|-------------------------|
//! | `Job`       | before the start: bad spec or image, input hash mismatch; while it runs: non-zero exit, OOM, timeout, output too large | before the start, `reject`s it at once with the reason (free within the market's reject grace; found past it, after a long download, answered with its failure report instead); once it ran, submits its failure report as the result (paid) |
//! | `Node`      | Docker engine down, disk full, cache unwritable  | `reject`s it at once and stops taking work until healthy |
//! | `Transient` | network errors, RPC hiccups                      | retries with backoff; persisting, it becomes `Node` |

use std::fmt;

/// Whose fault a failure is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultClass {
    Job,
    Node,
    Transient,
}

/// A failed job stage: its class and a short reason fit for an on-chain `reject` or a
/// failure report (no secrets, no host paths beyond the job's own).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub class: FaultClass,
    pub reason: String,
    /// A job fault the node proved on bytes it holds (an input failing its hash, or not
    /// decrypting with the key its submitter released): found after the free reject
    /// grace it is answered with the failure report, paid, not a reject the node pays.
    pub proven: bool,
}

/// Longest reason sent on-chain, bytes (the market takes texts up to 256).
pub const MAX_REASON: usize = 160;

/// `reason` cut to [`MAX_REASON`] bytes, on a char boundary.
pub fn bounded(mut reason: String) -> String {
    if reason.len() > MAX_REASON {
        let mut end = MAX_REASON;
        while !reason.is_char_boundary(end) {
            end -= 1;
        }
        reason.truncate(end);
    }
    reason
}

impl Failure {
    pub fn job(reason: impl Into<String>) -> Self {
        Self::new(FaultClass::Job, reason)
    }

    pub fn node(reason: impl Into<String>) -> Self {
        Self::new(FaultClass::Node, reason)
    }

    pub fn transient(reason: impl Into<String>) -> Self {
        Self::new(FaultClass::Transient, reason)
    }

    /// A job fault shown by the bytes themselves (see [`Failure::proven`]).
    pub fn proven(reason: impl Into<String>) -> Self {
        Self {
            proven: true,
            ..Self::job(reason)
        }
    }

    /// Whether trying again may succeed: a transient failure.
    pub fn is_retryable(&self) -> bool {
        self.class == FaultClass::Transient
    }

    fn new(class: FaultClass, reason: impl Into<String>) -> Self {
        Self {
            class,
            reason: bounded(reason.into()),
            proven: false,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let class = match self.class {
            FaultClass::Job => "job fault",
            FaultClass::Node => "node fault",
            FaultClass::Transient => "transient",
        };
        write!(f, "{class}: {}", self.reason)
    }
}

impl std::error::Error for Failure {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_bounded_on_a_char_boundary() {
        let failure = Failure::job("é".repeat(200));
        assert!(failure.reason.len() <= MAX_REASON);
        assert!(failure.reason.chars().all(|c| c == 'é'));
        assert_eq!(
            Failure::node("disk full").to_string(),
            "node fault: disk full"
        );
    }
}
