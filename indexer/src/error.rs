//! The indexer's errors. Chain and bus failures carry whether retrying can help.

/// A JSON-RPC failure.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The node refused the range (too many results or too much work): shrink it.
    #[error("log range too large: {0}")]
    RangeTooLarge(String),
    #[error("rpc timed out: {0}")]
    Timeout(String),
    #[error("rpc failed: {0}")]
    Rpc(String),
    /// Two answers of the node disagree (a reorg between the calls): read again.
    #[error("chain data inconsistent: {0}")]
    Inconsistent(String),
}

/// A NATS or JetStream failure.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// Someone else wrote to the stream (or a publish was lost): re-read the tail.
    #[error("stream moved under us: {0}")]
    Conflict(String),
    #[error("nats: {0}")]
    Nats(String),
    /// The stream holds something this indexer cannot resume from.
    #[error("stream content invalid: {0}")]
    Corrupt(String),
    /// The server will not take the indexer's batches as configured (atomic batches not
    /// allowed on the stream, or larger than the server's `max_batch_size`).
    #[error("stream refuses the indexer's batches: {0}")]
    Refused(String),
}

/// Why the indexer stopped following.
#[derive(Debug, thiserror::Error)]
pub enum IndexerError {
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// A reorg deeper than the window, or a chain that is not the configured one.
    #[error("fatal: {0}")]
    Fatal(String),
    #[error("lost the writer lease")]
    LeaseLost,
}

impl IndexerError {
    /// Whether the indexer should re-read the stream tail and try again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Stream(StreamError::Corrupt(_) | StreamError::Refused(_)) | Self::Fatal(_) => {
                false
            }
            Self::Chain(_) | Self::Stream(_) | Self::LeaseLost => true,
        }
    }
}
