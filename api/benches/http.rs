//! `cargo bench -p gantry-api --bench http`: the read API over a SQLite projection of
//! 100,000 jobs. `GET /v1/jobs/{id}` (random ids) and `GET /v1/jobs?status=running`
//! against `GET /healthz` on the same server and the same keep-alive connections,
//! measured in the same run, so that the ratios hold on a noisy machine.
//!
//! ```text
//!   synthetic blocks ──Store::apply_block──▶ SQLite ──▶ router (axum, 2 workers)
//!                                                          ▲
//!   load generator (1 thread, 32 HTTP/1.1 keep-alive connections, closed loop)
//! ```
//!
//! The projection goes through the real fold (`Store::apply_block`): 1,000 blocks of 100
//! `JobPosted` (block 1 first announces the policy and registers 8 nodes), and one job in
//! ten `JobAssigned` a block later. Its
//! speed is printed too. Then, per scenario, a warm-up and a fixed window in which every
//! latency is recorded; any answer that is not a 200 with a body fails the bench. Last,
//! the store's own calls behind `GET /v1/jobs/{id}`, without HTTP, to tell the two apart.
//!
//! `-- projection` stops after the projection (into SQLite and PostgreSQL), with its own
//! JSON line (`"bench":"api_projection"`, with the SQLite database's bytes per event).
//!
//! Prints figures and a final JSON line:
//! `{"bench":"api_http","by_id_rps":..,"by_id_p99_ms":..,"list_rps":..,"by_id_vs_healthz":..}`
//! (goal: ≥ 10,000 req/s by id with p99 ≤ 10 ms, load generator included).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, B256, Bytes, U256, aliases::U40, aliases::U96};
use gantry_api::http::{AppState, HttpConfig, router};
use gantry_api::project::{MAX_BATCH_BLOCKS, MAX_BATCH_EVENTS, Progress};
use gantry_api::store::{CommittedBlock, Store};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::Requirements;
use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION, EventEnvelope};
use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
use gantry_protocol::market::Terms;
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes as Chunk;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;

/// The API binary's allocator (`api/src/main.rs`): the projection's speed depends on it.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const JOBS: u64 = 100_000;
const JOBS_PER_BLOCK: u64 = 100;
const NODES: u64 = 8;
/// One job in this many is assigned (10,000 running jobs).
const ASSIGN_EVERY: u64 = 10;
const CHAIN_ID: u64 = 31_337;
const GENESIS_TIME: u64 = 1_750_000_000;

const CONNECTIONS: usize = 32;
const WARM_UP: Duration = Duration::from_secs(1);
const WINDOW: Duration = Duration::from_secs(5);

fn main() {
    let server = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("server runtime");
    let dir = tempfile::tempdir().expect("temporary directory");
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    let store = server.block_on(Store::open(&url)).expect("store");
    let projection = server.block_on(project(&store, "SQLite"));
    // The same chain into PostgreSQL (the store at scale), started here on a free port.
    let postgres = gantry_testkit::Postgres::start().expect("postgres starts");
    let on_postgres = server.block_on(async {
        let store = Store::open(&postgres.url()).await.expect("postgres store");
        project(&store, "PostgreSQL").await
    });
    drop(postgres);
    let ratio = |a: f64, b: f64| round(a / b, 3);
    let projection_json = serde_json::json!({
        "projection_events_per_s": round(projection.events_per_s, 0),
        "projection_cpu_us_per_event": round(projection.cpu_per_event, 1),
        "projection_per_block_events_per_s": round(projection.per_block, 0),
        "projection_bytes_per_event": round(projection.bytes_per_event, 0),
        "projection_postgres_events_per_s": round(on_postgres.events_per_s, 0),
        "projection_postgres_client_cpu_us_per_event": round(on_postgres.cpu_per_event, 1),
        "projection_postgres_per_block_events_per_s": round(on_postgres.per_block, 0),
    });
    if std::env::args().any(|arg| arg == "projection") {
        // `cargo bench -p gantry-api --bench http -- projection`: the projection alone.
        let mut json = serde_json::json!({ "bench": "api_projection" });
        json.as_object_mut()
            .expect("an object")
            .extend(projection_json.as_object().expect("an object").clone());
        println!("{json}");
        return;
    }
    // One server keeps the jobs' documents (the default cache), one builds each in the
    // database (no cache): the miss path.
    let kept = server.block_on(serve(store.clone()));
    let built = server.block_on(serve(store.clone().with_document_cache(0)));

    // The load generator runs on its own thread, on a single-threaded runtime, so that it
    // takes at most one of the two cores and its cost is the same for every scenario.
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("client runtime");
    let (list_path, mut http) = client.block_on(load(kept, built));
    http.documents_kept = store.documents_kept();
    let store_only = server.block_on(store_by_id(&store));

    let by_id = &http.by_id;
    let mut json = serde_json::json!({
        "bench": "api_http",
        "by_id_rps": round(by_id.rps, 0),
        "by_id_p50_ms": round(by_id.p50_ms, 3),
        "by_id_p99_ms": round(by_id.p99_ms, 3),
        "list_rps": round(http.list.rps, 0),
        "list_p99_ms": round(http.list.p99_ms, 3),
        "healthz_rps": round(http.healthz.rps, 0),
        "healthz_p99_ms": round(http.healthz.p99_ms, 3),
        "by_id_vs_healthz": ratio(by_id.rps, http.healthz.rps),
        "by_id_p99_vs_healthz": ratio(by_id.p99_ms, http.healthz.p99_ms),
        "by_id_built_rps": round(http.by_id_built.rps, 0),
        "by_id_built_p99_ms": round(http.by_id_built.p99_ms, 3),
        "by_id_built_vs_healthz": ratio(http.by_id_built.rps, http.healthz.rps),
        "documents_kept_mb": round(http.documents_kept as f64 / f64::from(1 << 20), 1),
        "list_vs_healthz": ratio(http.list.rps, http.healthz.rps),
        "store_by_id_rps": round(store_only.rps, 0),
        "by_id_vs_store": ratio(by_id.rps, store_only.rps),
        "list_status": list_path.trim_start_matches("/v1/jobs?status="),
        "jobs": JOBS,
        "connections": CONNECTIONS,
    });
    json.as_object_mut()
        .expect("an object")
        .extend(projection_json.as_object().expect("an object").clone());
    let goal = by_id.rps >= 10_000.0 && by_id.p99_ms <= 10.0;
    println!(
        "goal (>= 10000 req/s by id, p99 <= 10 ms): {}",
        if goal { "met" } else { "NOT met" }
    );
    println!("{json}");
}

fn round(value: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (value * scale).round() / scale
}

// ---------------------------------------------------------------------------------------
// The projection

#[derive(Debug)]
struct Projection {
    events_per_s: f64,
    per_block: f64,
    /// This process's CPU time (every thread: the fold, and SQLite's own work when the
    /// database is SQLite) over the catching-up events, µs: steadier than the rate on a
    /// shared machine.
    cpu_per_event: f64,
    /// The database's size over the events applied (SQLite: pages in use).
    bytes_per_event: f64,
}

/// Applies the synthetic chain, timing only the store: the first 100 blocks one
/// transaction each (`Store::apply_block`, as the projection does live), the rest in
/// ranges cut as the projector cuts them while catching up (`MAX_BATCH_BLOCKS`,
/// `MAX_BATCH_EVENTS`), a transaction each (`Store::apply_blocks`).
async fn project(store: &Store, database: &str) -> Projection {
    let blocks = synthetic_chain();
    let count = |blocks: &[(Vec<EventEnvelope>, BlockCommit)]| -> usize {
        blocks.iter().map(|(events, _)| events.len()).sum()
    };
    let (live, catching_up) = blocks.split_at(100);
    let started = Instant::now();
    for (seq, (events, commit)) in live.iter().enumerate() {
        store
            .apply_block(events, commit, seq as u64 + 1)
            .await
            .expect("apply block");
    }
    let per_block = count(live) as f64 / started.elapsed().as_secs_f64();
    // The ranges as the projector cuts them (made before the clock starts).
    let mut ranges: Vec<Vec<CommittedBlock<'_>>> = vec![Vec::new()];
    for (i, (events, commit)) in catching_up.iter().enumerate() {
        let range = ranges.last_mut().expect("a range");
        range.push(CommittedBlock {
            events,
            commit,
            seq: (live.len() + i) as u64 + 1,
        });
        let held: usize = range.iter().map(|block| block.events.len()).sum();
        if range.len() >= MAX_BATCH_BLOCKS || held >= MAX_BATCH_EVENTS {
            ranges.push(Vec::new());
        }
    }
    ranges.retain(|range| !range.is_empty());
    let range_count = ranges.len();
    let started = Instant::now();
    let cpu = cpu_time::ProcessTime::now();
    for blocks in &ranges {
        store.apply_blocks(blocks).await.expect("apply blocks");
    }
    let elapsed = started.elapsed();
    let cpu_per_event = cpu.elapsed().as_secs_f64() * 1e6 / count(catching_up) as f64;
    let events_per_s = count(catching_up) as f64 / elapsed.as_secs_f64();
    println!(
        "projection into {database}: {} events in {} blocks; a transaction a block {per_block:.0} events/s, \
         catching up ({range_count} transactions) {events_per_s:.0} events/s, {:.0} blocks/s, \
         {cpu_per_event:.1} µs of this process's CPU an event",
        count(&blocks),
        blocks.len(),
        catching_up.len() as f64 / elapsed.as_secs_f64(),
    );
    let open = store.job(1).await.expect("job 1").expect("job 1 stored");
    assert_eq!(open.status.as_str(), "open", "job 1");
    let running = store.job(ASSIGN_EVERY).await.expect("job").expect("stored");
    assert_eq!(running.status.as_str(), "assigned", "job {ASSIGN_EVERY}");
    let bytes = if database == "SQLite" {
        let pages: i64 = sqlx::query_scalar(
            "SELECT page_count - freelist_count FROM pragma_page_count(), pragma_freelist_count()",
        )
        .fetch_one(store.pool())
        .await
        .expect("page count");
        let page_size: i64 = sqlx::query_scalar("SELECT page_size FROM pragma_page_size()")
            .fetch_one(store.pool())
            .await
            .expect("page size");
        (pages * page_size) as f64
    } else {
        0.0
    };
    Projection {
        events_per_s,
        per_block,
        cpu_per_event,
        bytes_per_event: bytes / count(&blocks) as f64,
    }
}

/// Blocks 1..=1000 post 100 jobs each (block 1 first registers the nodes); each block
/// also assigns every tenth job of the block before it, and one more block assigns the
/// last block's.
fn synthetic_chain() -> Vec<(Vec<EventEnvelope>, BlockCommit)> {
    let last_block = JOBS / JOBS_PER_BLOCK + 1;
    let mut chain = Vec::with_capacity(last_block as usize);
    for number in 1..=last_block {
        let mut block = Block::new(number);
        if number == 1 {
            // As at deployment: the market's first policy, which the jobs are posted under.
            block.push(
                ContractKind::Market,
                event_name::<JobMarket::MarketParamsUpdated>(),
                0,
                JobMarket::MarketParamsUpdated {
                    params: gantry_testkit::DeployParams::dev(Address::repeat_byte(0x7e)).market,
                    policyVersion: 1,
                },
            );
            for node in 1..=NODES {
                block.push(
                    ContractKind::Registry,
                    event_name::<NodeRegistry::NodeRegistered>(),
                    node,
                    registered(node),
                );
            }
        }
        let posted = (number - 1) * JOBS_PER_BLOCK;
        if posted < JOBS {
            for job in posted + 1..=posted + JOBS_PER_BLOCK {
                block.push(
                    ContractKind::Market,
                    event_name::<JobMarket::JobPosted>(),
                    job,
                    job_posted(job),
                );
            }
        }
        if number > 1 {
            let previous = (number - 2) * JOBS_PER_BLOCK;
            for job in (previous + 1..=previous + JOBS_PER_BLOCK).filter(|j| j % ASSIGN_EVERY == 0)
            {
                let node = job % NODES + 1;
                // The subject key of `JobAssigned` is the node.
                block.push(
                    ContractKind::Market,
                    event_name::<JobMarket::JobAssigned>(),
                    node,
                    job_assigned(job, node, block.timestamp()),
                );
            }
        }
        chain.push(block.commit());
    }
    chain
}

/// A block being built: its commit (counted at the end) and its events.
#[derive(Debug)]
struct Block {
    commit: BlockCommit,
    events: Vec<EventEnvelope>,
}

impl Block {
    fn new(number: u64) -> Self {
        Self {
            commit: BlockCommit {
                v: ENVELOPE_VERSION,
                chain_id: CHAIN_ID,
                block_number: number,
                block_hash: block_hash(number),
                parent_hash: block_hash(number - 1),
                block_timestamp: GENESIS_TIME + 12 * number,
                event_count: 0,
            },
            events: Vec::new(),
        }
    }

    fn timestamp(&self) -> u64 {
        self.commit.block_timestamp
    }

    fn push(&mut self, contract: ContractKind, name: &str, key: u64, data: impl serde::Serialize) {
        let log_index = self.events.len() as u64;
        let number = self.commit.block_number;
        self.events.push(EventEnvelope {
            v: ENVELOPE_VERSION,
            chain_id: CHAIN_ID,
            block_number: number,
            block_hash: self.commit.block_hash,
            block_timestamp: self.commit.block_timestamp,
            // One transaction per event, as a batcher-less chain would have.
            tx_hash: B256::from(U256::from((number << 32) | log_index)),
            log_index,
            // What the indexer publishes: the sol event's own serde form.
            event: DecodedEvent {
                contract,
                name: name.into(),
                key: key.to_string(),
                data: serde_json::to_value(data).expect("event serializes"),
            },
        });
    }

    fn commit(mut self) -> (Vec<EventEnvelope>, BlockCommit) {
        self.commit.event_count = self.events.len() as u32;
        (self.events, self.commit)
    }
}

fn block_hash(number: u64) -> B256 {
    B256::from(U256::from(number) | (U256::from(0xb10c) << 200))
}

fn registered(node: u64) -> NodeRegistry::NodeRegistered {
    NodeRegistry::NodeRegistered {
        nodeId: node,
        operator: Address::repeat_byte(0x10 + node as u8),
        agent: Address::repeat_byte(0x20 + node as u8),
        capabilities: gantry_testkit::scenario::h100_node(),
        metadataURI: format!("https://nodes.example.org/{node}.json"),
        stake: U96::from(500_000_000u64),
        at: GENESIS_TIME as u32,
    }
}

fn job_posted(job: u64) -> JobMarket::JobPosted {
    let submitter = Address::repeat_byte(0x30 + (job % 16) as u8);
    let terms = Terms {
        submitter,
        bounty: 5_000_000,
        spec_hash: B256::from(U256::from(job)),
        requirements: Requirements::from(&gantry_testkit::scenario::h100_requirements()),
        deadline: GENESIS_TIME + 86_400,
        policy: 1,
        verification: gantry_protocol::market::Verification::NONE,
    };
    JobMarket::JobPosted {
        jobId: job,
        submitter,
        terms: terms.pack(),
        fromCredits: U96::ZERO,
        spec: Bytes::from(spec_of(job)),
    }
}

/// The ~400-byte spec of the contract tests, its seed the job's: a sweep's postings, each
/// spec read on its own (a range posting one spec many times reads it once).
fn spec_of(job: u64) -> Vec<u8> {
    let spec = String::from_utf8(gantry_testkit::scenario::example_spec()).expect("UTF-8");
    let seeded = spec.replace(r#""SEED":"42""#, &format!(r#""SEED":"sweep-{job}""#));
    assert_ne!(seeded, spec, "the example spec has a seed");
    seeded.into_bytes()
}

fn job_assigned(job: u64, node: u64, at: u64) -> JobMarket::JobAssigned {
    let max_runtime = gantry_testkit::scenario::h100_requirements().maxRuntime;
    JobMarket::JobAssigned {
        jobId: job,
        nodeId: node,
        claimed: false,
        until: U40::from(at + u64::from(max_runtime)),
    }
}

// ---------------------------------------------------------------------------------------
// The HTTP side

async fn serve(store: Store) -> SocketAddr {
    let (_tx, progress) = tokio::sync::watch::channel(Progress {
        checkpoint: store.checkpoint().await.expect("checkpoint"),
        block: store.last_block().await.expect("last block"),
        read: 0,
        idle: true,
        stalled: None,
    });
    let app = router(
        AppState::new(store, progress, gantry_api::live::Live::default()),
        HttpConfig {
            request_timeout: Duration::from_secs(5),
            cors: tower_http::cors::CorsLayer::permissive(),
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    addr
}

#[derive(Debug)]
struct HttpFigures {
    healthz: Figures,
    /// With every document kept (read once before).
    by_id: Figures,
    /// On the server that keeps none: each built by the database.
    by_id_built: Figures,
    list: Figures,
    /// Bytes the documents kept take (as the cache weighs them).
    documents_kept: u64,
}

/// Latencies of one scenario's window.
#[derive(Debug)]
struct Figures {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
}

impl Figures {
    fn of(name: &str, mut micros: Vec<u32>, bytes: u64, window: Duration) -> Self {
        micros.sort_unstable();
        let at = |p: f64| {
            let index = ((micros.len() as f64 - 1.0) * p).round() as usize;
            f64::from(micros[index]) / 1e3
        };
        let figures = Self {
            rps: micros.len() as f64 / window.as_secs_f64(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
        };
        println!(
            "{name:<28} {:>8.0} req/s  p50 {:>6.3} ms  p90 {:>6.3} ms  p99 {:>6.3} ms  max {:>7.3} ms  \
             ({} requests, {:.0} bytes/answer)",
            figures.rps,
            figures.p50_ms,
            at(0.90),
            figures.p99_ms,
            at(1.0),
            micros.len(),
            bytes as f64 / micros.len() as f64,
        );
        figures
    }
}

type Sender = SendRequest<Empty<Chunk>>;

/// Opens the connections, checks the answers once, then runs the scenarios on the same
/// connections. Returns the list path used (`running`, or `assigned` when the API does
/// not know the alias yet).
async fn load(addr: SocketAddr, built: SocketAddr) -> (String, HttpFigures) {
    let mut senders = Vec::with_capacity(CONNECTIONS);
    let mut built_senders = Vec::with_capacity(CONNECTIONS);
    for _ in 0..CONNECTIONS {
        senders.push(connect(addr).await);
        built_senders.push(connect(built).await);
    }
    let sender = &mut senders[0];
    let (status, body) = get(sender, &format!("/v1/jobs/{ASSIGN_EVERY}")).await;
    assert_eq!(status, 200, "GET /v1/jobs/{ASSIGN_EVERY}");
    let job: serde_json::Value = serde_json::from_slice(&body).expect("job JSON");
    assert_eq!(job["jobId"], ASSIGN_EVERY, "job id");
    assert_eq!(
        job["timeline"].as_array().map(Vec::len),
        Some(2),
        "timeline"
    );
    let mut list_path = "/v1/jobs?status=running".to_string();
    let (status, _) = get(sender, &list_path).await;
    if status != 200 {
        println!("note: status=running answered {status}; measuring status=assigned instead");
        list_path = "/v1/jobs?status=assigned".into();
    }
    let (status, body) = get(sender, &list_path).await;
    assert_eq!(status, 200, "GET {list_path}");
    let page: serde_json::Value = serde_json::from_slice(&body).expect("page JSON");
    let items = page["items"].as_array().expect("items");
    assert_eq!(items.len(), 50, "a full first page");
    assert!(
        items.iter().all(|j| j["status"] == "assigned"),
        "only running jobs"
    );

    println!(
        "HTTP/1.1, {CONNECTIONS} keep-alive connections, closed loop, warm-up {} s, window {} s",
        WARM_UP.as_secs(),
        WINDOW.as_secs()
    );
    let (senders, healthz) = scenario("GET /healthz", senders, |_| "/healthz".into()).await;
    let random_job = |rng: &mut Rng| format!("/v1/jobs/{}", rng.below(JOBS) + 1);
    let (_, by_id_built) =
        scenario("GET /v1/jobs/{id}, each built", built_senders, random_job).await;
    // Every job read once: its document kept.
    let started = Instant::now();
    let senders = read_every_job(senders).await;
    println!(
        "read every job once (documents kept): {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let (senders, by_id) = scenario("GET /v1/jobs/{id}, kept", senders, random_job).await;
    let path = list_path.clone();
    let (_senders, list) =
        scenario(&format!("GET {list_path}"), senders, move |_| path.clone()).await;
    (
        list_path,
        HttpFigures {
            healthz,
            by_id,
            by_id_built,
            list,
            documents_kept: 0,
        },
    )
}

async fn connect(addr: SocketAddr) -> Sender {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            eprintln!("connection: {error}");
        }
    });
    sender
}

/// One request: the status and the whole body.
async fn get(sender: &mut Sender, path: &str) -> (u16, Chunk) {
    sender.ready().await.expect("connection ready");
    let request = hyper::Request::get(path)
        .header(hyper::header::HOST, "127.0.0.1")
        .body(Empty::new())
        .expect("request");
    let response = sender.send_request(request).await.expect("response");
    let status = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, body)
}

#[derive(Debug)]
struct Outcome {
    sender: Sender,
    micros: Vec<u32>,
    bytes: u64,
    errors: u64,
    first_error: Option<String>,
}

/// Reads jobs 1 to [`JOBS`] once each, the connections taking turns.
async fn read_every_job(senders: Vec<Sender>) -> Vec<Sender> {
    let tasks: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(index, mut sender)| {
            tokio::spawn(async move {
                for job in (index as u64 + 1..=JOBS).step_by(CONNECTIONS) {
                    let (status, _) = get(&mut sender, &format!("/v1/jobs/{job}")).await;
                    assert_eq!(status, 200, "GET /v1/jobs/{job}");
                }
                sender
            })
        })
        .collect();
    let mut senders = Vec::with_capacity(CONNECTIONS);
    for task in tasks {
        senders.push(task.await.expect("reading task"));
    }
    senders
}

/// Every connection sends requests back to back for the warm-up and the window; the
/// requests started inside the window count.
async fn scenario(
    name: &str,
    senders: Vec<Sender>,
    path: impl Fn(&mut Rng) -> String + Clone + Send + 'static,
) -> (Vec<Sender>, Figures) {
    let start = Instant::now();
    let window_start = start + WARM_UP;
    let end = window_start + WINDOW;
    let tasks: Vec<_> = senders
        .into_iter()
        .enumerate()
        .map(|(index, mut sender)| {
            let path = path.clone();
            tokio::spawn(async move {
                let mut rng = Rng(0x9e37_79b9_7f4a_7c15 ^ (index as u64 + 1));
                let mut outcome = Outcome {
                    sender: {
                        // Moved back into the outcome at the end.
                        sender.ready().await.expect("connection ready");
                        sender
                    },
                    micros: Vec::with_capacity(64 * 1024),
                    bytes: 0,
                    errors: 0,
                    first_error: None,
                };
                loop {
                    let sent = Instant::now();
                    if sent >= end {
                        break;
                    }
                    let path = path(&mut rng);
                    let (status, body) = get(&mut outcome.sender, &path).await;
                    let elapsed = sent.elapsed();
                    if sent < window_start {
                        continue;
                    }
                    outcome
                        .micros
                        .push(elapsed.as_micros().min(u128::from(u32::MAX)) as u32);
                    outcome.bytes += body.len() as u64;
                    if status != 200 || body.is_empty() {
                        outcome.errors += 1;
                        outcome.first_error.get_or_insert_with(|| {
                            format!("GET {path}: {status} {}", String::from_utf8_lossy(&body))
                        });
                    }
                }
                outcome
            })
        })
        .collect();
    let mut senders = Vec::with_capacity(CONNECTIONS);
    let mut micros = Vec::new();
    let mut bytes = 0;
    let mut errors = 0;
    let mut first_error = None;
    for task in tasks {
        let outcome = task.await.expect("load task");
        senders.push(outcome.sender);
        micros.extend(outcome.micros);
        bytes += outcome.bytes;
        errors += outcome.errors;
        first_error = first_error.or(outcome.first_error);
    }
    assert!(
        errors == 0,
        "{name}: {errors} of {} answers were not a 200 with a body; first: {}",
        micros.len(),
        first_error.unwrap_or_default()
    );
    (senders, Figures::of(name, micros, bytes, WINDOW))
}

/// xorshift64*: enough to spread ids, and free next to a request.
#[derive(Debug)]
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

// ---------------------------------------------------------------------------------------
// The store alone

/// The store call of `GET /v1/jobs/{id}` (`job_document`, one statement) from as many tasks
/// as there are connections, on the server's runtime, without HTTP; then, one at a time,
/// its latency against the four separate reads it replaces (job, timeline, progress,
/// completions).
async fn store_by_id(store: &Store) -> Figures {
    let start = Instant::now();
    let window_start = start + WARM_UP;
    let end = window_start + WINDOW;
    let tasks: Vec<_> = (0..CONNECTIONS)
        .map(|index| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut rng = Rng(0x51ed_2701_f3a5_b9c3 ^ (index as u64 + 1));
                let mut micros = Vec::with_capacity(64 * 1024);
                loop {
                    let sent = Instant::now();
                    if sent >= end {
                        break;
                    }
                    let job = rng.below(JOBS) + 1;
                    let document = store.build_job_document(job).await.expect("job document");
                    assert!(document.is_some_and(|d| {
                        std::str::from_utf8(&d.json).is_ok_and(|j| j.contains("\"logIndex\""))
                    }));
                    if sent >= window_start {
                        micros.push(sent.elapsed().as_micros() as u32);
                    }
                }
                micros
            })
        })
        .collect();
    let mut micros = Vec::new();
    for task in tasks {
        micros.extend(task.await.expect("store task"));
    }
    let figures = Figures::of("store build_job_document, no HTTP", micros, 0, WINDOW);

    const CALLS: u64 = 2_000;
    let mut rng = Rng(7);
    let mut each = [Duration::ZERO; 5];
    for _ in 0..CALLS {
        let job = rng.below(JOBS) + 1;
        let [row, timeline, progress, completions, document] = &mut each;
        timed(document, store.build_job_document(job))
            .await
            .expect("job document");
        timed(row, store.job(job)).await.expect("job");
        timed(timeline, store.timeline(job))
            .await
            .expect("timeline");
        timed(progress, store.progress(job))
            .await
            .expect("progress");
        timed(completions, store.completions(job))
            .await
            .expect("completions");
    }
    let per_call = |d: Duration| d.as_secs_f64() * 1e6 / CALLS as f64;
    println!(
        "store calls one at a time (mean µs): job_document {:.0}; the four it replaces: job {:.0}, \
         timeline {:.0}, progress {:.0}, completions {:.0}",
        per_call(each[4]),
        per_call(each[0]),
        per_call(each[1]),
        per_call(each[2]),
        per_call(each[3]),
    );
    figures
}

/// Awaits `call`, adding the time it took to `total`; its answer, kept from the optimiser.
async fn timed<T>(total: &mut Duration, call: impl Future<Output = T>) -> T {
    let start = Instant::now();
    let answer = std::hint::black_box(call.await);
    *total += start.elapsed();
    answer
}
