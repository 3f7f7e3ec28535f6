//! Job inputs: downloads each [`InputSpec`] into the node's content-addressed cache and
//! says where it landed. A known `sha256` already in the cache costs no download.
//!
//! ```text
//!   InputSpec.uri ──parse_source──▶ http(s) · ipfs (gateway) · nats object · s3 · file
//!        │           (source)                   │ (transport)
//!        │                                      │ stream, hash and count, stop past the limit
//!        │ sha256 known and cached              ▼ (cache)
//!        └──────────▶ hit          <cache>/tmp/fetch-* ──fsync, verify──▶ <cache>/sha256/<hex>
//! ```
//!
//! `source` parses the URI without IO, `transport` opens it as a stream of bytes, `cache`
//! writes that stream into the cache and `error` says whose fault a failure is. This
//! module holds them together: the cache check first, then tries with backoff.
//!
//! A job's URI is the job's, the network it reaches the provider's: `guard` keeps http(s)
//! inputs, redirects included, off loopback, private and link-local addresses (after DNS
//! resolution) unless the provider allows the host (`allow_hosts`); the ipfs gateway is
//! the provider's own choice and reached wherever it is. `nats://` inputs name the chain's
//! inputs or results bucket only, never the checkpoints the worker's NATS user can read.
//!
//! Failures carry a [`FaultClass`]: the job's fault (bad or unservable input), the node's
//! (its cache or settings) or transient (network, server 5xx), and only transient ones are
//! retried here, with backoff. Anything a job's URI can provoke is never `Node`, so that a
//! job cannot get a node marked unhealthy. Messages are short and hold no URI or secret,
//! since they become on-chain reject reasons.

mod cache;
mod error;
mod guard;
mod source;
#[cfg(test)]
mod testkit;
mod transport;

use std::path::PathBuf;
use std::time::Duration;

use gantry_protocol::names;
use gantry_protocol::spec::InputSpec;
use gantry_runtime::backoff::{self, Retryable as _};
use tracing::{debug, info, instrument, warn};
use url::Url;

pub(crate) use self::cache::newest as newest_cached;
pub use self::error::FetchError;
use self::guard::AllowList;
use self::source::{Source, normalize_hash, parse_source, scheme_of};
use self::transport::GuardedClient;
pub use crate::fault::FaultClass;
use crate::metrics;

/// Time to open a TCP connection to an input's server.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for the next piece of an input once its transfer has started.
pub const READ_TIMEOUT: Duration = Duration::from_secs(30);
/// Longest wait for a source to start answering (response headers, object info).
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// Wait before the first retry of a transient failure; doubled each time up to 5 s.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

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
    /// Hosts (names or IP literals, as written in the URL) that http(s) inputs may reach
    /// although they are loopback, private or link-local; any other such address is
    /// refused, the job's fault. The ipfs gateway's host needs no entry.
    pub allow_hosts: Vec<String>,
    /// The chain whose inputs and results buckets `nats://` inputs may name.
    pub chain_id: u64,
}

/// Whether `entry` can be an entry of [`FetchConfig::allow_hosts`]: a host name or an IP
/// literal, without scheme, port or path.
pub fn check_allowed_host(entry: &str) -> Result<(), &'static str> {
    guard::parse_host(entry).map(drop)
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

/// Downloads inputs into the cache. Cheap to share behind an `Arc`; concurrent fetches
/// of the same content are safe (each writes its own temp file, the rename is atomic).
#[derive(Debug)]
pub struct Fetcher {
    /// For http(s) inputs: public addresses and `allow_hosts`.
    http: GuardedClient,
    /// For ipfs inputs: the same, and the gateway's host.
    gateway: GuardedClient,
    nats: Option<async_nats::jetstream::Context>,
    /// The buckets `nats://` inputs may name: the chain's inputs and results.
    nats_buckets: [String; 2],
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
        cache::create_dirs(&config.cache_dir)?;
        let local_root =
            match &config.local_root {
                Some(root) => Some(std::fs::canonicalize(root).map_err(|e| {
                    FetchError::Setup(format!("local root {}: {e}", root.display()))
                })?),
                None => None,
            };
        let allow = AllowList::parse(&config.allow_hosts)
            .map_err(|why| FetchError::Setup(format!("allowed input host {why}")))?;
        let gateway = GuardedClient::new(allow.clone().with_host_of(&config.ipfs_gateway))?;
        let http = GuardedClient::new(allow)?;
        let nats_buckets = [
            names::inputs_bucket(config.chain_id),
            names::results_bucket(config.chain_id),
        ];
        Ok(Self {
            http,
            gateway,
            nats,
            nats_buckets,
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
            && let Some(hit) = cache::lookup(&self.config.cache_dir, hex).await?
        {
            // The same content is over this input's limit whether cached or not.
            if hit.size > limit {
                return Err(FetchError::TooLarge { limit });
            }
            record(&hit);
            metrics::cache_hit();
            debug!("input already cached");
            return Ok(hit);
        }
        metrics::cache_miss();

        let source = parse_source(&input.uri, &self.config.ipfs_gateway)?;
        let mut attempt = 1;
        let downloaded = (|| self.download(&source, limit, expected.as_deref()))
            .retry(backoff::attempts(
                self.config.attempts,
                FIRST_BACKOFF,
                MAX_BACKOFF,
            ))
            .when(FetchError::is_retryable)
            .notify(|err, _| {
                warn!(attempt, error = %err, "input download failed, retrying");
                attempt += 1;
            })
            .await;
        match downloaded {
            Ok(fetched) => {
                record(&fetched);
                metrics::input_bytes(fetched.size);
                info!("input downloaded");
                Ok(fetched)
            }
            Err(err) => {
                warn!(attempt, error = %err, class = ?err.class(), "input download failed");
                Err(err)
            }
        }
    }

    /// One try: opens the source and streams it into the cache.
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
        cache::insert(&self.config.cache_dir, body.chunks, limit, expected).await
    }
}

fn record(fetched: &Fetched) {
    let span = tracing::Span::current();
    span.record("bytes", fetched.size);
    span.record("cache_hit", fetched.cache_hit);
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::testkit::{Reply, TestServer, config, fetcher_trying, input, sha256_hex};
    use super::*;

    /// `err` is the guard's refusal of a private address, the job's fault.
    fn assert_private(err: &FetchError, what: &str) {
        assert!(matches!(err, FetchError::PrivateAddress), "{what}: {err:?}");
        assert_eq!(err.class(), FaultClass::Job, "{what}");
        assert!(!err.is_retryable(), "{what}");
    }

    #[tokio::test]
    async fn loopback_inputs_are_refused_unless_the_host_is_allowed() {
        let server = TestServer::start(|_, _| Reply::Body(b"internal".to_vec())).await;
        let port = server.port();
        let cache = tempfile::tempdir().unwrap();
        let closed = Fetcher::new(
            FetchConfig {
                allow_hosts: Vec::new(),
                ..config(cache.path())
            },
            None,
        )
        .unwrap();
        // Allows 127.0.0.1 as written, and nothing else of this machine.
        let allowing = Fetcher::new(config(cache.path()), None).unwrap();

        let err = closed
            .fetch(&input(&server.url("/x"), None, None))
            .await
            .unwrap_err();
        assert_private(&err, "127.0.0.1 not allowed");
        for uri in [
            format!("http://localhost:{port}/x"),
            format!("http://LOCALHOST:{port}/x"),
            format!("http://[::ffff:127.0.0.1]:{port}/x"),
            format!("http://0x7f.0.0.2:{port}/x"),
            format!("http://[::1]:{port}/x"),
        ] {
            for fetcher in [&closed, &allowing] {
                let err = fetcher.fetch(&input(&uri, None, None)).await.unwrap_err();
                assert_private(&err, &uri);
            }
        }
        assert_eq!(server.hits("/x"), 0, "nothing reached the service");

        let fetched = allowing
            .fetch(&input(
                &server.url("/x"),
                Some(&sha256_hex(b"internal")),
                None,
            ))
            .await
            .unwrap();
        assert_eq!(fetched.size, 8);
        assert_eq!(server.hits("/x"), 1);
    }

    #[tokio::test]
    async fn redirects_into_private_addresses_are_refused() {
        // The service the redirects aim at: on 127.0.0.2, which no config here allows.
        let internal = TestServer::start_on(Ipv4Addr::new(127, 0, 0, 2), |_, _| {
            Reply::Body(b"internal".to_vec())
        })
        .await;
        let internal_port = internal.port();
        let server = TestServer::start(move |path, _| match path {
            "/to-loopback" => Reply::Redirect(format!("http://127.0.0.2:{internal_port}/")),
            "/to-private" => Reply::Redirect("http://10.0.0.1/secret".into()),
            "/to-metadata" => Reply::Redirect("http://169.254.169.254/latest/".into()),
            "/to-name" => Reply::Redirect(format!("http://localhost:{internal_port}/")),
            "/to-mapped" => Reply::Redirect(format!("http://[::ffff:127.0.0.2]:{internal_port}/")),
            "/hop" => Reply::Redirect("/data".into()),
            "/data" => Reply::Body(b"public".to_vec()),
            "/loop" => Reply::Redirect("/loop".into()),
            _ => Reply::Status(404),
        })
        .await;
        let cache = tempfile::tempdir().unwrap();
        // Three tries: a refusal is not retried. 10.0.0.1 is never dialled (a connection
        // attempt there would end as a transient transfer error, not a refusal).
        let fetcher = fetcher_trying(cache.path(), 3);
        for path in [
            "/to-loopback",
            "/to-private",
            "/to-metadata",
            "/to-name",
            "/to-mapped",
        ] {
            let err = fetcher
                .fetch(&input(&server.url(path), None, None))
                .await
                .unwrap_err();
            assert_private(&err, path);
            assert_eq!(server.hits(path), 1, "{path}: not retried");
        }
        assert_eq!(
            internal.hits("/"),
            0,
            "nothing reached the internal service"
        );

        let fetched = fetcher
            .fetch(&input(&server.url("/hop"), None, None))
            .await
            .unwrap();
        assert_eq!(fetched.sha256, sha256_hex(b"public"));

        let err = fetcher
            .fetch(&input(&server.url("/loop"), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::TooManyRedirects), "{err:?}");
        assert_eq!(err.class(), FaultClass::Job);
        assert_eq!(server.hits("/loop"), guard::MAX_REDIRECTS + 1);
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
        let fetcher = fetcher_trying(cache.path(), 2);
        let err = fetcher
            .fetch(&input(&server.url("/down"), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::Http { status: 503 }), "{err:?}");
        assert_eq!(err.class(), FaultClass::Transient);
        assert_eq!(server.hits("/down"), 2);
    }
}
