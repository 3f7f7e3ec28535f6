//! `cargo bench -p gantry-devnet --bench scale` (part of `make bench`; #21, "at 10×"): the
//! whole network — anvil with a block a second, nats-server, two indexers (a leader and
//! its standby), two matchers, two keepers and the API, every service its release binary —
//! at 10,000 nodes and 100,000 jobs, the nodes simulated: no worker and no container, a
//! fleet in this process that follows the chain stream as a worker does and answers each
//! assignment of its nodes with `submitResult` at once.
//!
//! What it does, in order: registers the nodes (4 operators, each its nodes' own agent,
//! transactions pipelined), posts the jobs (2 submitters), and waits until every job is
//! paid (or the window ends, below). It prints, and puts in its JSON line:
//!
//! - `jobs_per_s`: jobs paid per second from the first posting to the last payout (or the
//!   window's end; `paid` of `jobs`), and `steady_jobs_per_s` between the 10th and the
//!   90th percentile of payouts, by the paying blocks' times;
//! - each service's lag, sampled every second while the jobs flow, in blocks behind the
//!   chain's head: the leading indexer's, each matcher's and keeper's view, the API's
//!   projection (its `/readyz`), mean and max;
//! - each process's share of the machine's CPU over the same time (`/proc`), the
//!   first to saturate being the one whose share comes nearest a whole core.
//!
//! Baseline, in the same run, on a fresh anvil of its own with nothing else running: the
//! chain alone carrying the same transactions per job (posting, the assignment in batches
//! as the matcher sends them, the result, the finalization in batches as the keeper sends
//! them), sent by this process as fast as anvil mines them — the jobs per second the chain
//! allows on this machine. The ratio says how much of it the network reaches.
//!
//! Heartbeats are left out (the registry's timeout is a day): at the dev network's pace,
//! a beat per node every 10 s, 10,000 nodes would send 1,000 transactions a second on
//! their own — nearly all this chain carries — which is a finding of its own (see
//! `deploy/BENCHMARKS.md`).
//!
//! `-- --nodes N --jobs M` runs it smaller; `-- --window S` stops measuring S seconds after
//! the last posting (the JSON line's `paid` says how many were paid by then).

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use alloy::network::TransactionBuilder as _;
use alloy::node_bindings::Anvil;
use alloy::primitives::aliases::{U40, U96};
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::{Filter, TransactionRequest};
use alloy::sol_types::{SolCall, SolEvent};
use anyhow::Context as _;
use futures::StreamExt;
use gantry_devnet::cpu::Cpu;
use gantry_devnet::network::{Network, NetworkConfig, transactions_in};
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry};
use gantry_protocol::chain_stream::{Assembled, BlockAssembler};
use gantry_protocol::eligibility::Engines;
use gantry_protocol::events::{GantryEvent, market_job_id};
use gantry_protocol::market::{Job, Policies, Policy};
use gantry_protocol::spec::Engine;
use gantry_protocol::status::JobStatus;
use gantry_runtime::chain_stream::ChainStreamReader;
use gantry_testkit::accounts::{AGENT, KEEPER, MATCHER, NODES, SUBMITTER};
use gantry_testkit::{Devnet, GUSD, Tools, confirm_receipt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const DEFAULT_NODES: usize = 10_000;
const DEFAULT_JOBS: usize = 100_000;
/// The block gas limit: a block a second, and room in it for every transaction that
/// arrives in that second (anvil's default 30M holds ~400 postings).
const GAS_LIMIT: u64 = 2_000_000_000;
/// Transactions each account has sent and anvil has not yet answered, at most.
const IN_FLIGHT: usize = 64;
/// The submitters.
const SUBMITTERS: [usize; 2] = [SUBMITTER, AGENT];
/// A run ends with an error when no job was paid for this long.
const STALL: Duration = Duration::from_secs(180);
/// Jobs per assignment and per finalization batch in the baseline: as many as the
/// matcher's and the keeper's batches carry.
const BASELINE_BATCH: usize = gantry_matcher::sender::MAX_BATCH;
/// Gas offered for a batch of [`BASELINE_BATCH`] (a block holds what the transactions
/// offer, not what they use).
const BATCH_GAS: u64 = 2_000_000;
/// Jobs in the baseline, at most: its rate does not depend on the count.
const BASELINE_JOBS: usize = 20_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str, default: usize| -> anyhow::Result<usize> {
        match args.iter().position(|a| a == name) {
            Some(i) => Ok(args.get(i + 1).context("a number after it")?.parse()?),
            None => Ok(default),
        }
    };
    let (nodes, jobs) = (arg("--nodes", DEFAULT_NODES)?, arg("--jobs", DEFAULT_JOBS)?);
    let window = match arg("--window", 0)? {
        0 => None,
        seconds => Some(seconds),
    };
    let dir = tempfile::tempdir()?;
    let config = NetworkConfig {
        workers: 0,
        replicas: 2,
        block_time: Duration::from_secs(1),
        gas_limit: Some(GAS_LIMIT),
        challenge_window: 1,
        heartbeat_timeout: 86_400,
        ..NetworkConfig::ephemeral(dir.path(), 0)?
    };
    println!("the whole network at {nodes} nodes and {jobs} jobs (simulated nodes)");
    let network = Network::start(config).await?;
    let mix = Mix::new(&network);

    // The fleet follows the stream from its start: it learns its nodes and the jobs from
    // it, as the services do.
    let cancel = CancellationToken::new();
    let (paid_tx, mut paid_rx) = mpsc::unbounded_channel();
    let fleet = tokio::spawn(fleet(
        network.nats.url(),
        network.devnet.deployment.chain_id,
        network.devnet.deployment.market,
        agents(&network.devnet, &NODES),
        paid_tx,
        cancel.clone(),
    ));

    let start = Instant::now();
    register_nodes(&network.devnet, nodes, |i| mix.node(i)).await?;
    let register_s = start.elapsed().as_secs_f64();
    println!("{nodes} nodes registered in {register_s:.1} s");

    let chain = network.devnet.provider(SUBMITTER);
    let first_block = chain.get_block_number().await?;
    let before = Cpu::read(&network, Some("this bench (fleet)"));
    let sampler = tokio::spawn(sample_lags(
        network.metrics_endpoints(),
        network.api_url.clone(),
        chain.clone(),
        cancel.clone(),
    ));
    let start = Instant::now();
    post_jobs(&network.devnet, &mix, jobs).await?;
    let post_s = start.elapsed().as_secs_f64();
    println!(
        "{jobs} jobs posted in {post_s:.1} s ({:.0}/s)",
        jobs as f64 / post_s
    );

    // Measured until every job is paid, or `--window` seconds after the last posting.
    let ends = window.map(|seconds| Instant::now() + Duration::from_secs(seconds as u64));
    let mut paid_at = Vec::with_capacity(jobs);
    // When the chain paid each (its blocks' times): the fleet may read a run of blocks at
    // once, so the times it tells them in bunch up.
    let mut paid_blocks = Vec::with_capacity(jobs);
    let mut last_said = Instant::now();
    while paid_at.len() < jobs {
        let wait = match ends {
            Some(ends) if Instant::now() >= ends => break,
            Some(ends) => STALL.min(ends - Instant::now()),
            None => STALL,
        };
        let paid = match tokio::time::timeout(wait, paid_rx.recv()).await {
            Err(_) if ends.is_some_and(|ends| Instant::now() >= ends) => break,
            paid => paid,
        };
        let paid = paid
            .map_err(|_| {
                anyhow::anyhow!(
                    "no job paid for {} s ({} of {jobs} paid)",
                    STALL.as_secs(),
                    paid_at.len()
                )
            })?
            .context("the fleet ended")??;
        paid_at.push(start.elapsed().as_secs_f64());
        paid_blocks.push(paid.at);
        if paid.failed {
            anyhow::bail!("job {} ended without its payout: {}", paid.job_id, paid.how);
        }
        if last_said.elapsed() > Duration::from_secs(10) {
            last_said = Instant::now();
            println!(
                "  {:6.0} s: {} paid",
                paid_at[paid_at.len() - 1],
                paid_at.len()
            );
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    let after = Cpu::read(&network, Some("this bench (fleet)"));
    cancel.cancel();
    let lags = sampler.await??;
    let submitted = fleet.await??;
    let head = chain.get_block_number().await?;
    let transactions = transactions_in(&chain, first_block + 1..=head).await?;
    let paid = paid_at.len();
    anyhow::ensure!(paid > 0, "no job paid within the window");
    let jobs_per_s = paid as f64 / elapsed;
    paid_blocks.sort_unstable();
    let (p10, p90) = (paid_blocks[paid / 10], paid_blocks[paid * 9 / 10]);
    let steady = (paid * 8 / 10) as f64 / (p90 - p10).max(1) as f64;
    println!(
        "{paid} of {jobs} jobs posted and paid in {elapsed:.1} s: {jobs_per_s:.1} jobs/s, \
         {steady:.1}/s between the 10th and 90th percentile of payouts (the paying blocks' \
         times); the chain: \
         {transactions} transactions in {} blocks ({:.2} per paid job; {submitted} results sent)",
        head - first_block,
        transactions as f64 / paid as f64,
    );
    // The API's count, once it has caught up: every job paid completed, none failed.
    let api_caught_up = Instant::now();
    wait_for(
        || async {
            let stats: serde_json::Value = reqwest::get(format!("{}/v1/stats", network.api_url))
                .await?
                .json()
                .await?;
            anyhow::ensure!(
                stats["jobsByStatus"]["failed"].as_u64().unwrap_or(0) == 0,
                "jobs failed: {stats}"
            );
            Ok(stats["jobsByStatus"]["completed"].as_u64() >= Some(paid as u64))
        },
        "the API to count every job paid completed",
    )
    .await?;
    let api_behind_s = api_caught_up.elapsed().as_secs_f64();
    let cpu: Vec<(String, f64)> = (after.since(&before).into_iter())
        .map(|(label, seconds)| (label, seconds / elapsed))
        .collect();
    println!("share of one core from the first posting to the last payout:");
    for (label, share) in &cpu {
        println!("  {label:<20} {:5.1} %", share * 100.0);
    }
    println!("blocks behind the chain's head while the jobs flowed (mean, max):");
    for (label, lag) in &lags {
        println!("  {label:<20} {:8.1} {:8.0}", lag.mean(), lag.max);
    }
    network.stop().await;

    let baseline_jobs = jobs.min(BASELINE_JOBS);
    let baseline = chain_alone(baseline_jobs, &mix).await?;
    println!(
        "baseline: the chain alone, the same transactions per job sent as fast as it takes \
         them: {:.1} jobs/s",
        baseline
    );
    let saturated = cpu
        .iter()
        .filter(|(label, _)| label.as_str() != "this bench (fleet)")
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(label, _)| label.clone())
        .unwrap_or_default();
    println!(
        "{}",
        serde_json::json!({
            "bench": "network_scale",
            "nodes": nodes,
            "jobs": jobs,
            "paid": paid,
            "register_s": round(register_s),
            "post_s": round(post_s),
            "jobs_per_s": round(jobs_per_s),
            "steady_jobs_per_s": round(steady),
            "chain_alone_jobs_per_s": round(baseline),
            "chain_alone_jobs": baseline_jobs,
            "ratio": round(jobs_per_s / baseline),
            "transactions": transactions,
            "blocks": head - first_block,
            "api_behind_s": round(api_behind_s),
            "lag": lags.iter().map(|(label, lag)| (label.clone(), serde_json::json!({
                "mean": round(lag.mean()),
                "max": lag.max,
            }))).collect::<serde_json::Map<_, _>>(),
            "cpu_share": cpu.iter().map(|(label, share)| (label.clone(), serde_json::json!(round(*share))))
                .collect::<serde_json::Map<_, _>>(),
            "busiest": saturated,
        })
    );
    Ok(())
}

/// The nodes' and jobs' shapes: a deterministic mix of sizes, prices, priorities and
/// slots, so that the matcher meets many classes, not one.
struct Mix {
    spec: Bytes,
}

impl Mix {
    fn new(network: &Network) -> Self {
        let spec = network.dataset.spec(Engine::Wasm);
        Self {
            spec: serde_json::to_vec(&spec).expect("a spec serialises").into(),
        }
    }

    fn node(&self, index: usize) -> NodeRegistry::NodeCapabilities {
        let mut rng = StdRng::seed_from_u64(index as u64);
        NodeRegistry::NodeCapabilities {
            cpuCores: [2, 4, 8, 16][rng.random_range(0..4)],
            ramMiB: [4_096, 16_384, 65_536][rng.random_range(0..3)],
            pricePerGpuHour: U96::from(rng.random_range(0..=2 * GUSD)),
            maxConcurrentJobs: [1, 2, 4, 8][rng.random_range(0..4)],
            engines: Engines::WASM.0,
            ..Default::default()
        }
    }

    fn post(&self, index: usize, deadline: u64) -> JobMarket::postJobCall {
        let mut rng = StdRng::seed_from_u64(u64::MAX - index as u64);
        JobMarket::postJobCall {
            requirements: JobMarket::JobRequirements {
                gpuModel: B256::ZERO,
                minGpuCount: 0,
                minVramMiB: 0,
                minCpuCores: [1, 2, 4, 8][rng.random_range(0..4)],
                minRamMiB: [256, 2_048, 8_192][rng.random_range(0..3)],
                maxPricePerGpuHour: U96::from([GUSD, 2 * GUSD][rng.random_range(0..2)]),
                maxRuntime: 4 * 3_600,
                priority: rng.random_range(1..=10),
                engine: Engine::Wasm.code(),
            },
            bounty: U96::from(GUSD),
            deadline: U40::from(deadline),
            spec: self.spec.clone(),
        }
    }
}

/// One account's transactions, nonces counted here, fees and gas fixed, up to
/// [`IN_FLIGHT`] sent and not yet answered at once.
struct Sender {
    provider: DynProvider,
    from: Address,
    nonce: u64,
    max_fee: u128,
    priority_fee: u128,
}

impl Sender {
    async fn new(devnet: &Devnet, account: usize) -> anyhow::Result<Self> {
        Self::on(devnet.provider(account), devnet.address(account)).await
    }

    /// `from`'s sender, its next nonce the pending count now.
    async fn on(provider: DynProvider, from: Address) -> anyhow::Result<Self> {
        let nonce = provider.get_transaction_count(from).pending().await?;
        let fees = provider.estimate_eip1559_fees().await?;
        Ok(Self {
            provider,
            from,
            nonce,
            max_fee: fees.max_fee_per_gas * 10,
            priority_fee: fees.max_priority_fee_per_gas,
        })
    }

    /// Sends every call to `to`, in order; returns once anvil took them all (not mined).
    async fn send_all(&mut self, to: Address, calls: Vec<Bytes>, gas: u64) -> anyhow::Result<()> {
        let first = self.nonce;
        self.nonce += calls.len() as u64;
        let this = &*self;
        let sent = futures::stream::iter(calls.into_iter().enumerate())
            .map(|(i, input)| {
                let tx = this.request(to, input, gas, first + i as u64);
                async move { this.provider.send_transaction(tx).await.map(drop) }
            })
            .buffered(IN_FLIGHT)
            .collect::<Vec<_>>()
            .await;
        for (i, sent) in sent.into_iter().enumerate() {
            sent.with_context(|| format!("sending nonce {} of {}", first + i as u64, self.from))?;
        }
        Ok(())
    }

    fn request(&self, to: Address, input: Bytes, gas: u64, nonce: u64) -> TransactionRequest {
        TransactionRequest::default()
            .with_from(self.from)
            .with_to(to)
            .with_input(input)
            .with_nonce(nonce)
            .with_gas_limit(gas)
            .with_max_fee_per_gas(self.max_fee)
            .with_max_priority_fee_per_gas(self.priority_fee)
    }
}

/// The agents' providers, by address.
fn agents(devnet: &Devnet, accounts: &[usize]) -> HashMap<Address, DynProvider> {
    accounts
        .iter()
        .map(|&account| (devnet.address(account), devnet.provider(account)))
        .collect()
}

/// Registers `nodes` nodes (node `i` with `capabilities(i)`) as `NODES`' operators, each
/// its nodes' own agent (no consent to sign), the minimum stake each; returns once the
/// registry counts them.
async fn register_nodes(
    devnet: &Devnet,
    nodes: usize,
    capabilities: impl Fn(usize) -> NodeRegistry::NodeCapabilities,
) -> anyhow::Result<()> {
    let registry = devnet.deployment.registry;
    let reader = NodeRegistry::new(registry, devnet.provider(SUBMITTER));
    let already = reader.nodeCount().call().await? as usize;
    let min_stake = JobMarket::new(devnet.deployment.market, devnet.provider(SUBMITTER))
        .params()
        .call()
        .await?
        .minStake;
    let per_operator = nodes.div_ceil(NODES.len()) + 1;
    for &operator in &NODES {
        let stake = U256::from(min_stake) * U256::from(per_operator);
        allow(devnet, operator, registry, stake).await?;
    }
    send_spread(devnet, &NODES, registry, nodes, |i, operator| {
        NodeRegistry::registerCall {
            capabilities: capabilities(i),
            metadataURI: "ipfs://simulated".into(),
            stake: min_stake,
            agent: devnet.address(operator),
            consentDeadline: U256::ZERO,
            agentSignature: Bytes::new(),
        }
        .abi_encode()
        .into()
    })
    .await?;
    wait_for(
        || async { Ok(reader.nodeCount().call().await? as usize >= already + nodes) },
        "every node registered",
    )
    .await
}

/// Sends `count` calls to `to`, call `n` (`call(n, account)`) by `accounts[n % len]`,
/// each account's pipelined by its own [`Sender`].
async fn send_spread(
    devnet: &Devnet,
    accounts: &[usize],
    to: Address,
    count: usize,
    call: impl Fn(usize, usize) -> Bytes,
) -> anyhow::Result<()> {
    let groups = accounts.iter().enumerate().map(|(index, &account)| {
        let calls = (0..count)
            .filter(|n| n % accounts.len() == index)
            .map(|n| call(n, account))
            .collect::<Vec<Bytes>>();
        (account, calls)
    });
    send_from(devnet, to, 400_000, groups).await
}

/// Sends each account's calls to `to` (`gas` each), the accounts at once, each pipelined
/// by its own [`Sender`].
async fn send_from(
    devnet: &Devnet,
    to: Address,
    gas: u64,
    groups: impl IntoIterator<Item = (usize, Vec<Bytes>)>,
) -> anyhow::Result<()> {
    let sends = groups.into_iter().map(|(account, calls)| async move {
        Sender::new(devnet, account)
            .await?
            .send_all(to, calls, gas)
            .await
    });
    futures::future::try_join_all(sends).await?;
    Ok(())
}

/// Lets `spender` take `account`'s tokens, minting what it lacks of `amount` first (the
/// dev network gives every account a million gUSD: enough, so that no mint by the
/// deployer, who is also the matcher, races the matcher's own transactions).
async fn allow(
    devnet: &Devnet,
    account: usize,
    spender: Address,
    amount: U256,
) -> anyhow::Result<()> {
    let address = devnet.address(account);
    let token = GantryTestToken::new(devnet.deployment.token, devnet.provider(account));
    let balance = token.balanceOf(address).call().await?;
    if balance < amount {
        devnet.mint(address, amount - balance).await?;
    }
    confirm_receipt("approve", token.approve(spender, U256::MAX).send().await).await?;
    Ok(())
}

/// Posts `jobs` jobs of the mix, alternately as each of [`SUBMITTERS`]; returns once the
/// market counts them.
async fn post_jobs(devnet: &Devnet, mix: &Mix, jobs: usize) -> anyhow::Result<()> {
    let market = devnet.deployment.market;
    let reader = JobMarket::new(market, devnet.provider(SUBMITTER));
    let already = reader.jobCount().call().await? as usize;
    let deadline = devnet.now().await? + 6 * 3_600;
    for &submitter in &SUBMITTERS {
        let bounties = U256::from(GUSD) * U256::from(jobs.div_ceil(SUBMITTERS.len()) + 1);
        allow(devnet, submitter, market, bounties).await?;
    }
    send_spread(devnet, &SUBMITTERS, market, jobs, |n, _| {
        mix.post(n, deadline).abi_encode().into()
    })
    .await?;
    wait_for(
        || async { Ok(reader.jobCount().call().await? as usize >= already + jobs) },
        "every job posted",
    )
    .await
}

/// A job that ended, as the stream says.
struct Paid {
    job_id: u64,
    /// The chain's time of the block that paid it.
    at: u64,
    failed: bool,
    how: String,
}

/// The simulated nodes: follows the chain stream from its start, folds the jobs and the
/// nodes (their agents) from it, and answers every assignment to one of its agents' nodes
/// with `submitResult` (each agent's answers sent in order, pipelined). Tells `paid` of
/// every job that ended. Returns the number of results sent.
async fn fleet(
    nats_url: String,
    chain_id: u64,
    market: Address,
    providers: HashMap<Address, DynProvider>,
    paid: mpsc::UnboundedSender<anyhow::Result<Paid>>,
    cancel: CancellationToken,
) -> anyhow::Result<u64> {
    let js = async_nats::jetstream::new(async_nats::connect(nats_url).await?);
    let mut reader = ChainStreamReader::open(&js, chain_id, 0, &cancel)
        .await?
        .context("cancelled before the stream existed")?;
    let mut assembler = BlockAssembler::new();
    let mut policies = Policies::default();
    let mut agents: HashMap<u64, Address> = HashMap::new();
    let mut jobs: HashMap<u64, Job> = HashMap::new();
    // Each agent's answers go out from a task of its own, in the order they come.
    let mut queues = HashMap::new();
    let mut answering = Vec::new();
    for (agent, provider) in providers {
        let (tx, mut rx) = mpsc::unbounded_channel::<(Address, Vec<Bytes>)>();
        queues.insert(agent, tx);
        answering.push(tokio::spawn(async move {
            let mut sent = 0u64;
            // Made at the first answer: the agents registered their nodes before, with
            // nonces of their own.
            let mut sender = None;
            while let Some((to, mut calls)) = rx.recv().await {
                let sender = match &mut sender {
                    Some(sender) => sender,
                    None => sender.insert(Sender::on(provider.clone(), agent).await?),
                };
                while let Ok((_, more)) = rx.try_recv() {
                    calls.extend(more);
                }
                sent += calls.len() as u64;
                sender.send_all(to, calls, 200_000).await?;
            }
            anyhow::Ok(sent)
        }));
    }
    loop {
        let next = tokio::select! {
            next = reader.next() => next,
            () = cancel.cancelled() => break,
        };
        let (_, message) = next.context("the stream ended")??;
        let events = match assembler.push(message) {
            Ok(Assembled::Block { events, .. }) => events,
            Ok(Assembled::Held | Assembled::Final(_)) => continue,
            Ok(Assembled::Retracted(r)) => anyhow::bail!("a reorganisation: {r:?}"),
            Err(e) => anyhow::bail!("the stream is damaged: {e}"),
        };
        let mut assigned = Vec::new();
        for envelope in events {
            match envelope.event.typed()? {
                GantryEvent::Registry(NodeRegistry::NodeRegistryEvents::NodeRegistered(e)) => {
                    agents.insert(e.nodeId, e.agent);
                }
                GantryEvent::Market(event) => {
                    use JobMarket::JobMarketEvents as M;
                    match &event {
                        M::MarketParamsUpdated(e) => {
                            policies.insert(e.policyVersion, Policy::from(&e.params));
                        }
                        M::JobPosted(e) => {
                            jobs.insert(e.jobId, Job::posted(&e.terms, &policies)?);
                        }
                        _ => {}
                    }
                    let Some(job_id) = market_job_id(&event) else {
                        continue;
                    };
                    let Some(job) = jobs.get_mut(&job_id) else {
                        continue;
                    };
                    if !matches!(event, M::JobPosted(_)) {
                        job.state.apply(&event);
                    }
                    match &event {
                        M::JobAssigned(e) => assigned.push((e.jobId, e.nodeId)),
                        M::JobCompleted(e) => {
                            jobs.remove(&e.jobId);
                            let _ = paid.send(Ok(Paid {
                                job_id: e.jobId,
                                at: envelope.block_timestamp,
                                failed: false,
                                how: String::new(),
                            }));
                        }
                        M::JobFailed(_) | M::JobCancelled(_) | M::JobExpired(_) => {
                            jobs.remove(&job_id);
                            let _ = paid.send(Ok(Paid {
                                job_id,
                                at: envelope.block_timestamp,
                                failed: true,
                                how: format!("{event:?}"),
                            }));
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
        }
        // Answered with the state at the block's end: still assigned to the node.
        let mut calls: HashMap<Address, Vec<Bytes>> = HashMap::new();
        for (job_id, node_id) in assigned {
            let Some(job) = jobs.get(&job_id) else {
                continue;
            };
            if job.state.status != JobStatus::Assigned || job.state.node_id != node_id {
                continue;
            }
            let agent = agents
                .get(&node_id)
                .context("a job assigned to an unknown node")?;
            let call = JobMarket::submitResultCall {
                jobId: job_id,
                state: job.state.pack(),
                resultHash: B256::from(U256::from(job_id)),
                resultURI: "nats://simulated".into(),
            };
            calls
                .entry(*agent)
                .or_default()
                .push(call.abi_encode().into());
        }
        for (agent, calls) in calls {
            queues
                .get(&agent)
                .context("a node of an agent the fleet does not hold")?
                .send((market, calls))
                .map_err(|_| anyhow::anyhow!("the answering task of {agent} ended"))?;
        }
    }
    drop(queues);
    let mut sent = 0;
    for task in answering {
        sent += task.await??;
    }
    Ok(sent)
}

/// A lag series: mean and max of the samples.
#[derive(Default)]
struct Lag {
    sum: f64,
    count: u64,
    max: f64,
}

impl Lag {
    fn add(&mut self, value: f64) {
        self.sum += value;
        self.count += 1;
        self.max = self.max.max(value);
    }

    fn mean(&self) -> f64 {
        self.sum / self.count.max(1) as f64
    }
}

/// Samples every second, until cancelled, in blocks behind the chain's head: the leading
/// indexer's, each matcher's and keeper's view, the API's projection (its `/readyz`).
async fn sample_lags(
    endpoints: Vec<(String, String)>,
    api_url: String,
    chain: DynProvider,
    cancel: CancellationToken,
) -> anyhow::Result<BTreeMap<String, Lag>> {
    let mut lags: BTreeMap<String, Lag> = BTreeMap::new();
    let client = reqwest::Client::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            () = cancel.cancelled() => return Ok(lags),
        }
        let head = chain.get_block_number().await? as f64;
        let readiness: serde_json::Value = client
            .get(format!("{api_url}/readyz"))
            .send()
            .await?
            .json()
            .await?;
        if let Some(block) = readiness["block"].as_f64() {
            lags.entry("gantry-api".to_owned())
                .or_default()
                .add(head - block);
        }
        for (label, url) in &endpoints {
            let Ok(response) = client.get(url).send().await else {
                continue;
            };
            let text = response.text().await?;
            let gauge = |name: &str| {
                text.lines()
                    .filter(|line| !line.starts_with('#'))
                    .find(|line| line.split(['{', ' ']).next() == Some(name))
                    .and_then(|line| line.rsplit_once(' '))
                    .and_then(|(_, value)| value.parse::<f64>().ok())
            };
            let lag = if label.starts_with("gantry-indexer") {
                match gauge("gantry_indexer_leader") {
                    Some(leader) if leader > 0.0 => gauge("gantry_indexer_head_lag_blocks"),
                    _ => None,
                }
                .map(|lag| ("indexer (leader)".to_owned(), lag))
            } else if label.starts_with("gantry-api") {
                None
            } else {
                gauge("gantry_matcher_view_block").map(|block| (label.clone(), head - block))
            };
            if let Some((label, lag)) = lag {
                lags.entry(label).or_default().add(lag);
            }
        }
    }
}

/// Polls `done` every 250 ms until it says so; an error after 10 minutes.
async fn wait_for<F, Fut>(mut done: F, what: &str) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let give_up = Instant::now() + Duration::from_secs(600);
    while !done().await? {
        anyhow::ensure!(Instant::now() < give_up, "waited 10 minutes for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// The baseline: a fresh anvil (a block a second, the same gas limit) with the market,
/// `jobs / 8` nodes of 8 slots that every job of the mix fits, and `jobs` jobs; every
/// transaction a job needs sent by this process, phase after phase, as fast as the chain
/// takes them: the postings, the assignments in batches of [`BASELINE_BATCH`] (as the
/// matcher does), the results (each node's agent), the finalizations in batches (as the
/// keeper does). Jobs per second from the first posting to the last payout mined.
async fn chain_alone(jobs: usize, mix: &Mix) -> anyhow::Result<f64> {
    let anvil = Anvil::at(Tools::locate().anvil()?)
        .block_time(1)
        .args(["--gas-limit".to_owned(), GAS_LIMIT.to_string()])
        .try_spawn()?;
    let devnet = Devnet::deploy_on(anvil, |mut params| {
        params.market.challengeWindow = 1;
        params.market.heartbeatTimeout = 86_400;
        params
    })
    .await?;
    let nodes = jobs.div_ceil(8);
    let big = NodeRegistry::NodeCapabilities {
        cpuCores: 16,
        ramMiB: 65_536,
        maxConcurrentJobs: 8,
        engines: Engines::WASM.0,
        ..Default::default()
    };
    register_nodes(&devnet, nodes, |_| big.clone()).await?;
    let market = devnet.deployment.market;
    let chain = devnet.provider(SUBMITTER);
    let from = chain.get_block_number().await?;
    let start = Instant::now();
    post_jobs(&devnet, mix, jobs).await?;

    let head = chain.get_block_number().await?;
    let policies = gantry_runtime::market::read_policies(&chain, market, 0, head).await?;
    let mut posted: Vec<(u64, JobMarket::JobTerms, Job)> = Vec::with_capacity(jobs);
    for log in events::<JobMarket::JobPosted>(&chain, market, from).await? {
        posted.push((
            log.jobId,
            log.terms.clone(),
            Job::posted(&log.terms, &policies)?,
        ));
    }
    anyhow::ensure!(
        posted.len() == jobs,
        "{} postings of {jobs} found",
        posted.len()
    );
    // The `n`th node registered takes jobs `8n..8n+8`; its agent is its operator.
    let registered =
        events::<NodeRegistry::NodeRegistered>(&chain, devnet.deployment.registry, 0).await?;
    let node_of = |n: usize| registered[n / 8].nodeId;
    let agents: HashMap<u64, usize> = registered
        .iter()
        .map(|e| {
            let account = NODES
                .into_iter()
                .find(|&a| devnet.address(a) == e.agent)
                .context("a node of an unknown agent")?;
            anyhow::Ok((e.nodeId, account))
        })
        .collect::<Result<_, _>>()?;
    let agent_of = |node_id: u64| agents[&node_id];
    let assignments = posted
        .chunks(BASELINE_BATCH)
        .enumerate()
        .map(|(c, chunk)| {
            let batch = chunk
                .iter()
                .enumerate()
                .map(|(k, (job_id, terms, job))| JobMarket::Assignment {
                    jobId: *job_id,
                    nodeId: node_of(c * BASELINE_BATCH + k),
                    terms: terms.clone(),
                    state: job.state.pack(),
                })
                .collect();
            JobMarket::assignBatchCall { assignments: batch }
                .abi_encode()
                .into()
        })
        .collect();
    Sender::new(&devnet, MATCHER)
        .await?
        .send_all(market, assignments, BATCH_GAS)
        .await?;
    let assigned = wait_for_events::<JobMarket::JobAssigned>(&chain, market, from, jobs).await?;
    let mut by_id: HashMap<u64, Job> = posted.into_iter().map(|(id, _, job)| (id, job)).collect();
    for event in assigned {
        let job = by_id
            .get_mut(&event.jobId)
            .context("an unknown job assigned")?;
        job.state
            .apply(&JobMarket::JobMarketEvents::JobAssigned(event));
    }
    let mut results: BTreeMap<usize, Vec<Bytes>> = BTreeMap::new();
    for (job_id, job) in &by_id {
        let call = JobMarket::submitResultCall {
            jobId: *job_id,
            state: job.state.pack(),
            resultHash: B256::from(U256::from(*job_id)),
            resultURI: "nats://simulated".into(),
        };
        results
            .entry(agent_of(job.state.node_id))
            .or_default()
            .push(call.abi_encode().into());
    }
    send_from(&devnet, market, 200_000, results).await?;
    let submitted =
        wait_for_events::<JobMarket::ResultSubmitted>(&chain, market, from, jobs).await?;
    let mut last_until = 0;
    for event in submitted {
        last_until = last_until.max(event.until.to::<u64>());
        let job = by_id
            .get_mut(&event.jobId)
            .context("an unknown job answered")?;
        job.state
            .apply(&JobMarket::JobMarketEvents::ResultSubmitted(event));
    }
    wait_for(
        || async { Ok(devnet.now().await? > last_until) },
        "the challenge windows to end",
    )
    .await?;
    let answered: Vec<(u64, Job)> = by_id.into_iter().collect();
    let finalizations = answered
        .chunks(BASELINE_BATCH)
        .map(|chunk| {
            JobMarket::finalizeBatchCall {
                jobIds: chunk.iter().map(|(id, _)| *id).collect(),
                states: chunk.iter().map(|(_, job)| job.state.pack()).collect(),
            }
            .abi_encode()
            .into()
        })
        .collect();
    Sender::new(&devnet, KEEPER)
        .await?
        .send_all(market, finalizations, BATCH_GAS)
        .await?;
    wait_for_events::<JobMarket::JobCompleted>(&chain, market, from, jobs).await?;
    Ok(jobs as f64 / start.elapsed().as_secs_f64())
}

/// The market's `E` events from block `from` on.
async fn events<E: SolEvent>(
    chain: &DynProvider,
    market: Address,
    from: u64,
) -> anyhow::Result<Vec<E>> {
    let filter = Filter::new()
        .address(market)
        .event_signature(E::SIGNATURE_HASH)
        .from_block(from);
    Ok(chain
        .get_logs(&filter)
        .await?
        .iter()
        .map(|log| E::decode_log(&log.inner).map(|e| e.data))
        .collect::<Result<_, _>>()?)
}

/// Polls until there are `count` `E` events from block `from` on; returns them.
async fn wait_for_events<E: SolEvent>(
    chain: &DynProvider,
    market: Address,
    from: u64,
    count: usize,
) -> anyhow::Result<Vec<E>> {
    let give_up = Instant::now() + Duration::from_secs(600);
    loop {
        let found = events::<E>(chain, market, from).await?;
        if found.len() >= count {
            return Ok(found);
        }
        anyhow::ensure!(
            Instant::now() < give_up,
            "{} of {count} {} events after 10 minutes",
            found.len(),
            std::any::type_name::<E>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
