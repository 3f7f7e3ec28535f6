//! Why an input could not be cached, whose fault that is, and how each transport's
//! errors map onto it without leaking a URI or a credential.

use std::io;

use super::guard::{MAX_REDIRECTS, Refused};
use crate::fault::{Failure, FaultClass};

/// Longest free-form detail kept in an error message (the whole stays under 100 chars).
const MAX_DETAIL_CHARS: usize = 64;

/// Why an input could not be cached. Messages are short and never contain the URI or a
/// credential: they may end up on-chain as reject reasons.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("unsupported input uri: {0}")]
    UnsupportedUri(&'static str),
    #[error("input sha256 must be 64 hex digits")]
    InvalidHash,
    #[error("input path is outside the node's local root")]
    Forbidden,
    /// The host is (or resolves only to) a loopback, private, link-local or other
    /// non-public address, and the provider did not allow it.
    #[error(
        "input host is not public (loopback, private, link-local); refused: not in allow_input_hosts"
    )]
    PrivateAddress,
    #[error("input server redirected more than {MAX_REDIRECTS} times")]
    TooManyRedirects,
    #[error("nats inputs may only name the inputs or results bucket")]
    NatsBucket,
    #[error("input not found ({0})")]
    NotFound(&'static str),
    #[error("input access denied ({0})")]
    AccessDenied(&'static str),
    #[error("input server answered http {status}")]
    Http { status: u16 },
    #[error("input exceeds its limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error(
        "input sha256 mismatch: expected {}…, got {}…",
        abbreviate(expected),
        abbreviate(actual)
    )]
    HashMismatch { expected: String, actual: String },
    #[error("{scheme} inputs are not served by this node")]
    SchemeDisabled { scheme: &'static str },
    #[error("input transfer timed out")]
    Timeout,
    #[error("input transfer failed: {0}")]
    Transfer(String),
    #[error("local input read failed: {}", detail(.0))]
    LocalRead(#[source] io::Error),
    #[error("input cache {op} failed: {}", detail(.source))]
    Cache {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("input fetcher setup: {0}")]
    Setup(String),
}

impl FetchError {
    pub fn class(&self) -> FaultClass {
        match self {
            Self::UnsupportedUri(_)
            | Self::InvalidHash
            | Self::Forbidden
            // The job's URI named the provider's network: never the node's fault.
            | Self::PrivateAddress
            | Self::TooManyRedirects
            | Self::NatsBucket
            | Self::NotFound(_)
            | Self::AccessDenied(_)
            | Self::TooLarge { .. }
            | Self::HashMismatch { .. }
            // Another node may serve the scheme; the job must not make this one unhealthy.
            | Self::SchemeDisabled { .. } => FaultClass::Job,
            Self::Http { status } => http_status_class(*status),
            Self::Timeout | Self::Transfer(_) => FaultClass::Transient,
            Self::LocalRead(_) | Self::Cache { .. } | Self::Setup(_) => FaultClass::Node,
        }
    }

    /// Whether trying again may succeed: a transient failure.
    pub fn is_retryable(&self) -> bool {
        self.class() == FaultClass::Transient
    }
}

impl From<&FetchError> for Failure {
    fn from(err: &FetchError) -> Self {
        let reason = err.to_string();
        match err.class() {
            FaultClass::Job => Failure::job(reason),
            FaultClass::Node => Failure::node(reason),
            FaultClass::Transient => Failure::transient(reason),
        }
    }
}

impl From<Refused> for FetchError {
    fn from(refused: Refused) -> Self {
        match refused {
            Refused::PrivateAddress => Self::PrivateAddress,
            Refused::TooManyRedirects => Self::TooManyRedirects,
        }
    }
}

fn http_status_class(status: u16) -> FaultClass {
    match status {
        408 | 429 | 500..=599 => FaultClass::Transient,
        _ => FaultClass::Job,
    }
}

pub(super) fn http_error(err: reqwest::Error) -> FetchError {
    if let Some(refused) = refusal(&err) {
        return refused.into();
    }
    if err.is_timeout() {
        return FetchError::Timeout;
    }
    // The URL may carry a token (presigned links): keep it out of the message.
    FetchError::Transfer(error_detail(&err.without_url()))
}

/// The guard's refusal somewhere in `err`'s causes (from the resolver or the redirect
/// policy, however deep reqwest and hyper wrapped it).
fn refusal(err: &reqwest::Error) -> Option<Refused> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(current) = cause {
        if let Some(refused) = current.downcast_ref::<Refused>() {
            return Some(*refused);
        }
        cause = current.source();
    }
    None
}

pub(super) fn s3_error(err: object_store::Error) -> FetchError {
    match err {
        object_store::Error::NotFound { .. } => FetchError::NotFound("s3 object"),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => FetchError::AccessDenied("s3"),
        object_store::Error::InvalidPath { .. } => FetchError::UnsupportedUri("invalid s3 key"),
        other => FetchError::Transfer(error_detail(&other)),
    }
}

pub(super) fn local_error(err: io::Error) -> FetchError {
    match err.kind() {
        io::ErrorKind::NotFound => FetchError::NotFound("local file"),
        io::ErrorKind::PermissionDenied => FetchError::Forbidden,
        _ => FetchError::LocalRead(err),
    }
}

/// An error and its causes on one line, cut to [`MAX_DETAIL_CHARS`].
pub(super) fn error_detail(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    truncate(text, MAX_DETAIL_CHARS)
}

fn detail(err: &io::Error) -> String {
    truncate(err.to_string(), MAX_DETAIL_CHARS)
}

fn truncate(mut text: String, max_chars: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max_chars) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The first 12 hex digits, enough to tell hashes apart in a message.
fn abbreviate(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_http_statuses() {
        for (status, class) in [
            (400, FaultClass::Job),
            (404, FaultClass::Job),
            (408, FaultClass::Transient),
            (429, FaultClass::Transient),
            (500, FaultClass::Transient),
            (503, FaultClass::Transient),
            (304, FaultClass::Job),
        ] {
            assert_eq!(FetchError::Http { status }.class(), class, "{status}");
        }
    }

    #[test]
    fn messages_are_short() {
        let long_io = || io::Error::other("x".repeat(500));
        let errors = [
            FetchError::UnsupportedUri("scheme must be https, http, ipfs, nats, s3 or file"),
            FetchError::HashMismatch {
                expected: "a".repeat(64),
                actual: "b".repeat(64),
            },
            FetchError::TooLarge { limit: u64::MAX },
            FetchError::Transfer(truncate("y".repeat(500), MAX_DETAIL_CHARS)),
            FetchError::LocalRead(long_io()),
            FetchError::Cache {
                op: "rename",
                source: long_io(),
            },
            FetchError::Forbidden,
            FetchError::PrivateAddress,
            FetchError::TooManyRedirects,
            FetchError::NatsBucket,
            FetchError::SchemeDisabled { scheme: "nats" },
        ];
        for err in errors {
            let message = err.to_string();
            assert!(message.chars().count() <= 100, "{message}");
        }
    }
}
