//! Errors of the services' IO, with whether retrying can help.

/// A chain (JSON-RPC) failure.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("rpc: {0}")]
    Rpc(String),
    #[error("the RPC endpoint serves chain {actual}, not the configured chain {expected}")]
    WrongChain { expected: u64, actual: u64 },
    #[error("signing: {0}")]
    Signing(String),
}

impl ChainError {
    pub(crate) fn rpc(error: impl std::fmt::Display) -> Self {
        Self::Rpc(error.to_string())
    }

    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Rpc(_))
    }
}

/// A NATS failure, or a stream that cannot be projected.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    #[error("nats: {0}")]
    Nats(String),
    #[error("message {sequence} on {subject}: {reason}")]
    BadMessage {
        sequence: u64,
        subject: String,
        reason: String,
    },
}

impl StreamError {
    pub(crate) fn nats(context: &str, error: impl std::fmt::Display) -> Self {
        Self::Nats(format!("{context}: {error}"))
    }
}
