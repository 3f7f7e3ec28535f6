//! Node-scoped objects (design 19, §2.1): a bucket every node writes (checkpoints), each
//! node under its own id, which the permissions enforce (a permission cannot name part of
//! a subject token, so the node is a token of its own):
//!
//! ```text
//!   $O.<bucket>.C.<node>.<nuid>              the chunks
//!   $O.<bucket>.M.<node>.<base64url(key)>    the metadata: async-nats's ObjectInfo JSON,
//!                                            its nuid "<node>.<nuid>"
//! ```
//!
//! The bucket's stream refuses rollup headers (with them a writer could wipe the bucket
//! from its own subject). A reader names the node and the key; the node is taken from the
//! subject, never from the JSON, and metadata whose nuid is not the node's and one plain
//! nuid is refused (anything else could name another node's chunks, or all of them). A
//! writer may still lie in its own metadata: [`Object::bytes`] reads at most the chunks
//! and bytes the metadata names and the caller's limit, gives up when a chunk is slow to
//! come, and checks the SHA-256. async-nats's `ObjectStore::get` does not find these
//! objects: [`get`] does.

use std::collections::HashMap;

use async_nats::jetstream::{self, consumer::push, object_store::ObjectInfo, stream};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE;
use bytes::Bytes;
use futures::{Stream, StreamExt as _};
use sha2::Digest as _;

use crate::nats::{CHUNK_BYTES, NatsError, Put};

/// A chunk not delivered within this is the end of the read (the stream holds every
/// chunk already: a wait this long means it is not there).
pub const CHUNK_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The stream name of the object store `bucket`.
pub fn stream_name(bucket: &str) -> String {
    format!("OBJ_{bucket}")
}

/// The stream of a node-scoped bucket (an object store's subjects, no rollups).
pub fn stream_config(bucket: &str, replicas: usize) -> stream::Config {
    stream::Config {
        name: stream_name(bucket),
        subjects: vec![format!("$O.{bucket}.C.>"), format!("$O.{bucket}.M.>")],
        allow_rollup: false,
        allow_direct: true,
        discard: stream::DiscardPolicy::New,
        storage: stream::StorageType::File,
        num_replicas: replicas,
        ..Default::default()
    }
}

/// The node-scoped bucket `bucket`, made with `replicas` when missing (its stream as
/// [`stream_config`]; one made before without rollups off is updated).
pub async fn open(
    js: &jetstream::Context,
    bucket: &str,
    replicas: usize,
) -> Result<stream::Stream, NatsError> {
    let name = stream_name(bucket);
    match js.get_stream(&name).await {
        Ok(mut existing) => {
            let info = existing
                .info()
                .await
                .map_err(|e| NatsError::new("the bucket's info", e))?;
            if info.config.allow_rollup {
                let config = stream::Config {
                    allow_rollup: false,
                    ..info.config.clone()
                };
                js.update_stream(config)
                    .await
                    .map_err(|e| NatsError::new("turning the bucket's rollups off", e))?;
            }
            Ok(existing)
        }
        Err(_) => js
            .get_or_create_stream(stream_config(bucket, replicas))
            .await
            .map_err(|e| NatsError::new("creating the bucket", e)),
    }
}

fn meta_subject(bucket: &str, node: u64, key: &str) -> String {
    format!("$O.{bucket}.M.{node}.{}", URL_SAFE.encode(key))
}

/// Puts `reader`'s bytes as node `node`'s object `key` with `metadata`, without reading
/// the bucket (the writer needs no read permission): chunks first, then the metadata,
/// every publish acknowledged. An earlier version of the key stays in the stream (no
/// rollup) until its limits drop it; readers take the latest.
pub async fn put(
    js: &jetstream::Context,
    bucket: &str,
    node: u64,
    key: &str,
    metadata: HashMap<String, String>,
    reader: impl tokio::io::AsyncRead + Unpin,
) -> Result<Put, NatsError> {
    let nuid = format!("{node}.{}", nuid::next());
    crate::nats::put_chunks(
        js,
        bucket,
        &nuid,
        key,
        meta_subject(bucket, node, key),
        None,
        metadata,
        reader,
    )
    .await
}

/// Node `node`'s object `key`, found: its metadata and its bytes.
pub struct Object {
    pub info: ObjectInfo,
    chunks: push::Ordered,
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Object")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Why an object could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetError {
    #[error(transparent)]
    Nats(#[from] NatsError),
    #[error("the metadata of {0} is not an object's, or names chunks not its node's")]
    Foreign(String),
}

/// Whether `nuid` is `<node>.<one nuid>`: 22 letters and digits after the node, as
/// [`put`] writes (no dot, no wildcard, nothing of another node).
fn is_own_nuid(nuid: &str, node: u64) -> bool {
    nuid.strip_prefix(&format!("{node}."))
        .is_some_and(|own| own.len() == 22 && own.bytes().all(|b| b.is_ascii_alphanumeric()))
}

/// Node `node`'s object `key` in `bucket`; `None` when there is none (or it was deleted).
pub async fn get(
    js: &jetstream::Context,
    bucket: &str,
    node: u64,
    key: &str,
) -> Result<Option<Object>, GetError> {
    use async_nats::jetstream::stream::DirectGetErrorKind;
    let stream = js
        .get_stream_no_info(stream_name(bucket))
        .await
        .map_err(|e| NatsError::new("the bucket", e))?;
    let subject = meta_subject(bucket, node, key);
    let message = match stream.direct_get_last_for_subject(&subject).await {
        Ok(message) => message,
        Err(e) if e.kind() == DirectGetErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(NatsError::new("the object's metadata", e).into()),
    };
    let info: ObjectInfo =
        serde_json::from_slice(&message.payload).map_err(|_| GetError::Foreign(subject.clone()))?;
    if info.deleted {
        return Ok(None);
    }
    let chunks_for_size = info.size.div_ceil(CHUNK_BYTES);
    if !is_own_nuid(&info.nuid, node) || info.bucket != bucket || info.chunks != chunks_for_size {
        return Err(GetError::Foreign(subject));
    }
    let chunks = stream
        .create_consumer(push::OrderedConfig {
            deliver_subject: js.client().new_inbox(),
            filter_subject: format!("$O.{bucket}.C.{}", info.nuid),
            ..Default::default()
        })
        .await
        .map_err(|e| NatsError::new("reading the object's chunks", e))?
        .messages()
        .await
        .map_err(|e| NatsError::new("reading the object's chunks", e))?;
    Ok(Some(Object { info, chunks }))
}

impl Object {
    /// The SHA-256 the metadata names, if it names one.
    pub fn sha256(&self) -> Option<[u8; 32]> {
        let named = self.info.digest.as_deref()?.strip_prefix("SHA-256=")?;
        URL_SAFE.decode(named).ok()?.try_into().ok()
    }

    /// The object's bytes, chunk by chunk; the last item is an error if they are not the
    /// size and SHA-256 the metadata names, or more than `limit` bytes, or a chunk does
    /// not come within [`CHUNK_WAIT`].
    pub fn bytes(self, limit: u64) -> impl Stream<Item = std::io::Result<Bytes>> + Send {
        struct Reading {
            chunks: push::Ordered,
            left: usize,
            size: usize,
            sha: sha2::Sha256,
            digest: Option<String>,
            done: bool,
        }
        let state = Reading {
            chunks: self.chunks,
            left: self.info.chunks,
            size: 0,
            sha: sha2::Sha256::new(),
            digest: self.info.digest.clone(),
            done: false,
        };
        let expected_size = self.info.size;
        futures::stream::unfold(state, move |mut state| async move {
            if state.done {
                return None;
            }
            if state.left == 0 {
                state.done = true;
                let digest = format!(
                    "SHA-256={}",
                    URL_SAFE.encode(std::mem::take(&mut state.sha).finalize())
                );
                let whole = state.size == expected_size
                    && state.digest.as_deref().is_none_or(|named| named == digest);
                return (!whole).then(|| {
                    (
                        Err(std::io::Error::other(
                            "the object's bytes are not the size and SHA-256 its metadata names",
                        )),
                        state,
                    )
                });
            }
            let Ok(next) = tokio::time::timeout(CHUNK_WAIT, state.chunks.next()).await else {
                state.done = true;
                return Some((
                    Err(std::io::Error::other("a chunk of the object did not come")),
                    state,
                ));
            };
            match next {
                Some(Ok(message)) => {
                    state.left -= 1;
                    state.size += message.payload.len();
                    if state.size > expected_size || state.size as u64 > limit {
                        state.done = true;
                        return Some((
                            Err(std::io::Error::other(
                                "the object is larger than its metadata says or than allowed",
                            )),
                            state,
                        ));
                    }
                    state.sha.update(&message.payload);
                    Some((Ok(message.payload.clone()), state))
                }
                Some(Err(e)) => {
                    state.done = true;
                    Some((Err(std::io::Error::other(e)), state))
                }
                None => {
                    state.done = true;
                    Some((
                        Err(std::io::Error::other("the object's chunks ended early")),
                        state,
                    ))
                }
            }
        })
        // Ended for good: an HTTP body is polled again after its end.
        .fuse()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nuid_is_its_nodes_and_one_plain_nuid() {
        let own = format!("3.{}", nuid::next());
        assert!(is_own_nuid(&own, 3));
        for other in [
            format!("4.{}", nuid::next()),
            "3.".to_owned(),
            "3.>".to_owned(),
            "3.*".to_owned(),
            format!("3.{}.x", nuid::next()),
            format!("3.{}", "a".repeat(21)),
            format!("3.{} ", "a".repeat(21)),
            format!("33.{}", nuid::next()),
        ] {
            assert!(!is_own_nuid(&other, 3), "{other}");
        }
    }
}
