//! What the fetch tests share: an HTTP server whose answers each test scripts, and
//! helpers to build configs and inputs and to inspect the cache.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use gantry_protocol::spec::InputSpec;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use url::Url;

use super::FetchConfig;

/// What the test server answers to one request.
pub(super) enum Reply {
    Body(Vec<u8>),
    Status(u16),
    /// 200 without a length, then 256 MiB of zeros unless the client hangs up first
    /// (bounded, so that a broken limit fails the test instead of filling the disk).
    Unsized,
    /// An S3 `GetObject` answer: the headers `object_store` insists on.
    S3Object(Vec<u8>),
    /// 302 to this location.
    Redirect(String),
}

type Route = dyn Fn(&str, usize) -> Reply + Send + Sync;

/// An HTTP server on a free port, answering each request with `route(path, how many
/// earlier requests had this path)`.
pub(super) struct TestServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    /// Notified when a client hung up during an unsized body.
    pub(super) hung_up: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

struct ServerState {
    route: Box<Route>,
    hits: Mutex<HashMap<String, usize>>,
    hung_up: Arc<Notify>,
}

impl TestServer {
    pub(super) async fn start(
        route: impl Fn(&str, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        Self::start_on(Ipv4Addr::LOCALHOST, route).await
    }

    /// The server on `ip` (any of 127.0.0.0/8 is this machine's).
    pub(super) async fn start_on(
        ip: Ipv4Addr,
        route: impl Fn(&str, usize) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind((ip, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let hung_up = Arc::new(Notify::new());
        let state = Arc::new(ServerState {
            route: Box::new(route),
            hits: Mutex::new(HashMap::new()),
            hung_up: hung_up.clone(),
        });
        let router = axum::Router::new()
            .fallback(answer)
            .with_state(state.clone());
        let task = tokio::spawn(async move {
            axum::serve(listener, router).await.unwrap();
        });
        Self {
            addr,
            state,
            hung_up,
            task,
        }
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub(super) fn port(&self) -> u16 {
        self.addr.port()
    }

    pub(super) fn hits(&self, path: &str) -> usize {
        let hits = self.state.hits.lock().unwrap();
        hits.get(path).copied().unwrap_or(0)
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(State(state): State<Arc<ServerState>>, uri: Uri) -> Response {
    let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_owned();
    let earlier = {
        let mut hits = state.hits.lock().unwrap();
        let count = hits.entry(path.clone()).or_default();
        *count += 1;
        *count - 1
    };
    match (state.route)(&path, earlier) {
        Reply::Body(body) => body.into_response(),
        Reply::Status(status) => StatusCode::from_u16(status).unwrap().into_response(),
        Reply::S3Object(body) => (
            [
                (header::ETAG, "\"0123\""),
                (header::LAST_MODIFIED, "Wed, 21 Oct 2015 07:28:00 GMT"),
            ],
            body,
        )
            .into_response(),
        Reply::Unsized => Body::from_stream(zeros(state.hung_up.clone())).into_response(),
        Reply::Redirect(location) => {
            (StatusCode::FOUND, [(header::LOCATION, location)]).into_response()
        }
    }
}

/// 4096 chunks of 64 KiB of zeros; `hung_up` is notified if the stream is dropped before
/// its end, which is what the server does once the client has gone.
fn zeros(hung_up: Arc<Notify>) -> impl futures::Stream<Item = Result<Bytes, Infallible>> {
    struct Sent {
        chunks: usize,
        hung_up: Arc<Notify>,
    }
    impl Drop for Sent {
        fn drop(&mut self) {
            if self.chunks < 4096 {
                self.hung_up.notify_one();
            }
        }
    }
    let chunk = Bytes::from(vec![0; 64 * 1024]);
    let sent = Sent { chunks: 0, hung_up };
    futures::stream::unfold(sent, move |mut sent| {
        let chunk = chunk.clone();
        async move {
            if sent.chunks == 4096 {
                return None;
            }
            sent.chunks += 1;
            Some((Ok(chunk), sent))
        }
    })
}

/// The chain of [`config`]: `nats://` inputs name its inputs or results bucket.
pub(super) const CHAIN: u64 = 31337;

/// A config caching in `cache` that, like the test nets, lets inputs come from
/// `127.0.0.1` (where [`TestServer`]s listen) and nowhere else that is not public.
pub(super) fn config(cache: &Path) -> FetchConfig {
    FetchConfig {
        cache_dir: cache.to_path_buf(),
        ipfs_gateway: Url::parse("http://127.0.0.1:9/").unwrap(),
        local_root: None,
        default_max_bytes: 1 << 20,
        s3: None,
        attempts: 3,
        allow_hosts: vec!["127.0.0.1".into()],
        chain_id: CHAIN,
    }
}

pub(super) fn input(uri: &str, sha256: Option<&str>, max_bytes: Option<u64>) -> InputSpec {
    InputSpec {
        encrypted: false,
        uri: uri.into(),
        sha256: sha256.map(Into::into),
        path: "/inputs/data".into(),
        max_bytes,
    }
}

pub(super) fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

pub(super) fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect()
}

/// `err` is the refusal of a body larger than `limit`, a job fault.
pub(super) fn assert_too_large(err: &super::FetchError, limit: u64) {
    assert!(
        matches!(err, super::FetchError::TooLarge { limit: l } if *l == limit),
        "{err:?}"
    );
    assert_eq!(err.class(), crate::fault::FaultClass::Job);
}

/// A fetcher caching in `cache` that tries each download `attempts` times.
pub(super) fn fetcher_trying(cache: &Path, attempts: u32) -> super::Fetcher {
    let config = FetchConfig {
        attempts,
        ..config(cache)
    };
    super::Fetcher::new(config, None).unwrap()
}

pub(super) fn assert_no_partial_files(cache: &Path) {
    assert_eq!(entries(&cache.join("tmp")), Vec::<PathBuf>::new());
}
