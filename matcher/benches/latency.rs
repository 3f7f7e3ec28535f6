//! Post-to-assign latency on a dev chain: anvil (automine), nats-server, the indexer and one
//! matcher, all real. 1,000 jobs are posted one at a time (each once the last is assigned);
//! a watcher polls the chain every millisecond and notes when each job's JobPosted block and JobAssigned block
//! appear. The latency is the difference: the indexer noticing the block, publishing,
//! the matcher planning, signing and sending, and anvil mining the assignment.
//!
//! Baseline, same run and same watcher: the bench assigns 100 jobs itself right after
//! posting each (no indexer, no matcher in the path), the floor the chain and the watcher
//! impose.
//!
//! `cargo bench -p gantry-matcher --bench latency`; final line
//! `{"bench":"post_to_assign","p50_ms":..,"p99_ms":..,"jobs":1000,...}`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use alloy::primitives::{aliases::U40, aliases::U96};
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolEvent;
use gantry_matcher::config::{Common, MatcherConfig};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_testkit::accounts::{ADMIN, MATCHER, OPERATOR, SUBMITTER};
use gantry_testkit::{GUSD, TestNet, confirm_receipt, scenario};
use tokio_util::sync::CancellationToken;

const JOBS: usize = 1_000;
const BASELINE_JOBS: usize = 100;
const NODES: usize = 5;
const SLOTS: u8 = 255;

/// When the watcher first saw each job posted and assigned.
#[derive(Default)]
struct Seen {
    posted: HashMap<u64, Instant>,
    /// When the indexer published the JobPosted event.
    published: HashMap<u64, Instant>,
    assigned: HashMap<u64, Instant>,
}

#[tokio::main]
async fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let net = TestNet::builder()
        .indexer_later()
        .indexer_config(|config| gantry_indexer::Config {
            initial_range: 1_000,
            poll: std::time::Duration::from_millis(5),
            lease_ttl: std::time::Duration::from_secs(3),
            ..config
        })
        .start()
        .await
        .expect("the test net starts");
    let d = net.deployment();

    // Nodes with room for every job, all of one operator (their agents never act), and a
    // funded submitter.
    let capabilities = NodeRegistry::NodeCapabilities {
        maxConcurrentJobs: SLOTS,
        engines: gantry_protocol::eligibility::Engines::ALL.0,
        ..scenario::h100_node()
    };
    for _ in 0..NODES {
        let agent = PrivateKeySigner::random();
        net.register_node_with(OPERATOR, &agent, capabilities.clone(), 500 * GUSD)
            .await;
    }
    net.fund_submitter().await;
    let market = net.market(SUBMITTER);
    let as_matcher = net.market(MATCHER);
    let requirements = scenario::h100_requirements();
    let deadline = U40::from(4_000_000_000u64);

    // The watcher.
    let seen = Arc::new(Mutex::new(Seen::default()));
    let stop = CancellationToken::new();
    let watcher = tokio::spawn(watch(
        net.provider(ADMIN),
        d.market,
        Arc::clone(&seen),
        stop.clone(),
    ));

    // Each send returns once anvil (automine) has mined the transaction.
    let send_post = || async {
        market
            .postJob(
                requirements.clone(),
                U96::from(GUSD),
                deadline,
                scenario::example_spec().into(),
            )
            .send()
            .await
            .unwrap()
    };
    let post = || async {
        confirm_receipt("postJob", Ok(send_post().await))
            .await
            .unwrap()
            .decoded_log::<JobMarket::JobPosted>()
            .unwrap()
            .jobId
    };

    // Baseline: post, then assign directly.
    let mut baseline_jobs = Vec::new();
    let mut open = None;
    for i in 0..BASELINE_JOBS {
        let job = if i == 0 {
            post().await
        } else {
            baseline_jobs[0] + i as u64
        };
        if i > 0 {
            let _mined = send_post().await;
        }
        if open.is_none() {
            // Every job is posted with the same terms: one read serves them all.
            open = Some(net.job(job).await);
        }
        let posted = open.expect("read above");
        let node = (i % NODES) as u64 + 1;
        let _mined = as_matcher
            .assign(job, node, posted.terms.pack(), posted.state.pack())
            .send()
            .await
            .unwrap();
        baseline_jobs.push(job);
    }
    let baseline = wait_latencies(&seen, &baseline_jobs).await;
    eprintln!("baseline measured");

    // The pipeline: indexer and matcher, polling for receipts every 50 ms.
    net.start_indexer();
    let matcher = net.matcher_config(MATCHER);
    let matcher = MatcherConfig {
        common: Common {
            receipt_poll: std::time::Duration::from_millis(50),
            ..matcher.common
        },
        ..matcher
    };
    let services = net.shutdown();
    tokio::spawn(gantry_matcher::run_matcher(matcher, services.clone()));
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let mut postings = client
        .subscribe(gantry_protocol::names::event_filter(
            d.chain_id,
            gantry_protocol::events::event_name::<gantry_protocol::bindings::JobMarket::JobPosted>(
            ),
        ))
        .await
        .unwrap();
    let seen_published = Arc::clone(&seen);
    tokio::spawn(async move {
        use futures::StreamExt;
        while let Some(message) = postings.next().await {
            let job: u64 = message.subject.rsplit('.').next().unwrap().parse().unwrap();
            seen_published
                .lock()
                .unwrap()
                .published
                .entry(job)
                .or_insert(Instant::now());
        }
    });

    // Warm-up: the matcher replays and assigns one job before measuring.
    let warm = post().await;
    wait_latencies(&seen, &[warm]).await;
    eprintln!("matcher warm");

    // One job at a time, the next posted once the last is assigned: the latency of the
    // path, not the queueing of a chain saturated by posts (anvil mines every transaction
    // on two shared cores).
    let started = Instant::now();
    let jobs: Vec<u64> = (warm + 1..=warm + JOBS as u64).collect();
    for job in &jobs {
        let _mined = send_post().await;
        wait_latencies(&seen, &[*job]).await;
    }
    let measured = wait_latencies(&seen, &jobs).await;
    let elapsed = started.elapsed();
    stop.cancel();
    services.cancel();
    let _ = watcher.await;

    let indexed: Vec<f64> = {
        let seen = seen.lock().unwrap();
        jobs.iter()
            .filter_map(|job| {
                Some((*seen.published.get(job)? - seen.posted[job]).as_secs_f64() * 1_000.0)
            })
            .collect()
    };
    println!(
        "  of which indexer (JobPosted block to its event on NATS): p50 {:.1} ms, p99 {:.1} ms",
        percentile(&indexed, 0.5),
        percentile(&indexed, 0.99)
    );
    let (p50, p99) = (percentile(&measured, 0.50), percentile(&measured, 0.99));
    let (base50, base99) = (percentile(&baseline, 0.50), percentile(&baseline, 0.99));
    println!("post_to_assign: {JOBS} jobs posted one at a time in {elapsed:.1?} on {NODES} nodes");
    println!(
        "  matcher path  p50 {p50:.1} ms  p99 {p99:.1} ms  max {:.1} ms",
        percentile(&measured, 1.0)
    );
    println!(
        "  baseline (direct assign, {BASELINE_JOBS} jobs)  p50 {base50:.1} ms  p99 {base99:.1} ms"
    );
    println!(
        "  ratio p50 {:.2}, goal p50 ≤ 50 ms, p99 ≤ 250 ms",
        p50 / base50.max(0.001)
    );
    println!(
        "{}",
        serde_json::json!({
            "bench": "post_to_assign",
            "p50_ms": round(p50),
            "p99_ms": round(p99),
            "jobs": JOBS,
            "baseline_p50_ms": round(base50),
            "baseline_p99_ms": round(base99),
            "ratio_p50": round(p50 / base50.max(0.001)),
        })
    );
}

/// Polls the chain every millisecond and notes when JobPosted and JobAssigned appear.
async fn watch(
    provider: alloy::providers::DynProvider,
    market: alloy::primitives::Address,
    seen: Arc<Mutex<Seen>>,
    stop: CancellationToken,
) {
    let mut next = provider.get_block_number().await.unwrap() + 1;
    while !stop.is_cancelled() {
        let head = provider.get_block_number().await.unwrap();
        if head < next {
            tokio::time::sleep(Duration::from_millis(1)).await;
            continue;
        }
        // A few blocks of overlap: a node may report a head before serving its logs.
        let logs = provider
            .get_logs(
                &Filter::new()
                    .address(market)
                    .from_block(next.saturating_sub(3))
                    .to_block(head),
            )
            .await
            .unwrap();
        let now = Instant::now();
        let mut seen = seen.lock().unwrap();
        for log in logs {
            match log.topic0() {
                Some(t) if *t == JobMarket::JobPosted::SIGNATURE_HASH => {
                    let job = JobMarket::JobPosted::decode_log(&log.inner).unwrap().jobId;
                    seen.posted.entry(job).or_insert(now);
                }
                Some(t) if *t == JobMarket::JobAssigned::SIGNATURE_HASH => {
                    let job = JobMarket::JobAssigned::decode_log(&log.inner)
                        .unwrap()
                        .jobId;
                    seen.assigned.entry(job).or_insert(now);
                }
                _ => {}
            }
        }
        next = head + 1;
    }
}

/// Waits until every job was seen assigned; their latencies in milliseconds.
async fn wait_latencies(seen: &Mutex<Seen>, jobs: &[u64]) -> Vec<f64> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        {
            let seen = seen.lock().unwrap();
            if jobs
                .iter()
                .all(|job| seen.assigned.contains_key(job) && seen.posted.contains_key(job))
            {
                return jobs
                    .iter()
                    .map(|job| (seen.assigned[job] - seen.posted[job]).as_secs_f64() * 1_000.0)
                    .collect();
            }
        }
        if Instant::now() > deadline {
            let seen = seen.lock().unwrap();
            let unposted: Vec<&u64> = jobs
                .iter()
                .filter(|j| !seen.posted.contains_key(j))
                .collect();
            let unassigned: Vec<&u64> = jobs
                .iter()
                .filter(|j| !seen.assigned.contains_key(j))
                .collect();
            panic!(
                "not all jobs assigned within 300 s: {} not seen posted (first {:?}), {} not seen assigned (first {:?})",
                unposted.len(),
                unposted.first(),
                unassigned.len(),
                unassigned.first()
            );
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn percentile(values: &[f64], q: f64) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let index = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[index]
}

fn round(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}
