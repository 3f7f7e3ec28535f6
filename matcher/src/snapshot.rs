//! Snapshots of the view, so that a restart does not replay the whole chain stream: every
//! `--snapshot-every` messages (once caught up, at a commit) a service writes what its
//! projection keeps ([`Saved`]) to its object store bucket, signed with its own key; on
//! start it reads its snapshot back, checks it and applies only the stream's tail.
//!
//! ```text
//!  object  gantry_<chain>_snapshots_<service> / <signer address>
//!  bytes   "GSNP" | header length (u32, big-endian) | header (JSON) | body (gzip of JSON Saved)
//!  header  v, service, chain, market, registry, the stream position (sequence), the commit
//!          it stands at (commit sequence, block, hash), the body's SHA-256, the signature
//! ```
//!
//! A snapshot is taken only if all of these hold, else the service replays from the start:
//! its version is this build's; it names this service, chain and contracts; it is signed by
//! this service's own account over all of the above (a writer without the key cannot make
//! one, and a byte changed anywhere breaks the signature or the body's hash); the stream's
//! message at its commit sequence is the commit of its block with its hash (a snapshot of
//! another stream or of a chain reset does not match; one whose block was reorganised
//! away since matches, and the retraction in the tail undoes that block, which the
//! snapshot keeps among its retained blocks); and the view rebuilt from it stands at that
//! block. The header is read and checked before the body: a body is read only for a
//! header signed by this account, and only as many bytes as it names. A snapshot is never trusted further than
//! that: the contract checks every call the view leads to.

use std::io::{Read as _, Write as _};

use alloy::primitives::{Address, B256, Bytes, keccak256};
use alloy::signers::SignerSync as _;
use alloy::signers::local::PrivateKeySigner;
use async_nats::jetstream::{self, object_store};
use gantry_protocol::names;
use gantry_runtime::chain_stream::{AtSequence, at_sequence};
use serde::{Deserialize, Serialize};
use sha2::Digest as _;
use tokio::io::AsyncReadExt as _;

use crate::feed::Feed;
use crate::project::{Projection, Saved};

/// The snapshot format this build writes and reads.
pub const SNAPSHOT_VERSION: u32 = 1;
const MAGIC: &[u8; 4] = b"GSNP";
/// A snapshot's body larger than this is not read (compressed bytes), nor written.
pub const MAX_SNAPSHOT_BYTES: u64 = 1 << 30;
/// Nor one that expands past this.
pub const MAX_EXPANDED_BYTES: u64 = 4 << 30;
/// The snapshot bucket's limit: a few snapshots (one per signing account) at most.
const BUCKET_BYTES: i64 = 4 << 30;
const MAX_HEADER_BYTES: usize = 64 << 10;

/// Whose snapshot: the service, its chain and contracts, and its signing account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    pub service: &'static str,
    pub chain_id: u64,
    pub market: Address,
    pub registry: Address,
    pub signer: Address,
}

impl Identity {
    /// The bucket of this service's snapshots.
    pub fn bucket(&self) -> String {
        names::snapshots_bucket(self.chain_id, self.service)
    }

    /// The object of this signer's snapshot.
    pub fn object(&self) -> String {
        format!("{:#x}", self.signer)
    }
}

/// What a snapshot says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Header {
    pub v: u32,
    pub service: String,
    pub chain_id: u64,
    pub market: Address,
    pub registry: Address,
    /// The stream position: the last message the view applied.
    pub sequence: u64,
    /// The sequence of the commit of `block`, the last block applied.
    pub commit_sequence: u64,
    pub block: u64,
    pub hash: B256,
    /// The body's size, its SHA-256 and the size of the JSON it expands to.
    pub body_bytes: u64,
    pub body_sha256: B256,
    pub json_bytes: u64,
    /// The signer's signature of [`Header::digest`].
    pub signature: Bytes,
}

impl Header {
    /// What the signature covers: every field but the signature.
    pub fn digest(&self) -> B256 {
        let mut bytes = Vec::with_capacity(256);
        bytes.extend_from_slice(b"gantry view snapshot");
        bytes.extend_from_slice(&self.v.to_be_bytes());
        bytes.extend_from_slice(&(self.service.len() as u64).to_be_bytes());
        bytes.extend_from_slice(self.service.as_bytes());
        bytes.extend_from_slice(&self.chain_id.to_be_bytes());
        bytes.extend_from_slice(self.market.as_slice());
        bytes.extend_from_slice(self.registry.as_slice());
        bytes.extend_from_slice(&self.sequence.to_be_bytes());
        bytes.extend_from_slice(&self.commit_sequence.to_be_bytes());
        bytes.extend_from_slice(&self.block.to_be_bytes());
        bytes.extend_from_slice(self.hash.as_slice());
        bytes.extend_from_slice(&self.body_bytes.to_be_bytes());
        bytes.extend_from_slice(self.body_sha256.as_slice());
        bytes.extend_from_slice(&self.json_bytes.to_be_bytes());
        keccak256(bytes)
    }
}

/// Where a snapshot stands on the stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    pub sequence: u64,
    pub commit_sequence: u64,
    pub block: u64,
    pub hash: B256,
}

/// Why a snapshot was not taken.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error("not a snapshot ({0})")]
    Malformed(String),
    #[error("snapshot format {0}, this build reads {SNAPSHOT_VERSION}")]
    Version(u32),
    #[error("the snapshot is of {0}, not of this service, chain and contracts")]
    Foreign(String),
    #[error("the snapshot is not signed by this service's account {0}")]
    Signature(Address),
    #[error("the snapshot's body is not the one its header names")]
    Body,
    #[error("the snapshot's body does not read: {0}")]
    BodyUnreadable(String),
    #[error(
        "the chain stream's message {sequence} is not the commit of block {block} ({hash}): {found}"
    )]
    Position {
        sequence: u64,
        block: u64,
        hash: B256,
        found: String,
    },
    #[error("the view rebuilt from the snapshot stands at block {0}, not at its block {1}")]
    Inconsistent(u64, u64),
    #[error("reading it: {0}")]
    Read(String),
}

impl Refused {
    fn label(&self) -> &'static str {
        match self {
            Refused::Malformed(_) | Refused::BodyUnreadable(_) => "malformed",
            Refused::Version(_) => "version",
            Refused::Foreign(_) => "foreign",
            Refused::Signature(_) => "signature",
            Refused::Body => "body",
            Refused::Position { .. } => "position",
            Refused::Inconsistent(..) => "inconsistent",
            Refused::Read(_) => "read",
        }
    }
}

/// The snapshot's bytes: the header, signed by `signer`, then the body.
pub fn encode(
    identity: &Identity,
    signer: &PrivateKeySigner,
    at: Position,
    saved: &Saved,
) -> Result<Vec<u8>, std::io::Error> {
    let json = serde_json::to_vec(saved)?;
    let mut body = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    body.write_all(&json)?;
    let body = body.finish()?;
    if body.len() as u64 > MAX_SNAPSHOT_BYTES || json.len() as u64 > MAX_EXPANDED_BYTES {
        return Err(std::io::Error::other(format!(
            "the view's snapshot would be {} bytes ({} expanded), past the limits",
            body.len(),
            json.len()
        )));
    }
    let mut header = Header {
        v: SNAPSHOT_VERSION,
        service: identity.service.to_string(),
        chain_id: identity.chain_id,
        market: identity.market,
        registry: identity.registry,
        sequence: at.sequence,
        commit_sequence: at.commit_sequence,
        block: at.block,
        hash: at.hash,
        body_bytes: body.len() as u64,
        body_sha256: B256::from(<[u8; 32]>::from(sha2::Sha256::digest(&body))),
        json_bytes: json.len() as u64,
        signature: Bytes::new(),
    };
    let signature = signer
        .sign_hash_sync(&header.digest())
        .map_err(std::io::Error::other)?;
    header.signature = Bytes::from(signature.as_bytes().to_vec());
    let header = serde_json::to_vec(&header)?;
    let mut bytes = Vec::with_capacity(8 + header.len() + body.len());
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(header.len() as u32).to_be_bytes());
    bytes.extend_from_slice(&header);
    bytes.extend_from_slice(&body);
    Ok(bytes)
}

/// The snapshot in `bytes`, if it is `identity`'s: its header checked, its body read.
pub fn decode(identity: &Identity, bytes: &[u8]) -> Result<(Header, Saved), Refused> {
    let length = header_length(bytes)?;
    let rest = &bytes[8..];
    if length > rest.len() {
        return Err(Refused::Malformed("header length".into()));
    }
    let (header, body) = rest.split_at(length);
    let header = decode_header(identity, header)?;
    let saved = decode_body(&header, body)?;
    Ok((header, saved))
}

/// The header's length, from the snapshot's first 8 bytes.
fn header_length(start: &[u8]) -> Result<usize, Refused> {
    let malformed = |what: &str| Refused::Malformed(what.to_string());
    let rest = start
        .strip_prefix(MAGIC)
        .ok_or_else(|| malformed("no magic"))?;
    let length = rest
        .first_chunk::<4>()
        .ok_or_else(|| malformed("no header length"))?;
    let length = u32::from_be_bytes(*length) as usize;
    if length > MAX_HEADER_BYTES {
        return Err(malformed("header length"));
    }
    Ok(length)
}

/// The header, if it is `identity`'s and signed by its account (read before the body: a
/// body is never read for a header that is not).
pub fn decode_header(identity: &Identity, bytes: &[u8]) -> Result<Header, Refused> {
    let header: Header =
        serde_json::from_slice(bytes).map_err(|e| Refused::Malformed(e.to_string()))?;
    if header.v != SNAPSHOT_VERSION {
        return Err(Refused::Version(header.v));
    }
    if header.service != identity.service
        || header.chain_id != identity.chain_id
        || header.market != identity.market
        || header.registry != identity.registry
    {
        return Err(Refused::Foreign(format!(
            "{} on chain {} (market {}, registry {})",
            header.service, header.chain_id, header.market, header.registry
        )));
    }
    let signed_by = alloy::primitives::Signature::from_raw(&header.signature)
        .ok()
        .and_then(|s| s.recover_address_from_prehash(&header.digest()).ok());
    if signed_by != Some(identity.signer) {
        return Err(Refused::Signature(identity.signer));
    }
    if header.body_bytes > MAX_SNAPSHOT_BYTES || header.json_bytes > MAX_EXPANDED_BYTES {
        return Err(Refused::Malformed("a body past the limits".into()));
    }
    Ok(header)
}

/// The body the (checked) header names.
fn decode_body(header: &Header, body: &[u8]) -> Result<Saved, Refused> {
    if body.len() as u64 != header.body_bytes
        || B256::from(<[u8; 32]>::from(sha2::Sha256::digest(body))) != header.body_sha256
    {
        return Err(Refused::Body);
    }
    let mut json = Vec::with_capacity(header.json_bytes as usize);
    flate2::read::GzDecoder::new(body)
        .take(header.json_bytes)
        .read_to_end(&mut json)
        .map_err(|e| Refused::BodyUnreadable(e.to_string()))?;
    let saved: Saved =
        serde_json::from_slice(&json).map_err(|e| Refused::BodyUnreadable(e.to_string()))?;
    Ok(saved)
}

/// A view restored from a snapshot: the projection and where the stream goes on.
#[derive(Debug)]
pub struct Restored {
    pub projection: Projection,
    pub position: Position,
}

/// This service's snapshot, checked against the chain stream and rebuilt into a
/// projection; `None` when there is none or it is refused (said in the log and
/// `gantry_snapshots_total`): the service then replays the stream from its start.
pub async fn restore(js: &jetstream::Context, identity: &Identity) -> Option<Restored> {
    let started = std::time::Instant::now();
    let (header, body) = match read(js, identity).await {
        Ok(Some(read)) => read,
        Ok(None) => {
            tracing::info!(
                service = identity.service,
                "no snapshot: replaying the chain stream"
            );
            crate::metrics::snapshots(identity.service, "missing");
            return None;
        }
        Err(refused) => return refuse(identity, &refused),
    };
    let size = body.len();
    let checking = header.clone();
    let decoded = tokio::task::spawn_blocking(move || decode_body(&checking, &body))
        .await
        .map_err(|e| Refused::Read(e.to_string()))
        .and_then(|decoded| decoded);
    let saved = match decoded {
        Ok(saved) => saved,
        Err(refused) => return refuse(identity, &refused),
    };
    let position = Position {
        sequence: header.sequence,
        commit_sequence: header.commit_sequence,
        block: header.block,
        hash: header.hash,
    };
    if let Err(refused) = check_position(js, identity.chain_id, position).await {
        return refuse(identity, &refused);
    }
    let rebuilt = tokio::task::spawn_blocking(move || {
        Projection::restore(saved, position.block, position.hash)
    })
    .await;
    let projection = match rebuilt {
        Ok(Ok(projection)) => projection,
        Ok(Err(e)) => return refuse(identity, &Refused::BodyUnreadable(e.to_string())),
        Err(e) => return refuse(identity, &Refused::Read(e.to_string())),
    };
    if projection.view().block != position.block {
        return refuse(
            identity,
            &Refused::Inconsistent(projection.view().block, position.block),
        );
    }
    tracing::info!(
        service = identity.service,
        sequence = position.sequence,
        block = position.block,
        bytes = size,
        elapsed_ms = started.elapsed().as_millis() as u64,
        "restored the view from its snapshot; reading the chain stream after it"
    );
    crate::metrics::snapshots(identity.service, "restored");
    Some(Restored {
        projection,
        position,
    })
}

fn refuse(identity: &Identity, refused: &Refused) -> Option<Restored> {
    tracing::warn!(
        service = identity.service,
        error = %refused,
        "refusing the snapshot: replaying the chain stream"
    );
    crate::metrics::snapshots(identity.service, refused.label());
    None
}

/// The snapshot object's header, checked (identity, signature, limits), and then its
/// body's bytes, exactly as many as the header names; `None` when there is none.
async fn read(
    js: &jetstream::Context,
    identity: &Identity,
) -> Result<Option<(Header, Vec<u8>)>, Refused> {
    let Ok(store) = js.get_object_store(identity.bucket()).await else {
        return Ok(None);
    };
    let mut object = match store.get(identity.object()).await {
        Ok(object) => object,
        Err(e) if e.kind() == object_store::GetErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Refused::Read(e.to_string())),
    };
    let size = object.info().size as u64;
    let read = |e: std::io::Error| Refused::Read(e.to_string());
    let mut start = [0u8; 8];
    object.read_exact(&mut start).await.map_err(read)?;
    let length = header_length(&start)?;
    let mut header = vec![0u8; length];
    object.read_exact(&mut header).await.map_err(read)?;
    let header = decode_header(identity, &header)?;
    if size != 8 + length as u64 + header.body_bytes {
        return Err(Refused::Body);
    }
    let mut body = vec![0u8; header.body_bytes as usize];
    object.read_exact(&mut body).await.map_err(read)?;
    // The object store checks the digest its metadata names once the object is read to
    // its end.
    let mut end = Vec::new();
    object.read_to_end(&mut end).await.map_err(read)?;
    if !end.is_empty() {
        return Err(Refused::Body);
    }
    Ok(Some((header, body)))
}

/// Whether the chain stream's message at the snapshot's commit sequence is its block's
/// commit.
async fn check_position(
    js: &jetstream::Context,
    chain_id: u64,
    at: Position,
) -> Result<(), Refused> {
    let refused = |found: String| Refused::Position {
        sequence: at.commit_sequence,
        block: at.block,
        hash: at.hash,
        found,
    };
    if at.sequence < at.commit_sequence {
        return Err(refused("the position is before its commit".into()));
    }
    let stream = js
        .get_stream_no_info(names::stream_name(chain_id))
        .await
        .map_err(|e| refused(format!("no chain stream ({e})")))?;
    match at_sequence(&stream, chain_id, at.commit_sequence).await {
        Ok(AtSequence::Commit(commit))
            if commit.block_number == at.block && commit.block_hash == at.hash =>
        {
            Ok(())
        }
        Ok(AtSequence::Commit(commit)) => Err(refused(format!(
            "the commit of block {} ({})",
            commit.block_number, commit.block_hash
        ))),
        Ok(AtSequence::Other) => Err(refused("not a commit".into())),
        Ok(AtSequence::Missing) => Err(refused("no such message".into())),
        Err(e) => Err(refused(format!("not readable ({e})"))),
    }
}

/// Writes a snapshot every `every` messages applied (0: never), once the view is caught
/// up and stands at a commit; one at a time, in a task of its own (the service's loop
/// only clones what the projection keeps).
#[derive(Debug)]
pub struct Snapshotter {
    js: jetstream::Context,
    identity: Identity,
    signer: PrivateKeySigner,
    replicas: usize,
    every: u64,
    /// The position of the last snapshot taken (or restored).
    last: u64,
    writing: Option<tokio::task::JoinHandle<()>>,
}

impl Snapshotter {
    pub fn new(
        js: jetstream::Context,
        identity: Identity,
        signer: PrivateKeySigner,
        replicas: usize,
        every: u64,
        last: u64,
    ) -> Self {
        Self {
            js,
            identity,
            signer,
            replicas,
            every,
            last,
            writing: None,
        }
    }

    /// Takes a snapshot if one is due.
    pub fn maybe(&mut self, projection: &Projection, feed: &Feed) {
        if self.every == 0
            || feed.applied < self.last.saturating_add(self.every)
            || !feed.caught_up()
            || self.writing.as_ref().is_some_and(|w| !w.is_finished())
        {
            return;
        }
        let Some(commit_sequence) = feed.last_commit else {
            return;
        };
        let Some((saved, at)) = projection.save() else {
            return;
        };
        let Some(hash) = at.hash else {
            return;
        };
        let position = Position {
            sequence: feed.applied,
            commit_sequence,
            block: at.number,
            hash,
        };
        self.last = feed.applied;
        let (js, identity, signer, replicas) = (
            self.js.clone(),
            self.identity.clone(),
            self.signer.clone(),
            self.replicas,
        );
        self.writing = Some(tokio::spawn(async move {
            match write(&js, &identity, &signer, replicas, position, saved).await {
                Ok(bytes) => {
                    tracing::info!(
                        service = identity.service,
                        sequence = position.sequence,
                        block = position.block,
                        bytes,
                        "snapshot written"
                    );
                    crate::metrics::snapshots(identity.service, "written");
                }
                Err(e) => {
                    tracing::warn!(service = identity.service, error = %e, "writing a snapshot");
                    crate::metrics::snapshots(identity.service, "write_failed");
                }
            }
        }));
    }
}

/// Encodes and puts one snapshot; its size.
pub async fn write(
    js: &jetstream::Context,
    identity: &Identity,
    signer: &PrivateKeySigner,
    replicas: usize,
    position: Position,
    saved: Saved,
) -> anyhow::Result<usize> {
    let encoding = (identity.clone(), signer.clone());
    let bytes =
        tokio::task::spawn_blocking(move || encode(&encoding.0, &encoding.1, position, &saved))
            .await??;
    let store = match js.get_object_store(identity.bucket()).await {
        Ok(store) => store,
        Err(_) => {
            js.create_object_store(object_store::Config {
                bucket: identity.bucket(),
                description: Some("the services' view snapshots, by signer".into()),
                storage: jetstream::stream::StorageType::File,
                num_replicas: replicas,
                max_bytes: BUCKET_BYTES,
                ..Default::default()
            })
            .await?
        }
    };
    let size = bytes.len();
    store
        .put(identity.object().as_str(), &mut bytes.as_slice())
        .await?;
    Ok(size)
}
