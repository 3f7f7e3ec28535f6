//! What can go wrong, by what a script should do about it: each kind is one exit code.

/// The exit codes, documented in the README's CLI reference.
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// Anything else: the chain, the API or NATS did not answer, a file could not be
    /// written. Trying again later may help.
    pub const ERROR: u8 = 1;
    /// A bad flag or value, a missing key or deployment (clap's own usage errors are 2 too).
    pub const USAGE: u8 = 2;
    /// No such job, node or result.
    pub const NOT_FOUND: u8 = 3;
    /// Refused: the contract reverted, or a check before sending found it would (too
    /// little balance, nothing to withdraw).
    pub const REFUSED: u8 = 4;
    /// `job watch`: the job settled without completing (failed, cancelled, expired).
    pub const NOT_COMPLETED: u8 = 5;
    /// `job result`: the download does not match the on-chain hash, or would unpack
    /// outside the directory.
    pub const UNVERIFIED: u8 = 6;
}

/// A failure, with a message for people (lowercase, no trailing period).
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Unverified(String),
    /// `job watch`: the job settled without completing.
    #[error("{0}")]
    NotCompleted(String),
    /// A service did not answer or answered garbage: retryable.
    #[error("{0}")]
    Unavailable(String),
    /// Local IO and everything else.
    #[error("{0}")]
    Other(String),
}

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => exit::USAGE,
            Self::NotFound(_) => exit::NOT_FOUND,
            Self::Refused(_) => exit::REFUSED,
            Self::Unverified(_) => exit::UNVERIFIED,
            Self::NotCompleted(_) => exit::NOT_COMPLETED,
            Self::Unavailable(_) | Self::Other(_) => exit::ERROR,
        }
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::Usage(message.into())
    }

    pub fn io(what: impl std::fmt::Display, error: std::io::Error) -> Self {
        Self::Other(format!("{what}: {error}"))
    }
}

pub type Result<T, E = CliError> = std::result::Result<T, E>;
