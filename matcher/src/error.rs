//! Errors of the services' IO, with whether retrying can help.

use gantry_runtime::nats::NatsError;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A chain (JSON-RPC) failure.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("rpc")]
    Rpc(#[source] BoxError),
    #[error("the RPC endpoint serves chain {actual}, not the configured chain {expected}")]
    WrongChain { expected: u64, actual: u64 },
    #[error("signing")]
    Signing(#[source] BoxError),
}

impl ChainError {
    pub(crate) fn rpc(error: impl Into<BoxError>) -> Self {
        Self::Rpc(error.into())
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Rpc(_))
    }
}

/// A NATS failure, or a stream that cannot be projected.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("message {sequence}: {reason}")]
    BadMessage { sequence: u64, reason: String },
}

impl StreamError {
    pub(crate) fn nats(op: &'static str, error: impl Into<BoxError>) -> Self {
        Self::Nats(NatsError::new(op, error))
    }
}
