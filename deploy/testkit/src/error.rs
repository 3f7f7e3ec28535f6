use std::path::PathBuf;

/// Failures of the fixtures and of the local-network tooling built on them.
#[derive(Debug, thiserror::Error)]
pub enum DevnetError {
    #[error("tool {tool} not found at {path}: run `deploy/setup.sh` (or `make test`) first")]
    ToolMissing { tool: &'static str, path: PathBuf },
    #[error("{command} failed ({status}): {stderr}")]
    CommandFailed {
        command: String,
        status: std::process::ExitStatus,
        stderr: String,
    },
    #[error("artifact {path}: {reason}")]
    BadArtifact { path: PathBuf, reason: String },
    #[error(
        "committed artifacts differ from a fresh `forge build`: {0:?}; run `make artifacts` and commit"
    )]
    ArtifactsStale(Vec<String>),
    #[error("nats-server: {0}")]
    Nats(String),
    #[error("docker: {0}")]
    Docker(String),
    #[error("postgres: {0}")]
    Postgres(String),
    #[error("anvil: {0}")]
    Anvil(String),
    #[error("contract call {call}: {source}")]
    Contract {
        call: &'static str,
        #[source]
        source: Box<alloy::contract::Error>,
    },
    #[error("transaction {call}: {source}")]
    Pending {
        call: &'static str,
        #[source]
        source: Box<alloy::providers::PendingTransactionError>,
    },
    #[error("transaction {call} reverted")]
    Reverted { call: &'static str },
    #[error("transaction {call} emitted no {event}")]
    MissingEvent {
        call: &'static str,
        event: &'static str,
    },
    #[error(transparent)]
    ReadJob(#[from] gantry_runtime::market::ReadJobError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

impl DevnetError {
    /// For `map_err`: a failed contract call named `call`.
    pub fn contract(call: &'static str) -> impl FnOnce(alloy::contract::Error) -> Self {
        move |source| Self::Contract {
            call,
            source: Box::new(source),
        }
    }
}

/// Failures building or importing a local image (see `images`).
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("reading {path}: {source}; run `deploy/setup.sh` (installs busybox-static)")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{0} is not a statically linked 64-bit ELF: install Debian's busybox-static (`deploy/setup.sh`)"
    )]
    NotStatic(PathBuf),
    #[error("busybox applets: {0}")]
    Applets(String),
    #[error("building the rootfs tarball: {0}")]
    Tar(#[source] std::io::Error),
    #[error("docker: {0}")]
    Docker(#[from] bollard::errors::Error),
    #[error("image import: {0}")]
    Incomplete(String),
}
