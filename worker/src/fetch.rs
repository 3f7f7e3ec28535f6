//! Job inputs: downloads each [`InputSpec`] into the node's content-addressed cache and
//! says where it landed. A known `sha256` already in the cache costs no download.
//!
//! ```text
//!   InputSpec.uri ──parse_source──▶ http(s) · ipfs (gateway) · nats object · s3 · file
//!        │                                   │ stream, hash and count, stop past the limit
//!        │ sha256 known and cached           ▼
//!        └──────────▶ hit          <cache>/tmp/fetch-* ──fsync, verify──▶ <cache>/sha256/<hex>
//! ```
//!
//! Failures carry a [`FaultClass`]: the job's fault (bad or unservable input), the node's
//! (its cache or settings) or transient (network, server 5xx), and only transient ones are
//! retried here, with backoff. Anything a job's URI can provoke is never `Node`, so that a
//! job cannot get a node marked unhealthy. Messages are short and hold no URI or secret,
//! since they become on-chain reject reasons.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use gantry_protocol::spec::InputSpec;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, BufWriter};
use tracing::{debug, info, instrument, warn};
use url::Url;

use crate::fault::Failure;
pub use crate::fault::FaultClass;

/// Time to open a TCP connection to an input's server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the next piece of an input once its transfer has started.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for a source to start answering (response headers, object info).
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// Wait before the first retry of a transient failure; doubled each time up to 5 s.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// Writes to the cache go through a buffer this large, to keep blocking writes few.
const WRITE_BUFFER_BYTES: usize = 1 << 20;
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Longest free-form detail kept in an error message (the whole stays under 100 chars).
const MAX_DETAIL_CHARS: usize = 64;

const CACHE_HITS_TOTAL: &str = "gantry_worker_cache_hits_total";
const CACHE_MISSES_TOTAL: &str = "gantry_worker_cache_misses_total";
const INPUT_BYTES_TOTAL: &str = "gantry_worker_input_bytes_total";

/// Where inputs are cached and how each scheme is reached.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// `<cache_dir>/sha256/<hex>` holds complete files, `<cache_dir>/tmp` partial ones.
    pub cache_dir: PathBuf,
    /// `ipfs://<cid>/<path>` is fetched from `<gateway>/ipfs/<cid>/<path>`.
    pub ipfs_gateway: Url,
    /// `file:///x` is served only when `x`, canonicalised, is inside this directory;
    /// `None` refuses every `file://` input.
    pub local_root: Option<PathBuf>,
    /// Size limit of an input without `max_bytes`, bytes.
    pub default_max_bytes: u64,
    /// How `s3://<bucket>/<key>` is reached; `None` refuses `s3://` inputs.
    pub s3: Option<S3Settings>,
    /// Tries per input (at least one) when failures are transient.
    pub attempts: u32,
}

/// An S3-compatible endpoint and its credentials.
#[derive(Clone)]
pub struct S3Settings {
    /// Custom endpoint (MinIO, R2, …); `None` is AWS for the region.
    pub endpoint: Option<Url>,
    pub region: String,
    pub access_key_id: String,
    pub secret_access_key: String,
    /// Allow a plain `http://` endpoint.
    pub allow_http: bool,
}

impl std::fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint.as_ref().map(Url::as_str))
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .field("allow_http", &self.allow_http)
            .finish()
    }
}

/// A cached input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// `<cache_dir>/sha256/<sha256>`; never written again, so it can be mounted read-only.
    pub path: PathBuf,
    /// Lowercase hex SHA-256 of the content.
    pub sha256: String,
    pub size: u64,
    /// Whether it was already cached (no download happened).
    pub cache_hit: bool,
}

/// Why an input could not be cached. Messages are short and never contain the URI or a
/// credential: they may end up on-chain as reject reasons.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("unsupported input uri: {0}")]
    UnsupportedUri(&'static str),
    #[error("input sha256 must be 64 hex digits")]
    InvalidHash,
    #[error("input path is outside the node's local root")]
    Forbidden,
    #[error("input not found ({0})")]
    NotFound(&'static str),
    #[error("input access denied ({0})")]
    AccessDenied(&'static str),
    #[error("input server answered http {status}")]
    Http { status: u16 },
    #[error("input exceeds its limit of {limit} bytes")]
    TooLarge { limit: u64 },
    #[error(
        "input sha256 mismatch: expected {}…, got {}…",
        abbreviate(expected),
        abbreviate(actual)
    )]
    HashMismatch { expected: String, actual: String },
    #[error("{scheme} inputs are not served by this node")]
    SchemeDisabled { scheme: &'static str },
    #[error("input transfer timed out")]
    Timeout,
    #[error("input transfer failed: {0}")]
    Transfer(String),
    #[error("local input read failed: {}", detail(.0))]
    LocalRead(#[source] io::Error),
    #[error("input cache {op} failed: {}", detail(.source))]
    Cache {
        op: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("input fetcher setup: {0}")]
    Setup(String),
}

impl FetchError {
    pub fn class(&self) -> FaultClass {
        match self {
            Self::UnsupportedUri(_)
            | Self::InvalidHash
            | Self::Forbidden
            | Self::NotFound(_)
            | Self::AccessDenied(_)
            | Self::TooLarge { .. }
            | Self::HashMismatch { .. }
            // Another node may serve the scheme; the job must not make this one unhealthy.
            | Self::SchemeDisabled { .. } => FaultClass::Job,
            Self::Http { status } => http_status_class(*status),
            Self::Timeout | Self::Transfer(_) => FaultClass::Transient,
            Self::LocalRead(_) | Self::Cache { .. } | Self::Setup(_) => FaultClass::Node,
        }
    }
}

impl From<&FetchError> for Failure {
    fn from(err: &FetchError) -> Self {
        let reason = err.to_string();
        match err.class() {
            FaultClass::Job => Failure::job(reason),
            FaultClass::Node => Failure::node(reason),
            FaultClass::Transient => Failure::transient(reason),
        }
    }
}

/// Downloads inputs into the cache. Cheap to share behind an `Arc`; concurrent fetches
/// of the same content are safe (each writes its own temp file, the rename is atomic).
#[derive(Debug)]
pub struct Fetcher {
    http: reqwest::Client,
    nats: Option<async_nats::jetstream::Context>,
    config: FetchConfig,
    /// `config.local_root`, canonicalised once.
    local_root: Option<PathBuf>,
}

impl Fetcher {
    /// Creates the cache folders and the HTTP client. `nats` serves `nats://` inputs.
    pub fn new(
        mut config: FetchConfig,
        nats: Option<async_nats::jetstream::Context>,
    ) -> Result<Self, FetchError> {
        if !matches!(config.ipfs_gateway.scheme(), "http" | "https")
            || config.ipfs_gateway.cannot_be_a_base()
        {
            return Err(FetchError::Setup(
                "ipfs gateway must be an http(s) url".into(),
            ));
        }
        // Relative joins below keep the gateway's own path only with a trailing slash.
        if !config.ipfs_gateway.path().ends_with('/') {
            let path = format!("{}/", config.ipfs_gateway.path());
            config.ipfs_gateway.set_path(&path);
        }
        for dir in [sha256_dir(&config.cache_dir), tmp_dir(&config.cache_dir)] {
            std::fs::create_dir_all(&dir).map_err(|source| FetchError::Cache {
                op: "setup",
                source,
            })?;
        }
        let local_root =
            match &config.local_root {
                Some(root) => Some(std::fs::canonicalize(root).map_err(|e| {
                    FetchError::Setup(format!("local root {}: {e}", root.display()))
                })?),
                None => None,
            };
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(concat!("gantry-worker/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| FetchError::Setup(format!("http client: {e}")))?;
        Ok(Self {
            http,
            nats,
            config,
            local_root,
        })
    }

    /// Ensures the input is in the cache and returns where. Transient failures are tried
    /// again (`attempts` tries in all, with backoff) before being returned.
    #[instrument(
        name = "fetch_input",
        skip_all,
        fields(
            scheme = scheme_of(&input.uri),
            sha256 = input.sha256.as_deref(),
            bytes = tracing::field::Empty,
            cache_hit = tracing::field::Empty,
        )
    )]
    pub async fn fetch(&self, input: &InputSpec) -> Result<Fetched, FetchError> {
        let expected = input.sha256.as_deref().map(normalize_hash).transpose()?;
        let limit = input.max_bytes.unwrap_or(self.config.default_max_bytes);

        if let Some(hex) = &expected
            && let Some(hit) = self.lookup(hex).await?
        {
            // The same content is over this input's limit whether cached or not.
            if hit.size > limit {
                return Err(FetchError::TooLarge { limit });
            }
            record(&hit);
            metrics::counter!(CACHE_HITS_TOTAL).increment(1);
            debug!("input already cached");
            return Ok(hit);
        }
        metrics::counter!(CACHE_MISSES_TOTAL).increment(1);

        let source = parse_source(&input.uri, &self.config.ipfs_gateway)?;
        let attempts = self.config.attempts.max(1);
        let mut backoff = FIRST_BACKOFF;
        let mut attempt = 1;
        loop {
            match self.download(&source, limit, expected.as_deref()).await {
                Ok(fetched) => {
                    record(&fetched);
                    metrics::counter!(INPUT_BYTES_TOTAL).increment(fetched.size);
                    info!("input downloaded");
                    return Ok(fetched);
                }
                Err(err) if err.class() == FaultClass::Transient && attempt < attempts => {
                    warn!(attempt, error = %err, "input download failed, retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    attempt += 1;
                }
                Err(err) => {
                    warn!(attempt, error = %err, class = ?err.class(), "input download failed");
                    return Err(err);
                }
            }
        }
    }

    /// The cached file for `hex`, if complete files hold it.
    async fn lookup(&self, hex: &str) -> Result<Option<Fetched>, FetchError> {
        let path = sha256_dir(&self.config.cache_dir).join(hex);
        match tokio::fs::metadata(&path).await {
            Ok(meta) if meta.is_file() => Ok(Some(Fetched {
                path,
                sha256: hex.to_owned(),
                size: meta.len(),
                cache_hit: true,
            })),
            Ok(_) => Ok(None),
            Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(FetchError::Cache {
                op: "lookup",
                source,
            }),
        }
    }

    /// One try: streams the source into a temp file, then moves it into the cache. The
    /// temp file is removed on every early return (the `TempPath` guard).
    async fn download(
        &self,
        source: &Source,
        limit: u64,
        expected: Option<&str>,
    ) -> Result<Fetched, FetchError> {
        let body = tokio::time::timeout(OPEN_TIMEOUT, self.open(source))
            .await
            .map_err(|_| FetchError::Timeout)??;
        if body.declared_len.is_some_and(|len| len > limit) {
            return Err(FetchError::TooLarge { limit });
        }
        // Read-only for everyone: containers may run as any user, and cached content
        // never changes.
        let (file, temp_path) = tempfile::Builder::new()
            .prefix("fetch-")
            .permissions(std::fs::Permissions::from_mode(0o444))
            .tempfile_in(tmp_dir(&self.config.cache_dir))
            .map_err(|source| FetchError::Cache {
                op: "create",
                source,
            })?
            .into_parts();
        let (size, actual) = copy_limited(body.chunks, file, limit).await?;
        if let Some(expected) = expected
            && expected != actual
        {
            return Err(FetchError::HashMismatch {
                expected: expected.to_owned(),
                actual,
            });
        }
        let dir = sha256_dir(&self.config.cache_dir);
        let path = dir.join(&actual);
        if tokio::fs::try_exists(&path).await.unwrap_or(false) {
            // Same hash, same content: another fetch got there first.
            drop(temp_path);
        } else {
            temp_path.persist(&path).map_err(|e| FetchError::Cache {
                op: "rename",
                source: e.error,
            })?;
            // Makes the rename itself durable.
            let sync_error = |source| FetchError::Cache { op: "sync", source };
            let dir = tokio::fs::File::open(&dir).await.map_err(sync_error)?;
            dir.sync_all().await.map_err(sync_error)?;
        }
        Ok(Fetched {
            path,
            sha256: actual,
            size,
            cache_hit: false,
        })
    }

    /// Starts the transfer: the body and its announced length, if any.
    async fn open(&self, source: &Source) -> Result<Body, FetchError> {
        match source {
            Source::Http(url) => self.open_http(url.clone()).await,
            Source::Nats { bucket, key } => self.open_nats(bucket, key).await,
            Source::S3 { bucket, key } => self.open_s3(bucket, key).await,
            Source::File(path) => self.open_file(path).await,
        }
    }

    async fn open_http(&self, url: Url) -> Result<Body, FetchError> {
        let response = self.http.get(url).send().await.map_err(http_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(FetchError::Http {
                status: status.as_u16(),
            });
        }
        Ok(Body {
            declared_len: response.content_length(),
            chunks: response.bytes_stream().map_err(http_error).boxed(),
        })
    }

    async fn open_nats(&self, bucket: &str, key: &str) -> Result<Body, FetchError> {
        use async_nats::jetstream::ErrorCode;
        use async_nats::jetstream::context::ObjectStoreErrorKind;
        use async_nats::jetstream::context::{GetStreamError, GetStreamErrorKind};
        use async_nats::jetstream::object_store::GetErrorKind;

        let context = self
            .nats
            .as_ref()
            .ok_or(FetchError::SchemeDisabled { scheme: "nats" })?;
        let store = context.get_object_store(bucket).await.map_err(|err| {
            let missing = std::error::Error::source(&err)
                .and_then(|source| source.downcast_ref::<GetStreamError>())
                .is_some_and(|source| {
                    matches!(source.kind(), GetStreamErrorKind::JetStream(e)
                        if e.error_code() == ErrorCode::STREAM_NOT_FOUND)
                });
            match err.kind() {
                ObjectStoreErrorKind::InvalidBucketName => {
                    FetchError::UnsupportedUri("invalid nats bucket name")
                }
                ObjectStoreErrorKind::GetStore if missing => FetchError::NotFound("nats bucket"),
                ObjectStoreErrorKind::GetStore => FetchError::Transfer(error_detail(&err)),
            }
        })?;
        let object = store.get(key).await.map_err(|err| match err.kind() {
            GetErrorKind::NotFound => FetchError::NotFound("nats object"),
            GetErrorKind::InvalidName => FetchError::UnsupportedUri("invalid nats object name"),
            GetErrorKind::TimedOut => FetchError::Timeout,
            _ => FetchError::Transfer(error_detail(&err)),
        })?;
        Ok(Body {
            declared_len: u64::try_from(object.info.size).ok(),
            chunks: reader_stream(object, |err| FetchError::Transfer(error_detail(&err))),
        })
    }

    async fn open_s3(
        &self,
        bucket: &str,
        key: &object_store::path::Path,
    ) -> Result<Body, FetchError> {
        use object_store::ObjectStore;
        use object_store::aws::AmazonS3Builder;

        let settings = self
            .config
            .s3
            .as_ref()
            .ok_or(FetchError::SchemeDisabled { scheme: "s3" })?;
        // Retries and read timeouts are ours (in `fetch` and `copy_limited`); the
        // client's whole-request timeout would cut large downloads short.
        let options = object_store::ClientOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout_disabled()
            .with_allow_http(settings.allow_http);
        let retry = object_store::RetryConfig {
            max_retries: 0,
            ..Default::default()
        };
        let mut builder = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(&settings.region)
            .with_access_key_id(&settings.access_key_id)
            .with_secret_access_key(&settings.secret_access_key)
            .with_allow_http(settings.allow_http)
            .with_client_options(options)
            .with_retry(retry);
        if let Some(endpoint) = &settings.endpoint {
            builder = builder.with_endpoint(endpoint.as_str().trim_end_matches('/'));
        }
        // The bucket name was checked in `parse_source`: what fails here is our settings.
        let store = builder
            .build()
            .map_err(|err| FetchError::Setup(error_detail(&err)))?;
        let result = store.get(key).await.map_err(s3_error)?;
        Ok(Body {
            declared_len: Some(result.meta.size),
            chunks: result.into_stream().map_err(s3_error).boxed(),
        })
    }

    async fn open_file(&self, path: &Path) -> Result<Body, FetchError> {
        let root = self.local_root.as_deref().ok_or(FetchError::Forbidden)?;
        let resolved = match tokio::fs::canonicalize(path).await {
            Ok(resolved) => resolved,
            // Say "not found" only inside the root, so that nothing is learnt about
            // the rest of the file system.
            Err(err) if path.starts_with(root) => return Err(local_error(err)),
            Err(_) => return Err(FetchError::Forbidden),
        };
        if !resolved.starts_with(root) {
            return Err(FetchError::Forbidden);
        }
        // Checked before opening: opening a FIFO would block.
        let meta = tokio::fs::metadata(&resolved).await.map_err(local_error)?;
        if !meta.is_file() {
            return Err(FetchError::NotFound("local file"));
        }
        let file = tokio::fs::File::open(&resolved)
            .await
            .map_err(local_error)?;
        Ok(Body {
            declared_len: Some(meta.len()),
            chunks: reader_stream(file, local_error),
        })
    }
}

/// Where an input comes from, parsed from its URI without any IO.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Source {
    /// `http(s)://…`, and `ipfs://…` mapped onto the gateway.
    Http(Url),
    Nats {
        bucket: String,
        key: String,
    },
    S3 {
        bucket: String,
        key: object_store::path::Path,
    },
    File(PathBuf),
}

/// Parses an input URI; `gateway` must end with `/` (see [`Fetcher::new`]).
fn parse_source(uri: &str, gateway: &Url) -> Result<Source, FetchError> {
    let Some((scheme, rest)) = uri.split_once("://") else {
        return Err(FetchError::UnsupportedUri("not a uri"));
    };
    match scheme {
        "http" | "https" => {
            let url = Url::parse(uri).map_err(|_| FetchError::UnsupportedUri("malformed url"))?;
            if url.host().is_none() {
                return Err(FetchError::UnsupportedUri("url without a host"));
            }
            Ok(Source::Http(url))
        }
        "ipfs" => parse_ipfs(rest, gateway).map(Source::Http),
        "nats" => {
            let (bucket, key) = bucket_and_key(rest)?;
            Ok(Source::Nats {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
            })
        }
        "s3" => {
            let (bucket, key) = bucket_and_key(rest)?;
            if !is_s3_bucket_name(bucket) {
                return Err(FetchError::UnsupportedUri("invalid s3 bucket name"));
            }
            let key = object_store::path::Path::parse(key)
                .map_err(|_| FetchError::UnsupportedUri("invalid s3 key"))?;
            Ok(Source::S3 {
                bucket: bucket.to_owned(),
                key,
            })
        }
        "file" => {
            // The parser resolves `.` and `..`; canonicalisation later resolves links.
            let url = Url::parse(uri).map_err(|_| FetchError::UnsupportedUri("malformed url"))?;
            let path = url
                .to_file_path()
                .map_err(|_| FetchError::UnsupportedUri("file uri must be file:///<path>"))?;
            Ok(Source::File(path))
        }
        _ => Err(FetchError::UnsupportedUri(
            "scheme must be https, http, ipfs, nats, s3 or file",
        )),
    }
}

/// `ipfs://<cid>[/<path>]` → `<gateway>ipfs/<cid>[/<path>]`, never leaving `ipfs/<cid>/`.
fn parse_ipfs(rest: &str, gateway: &Url) -> Result<Url, FetchError> {
    let (cid, path) = rest.split_once('/').unwrap_or((rest, ""));
    if cid.is_empty() || !cid.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err(FetchError::UnsupportedUri("invalid ipfs cid"));
    }
    // `\` is a separator in http urls, `%2e` a dot: refuse anything that could climb out.
    let climbs = |segment: &str| {
        let lower = segment.to_ascii_lowercase().replace("%2e", ".");
        lower == "." || lower == ".."
    };
    if path.contains(['\\', '?', '#']) || (!path.is_empty() && path.split('/').any(climbs)) {
        return Err(FetchError::UnsupportedUri("invalid ipfs path"));
    }
    let url = gateway
        .join(&format!("ipfs/{cid}/{path}"))
        .map_err(|_| FetchError::UnsupportedUri("invalid ipfs path"))?;
    let prefix = format!("{gateway}ipfs/{cid}/");
    if !url.as_str().starts_with(&prefix) {
        return Err(FetchError::UnsupportedUri("invalid ipfs path"));
    }
    Ok(url)
}

fn bucket_and_key(rest: &str) -> Result<(&str, &str), FetchError> {
    match rest.split_once('/') {
        Some((bucket, key)) if !bucket.is_empty() && !key.is_empty() => Ok((bucket, key)),
        _ => Err(FetchError::UnsupportedUri("expected <bucket>/<key>")),
    }
}

/// S3's rules: 3 to 63 lowercase letters, digits, dots and hyphens, alphanumeric at
/// both ends.
fn is_s3_bucket_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (3..=63).contains(&bytes.len())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'.' || *b == b'-')
        && bytes[0].is_ascii_alphanumeric()
        && bytes[bytes.len() - 1].is_ascii_alphanumeric()
}

/// The URI's scheme for logs, from a fixed set.
fn scheme_of(uri: &str) -> &'static str {
    ["https", "http", "ipfs", "nats", "s3", "file"]
        .into_iter()
        .find(|scheme| {
            uri.strip_prefix(scheme)
                .is_some_and(|rest| rest.starts_with("://"))
        })
        .unwrap_or("other")
}

/// Lowercase hex, or [`FetchError::InvalidHash`] (the hash names a cache file, so it
/// must be exactly hex).
fn normalize_hash(hash: &str) -> Result<String, FetchError> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(FetchError::InvalidHash);
    }
    Ok(hash.to_ascii_lowercase())
}

fn http_status_class(status: u16) -> FaultClass {
    match status {
        408 | 429 | 500..=599 => FaultClass::Transient,
        _ => FaultClass::Job,
    }
}

/// A transfer in progress.
struct Body {
    declared_len: Option<u64>,
    chunks: BoxStream<'static, Result<Bytes, FetchError>>,
}

/// Writes `chunks` to `file`, hashing and counting; stops as soon as more than `limit`
/// bytes arrived or a chunk takes longer than [`READ_TIMEOUT`]. Returns the size and
/// hex hash once the file is flushed and synced.
async fn copy_limited(
    mut chunks: BoxStream<'static, Result<Bytes, FetchError>>,
    file: std::fs::File,
    limit: u64,
) -> Result<(u64, String), FetchError> {
    let write_error = |source| FetchError::Cache {
        op: "write",
        source,
    };
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, tokio::fs::File::from_std(file));
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    loop {
        let next = tokio::time::timeout(READ_TIMEOUT, chunks.next())
            .await
            .map_err(|_| FetchError::Timeout)?;
        let Some(chunk) = next else { break };
        let chunk = chunk?;
        size = size.saturating_add(chunk.len() as u64);
        if size > limit {
            return Err(FetchError::TooLarge { limit });
        }
        hasher.update(&chunk);
        writer.write_all(&chunk).await.map_err(write_error)?;
    }
    writer.flush().await.map_err(write_error)?;
    writer
        .into_inner()
        .sync_all()
        .await
        .map_err(|source| FetchError::Cache { op: "sync", source })?;
    Ok((size, hex::encode(hasher.finalize())))
}

/// Chunks of whatever `reader` yields, read `READ_CHUNK_BYTES` at a time.
fn reader_stream<R>(
    reader: R,
    on_error: fn(io::Error) -> FetchError,
) -> BoxStream<'static, Result<Bytes, FetchError>>
where
    R: AsyncRead + Unpin + Send + 'static,
{
    futures::stream::try_unfold(reader, move |mut reader| async move {
        let mut buf = BytesMut::with_capacity(READ_CHUNK_BYTES);
        let read = reader.read_buf(&mut buf).await.map_err(on_error)?;
        Ok((read > 0).then(|| (buf.freeze(), reader)))
    })
    .boxed()
}

fn http_error(err: reqwest::Error) -> FetchError {
    if err.is_timeout() {
        return FetchError::Timeout;
    }
    // The URL may carry a token (presigned links): keep it out of the message.
    FetchError::Transfer(error_detail(&err.without_url()))
}

fn s3_error(err: object_store::Error) -> FetchError {
    match err {
        object_store::Error::NotFound { .. } => FetchError::NotFound("s3 object"),
        object_store::Error::PermissionDenied { .. }
        | object_store::Error::Unauthenticated { .. } => FetchError::AccessDenied("s3"),
        object_store::Error::InvalidPath { .. } => FetchError::UnsupportedUri("invalid s3 key"),
        other => FetchError::Transfer(error_detail(&other)),
    }
}

fn local_error(err: io::Error) -> FetchError {
    match err.kind() {
        io::ErrorKind::NotFound => FetchError::NotFound("local file"),
        io::ErrorKind::PermissionDenied => FetchError::Forbidden,
        _ => FetchError::LocalRead(err),
    }
}

/// An error and its causes on one line, cut to [`MAX_DETAIL_CHARS`].
fn error_detail(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    truncate(text, MAX_DETAIL_CHARS)
}

fn detail(err: &io::Error) -> String {
    truncate(err.to_string(), MAX_DETAIL_CHARS)
}

fn truncate(mut text: String, max_chars: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max_chars) {
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The first 12 hex digits, enough to tell hashes apart in a message.
fn abbreviate(hex: &str) -> &str {
    hex.get(..12).unwrap_or(hex)
}

fn record(fetched: &Fetched) {
    let span = tracing::Span::current();
    span.record("bytes", fetched.size);
    span.record("cache_hit", fetched.cache_hit);
}

fn sha256_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("sha256")
}

fn tmp_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("tmp")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::net::SocketAddr;
    use std::sync::{Arc, Mutex};

    use proptest::prelude::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};
    use tokio::sync::Notify;

    use super::*;

    /// What the test server answers to one request.
    enum Reply {
        Body(Vec<u8>),
        Status(u16),
        /// 200 without a length, then 256 MiB of zeros unless the client hangs up first
        /// (bounded, so that a broken limit fails the test instead of filling the disk).
        Unsized,
        /// An S3 `GetObject` answer: the headers `object_store` insists on.
        S3Object(Vec<u8>),
    }

    type Route = dyn Fn(&str, usize) -> Reply + Send + Sync;

    /// A minimal HTTP/1.1 server on a free port: one request per connection, answered by
    /// `route(path, how many earlier requests had this path)`.
    struct TestServer {
        addr: SocketAddr,
        hits: Arc<Mutex<HashMap<String, usize>>>,
        /// Notified when a client hung up during an unsized body.
        hung_up: Arc<Notify>,
        task: tokio::task::JoinHandle<()>,
    }

    impl TestServer {
        async fn start(route: impl Fn(&str, usize) -> Reply + Send + Sync + 'static) -> Self {
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let hits = Arc::new(Mutex::new(HashMap::new()));
            let hung_up = Arc::new(Notify::new());
            let route: Arc<Route> = Arc::new(route);
            let task = tokio::spawn({
                let hits = hits.clone();
                let hung_up = hung_up.clone();
                async move {
                    while let Ok((stream, _)) = listener.accept().await {
                        let (route, hits, hung_up) = (route.clone(), hits.clone(), hung_up.clone());
                        tokio::spawn(async move {
                            let _ = serve(stream, &*route, &hits, &hung_up).await;
                        });
                    }
                }
            });
            Self {
                addr,
                hits,
                hung_up,
                task,
            }
        }

        fn url(&self, path: &str) -> String {
            format!("http://{}{path}", self.addr)
        }

        fn hits(&self, path: &str) -> usize {
            self.hits.lock().unwrap().get(path).copied().unwrap_or(0)
        }
    }

    impl Drop for TestServer {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    async fn serve(
        mut stream: TcpStream,
        route: &Route,
        hits: &Mutex<HashMap<String, usize>>,
        hung_up: &Notify,
    ) -> io::Result<()> {
        let mut head = Vec::new();
        let mut buf = [0; 1024];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let read = stream.read(&mut buf).await?;
            if read == 0 {
                return Ok(());
            }
            head.extend_from_slice(&buf[..read]);
        }
        let head = String::from_utf8_lossy(&head);
        let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let earlier = {
            let mut hits = hits.lock().unwrap();
            let count = hits.entry(path.clone()).or_default();
            *count += 1;
            *count - 1
        };
        let (status, headers, body) = match route(&path, earlier) {
            Reply::Body(body) => (200, String::new(), body),
            Reply::Status(status) => (status, String::new(), Vec::new()),
            Reply::S3Object(body) => (
                200,
                "ETag: \"0123\"\r\nLast-Modified: Wed, 21 Oct 2015 07:28:00 GMT\r\n".into(),
                body,
            ),
            Reply::Unsized => {
                stream
                    .write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
                    .await?;
                let zeros = vec![0; 64 * 1024];
                for _ in 0..4096 {
                    if stream.write_all(&zeros).await.is_err() {
                        hung_up.notify_one();
                        break;
                    }
                }
                return Ok(());
            }
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&body).await?;
        stream.shutdown().await
    }

    fn config(cache: &Path) -> FetchConfig {
        FetchConfig {
            cache_dir: cache.to_path_buf(),
            ipfs_gateway: Url::parse("http://127.0.0.1:9/").unwrap(),
            local_root: None,
            default_max_bytes: 1 << 20,
            s3: None,
            attempts: 3,
        }
    }

    fn input(uri: &str, sha256: Option<&str>, max_bytes: Option<u64>) -> InputSpec {
        InputSpec {
            uri: uri.into(),
            sha256: sha256.map(Into::into),
            path: "/inputs/data".into(),
            max_bytes,
        }
    }

    fn sha256_hex(data: &[u8]) -> String {
        hex::encode(Sha256::digest(data))
    }

    fn entries(dir: &Path) -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect()
    }

    fn assert_no_partial_files(cache: &Path) {
        assert_eq!(entries(&cache.join("tmp")), Vec::<PathBuf>::new());
    }

    #[tokio::test]
    async fn downloads_verifies_and_then_hits_the_cache() {
        let data = b"training data".repeat(1000);
        let server = TestServer::start({
            let data = data.clone();
            move |_, _| Reply::Body(data.clone())
        })
        .await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let hash = sha256_hex(&data);
        let spec = input(&server.url("/data.tar"), Some(&hash.to_uppercase()), None);

        let first = fetcher.fetch(&spec).await.unwrap();
        assert!(!first.cache_hit);
        assert_eq!(first.sha256, hash);
        assert_eq!(first.size, data.len() as u64);
        assert_eq!(first.path, cache.path().join("sha256").join(&hash));
        assert_eq!(std::fs::read(&first.path).unwrap(), data);
        let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o444);

        let second = fetcher.fetch(&spec).await.unwrap();
        assert_eq!(
            second,
            Fetched {
                cache_hit: true,
                ..first
            }
        );
        assert_eq!(server.hits("/data.tar"), 1);
        assert_no_partial_files(cache.path());

        // A cached file is still held to the input's own limit.
        let mut small = spec.clone();
        small.max_bytes = Some(100);
        assert!(matches!(
            fetcher.fetch(&small).await,
            Err(FetchError::TooLarge { limit: 100 })
        ));
        assert_eq!(server.hits("/data.tar"), 1);
    }

    #[tokio::test]
    async fn without_a_hash_it_downloads_every_time_into_the_cache() {
        let server = TestServer::start(|_, _| Reply::Body(b"abc".to_vec())).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let spec = input(&server.url("/x"), None, None);
        for _ in 0..2 {
            let fetched = fetcher.fetch(&spec).await.unwrap();
            assert!(!fetched.cache_hit);
            assert_eq!(fetched.sha256, sha256_hex(b"abc"));
        }
        assert_eq!(server.hits("/x"), 2);
        assert_eq!(entries(&cache.path().join("sha256")).len(), 1);
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn a_hash_mismatch_is_the_jobs_fault_and_leaves_nothing_behind() {
        let server = TestServer::start(|_, _| Reply::Body(b"not what was promised".to_vec())).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let expected = sha256_hex(b"the promised data");
        let err = fetcher
            .fetch(&input(&server.url("/x"), Some(&expected), None))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, FetchError::HashMismatch { expected: e, actual }
            if *e == expected && *actual == sha256_hex(b"not what was promised"))
        );
        assert_eq!(err.class(), FaultClass::Job);
        assert_eq!(server.hits("/x"), 1);
        assert_eq!(entries(&cache.path().join("sha256")), Vec::<PathBuf>::new());
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn an_unsized_body_is_cut_off_at_the_limit() {
        let server = TestServer::start(|_, _| Reply::Unsized).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let err = fetcher
            .fetch(&input(&server.url("/endless"), None, Some(300_000)))
            .await
            .unwrap_err();
        assert!(
            matches!(err, FetchError::TooLarge { limit: 300_000 }),
            "{err:?}"
        );
        assert_eq!(err.class(), FaultClass::Job);
        // The connection was dropped: the server's writes fail.
        tokio::time::timeout(Duration::from_secs(10), server.hung_up.notified())
            .await
            .expect("the client hangs up");
        assert_eq!(server.hits("/endless"), 1);
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused() {
        let server = TestServer::start(|_, _| Reply::Body(vec![7; 2048])).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let err = fetcher
            .fetch(&input(&server.url("/big"), None, Some(1024)))
            .await
            .unwrap_err();
        assert!(
            matches!(err, FetchError::TooLarge { limit: 1024 }),
            "{err:?}"
        );
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn client_errors_are_the_jobs_fault_and_not_retried() {
        let server = TestServer::start(|path, _| match path {
            "/gone" => Reply::Status(404),
            _ => Reply::Status(403),
        })
        .await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        for (path, status) in [("/gone", 404), ("/secret", 403)] {
            let err = fetcher
                .fetch(&input(&server.url(path), None, None))
                .await
                .unwrap_err();
            assert!(
                matches!(err, FetchError::Http { status: s } if s == status),
                "{err:?}"
            );
            assert_eq!(err.class(), FaultClass::Job);
            assert_eq!(server.hits(path), 1);
        }
    }

    #[tokio::test]
    async fn server_errors_are_retried_until_one_succeeds() {
        let server = TestServer::start(|_, earlier| match earlier {
            0 => Reply::Status(500),
            1 => Reply::Status(429),
            _ => Reply::Body(b"finally".to_vec()),
        })
        .await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let fetched = fetcher
            .fetch(&input(
                &server.url("/flaky"),
                Some(&sha256_hex(b"finally")),
                None,
            ))
            .await
            .unwrap();
        assert_eq!(fetched.size, 7);
        assert_eq!(server.hits("/flaky"), 3);
    }

    #[tokio::test]
    async fn transient_failures_are_returned_after_the_last_attempt() {
        let server = TestServer::start(|_, _| Reply::Status(503)).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(
            FetchConfig {
                attempts: 2,
                ..config(cache.path())
            },
            None,
        )
        .unwrap();
        let err = fetcher
            .fetch(&input(&server.url("/down"), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Http { status: 503 }), "{err:?}");
        assert_eq!(err.class(), FaultClass::Transient);
        assert_eq!(server.hits("/down"), 2);
    }

    #[tokio::test]
    async fn a_refused_connection_is_transient() {
        // Bind then drop: nothing listens on the port afterwards.
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(
            FetchConfig {
                attempts: 1,
                ..config(cache.path())
            },
            None,
        )
        .unwrap();
        let err = fetcher
            .fetch(&input(&format!("http://{addr}/x"), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Transfer(_)), "{err:?}");
        assert_eq!(err.class(), FaultClass::Transient);
        assert!(!err.to_string().contains(&addr.to_string()), "{err}");
    }

    #[tokio::test]
    async fn ipfs_inputs_go_through_the_gateway() {
        let server = TestServer::start(|_, _| Reply::Body(b"pinned".to_vec())).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(
            FetchConfig {
                ipfs_gateway: Url::parse(&server.url("/gw")).unwrap(),
                ..config(cache.path())
            },
            None,
        )
        .unwrap();
        let fetched = fetcher
            .fetch(&input("ipfs://bafybeigdyrzt/dir/file.bin", None, None))
            .await
            .unwrap();
        assert_eq!(fetched.sha256, sha256_hex(b"pinned"));
        assert_eq!(server.hits("/gw/ipfs/bafybeigdyrzt/dir/file.bin"), 1);
    }

    #[tokio::test]
    async fn s3_inputs_are_streamed_from_the_endpoint() {
        let server = TestServer::start(|path, _| match path {
            "/bucket/models/w.bin" => Reply::S3Object(b"weights".to_vec()),
            _ => Reply::Status(404),
        })
        .await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(
            FetchConfig {
                s3: Some(S3Settings {
                    endpoint: Some(Url::parse(&server.url("/")).unwrap()),
                    region: "us-east-1".into(),
                    access_key_id: "AKIDEXAMPLE".into(),
                    secret_access_key: "wJalrXUtnFEMI".into(),
                    allow_http: true,
                }),
                ..config(cache.path())
            },
            None,
        )
        .unwrap();
        let fetched = fetcher
            .fetch(&input(
                "s3://bucket/models/w.bin",
                Some(&sha256_hex(b"weights")),
                None,
            ))
            .await
            .unwrap();
        assert_eq!(std::fs::read(fetched.path).unwrap(), b"weights");

        let err = fetcher
            .fetch(&input("s3://bucket/models/missing.bin", None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::NotFound("s3 object")), "{err:?}");
        assert_eq!(err.class(), FaultClass::Job);
        assert!(!format!("{fetcher:?}").contains("wJalrXUtnFEMI"));
    }

    #[tokio::test]
    async fn file_inputs_are_confined_to_the_local_root() {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("sets")).unwrap();
        std::fs::write(root.path().join("sets/a.bin"), b"local").unwrap();
        std::fs::write(outside.path().join("secret"), b"secret").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.path().join("link"))
            .unwrap();
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(
            FetchConfig {
                local_root: Some(root.path().to_path_buf()),
                ..config(cache.path())
            },
            None,
        )
        .unwrap();
        let uri = |path: &Path| Url::from_file_path(path).unwrap().to_string();

        let fetched = fetcher
            .fetch(&input(&uri(&root.path().join("sets/a.bin")), None, None))
            .await
            .unwrap();
        assert_eq!(fetched.sha256, sha256_hex(b"local"));

        let root_uri = uri(root.path());
        let escapes = [
            uri(&outside.path().join("secret")),
            format!(
                "{root_uri}/sets/../../{}",
                outside.path().file_name().unwrap().to_str().unwrap()
            ),
            format!("{root_uri}/%2e%2e/%2E%2E/etc/passwd"),
            uri(&root.path().join("link")),
            uri(&outside.path().join("does-not-exist")),
        ];
        for escape in escapes {
            let err = fetcher
                .fetch(&input(&escape, None, None))
                .await
                .unwrap_err();
            assert!(matches!(err, FetchError::Forbidden), "{escape}: {err:?}");
            assert_eq!(err.class(), FaultClass::Job);
        }
        let err = fetcher
            .fetch(&input(&format!("{root_uri}/sets/missing"), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::NotFound("local file")), "{err:?}");
        // Not regular files: refused without being opened (a FIFO would block).
        let status = std::process::Command::new("mkfifo")
            .arg(root.path().join("fifo"))
            .status()
            .unwrap();
        assert!(status.success());
        for name in ["sets", "fifo"] {
            let err = fetcher
                .fetch(&input(&uri(&root.path().join(name)), None, None))
                .await
                .unwrap_err();
            assert!(
                matches!(err, FetchError::NotFound("local file")),
                "{name}: {err:?}"
            );
        }

        let refusing = Fetcher::new(config(cache.path()), None).unwrap();
        let err = refusing
            .fetch(&input(&uri(&root.path().join("sets/a.bin")), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Forbidden), "{err:?}");
    }

    #[tokio::test]
    async fn nats_object_store_round_trip() {
        let server = gantry_devnet::NatsServer::start().expect("nats-server starts");
        let client = async_nats::connect(server.url()).await.unwrap();
        let jetstream = async_nats::jetstream::new(client);
        let store = jetstream
            .create_object_store(async_nats::jetstream::object_store::Config {
                bucket: "inputs".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        // Several chunks (the store's default chunk is 128 KiB).
        let data: Vec<u8> = (0..400_000u32).map(|i| (i % 251) as u8).collect();
        store
            .put("sets/train.bin", &mut data.as_slice())
            .await
            .unwrap();

        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), Some(jetstream)).unwrap();
        let fetched = fetcher
            .fetch(&input(
                "nats://inputs/sets/train.bin",
                Some(&sha256_hex(&data)),
                None,
            ))
            .await
            .unwrap();
        assert_eq!(fetched.size, data.len() as u64);
        assert_eq!(std::fs::read(&fetched.path).unwrap(), data);

        for (uri, what) in [
            ("nats://inputs/sets/missing.bin", "nats object"),
            ("nats://nobucket/x", "nats bucket"),
        ] {
            let err = fetcher.fetch(&input(uri, None, None)).await.unwrap_err();
            assert!(
                matches!(err, FetchError::NotFound(w) if w == what),
                "{uri}: {err:?}"
            );
            assert_eq!(err.class(), FaultClass::Job);
        }
        let err = fetcher
            .fetch(&input("nats://inputs/sets/train.bin", None, Some(1000)))
            .await
            .unwrap_err();
        assert!(
            matches!(err, FetchError::TooLarge { limit: 1000 }),
            "{err:?}"
        );
        assert_no_partial_files(cache.path());

        let without_nats = Fetcher::new(config(cache.path()), None).unwrap();
        let err = without_nats
            .fetch(&input("nats://inputs/x", None, None))
            .await
            .unwrap_err();
        assert!(
            matches!(err, FetchError::SchemeDisabled { scheme: "nats" }),
            "{err:?}"
        );
        assert_eq!(err.class(), FaultClass::Job);
    }

    #[test]
    fn parses_each_scheme() {
        let gateway = Url::parse("https://gw.example/base/").unwrap();
        let check = |uri: &str, expected: Source| {
            assert_eq!(parse_source(uri, &gateway).unwrap(), expected, "{uri}");
        };
        check(
            "https://data.example.org/x.tar?sig=1",
            Source::Http(Url::parse("https://data.example.org/x.tar?sig=1").unwrap()),
        );
        check(
            "ipfs://QmYwAPJzv5CZsnA/a/b.bin",
            Source::Http(
                Url::parse("https://gw.example/base/ipfs/QmYwAPJzv5CZsnA/a/b.bin").unwrap(),
            ),
        );
        check(
            "nats://inputs/a/b",
            Source::Nats {
                bucket: "inputs".into(),
                key: "a/b".into(),
            },
        );
        check(
            "s3://bkt/k/v.bin",
            Source::S3 {
                bucket: "bkt".into(),
                key: object_store::path::Path::parse("k/v.bin").unwrap(),
            },
        );
        check("file:///srv/data/x", Source::File("/srv/data/x".into()));
    }

    #[test]
    fn refuses_malformed_uris_as_the_jobs_fault() {
        let gateway = Url::parse("https://gw.example/").unwrap();
        for uri in [
            "ftp://host/x",
            "no-scheme",
            "http://",
            "ipfs://",
            "ipfs://cid/../../etc",
            "ipfs://cid/%2e%2e/x",
            "ipfs://cid/a\\..\\..\\x",
            "ipfs://c.d/x",
            "nats://bucket",
            "nats:///key",
            "s3://bucket/",
            "s3://Bad_Bucket/x",
            "s3://ab/x",
            "file://host/x",
        ] {
            let err = parse_source(uri, &gateway).unwrap_err();
            assert!(
                matches!(err, FetchError::UnsupportedUri(_)),
                "{uri}: {err:?}"
            );
            assert_eq!(err.class(), FaultClass::Job);
        }
    }

    #[test]
    fn classifies_http_statuses() {
        for (status, class) in [
            (400, FaultClass::Job),
            (404, FaultClass::Job),
            (408, FaultClass::Transient),
            (429, FaultClass::Transient),
            (500, FaultClass::Transient),
            (503, FaultClass::Transient),
            (304, FaultClass::Job),
        ] {
            assert_eq!(FetchError::Http { status }.class(), class, "{status}");
        }
    }

    #[test]
    fn messages_are_short() {
        let long_io = || io::Error::other("x".repeat(500));
        let errors = [
            FetchError::UnsupportedUri("scheme must be https, http, ipfs, nats, s3 or file"),
            FetchError::HashMismatch {
                expected: "a".repeat(64),
                actual: "b".repeat(64),
            },
            FetchError::TooLarge { limit: u64::MAX },
            FetchError::Transfer(truncate("y".repeat(500), MAX_DETAIL_CHARS)),
            FetchError::LocalRead(long_io()),
            FetchError::Cache {
                op: "rename",
                source: long_io(),
            },
            FetchError::Forbidden,
            FetchError::SchemeDisabled { scheme: "nats" },
        ];
        for err in errors {
            let message = err.to_string();
            assert!(message.chars().count() <= 100, "{message}");
        }
    }

    proptest! {
        #[test]
        fn ipfs_paths_never_leave_the_cid(rest in "[a-zA-Z0-9]{1,8}(/[a-zA-Z0-9.%2eE\\\\/?#-]{0,12}){0,4}") {
            let gateway = Url::parse("https://gw.example/base/").unwrap();
            if let Ok(Source::Http(url)) = parse_source(&format!("ipfs://{rest}"), &gateway) {
                let cid = rest.split('/').next().unwrap();
                let prefix = format!("https://gw.example/base/ipfs/{cid}/");
                prop_assert!(url.as_str().starts_with(&prefix), "{url}");
                prop_assert!(url.query().is_none() && url.fragment().is_none());
            }
        }
    }
}
