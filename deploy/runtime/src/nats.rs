//! NATS for every service: connecting with the credentials a URL carries, and waiting for
//! a stream another service creates.

use std::time::Duration;

use async_nats::jetstream;
use gantry_protocol::nats::NatsAddress;
use tokio_util::sync::CancellationToken;

/// A NATS operation that failed, with what was being done.
#[derive(Debug, thiserror::Error)]
#[error("nats: {op}")]
pub struct NatsError {
    pub op: &'static str,
    #[source]
    pub source: Box<dyn std::error::Error + Send + Sync>,
}

impl NatsError {
    pub fn new(
        op: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self {
            op,
            source: source.into(),
        }
    }

    pub(crate) fn lost(reason: &'static str) -> Self {
        Self::new(reason, std::io::Error::other(reason))
    }
}

/// Why a service could not connect.
#[derive(Debug, thiserror::Error)]
#[error("connecting to NATS at {servers}")]
pub struct ConnectError {
    pub servers: String,
    #[source]
    pub source: async_nats::ConnectError,
}

/// Connects to the servers of `url` (`nats://user:pass@host:port,…`: credentials become
/// connect options and are never logged). With `retry`, the first connection is retried
/// until it succeeds (services that may start before NATS); without, it fails at once
/// (clients such as the CLI).
pub async fn connect(url: &str, retry: bool) -> Result<async_nats::Client, ConnectError> {
    let address = NatsAddress::parse(url);
    let mut options = address.connect_options();
    if retry {
        options = options.retry_on_initial_connect();
    }
    options
        .connect(&address.servers)
        .await
        .map_err(|source| ConnectError {
            servers: address.servers.clone(),
            source,
        })
}

/// How often to look for a stream that is not there yet.
pub const STREAM_POLL: Duration = Duration::from_secs(1);

/// The stream `name` once it exists (its writer creates it, and may start after the
/// reader); `None` when `cancel` fired first. Logs once while it waits; `waiting` is told
/// when the wait starts and ends (a gauge, say).
pub async fn wait_for_stream(
    js: &jetstream::Context,
    name: &str,
    cancel: &CancellationToken,
    waiting: impl Fn(bool),
) -> Option<jetstream::stream::Stream> {
    let mut logged = false;
    loop {
        match js.get_stream(name).await {
            Ok(stream) => {
                if logged {
                    waiting(false);
                }
                return Some(stream);
            }
            Err(error) => {
                if !logged {
                    tracing::info!(stream = name, %error, "waiting for the stream");
                    waiting(true);
                    logged = true;
                }
                tokio::select! {
                    () = cancel.cancelled() => return None,
                    () = tokio::time::sleep(STREAM_POLL) => {}
                }
            }
        }
    }
}
