//! The transports: each opens a [`Source`] as a stream of chunks, with its announced
//! length if it has one. http(s) and ipfs (through the gateway) go over `reqwest`, `nats`
//! through the JetStream object store, `s3` through `object_store`, `file` from the node's
//! local root.

use std::io;
use std::path::Path;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::stream::{BoxStream, StreamExt, TryStreamExt};
use tokio::io::{AsyncRead, AsyncReadExt};
use url::Url;

use super::error::{error_detail, http_error, local_error, s3_error};
use super::guard::{self, AllowList, GuardedResolver};
use super::source::Source;
use super::{CONNECT_TIMEOUT, FetchError, Fetcher, READ_TIMEOUT};

const READ_CHUNK_BYTES: usize = 64 * 1024;

/// The pieces of an input as they arrive.
pub(super) type Chunks = BoxStream<'static, Result<Bytes, FetchError>>;

/// A transfer in progress.
pub(super) struct Body {
    pub(super) declared_len: Option<u64>,
    pub(super) chunks: Chunks,
}

/// A client for http(s) or ipfs inputs that reaches public addresses and the hosts of
/// its allow list only (see [`guard`]).
#[derive(Debug)]
pub(super) struct GuardedClient {
    client: reqwest::Client,
    allow: Arc<AllowList>,
}

impl GuardedClient {
    pub(super) fn new(allow: AllowList) -> Result<Self, FetchError> {
        let allow = Arc::new(allow);
        let client = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(READ_TIMEOUT)
            .user_agent(concat!("gantry-worker/", env!("CARGO_PKG_VERSION")))
            // A proxy would resolve the input's host itself, out of the guard's sight.
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver::new(allow.clone())))
            .redirect(guard::redirect_policy(allow.clone()))
            .build()
            .map_err(|e| FetchError::Setup(format!("http client: {e}")))?;
        Ok(Self { client, allow })
    }
}

impl Fetcher {
    /// Starts the transfer: the body and its announced length, if any.
    pub(super) async fn open(&self, source: &Source) -> Result<Body, FetchError> {
        match source {
            Source::Http(url) => open_http(&self.http, url.clone()).await,
            Source::Ipfs(url) => open_http(&self.gateway, url.clone()).await,
            Source::Nats { bucket, key } => self.open_nats(bucket, key).await,
            Source::S3 { bucket, key } => self.open_s3(bucket, key).await,
            Source::File(path) => self.open_file(path).await,
        }
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
        // The worker's NATS user reads more than a job may (the checkpoints of every
        // job): only the buckets made for inputs and results are a job's to name.
        if !self.nats_buckets.iter().any(|allowed| allowed == bucket) {
            return Err(FetchError::NatsBucket);
        }
        if gantry_protocol::names::is_node_scoped(bucket) {
            return open_scoped(context, bucket, key).await;
        }
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

/// Sends a GET for `url` through `client`; an IP literal is checked here, since it
/// reaches no resolver.
async fn open_http(client: &GuardedClient, url: Url) -> Result<Body, FetchError> {
    guard::check_url(&client.allow, &url)?;
    let response = client.client.get(url).send().await.map_err(http_error)?;
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

/// Chunks of whatever `reader` yields, read `READ_CHUNK_BYTES` at a time.
fn reader_stream<R>(reader: R, on_error: fn(io::Error) -> FetchError) -> Chunks
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

/// Node N's object of a node-scoped bucket (the results: `nats://<bucket>/<N>/<key>`).
async fn open_scoped(
    context: &async_nats::jetstream::Context,
    bucket: &str,
    key: &str,
) -> Result<Body, FetchError> {
    use futures::StreamExt as _;
    let (node, key) = key
        .split_once('/')
        .and_then(|(node, key)| Some((node.parse::<u64>().ok()?, key)))
        .filter(|(_, key)| !key.is_empty())
        .ok_or(FetchError::UnsupportedUri(
            "a result is nats://<bucket>/<node>/<key>",
        ))?;
    let object = gantry_runtime::objects::get(context, bucket, node, key)
        .await
        .map_err(|err| FetchError::Transfer(error_detail(&err)))?
        .ok_or(FetchError::NotFound("nats object"))?;
    Ok(Body {
        declared_len: u64::try_from(object.info.size).ok(),
        chunks: object
            .bytes(u64::MAX)
            .map(|chunk| chunk.map_err(|err| FetchError::Transfer(error_detail(&err))))
            .boxed(),
    })
}

#[cfg(test)]
mod tests {
    use tokio::net::TcpListener;

    use super::*;
    use gantry_protocol::names;

    use crate::fetch::testkit::{
        CHAIN, Reply, TestServer, assert_no_partial_files, assert_too_large, config,
        fetcher_trying, input, sha256_hex,
    };
    use crate::fetch::{FaultClass, FetchConfig, S3Settings};

    #[tokio::test]
    async fn a_refused_connection_is_transient() {
        // Bind then drop: nothing listens on the port afterwards.
        let addr = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap();
        let cache = tempfile::tempdir().unwrap();
        let fetcher = fetcher_trying(cache.path(), 1);
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
        // A gateway on loopback is the provider's choice: reached without an allowed host,
        // for ipfs inputs only.
        let fetcher = Fetcher::new(
            FetchConfig {
                ipfs_gateway: Url::parse(&server.url("/gw")).unwrap(),
                allow_hosts: Vec::new(),
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

        let direct = server.url("/gw/ipfs/bafybeigdyrzt/dir/other.bin");
        let err = fetcher
            .fetch(&input(&direct, None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::PrivateAddress), "{err:?}");
        assert_eq!(err.class(), FaultClass::Job);
        assert_eq!(server.hits("/gw/ipfs/bafybeigdyrzt/dir/other.bin"), 0);
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
        let server = gantry_testkit::NatsServer::start().expect("nats-server starts");
        let client = async_nats::connect(server.url()).await.unwrap();
        let jetstream = async_nats::jetstream::new(client);
        let bucket = names::inputs_bucket(CHAIN);
        let store = jetstream
            .create_object_store(async_nats::jetstream::object_store::Config {
                bucket: bucket.clone(),
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
        let fetcher = Fetcher::new(config(cache.path()), Some(jetstream.clone())).unwrap();
        let fetched = fetcher
            .fetch(&input(
                &format!("nats://{bucket}/sets/train.bin"),
                Some(&sha256_hex(&data)),
                None,
            ))
            .await
            .unwrap();
        assert_eq!(fetched.size, data.len() as u64);
        assert_eq!(std::fs::read(&fetched.path).unwrap(), data);

        // Another job's result, node 3's, in the node-scoped results bucket.
        let results = names::results_bucket(CHAIN);
        gantry_runtime::objects::open(&jetstream, &results, 1)
            .await
            .unwrap();
        gantry_runtime::objects::put(
            &jetstream,
            &results,
            3,
            "7-1",
            Default::default(),
            data.as_slice(),
        )
        .await
        .unwrap();
        let fetched = fetcher
            .fetch(&input(
                &format!("nats://{results}/3/7-1"),
                Some(&sha256_hex(&data)),
                None,
            ))
            .await
            .unwrap();
        assert_eq!(std::fs::read(&fetched.path).unwrap(), data);
        let err = fetcher
            .fetch(&input(&format!("nats://{results}/7-1"), None, None))
            .await
            .unwrap_err();
        assert!(matches!(err, FetchError::UnsupportedUri(_)), "{err:?}");

        for (uri, what) in [
            (format!("nats://{bucket}/sets/missing.bin"), "nats object"),
            (format!("nats://{results}/4/7-1"), "nats object"),
        ] {
            let err = fetcher.fetch(&input(&uri, None, None)).await.unwrap_err();
            assert!(
                matches!(err, FetchError::NotFound(w) if w == what),
                "{uri}: {err:?}"
            );
            assert_eq!(err.class(), FaultClass::Job);
        }
        let err = fetcher
            .fetch(&input(
                &format!("nats://{bucket}/sets/train.bin"),
                None,
                Some(1000),
            ))
            .await
            .unwrap_err();
        assert_too_large(&err, 1000);
        assert_no_partial_files(cache.path());

        // Another job's checkpoint, which the worker's own user may read, and any bucket
        // but the chain's inputs and results: refused before NATS is asked.
        let checkpoints = jetstream
            .create_object_store(async_nats::jetstream::object_store::Config {
                bucket: names::checkpoints_bucket(CHAIN),
                ..Default::default()
            })
            .await
            .unwrap();
        checkpoints
            .put("7", &mut b"another job's state".as_slice())
            .await
            .unwrap();
        for uri in [
            format!("nats://{}/7", names::checkpoints_bucket(CHAIN)),
            format!("nats://{}/x", names::inputs_bucket(CHAIN + 1)),
            "nats://inputs/sets/train.bin".to_owned(),
        ] {
            let err = fetcher.fetch(&input(&uri, None, None)).await.unwrap_err();
            assert!(matches!(err, FetchError::NatsBucket), "{uri}: {err:?}");
            assert_eq!(err.class(), FaultClass::Job);
        }

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
}
