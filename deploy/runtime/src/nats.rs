//! NATS for every service: connecting with the credentials a URL carries, and waiting for
//! a stream another service creates.

use std::time::Duration;

use async_nats::jetstream;
use gantry_protocol::names;
use gantry_protocol::nats::{NatsAddress, inbox_prefix};
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

/// The connect options of node `node`'s worker and the servers to give them. With
/// credentials in `url` (a user the operator configured for the node), as any service's;
/// without, by the handshake (design 19): every connection, the first and each one after
/// the server closed it (the credentials it granted expired), sends a fresh token from
/// `token` (`handshake::Token`, signed by the node's agent key). Replies come to the
/// node's own inbox either way, the only one its user may read.
pub fn node_options(
    url: &str,
    node: u64,
    token: impl Fn() -> String + Send + Sync + 'static,
) -> (String, async_nats::ConnectOptions) {
    let address = NatsAddress::parse(url);
    if address.credentials.is_some() {
        return (address.servers.clone(), address.connect_options());
    }
    let token = std::sync::Arc::new(token);
    let options = async_nats::ConnectOptions::with_auth_callback(move |_nonce| {
        let token = token();
        async move {
            let mut auth = async_nats::Auth::new();
            auth.token = Some(token);
            Ok(auth)
        }
    })
    .custom_inbox_prefix(inbox_prefix(&names::worker_user(node)));
    (address.servers, options)
}

/// A fresh handshake token for node `node` (design 19): issued now with a random nonce,
/// carrying `manifest`, signed by the agent key `signer` for `chain_id`'s market `market`.
pub fn handshake_token(
    signer: &alloy::signers::local::PrivateKeySigner,
    chain_id: u64,
    market: alloy::primitives::Address,
    node: u64,
    manifest: &gantry_protocol::handshake::Manifest,
) -> String {
    use alloy::signers::SignerSync as _;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let token = gantry_protocol::handshake::Token::unsigned(
        node,
        signer.address(),
        now,
        alloy::primitives::B128::from(rand::random::<[u8; 16]>()),
        manifest,
    );
    match signer.sign_hash_sync(&token.digest(chain_id, market)) {
        Ok(signature) => token.signed(&signature).encode(),
        Err(error) => {
            tracing::error!(%error, "signing the handshake");
            String::new()
        }
    }
}

/// Connects node `node`'s worker ([`node_options`]), retrying in the background while the
/// servers are down or refuse it: a refusal is logged with what to check.
pub async fn connect_node(
    url: &str,
    node: u64,
    token: impl Fn() -> String + Send + Sync + 'static,
) -> Result<async_nats::Client, ConnectError> {
    let (servers, options) = node_options(url, node, token);
    options
        .retry_on_initial_connect()
        .event_callback(move |event| async move {
            if let async_nats::Event::ServerError(error) = &event {
                tracing::warn!(
                    node,
                    %error,
                    "NATS refused this worker: the auth service's log says why (is the node \
                     registered, not exited, its stake at least the minimum, and this key its agent?)"
                );
            }
        })
        .connect(&servers)
        .await
        .map_err(|source| ConnectError { servers, source })
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

/// Object chunks [`crate::objects::put`] publishes, bytes (the object store's default).
pub(crate) const CHUNK_BYTES: usize = 128 * 1024;

/// What [`crate::objects::put`] stored: its size and SHA-256.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Put {
    pub size: u64,
    pub sha256: [u8; 32],
}

/// Publishes `reader`'s bytes as chunks to `$O.<bucket>.C.<nuid>`, then their
/// `ObjectInfo` (named `key`, with `metadata`) to `meta_subject`, with the `Nats-Rollup`
/// header `rollup` if any.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn put_chunks(
    js: &jetstream::Context,
    bucket: &str,
    nuid: &str,
    key: &str,
    meta_subject: String,
    rollup: Option<&str>,
    metadata: std::collections::HashMap<String, String>,
    mut reader: impl tokio::io::AsyncRead + Unpin,
) -> Result<Put, NatsError> {
    use base64::Engine as _;
    use jetstream::object_store::{ObjectInfo, ObjectOptions};
    use sha2::Digest as _;
    use tokio::io::AsyncReadExt as _;

    let chunk_subject = format!("$O.{bucket}.C.{nuid}");
    let mut sha = sha2::Sha256::new();
    let (mut size, mut chunks) = (0usize, 0usize);
    let mut buffer = vec![0u8; CHUNK_BYTES];
    loop {
        // A whole chunk unless the bytes end first.
        let mut filled = 0;
        while filled < CHUNK_BYTES {
            let read = reader
                .read(&mut buffer[filled..])
                .await
                .map_err(|e| NatsError::new("reading the object's bytes", e))?;
            if read == 0 {
                break;
            }
            filled += read;
        }
        if filled == 0 {
            break;
        }
        sha.update(&buffer[..filled]);
        js.publish(
            chunk_subject.clone(),
            bytes::Bytes::copy_from_slice(&buffer[..filled]),
        )
        .await
        .map_err(|e| NatsError::new("publishing an object chunk", e))?
        .await
        .map_err(|e| NatsError::new("an object chunk's acknowledgement", e))?;
        size += filled;
        chunks += 1;
        if filled < CHUNK_BYTES {
            break;
        }
    }
    let sha256: [u8; 32] = sha.finalize().into();
    let info = ObjectInfo {
        name: key.to_owned(),
        description: None,
        metadata,
        headers: None,
        options: Some(ObjectOptions {
            link: None,
            max_chunk_size: Some(CHUNK_BYTES),
        }),
        bucket: bucket.to_owned(),
        nuid: nuid.to_owned(),
        size,
        chunks,
        modified: None,
        digest: Some(format!(
            "SHA-256={}",
            base64::engine::general_purpose::URL_SAFE.encode(sha256)
        )),
        deleted: false,
    };
    let mut headers = async_nats::HeaderMap::new();
    if let Some(rollup) = rollup {
        headers.insert("Nats-Rollup", rollup);
    }
    let meta = serde_json::to_vec(&info).map_err(|e| NatsError::new("the object's metadata", e))?;
    js.publish_with_headers(meta_subject, headers, meta.into())
        .await
        .map_err(|e| NatsError::new("publishing the object's metadata", e))?
        .await
        .map_err(|e| NatsError::new("the object's metadata's acknowledgement", e))?;
    Ok(Put {
        size: size as u64,
        sha256,
    })
}
