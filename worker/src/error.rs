//! Why the worker could not start or went down. A job's own failures are
//! [`crate::fault::Failure`]s: they end the job, not the worker.

use crate::chain::ChainError;
use crate::fault::Failure;

/// Why the worker could not start or went down.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("chain")]
    Chain(#[from] ChainError),
    /// A NATS or JetStream call failed; `op` says which.
    #[error("nats: {op}")]
    Nats {
        op: String,
        #[source]
        source: async_nats::Error,
    },
    /// The assignment consumer's message stream ended.
    #[error("nats: the assignment consumer ended")]
    AssignmentsEnded,
    /// A task the worker cannot do without panicked.
    #[error("a task panicked: {0}")]
    Panicked(String),
    #[error("{0}")]
    Node(Failure),
    #[error("local directories")]
    Io(#[from] std::io::Error),
}

impl WorkerError {
    pub(crate) fn nats(op: impl Into<String>, source: impl Into<async_nats::Error>) -> Self {
        Self::Nats {
            op: op.into(),
            source: source.into(),
        }
    }
}
