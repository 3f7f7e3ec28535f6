//! The chaos suite (`make chaos`: ten seeds; one short run inside `make test`): the whole
//! network as processes with every replicated service twice — an indexer and its standby,
//! two matchers, two keepers — the API and three workers, on a chain with a block a
//! second. Jobs are posted through `gantry job submit` and as raw `postJob` transactions
//! while seeded faults hit the network: SIGKILL and restart of any service, SIGSTOP of a
//! worker past the heartbeat timeout, nats-server SIGKILLed and restarted on its store,
//! and `anvil_reorg` of depth 1 to 3. Then every fault ends, the network settles without
//! help, and the run is judged against the chain:
//!
//! | figure | what it counts (each must be 0) |
//! | --- | --- |
//! | `lost` | jobs not terminal on chain (their word not 0) once the last deadline passed |
//! | `double_paid` | jobs with other than exactly one settlement event (completed, failed, cancelled, expired) |
//! | `unaccounted` | the market's token balance less the treasury, every account's credits and every node's stake, earnings and fees owed (no escrow is left once every job is terminal) |
//! | `unfair_slashes` | `NodeSlashed` of a node whose worker was never killed nor stopped |
//! | `projection_mismatches` | jobs (status, node, attempts) and nodes (status, stake, earnings, fees owed) where the API differs from the chain |
//! | `stream_duplicates`, `stream_missing`, `stream_extra`, `stream_damaged` | the chain stream folded as every reader folds it (retractions undo blocks) against `eth_getLogs` of the canonical chain |
//! | `chain_broken` | blocks of the chain whose parent is not the block one below it (anvil's own fault, not the services': no follower checking parents can see it, so the stream figures mean nothing then) |
//! | `panics` | `panicked at` in a service's log |
//! | `containers_left` | job containers on the engine once everything is settled |
//! | `cli_errors` | `gantry job submit` runs that hung, failed other than by an honest "nothing was done", or printed an id not their own |
//! | `posts_reverted` | raw `postJob`s mined and reverted (each printed with the market's reason) |
//!
//! ```text
//!  seed ──▶ StdRng ──▶ faults (kill/restart, stop/cont, nats, reorg) ─┐
//!  posters: raw ×2 accounts, CLI ──▶ jobs ────────────────────────────┼──▶ settle ──▶ judge ──▶ Report
//! ```

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use alloy::primitives::aliases::{U40, U96};
use alloy::primitives::{Address, B256, U256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::Filter;
use anyhow::Context;
use futures::StreamExt;
use gantry_protocol::api::{JobDetail, NodeDetail};
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry};
use gantry_protocol::chain_stream::{Assembled, BlockAssembler, ChainMessage};
use gantry_protocol::events::{Contracts, DecodedEvent, decode};
use gantry_protocol::spec::{JobKind, JobSpec, OutputSpec, Resources, SPEC_VERSION};
use gantry_protocol::status::NodeStatus;
use gantry_testkit::accounts::{AGENT, NODES, SUBMITTER};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::demo;
use crate::network::{Network, NetworkConfig};

/// The chain's block time, seconds.
const BLOCK_TIME: u64 = 1;
/// Stream messages between two snapshots of a matcher's or keeper's view (a chaos run
/// publishes a few thousand).
const SNAPSHOT_EVERY: u64 = 64;
/// The deepest reorganisation injected, blocks.
const MAX_REORG_DEPTH: u64 = 3;
/// The network's heartbeat timeout, seconds: a stopped worker's node is marked inactive
/// this long after its last beat.
const HEARTBEAT_TIMEOUT: u32 = 15;
/// The market's challenge window, seconds.
const CHALLENGE_WINDOW: u32 = 5;
/// How long a posted job may wait beyond the fault phase before it expires, seconds.
const DEADLINE_MARGIN: u64 = 240;
/// An attempt's on-chain runtime for a raw job, seconds (its spec's timeout is 30 s).
const MAX_RUNTIME: u32 = 120;
/// How long after the last deadline the keepers get to expire what is left, seconds.
const SETTLE_GRACE: u64 = 120;
/// The worker's label on each job container (gantry-worker's `docker::JOB_LABEL`).
const JOB_LABEL: &str = "io.gantry.job";

/// One chaos run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    /// Jobs to post; about a tenth through the CLI.
    pub jobs: usize,
    /// How long faults are injected.
    pub fault_time: Duration,
    /// Where the network's logs and folders go.
    pub run_dir: PathBuf,
}

impl ChaosConfig {
    /// `make chaos`'s run: 200 jobs, three minutes of faults.
    pub fn full(seed: u64, run_dir: &Path) -> Self {
        Self {
            seed,
            jobs: 200,
            fault_time: Duration::from_secs(180),
            run_dir: run_dir.to_owned(),
        }
    }

    /// `make test`'s run: 16 jobs, a minute of faults.
    pub fn short(seed: u64, run_dir: &Path) -> Self {
        Self {
            seed,
            jobs: 16,
            fault_time: Duration::from_secs(60),
            run_dir: run_dir.to_owned(),
        }
    }
}

/// What a run found. Every count but `jobs`, `faults`, the outcomes and `settle_secs`
/// must be 0 for the run to pass.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub bench: &'static str,
    pub seed: u64,
    pub jobs: u64,
    pub faults: usize,
    pub completed: u64,
    pub failed: u64,
    pub expired: u64,
    pub lost: u64,
    pub double_paid: u64,
    pub unaccounted: String,
    pub unfair_slashes: u64,
    pub projection_mismatches: u64,
    pub stream_duplicates: u64,
    pub stream_missing: u64,
    pub stream_extra: u64,
    pub stream_damaged: u64,
    pub chain_broken: u64,
    pub panics: u64,
    pub containers_left: u64,
    pub cli_errors: u64,
    pub posts_reverted: u64,
    pub settle_secs: u64,
    /// Matcher and keeper starts from a snapshot of their view, and snapshots refused (a
    /// reorganisation orphaned its block: the service replayed): how often the judgments
    /// above held over views restored from snapshots (not required to be 0).
    pub snapshot_restores: u64,
    pub snapshot_refusals: u64,
    /// What each non-zero count is about, for people (not in the JSON line).
    #[serde(skip)]
    pub findings: Vec<String>,
}

impl Report {
    /// Whether nothing was lost, paid twice, unaccounted, unfair, wrong or left behind.
    pub fn passed(&self) -> bool {
        self.lost == 0
            && self.double_paid == 0
            && self.unaccounted == "0"
            && self.unfair_slashes == 0
            && self.projection_mismatches == 0
            && self.stream_duplicates == 0
            && self.stream_missing == 0
            && self.stream_extra == 0
            && self.stream_damaged == 0
            && self.chain_broken == 0
            && self.panics == 0
            && self.containers_left == 0
            && self.cli_errors == 0
            && self.posts_reverted == 0
    }

    /// The final JSON line.
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a report serializes")
    }
}

/// One injected fault, for the log.
#[derive(Debug, Clone)]
struct Fault {
    at: Duration,
    what: String,
}

/// Runs the network through `config`'s faults and judges it; the network is stopped
/// before this returns.
pub async fn run(config: &ChaosConfig) -> anyhow::Result<Report> {
    println!(
        "chaos seed {}: {} jobs, {} s of faults, run directory {}",
        config.seed,
        config.jobs,
        config.fault_time.as_secs(),
        config.run_dir.display()
    );
    let network = Network::start(NetworkConfig {
        block_time: Duration::from_secs(BLOCK_TIME),
        replicas: 2,
        challenge_window: CHALLENGE_WINDOW,
        heartbeat_timeout: HEARTBEAT_TIMEOUT,
        // Matchers and keepers write their view's snapshot often, so that a replica
        // killed and restarted starts from one (and the judgments hold it to the chain).
        snapshot_every: Some(SNAPSHOT_EVERY),
        ..NetworkConfig::ephemeral(&config.run_dir, 3)?
    })
    .await?;
    let result = drive(network, config).await;
    if let Ok(report) = &result {
        for finding in &report.findings {
            println!("  finding: {finding}");
        }
    }
    result
}

async fn drive(mut network: Network, config: &ChaosConfig) -> anyhow::Result<Report> {
    let chain = network.devnet.admin.clone();
    let mut blocks = chain.watch_blocks().await?.into_stream();
    // The workers' nodes, by label.
    let workers = worker_nodes(&network, &mut blocks).await?;
    println!("nodes active: {workers:?}");

    let deadline = network.devnet.now().await? + config.fault_time.as_secs() + DEADLINE_MARGIN;
    let cli_jobs = (config.jobs / 10).max(1);
    let raw_jobs = config.jobs - cli_jobs;
    let mut posters = tokio::task::JoinSet::new();
    for (index, account) in [SUBMITTER, NODES[3]].into_iter().enumerate() {
        let share = raw_jobs / 2 + if index == 0 { raw_jobs % 2 } else { 0 };
        let devnet_provider = network.devnet.provider(account);
        let address = network.devnet.address(account);
        let market = network.devnet.deployment.market;
        network
            .devnet
            .fund(account, market, U256::from(1_000_000_000_000u64))
            .await?;
        let seed = config.seed.wrapping_add(index as u64 + 1);
        let raw = post_raw(devnet_provider, address, market, share, deadline, seed);
        posters.spawn(async move { raw.await.map(|reverted| (0, reverted)) });
    }
    // anvil_reorg drops the orphaned blocks' transactions for good (a real chain's would
    // return to the pool): the funding must be buried deeper than any reorg before the
    // first fault, or a posting finds no allowance (seed 59: three postings reverted).
    let funded = chain.get_block_number().await?;
    while chain.get_block_number().await? < funded + MAX_REORG_DEPTH {
        blocks.next().await;
    }
    let cli = post_with_cli(Cli::of(&network), cli_jobs, deadline, config.seed);
    posters.spawn(async move { cli.await.map(|errors| (errors, 0)) });

    let started = Instant::now();
    let (faults, touched) = inject(&mut network, config).await?;
    println!(
        "{} faults injected in {} s; all services up again",
        faults.len(),
        started.elapsed().as_secs()
    );
    let (mut cli_errors, mut posts_reverted) = (0, 0);
    while let Some(posted) = posters.join_next().await {
        let (errors, reverted) = posted??;
        cli_errors += errors;
        posts_reverted += reverted;
    }

    let settling = Instant::now();
    let lost = settle(&network, &mut blocks, deadline + SETTLE_GRACE).await?;
    let settle_secs = settling.elapsed().as_secs();
    println!(
        "settled in {settle_secs} s; {} jobs not terminal",
        lost.len()
    );

    let mut report = judge(&mut network, &mut blocks, &touched, &workers).await?;
    report.seed = config.seed;
    report.faults = faults.len();
    report.lost = lost.len() as u64;
    if !lost.is_empty() {
        report.findings.push(format!("not terminal: {lost:?}"));
    }
    report.settle_secs = settle_secs;
    report.cli_errors = cli_errors;
    report.posts_reverted = posts_reverted;
    // Read once every service has stopped: a panic on the way out counts too.
    let logs = network.run_dir.join("logs");
    network.stop().await;
    report.panics = panics(&logs, &mut report.findings)?;
    report.snapshot_restores = lines_with(&logs, "restored the view from its snapshot")?;
    report.snapshot_refusals = lines_with(&logs, "refusing the snapshot")?;
    if !report.passed() {
        for fault in &faults {
            println!(
                "  fault at {:>5.1} s: {}",
                fault.at.as_secs_f64(),
                fault.what
            );
        }
    }
    Ok(report)
}

/// Waits until each worker's node is Active; answers the node id of each worker label.
async fn worker_nodes(
    network: &Network,
    blocks: &mut (impl futures::Stream + Unpin),
) -> anyhow::Result<BTreeMap<String, u64>> {
    let registry = NodeRegistry::new(
        network.devnet.deployment.registry,
        network.devnet.admin.clone(),
    );
    let agents: Vec<(String, Address)> = (0..3)
        .map(|i| {
            (
                format!("gantry-worker-{}", i + 1),
                network.devnet.address(NODES[i]),
            )
        })
        .collect();
    let give_up = Instant::now() + Duration::from_secs(180);
    loop {
        let count = registry.nodeCount().call().await?;
        let mut found = BTreeMap::new();
        for id in 1..=count {
            let node = registry.getNode(id).call().await?;
            if node.status == NodeStatus::Active as u8
                && let Some((label, _)) = agents.iter().find(|(_, agent)| *agent == node.agent)
            {
                found.insert(label.clone(), id);
            }
        }
        if found.len() == agents.len() {
            return Ok(found);
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "the workers' nodes did not all become active in 180 s"
        );
        blocks.next().await;
    }
}

/// Posts `count` jobs as `address` through `provider`, one at a time, each at the nonce
/// the chain holds (a posting a reorg dropped is simply posted again), while an attempt
/// posted now still fits `deadline` (past it the market refuses the posting,
/// `JobMarket_DeadlineTooSoon`: the run goes on with the jobs posted); answers how many
/// postings reverted (each printed with the market's reason; after three it stops posting).
async fn post_raw(
    provider: DynProvider,
    address: Address,
    market: Address,
    count: usize,
    deadline: u64,
    seed: u64,
) -> anyhow::Result<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let market = JobMarket::new(market, provider.clone());
    let mut requirements = demo::requirements();
    requirements.maxRuntime = MAX_RUNTIME;
    let (mut posted, mut reverted) = (0, 0);
    while posted < count {
        let now = chain_time(&provider).await?;
        // A few blocks of room: the posting is mined a little later than it is sent.
        if now + u64::from(MAX_RUNTIME) + 10 > deadline {
            println!("posting stopped at {posted} of {count} jobs: their deadline no longer fits");
            break;
        }
        let spec = serde_json::to_vec(&job_spec(rng.random_range(0..4)))?;
        let nonce = provider.get_transaction_count(address).await?;
        let call = market
            .postJob(
                requirements.clone(),
                U96::from(1_000_000u64),
                U40::from(deadline),
                spec.into(),
            )
            .nonce(nonce)
            .gas(1_000_000);
        let Ok(pending) = call.send().await else {
            // A nonce the pool still holds: wait for it to be mined or dropped.
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        };
        match pending
            .with_timeout(Some(Duration::from_secs(20)))
            .get_receipt()
            .await
        {
            Ok(receipt) if receipt.status() => posted += 1,
            Ok(receipt) => {
                // The same call again on the state it ran on, to say why.
                let block = receipt.block_number.context("a mined receipt")?;
                let why = call
                    .from(address)
                    .block((block - 1).into())
                    .call()
                    .await
                    .err()
                    .map_or_else(
                        || "the same call passes on the block before".to_owned(),
                        |e| describe(&e),
                    );
                let mined_at = provider
                    .get_block(block.into())
                    .await?
                    .map(|b| b.header.timestamp);
                println!(
                    "  postJob {} (deadline {deadline}) reverted in block {block} at time {mined_at:?}: {why}",
                    receipt.transaction_hash
                );
                reverted += 1;
                if reverted == 3 {
                    break;
                }
            }
            // Not mined within 20 s: dropped by a reorg; post again.
            Err(_) => {}
        }
    }
    Ok(reverted)
}

/// A call's revert as the market's or the token's error, when it is one of theirs.
fn describe(error: &alloy::contract::Error) -> String {
    if let Some(e) = error.as_decoded_interface_error::<JobMarket::JobMarketErrors>() {
        return format!("{e:?}");
    }
    if let Some(e) = error.as_decoded_interface_error::<GantryTestToken::GantryTestTokenErrors>() {
        return format!("{e:?}");
    }
    error.to_string()
}

/// A small job: sleeps `pause` seconds, then writes its result.
fn job_spec(pause: u32) -> JobSpec {
    JobSpec {
        encryption: None,
        version: SPEC_VERSION,
        kind: JobKind::Inference,
        image: demo::BASE_IMAGE.into(),
        command: vec![
            "sh".into(),
            "-c".into(),
            format!("sleep {pause}; echo done > /outputs/result.txt"),
        ],
        env: Default::default(),
        inputs: vec![],
        outputs: OutputSpec {
            path: "/outputs".into(),
            max_bytes: None,
        },
        resources: Resources::default(),
        timeout_secs: 30,
        engine: gantry_protocol::spec::Engine::Docker,
        wasm: None,
    }
}

/// How to run the `gantry` CLI against the network.
struct Cli {
    bin: PathBuf,
    args: Vec<String>,
    key: String,
    chain: DynProvider,
    submitter: Address,
    market: Address,
    start_block: u64,
}

impl Cli {
    fn of(network: &Network) -> Self {
        Self {
            bin: network.bin_dir().join("gantry"),
            args: vec![
                "--deployment".into(),
                network
                    .run_dir
                    .join("deployment.json")
                    .display()
                    .to_string(),
                "--rpc-url".into(),
                network.devnet.anvil.endpoint_url().to_string(),
                "--api-url".into(),
                network.api_url.clone(),
                "--nats-url".into(),
                network.nats.url(),
            ],
            key: network.devnet.private_key(AGENT),
            chain: network.devnet.admin.clone(),
            submitter: network.devnet.address(AGENT),
            market: network.devnet.deployment.market,
            start_block: network.devnet.deployment.start_block,
        }
    }
}

/// Submits `count` jobs with `gantry --json job submit`, as a submitter would, and checks
/// that each id printed is a job the CLI's account posted; answers how many submissions
/// hung, failed other than by a refusal that says nothing was done (a posting a reorg
/// dropped: exit code 4), or printed another's id. Nothing is retried: the chain counts
/// what was posted.
async fn post_with_cli(cli: Cli, count: usize, deadline: u64, seed: u64) -> anyhow::Result<u64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut errors = 0;
    for _ in 0..count {
        let now = cli
            .chain
            .get_block(alloy::eips::BlockId::latest())
            .await?
            .context("no latest block")?
            .header
            .timestamp;
        let command = format!(
            "sleep {}; echo done > /outputs/result.txt",
            rng.random_range(0..4)
        );
        // Beyond the CLI's own two-minute receipt timeout: it must answer by itself.
        let output = tokio::time::timeout(
            Duration::from_secs(180),
            tokio::process::Command::new(&cli.bin)
                .args(&cli.args)
                .args(["--json", "job", "submit", "--bounty", "1"])
                .args(["--deadline", &format!("{}s", deadline.saturating_sub(now))])
                .args(["--cpus", "1", "--ram", "256MiB", "--duration", "30s"])
                .args(["--kind", "inference", "--image", demo::BASE_IMAGE])
                .args(["--", "sh", "-c", &command])
                .env("GANTRY_PRIVATE_KEY", &cli.key)
                .kill_on_drop(true)
                .output(),
        )
        .await;
        let Ok(Ok(output)) = output else {
            println!("  gantry job submit: did not finish in 180 s");
            errors += 1;
            continue;
        };
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let said = stderr.lines().last().unwrap_or_default().to_owned();
            println!("  gantry job submit: {}: {said}", output.status);
            let nothing_done = output.status.code() == Some(4) && said.contains("nothing was done");
            if !nothing_done {
                errors += 1;
            }
            continue;
        }
        let printed: serde_json::Value =
            serde_json::from_slice(&output.stdout).with_context(|| {
                format!("gantry printed {}", String::from_utf8_lossy(&output.stdout))
            })?;
        let job = printed["jobId"].as_u64().context("no jobId printed")?;
        let posted = gantry_runtime::market::read_job(&cli.chain, cli.market, cli.start_block, job)
            .await
            .map(|job| job.terms.submitter == cli.submitter);
        if !matches!(posted, Ok(true)) {
            println!("  gantry job submit printed job {job}, which is not its own: {posted:?}");
            errors += 1;
        }
    }
    Ok(errors)
}

/// What a fault left to undo, and when.
#[derive(Debug)]
enum Undo {
    Restart(String),
    Continue(String),
    Nats,
}

/// Injects seeded faults for `config.fault_time`, then undoes every one; answers the
/// faults and the workers that were killed or stopped.
async fn inject(
    network: &mut Network,
    config: &ChaosConfig,
) -> anyhow::Result<(Vec<Fault>, BTreeSet<String>)> {
    let mut rng = StdRng::seed_from_u64(config.seed);
    let labels: Vec<String> = network.labels();
    let mut faults = Vec::new();
    let mut touched = BTreeSet::new();
    // The schedule runs on its own clock, the sum of the pauses drawn: what is down at
    // each draw, and so every target, follows from the seed alone, however long the
    // faults themselves take on this machine.
    let mut at = Duration::ZERO;
    let mut undo: Vec<(Duration, Undo)> = Vec::new();
    let mut down: BTreeSet<String> = BTreeSet::new();
    let mut stopped: BTreeSet<String> = BTreeSet::new();
    let mut nats_down = false;
    while at < config.fault_time {
        let pause = Duration::from_millis(rng.random_range(1_500..5_000));
        tokio::time::sleep(pause).await;
        at += pause;
        undo_due(
            network,
            &mut undo,
            &mut down,
            &mut stopped,
            &mut nats_down,
            Some(at),
        )
        .await?;
        let roll = rng.random_range(0..100);
        let what = if roll < 50 {
            let up: Vec<&String> = labels
                .iter()
                .filter(|l| !down.contains(*l) && !stopped.contains(*l))
                .collect();
            let label = up[rng.random_range(0..up.len())].clone();
            network.kill(&label).await?;
            if label.starts_with("gantry-worker") {
                touched.insert(label.clone());
            }
            let after = Duration::from_millis(rng.random_range(500..4_000));
            undo.push((at + after, Undo::Restart(label.clone())));
            down.insert(label.clone());
            format!("SIGKILL {label}, restart in {:.1} s", after.as_secs_f64())
        } else if roll < 65 {
            let idle: Vec<&String> = labels
                .iter()
                .filter(|l| l.starts_with("gantry-worker") && !down.contains(*l))
                .collect();
            if !stopped.is_empty() || idle.is_empty() {
                continue;
            }
            let label = idle[rng.random_range(0..idle.len())].clone();
            network.signal(&label, "STOP").await?;
            touched.insert(label.clone());
            let after = Duration::from_secs(u64::from(HEARTBEAT_TIMEOUT) + rng.random_range(3..12));
            undo.push((at + after, Undo::Continue(label.clone())));
            stopped.insert(label.clone());
            format!("SIGSTOP {label} for {} s", after.as_secs())
        } else if roll < 75 {
            if nats_down {
                continue;
            }
            network.nats.kill();
            nats_down = true;
            let after = Duration::from_millis(rng.random_range(1_000..4_000));
            undo.push((at + after, Undo::Nats));
            format!(
                "SIGKILL nats-server, restart in {:.1} s",
                after.as_secs_f64()
            )
        } else {
            let depth: u64 = rng.random_range(1..=MAX_REORG_DEPTH);
            reorg(&network.devnet.admin, depth).await?;
            format!("anvil_reorg depth {depth}")
        };
        let fault = Fault { at, what };
        println!("  {:>5.1} s  {}", fault.at.as_secs_f64(), fault.what);
        faults.push(fault);
    }
    undo_due(
        network,
        &mut undo,
        &mut down,
        &mut stopped,
        &mut nats_down,
        None,
    )
    .await?;
    Ok((faults, touched))
}

/// The newest block's timestamp.
async fn chain_time(chain: &DynProvider) -> anyhow::Result<u64> {
    Ok(chain
        .get_block(alloy::eips::BlockId::latest())
        .await?
        .context("no latest block")?
        .header
        .timestamp)
}

/// Replaces the last `depth` blocks by empty ones (`anvil_reorg`), then puts the chain's
/// clock back on the wall clock: anvil mines the new branch from the orphaned blocks'
/// times and then keeps that lag for good (ten reorgs left it 30 s behind, and every
/// worker then saw each assignment as arriving after the job's time), which no real
/// chain's reorganisation does.
///
/// The interval miner is paused meanwhile. `anvil_reorg` reads the height and then rolls
/// back in two steps; a block the miner adds between them stays on top, and the branch's
/// new blocks are stacked on it while the orphaned heights are rewritten (seed 55: blocks
/// 101–102 carried block 97's time on top of an untouched 100, and 98–99 changed under
/// it). Such a chain — parent links that disagree with its numbers — is one no real node
/// serves and no follower checking parents can see; the judge counts it as `chain_broken`.
async fn reorg(chain: &DynProvider, depth: u64) -> anyhow::Result<()> {
    interval_mining(chain, 0).await?;
    let reorganised = async {
        let _: serde_json::Value = chain
            .raw_request(
                "anvil_reorg".into(),
                (depth, Vec::<serde_json::Value>::new()),
            )
            .await
            .context("anvil_reorg")?;
        let latest = chain_time(chain).await?;
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        let _: serde_json::Value = chain
            .raw_request(
                "evm_setNextBlockTimestamp".into(),
                ((wall + 1).max(latest + 1),),
            )
            .await
            .context("evm_setNextBlockTimestamp")?;
        anyhow::Ok(())
    }
    .await;
    interval_mining(chain, BLOCK_TIME).await?;
    reorganised
}

/// Sets anvil's interval miner to a block every `seconds` (0: none).
async fn interval_mining(chain: &DynProvider, seconds: u64) -> anyhow::Result<()> {
    let _: serde_json::Value = chain
        .raw_request("evm_setIntervalMining".into(), (seconds,))
        .await
        .context("evm_setIntervalMining")?;
    Ok(())
}

/// Undoes the faults due by schedule time `now` (all of them when `None`).
async fn undo_due(
    network: &mut Network,
    undo: &mut Vec<(Duration, Undo)>,
    down: &mut BTreeSet<String>,
    stopped: &mut BTreeSet<String>,
    nats_down: &mut bool,
    now: Option<Duration>,
) -> anyhow::Result<()> {
    let (due, later): (Vec<_>, Vec<_>) = undo
        .drain(..)
        .partition(|(at, _)| now.is_none_or(|now| *at <= now));
    *undo = later;
    for (_, action) in due {
        match action {
            Undo::Restart(label) => {
                network.restart(&label)?;
                down.remove(&label);
            }
            Undo::Continue(label) => {
                network.signal(&label, "CONT").await?;
                stopped.remove(&label);
            }
            Undo::Nats => {
                network.nats.restart().context("restarting nats-server")?;
                *nats_down = false;
            }
        }
    }
    Ok(())
}

/// Waits, block by block, until every job on chain is terminal (its word 0) or chain time
/// passes `give_up`; answers the jobs still live then.
async fn settle(
    network: &Network,
    blocks: &mut (impl futures::Stream + Unpin),
    give_up: u64,
) -> anyhow::Result<Vec<u64>> {
    let market = JobMarket::new(
        network.devnet.deployment.market,
        network.devnet.admin.clone(),
    );
    let count = market.jobCount().call().await?;
    let mut live: Vec<u64> = (1..=count).collect();
    loop {
        let mut still = Vec::new();
        for id in live {
            if market.jobHash(id).call().await? != B256::ZERO {
                still.push(id);
            }
        }
        live = still;
        if live.is_empty() || network.devnet.now().await? > give_up {
            return Ok(live);
        }
        blocks.next().await;
    }
}

/// Stops the senders, then checks the chain's books, the stream and the API against the
/// chain.
async fn judge(
    network: &mut Network,
    blocks: &mut (impl futures::Stream + Unpin),
    touched: &BTreeSet<String>,
    workers: &BTreeMap<String, u64>,
) -> anyhow::Result<Report> {
    let mut report = Report {
        bench: "chaos",
        ..Report::default()
    };
    for label in [
        "gantry-matcher",
        "gantry-matcher-2",
        "gantry-liveness",
        "gantry-liveness-2",
    ] {
        network.terminate(label).await?;
    }
    report.containers_left = containers(network).await?;
    if report.containers_left > 0 {
        report
            .findings
            .push(format!("{} job containers left", report.containers_left));
    }
    for label in workers.keys() {
        network.terminate(label).await?;
    }

    let d = network.devnet.deployment;
    let chain = network.devnet.admin.clone();
    let contracts = Contracts {
        market: d.market,
        registry: d.registry,
    };
    let logs = chain_events(&chain, &contracts, d.start_block).await?;
    let last_block = logs.last().map_or(d.start_block, |e| e.block_number);

    // Settlements: exactly one per job.
    let market = JobMarket::new(d.market, chain.clone());
    let jobs = market.jobCount().call().await?;
    report.jobs = jobs;
    let mut settlements: BTreeMap<u64, Vec<&str>> = BTreeMap::new();
    for e in &logs {
        let name = e.event.name.as_str();
        if matches!(
            name,
            "JobCompleted" | "JobFailed" | "JobCancelled" | "JobExpired"
        ) {
            settlements
                .entry(e.event.key.parse()?)
                .or_default()
                .push(name);
        }
    }
    for id in 1..=jobs {
        match settlements.get(&id).map(Vec::as_slice) {
            Some(["JobCompleted"]) => report.completed += 1,
            Some(["JobFailed"]) => report.failed += 1,
            Some(["JobExpired"]) => report.expired += 1,
            Some([_]) => {}
            None => {}
            Some(more) => {
                report.double_paid += 1;
                report
                    .findings
                    .push(format!("job {id} settled as {more:?}"));
            }
        }
    }

    // Slashes of nodes whose worker nothing happened to.
    // (`NodeSlashed` is keyed by its job; the node is in its fields.)
    for e in logs.iter().filter(|e| e.event.name == "NodeSlashed") {
        let node = e.event.data["nodeId"]
            .as_u64()
            .context("NodeSlashed names its node")?;
        let spared = workers
            .iter()
            .any(|(label, id)| *id == node && !touched.contains(label));
        if spared {
            // What charged it: the reject (with its reason) or reclaim of the same job in
            // the same block.
            let cause = logs
                .iter()
                .filter(|c| {
                    c.block_number == e.block_number
                        && c.event.key == e.event.key
                        && matches!(c.event.name.as_str(), "JobRejected" | "JobReclaimed")
                })
                .map(|c| format!("{} {}", c.event.name, c.event.data))
                .collect::<Vec<_>>()
                .join("; ");
            report.unfair_slashes += 1;
            report.findings.push(format!(
                "node {node} slashed at block {} though its worker was never killed nor stopped: {} ({cause})",
                e.block_number, e.event.data
            ));
        }
    }

    // The books: the market holds exactly what it owes.
    let registry = NodeRegistry::new(d.registry, chain.clone());
    let token = GantryTestToken::new(d.token, chain.clone());
    let held = token.balanceOf(d.market).call().await?;
    let mut owed = market.treasuryBalance().call().await?;
    for account in network.devnet.anvil.addresses() {
        owed += market.creditOf(*account).call().await?;
    }
    let nodes = registry.nodeCount().call().await?;
    for id in 1..=nodes {
        let node = registry.getNode(id).call().await?;
        owed += U256::from(node.stake) + U256::from(node.earnings) + U256::from(node.feesOwed);
    }
    report.unaccounted = if held >= owed {
        (held - owed).to_string()
    } else {
        format!("-{}", owed - held)
    };

    // The chain itself, then the stream, folded, against it; then the API.
    report.chain_broken = broken_links(&chain, d.start_block, &mut report.findings).await?;
    let stream = folded_stream(network, blocks, last_block).await?;
    compare_stream(&stream, &logs, &mut report);
    api_caught_up(network, blocks, last_block).await?;
    let mut attempts: HashMap<u64, u64> = HashMap::new();
    for e in logs.iter().filter(|e| e.event.name == "JobAssigned") {
        if let Some(job) = e.event.data["jobId"].as_u64() {
            *attempts.entry(job).or_default() += 1;
        }
    }
    compare_api(network, jobs, nodes, &attempts, &mut report).await?;
    Ok(report)
}

/// One event where the chain put it.
#[derive(Debug, Clone, PartialEq)]
struct EventAt {
    block_number: u64,
    block_hash: B256,
    log_index: u64,
    event: DecodedEvent,
}

/// Every event of the canonical chain since `from`, decoded as the indexer decodes them.
async fn chain_events(
    chain: &DynProvider,
    contracts: &Contracts,
    from: u64,
) -> anyhow::Result<Vec<EventAt>> {
    let head = chain.get_block_number().await?;
    let filter = Filter::new()
        .address(vec![contracts.market, contracts.registry])
        .from_block(from)
        .to_block(head);
    chain
        .get_logs(&filter)
        .await?
        .into_iter()
        .map(|log| {
            Ok(EventAt {
                block_number: log.block_number.context("a mined log")?,
                block_hash: log.block_hash.context("a mined log")?,
                log_index: log.log_index.context("a mined log")?,
                event: decode(contracts, &log.inner)?,
            })
        })
        .collect()
}

/// How many blocks since `from` the chain does not have below its head, or that name as
/// their parent another block than the chain's one below them.
async fn broken_links(
    chain: &DynProvider,
    from: u64,
    findings: &mut Vec<String>,
) -> anyhow::Result<u64> {
    let head = chain.get_block_number().await?;
    let headers: Vec<_> = futures::stream::iter(from..=head)
        .map(|number| async move {
            let block = chain.get_block_by_number(number.into()).await?;
            anyhow::Ok((number, block.map(|b| b.header)))
        })
        .buffered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<_>>()?;
    let mut broken = 0;
    for pair in headers.windows(2) {
        let ((below, parent), (number, child)) = (&pair[0], &pair[1]);
        let finding = match (parent, child) {
            (_, None) => {
                format!("the chain is broken: it has no block {number} below its head {head}")
            }
            (Some(parent), Some(child)) if child.parent_hash != parent.hash => format!(
                "the chain is broken: block {number} names {} as its parent, but block {below} is {}",
                child.parent_hash, parent.hash
            ),
            _ => continue,
        };
        broken += 1;
        findings.push(finding);
    }
    Ok(broken)
}

/// The stream as a reader ends up with it, once it holds block `last` (the stream's
/// events applied at their commits, retracted blocks undone), and how many blocks it
/// could not assemble.
struct Folded {
    events: Vec<EventAt>,
    damaged: Vec<String>,
}

async fn folded_stream(
    network: &Network,
    blocks: &mut (impl futures::Stream + Unpin),
    last: u64,
) -> anyhow::Result<Folded> {
    let chain_id = network.devnet.deployment.chain_id;
    let js = async_nats::jetstream::new(async_nats::connect(network.nats.url()).await?);
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let mut stream = js
            .get_stream(gantry_protocol::names::stream_name(chain_id))
            .await?;
        let stored = stream.info().await?.state.last_sequence;
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig::default())
            .await?;
        let mut delivered = consumer.messages().await?;
        let mut assembler = BlockAssembler::new();
        let mut folded = Folded {
            events: Vec::new(),
            damaged: Vec::new(),
        };
        for _ in 0..stored {
            let message = delivered.next().await.context("the stream ended")??;
            let message = match ChainMessage::decode(chain_id, &message.subject, &message.payload) {
                Ok(message) => message,
                Err(e) => {
                    folded.damaged.push(e.to_string());
                    continue;
                }
            };
            match assembler.push(message) {
                Ok(Assembled::Held | Assembled::Final(_)) => {}
                Ok(Assembled::Block { events, .. }) => {
                    folded.events.extend(events.into_iter().map(|e| EventAt {
                        block_number: e.block_number,
                        block_hash: e.block_hash,
                        log_index: e.log_index,
                        event: e.event,
                    }))
                }
                Ok(Assembled::Retracted(retraction)) => folded
                    .events
                    .retain(|e| !retraction.orphaned.iter().any(|o| o.hash == e.block_hash)),
                Err(e) => folded.damaged.push(e.to_string()),
            }
        }
        let applied = assembler.applied().map_or(0, |b| b.number);
        if applied >= last || Instant::now() > give_up {
            return Ok(folded);
        }
        blocks.next().await;
    }
}

fn compare_stream(stream: &Folded, chain: &[EventAt], report: &mut Report) {
    report.stream_damaged = stream.damaged.len() as u64;
    for damage in stream.damaged.iter().take(5) {
        report.findings.push(format!("stream damaged: {damage}"));
    }
    let mut seen: HashMap<(B256, u64), usize> = HashMap::new();
    for e in &stream.events {
        *seen.entry((e.block_hash, e.log_index)).or_default() += 1;
    }
    let on_chain: HashMap<(B256, u64), &EventAt> = chain
        .iter()
        .map(|e| ((e.block_hash, e.log_index), e))
        .collect();
    for (key, count) in &seen {
        if *count > 1 {
            report.stream_duplicates += (*count - 1) as u64;
            report
                .findings
                .push(format!("stream holds {count}× the event at {key:?}"));
        }
        if !on_chain.contains_key(key) {
            report.stream_extra += 1;
            report
                .findings
                .push(format!("stream holds an event the chain does not: {key:?}"));
        }
    }
    for e in stream.events.iter() {
        if let Some(chain_event) = on_chain.get(&(e.block_hash, e.log_index))
            && chain_event.event != e.event
        {
            report.stream_extra += 1;
            report.findings.push(format!(
                "stream event at block {} log {} differs from the chain's",
                e.block_number, e.log_index
            ));
        }
    }
    for e in chain {
        if !seen.contains_key(&(e.block_hash, e.log_index)) {
            report.stream_missing += 1;
            report.findings.push(format!(
                "chain event {} at block {} log {} is not in the stream",
                e.event.name, e.block_number, e.log_index
            ));
        }
    }
}

/// Waits until the API has projected block `last` and the whole stream.
async fn api_caught_up(
    network: &Network,
    blocks: &mut (impl futures::Stream + Unpin),
    last: u64,
) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let give_up = Instant::now() + Duration::from_secs(120);
    loop {
        let ready: serde_json::Value = http
            .get(format!("{}/readyz", network.api_url))
            .send()
            .await?
            .json()
            .await?;
        let block = ready["block"].as_u64().unwrap_or(0);
        if block >= last && ready["lag"] == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "the API did not project block {last} in 120 s: {ready}"
        );
        blocks.next().await;
    }
}

/// Compares every job and node the API serves with the chain's.
async fn compare_api(
    network: &Network,
    jobs: u64,
    nodes: u64,
    attempts: &HashMap<u64, u64>,
    report: &mut Report,
) -> anyhow::Result<()> {
    let d = network.devnet.deployment;
    let http = reqwest::Client::new();
    for id in 1..=jobs {
        let chain = network.devnet.job(id).await?;
        let api: JobDetail = http
            .get(format!("{}/v1/jobs/{id}", network.api_url))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let api = api.job;
        let s = chain.state;
        let assigned = attempts.get(&id).copied().unwrap_or(0);
        let same = api.status == s.status
            && api.attempts == assigned
            && (s.node_id == 0 || api.node_id == Some(s.node_id));
        if !same {
            report.projection_mismatches += 1;
            report.findings.push(format!(
                "job {id}: API {:?} node {:?} attempts {}, chain {:?} node {} attempts {assigned}",
                api.status, api.node_id, api.attempts, s.status, s.node_id
            ));
        }
    }
    let registry = NodeRegistry::new(d.registry, network.devnet.admin.clone());
    for id in 1..=nodes {
        let chain = registry.getNode(id).call().await?;
        let api: NodeDetail = http
            .get(format!("{}/v1/nodes/{id}", network.api_url))
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        let api = api.node.node;
        let same = api.status as u8 == chain.status
            && api.stake == chain.stake.to_string()
            && api.earnings == chain.earnings.to_string()
            && api.fees_owed == chain.feesOwed.to_string();
        if !same {
            report.projection_mismatches += 1;
            report.findings.push(format!(
                "node {id}: API {:?} stake {} earnings {} fees {}, chain status {} stake {} earnings {} fees {}",
                api.status, api.stake, api.earnings, api.fees_owed, chain.status, chain.stake, chain.earnings, chain.feesOwed
            ));
        }
    }
    Ok(())
}

/// Job containers on the network's engine.
async fn containers(network: &Network) -> anyhow::Result<u64> {
    let socket = network
        .docker_socket()
        .context("the network runs no Docker engine")?
        .to_str()
        .context("a UTF-8 socket path")?;
    let docker = bollard::Docker::connect_with_unix(socket, 120, bollard::API_DEFAULT_VERSION)?;
    let options = bollard::query_parameters::ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&HashMap::from([("label", vec![JOB_LABEL])]))
        .build();
    Ok(docker.list_containers(Some(options)).await?.len() as u64)
}

/// Lines with `needle` in the services' logs.
fn lines_with(logs: &Path, needle: &str) -> anyhow::Result<u64> {
    let mut count = 0;
    for entry in std::fs::read_dir(logs)? {
        let text = std::fs::read_to_string(entry?.path())?;
        count += text.lines().filter(|l| l.contains(needle)).count() as u64;
    }
    Ok(count)
}

/// Lines with `panicked at` in the services' logs.
fn panics(logs: &Path, findings: &mut Vec<String>) -> anyhow::Result<u64> {
    let mut count = 0;
    for entry in std::fs::read_dir(logs)? {
        let path = entry?.path();
        let text = std::fs::read_to_string(&path)?;
        for line in text.lines().filter(|l| l.contains("panicked at")) {
            count += 1;
            findings.push(format!("{}: {line}", path.display()));
        }
    }
    Ok(count)
}
