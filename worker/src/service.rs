//! The worker process: start-up (inventory, node registration, streams, Docker), the
//! heartbeat, the assignment consumer, claim mode, node health, and graceful shutdown.
//!
//! Assignments come from the durable consumer `gantry_<chain>_worker_<node>`, filtered to
//! `gantry.<chain>.ev.JobAssigned.<node>`. A message stays unacknowledged while its job
//! runs (kept alive with in-progress acks), so a worker that dies gets it redelivered
//! when it comes back; the chain check then decides whether to run it again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use alloy::primitives::U256;
use alloy::primitives::aliases::U96;
use alloy::signers::local::PrivateKeySigner;
use async_nats::jetstream;
use futures::StreamExt;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::{self, Capabilities, Requirements};
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::GantryEvent;
use gantry_protocol::status::JobStatus;
use gantry_protocol::{names, storage};
use tokio::sync::{Mutex as AsyncMutex, Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::admit::NodeLimits;
use crate::chain::{Chain, ChainError};
use crate::config::Config;
use crate::docker::Executor;
use crate::fault::Failure;
use crate::fetch::{FetchConfig, Fetcher, S3Settings};
use crate::inventory::{GpuMonitor, Inventory};
use crate::job::{Assignment, Ctx, GpuPool, Outcome, Stop, StopReason};
use crate::store;

/// How long claim mode hands a job back for while the node cannot take it.
const CLAIM_RETRY: Duration = Duration::from_secs(5);
/// How often an unhealthy node checks whether it recovered.
const HEALTH_INTERVAL: Duration = Duration::from_secs(2);
/// Free disk below which the node stops taking work, MiB.
const MIN_FREE_DISK_MIB: u64 = 1024;

/// Why the worker could not start or went down.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    #[error("chain: {0}")]
    Chain(#[from] ChainError),
    #[error("nats: {0}")]
    Nats(String),
    #[error("{0}")]
    Node(Failure),
    #[error("local directories: {0}")]
    Io(#[from] std::io::Error),
}

/// Hooks for tests and benchmarks.
#[derive(Debug, Default)]
pub struct Hooks {
    /// Receives (job id, time from the assignment message to the container running).
    pub started: Option<mpsc::UnboundedSender<(u64, Duration)>>,
    /// Receives the node id once the node is registered.
    pub node_id: Option<tokio::sync::oneshot::Sender<u64>>,
}

/// Whether the node may take work, and why not.
#[derive(Debug, Default)]
struct Health {
    broken: std::sync::Mutex<Option<String>>,
    healthy: AtomicBool,
    recovered: tokio::sync::Notify,
}

impl Health {
    fn new() -> Self {
        let health = Self::default();
        health.healthy.store(true, Ordering::SeqCst);
        health
    }

    fn fail(&self, reason: &str) {
        tracing::error!(reason, "node fault: taking no work until healthy");
        *self.broken.lock().expect("never poisoned") = Some(reason.to_owned());
        self.healthy.store(false, Ordering::SeqCst);
        metrics::gauge!("gantry_worker_healthy").set(0.0);
    }

    fn recover(&self) {
        tracing::info!("healthy again: taking work");
        *self.broken.lock().expect("never poisoned") = None;
        self.healthy.store(true, Ordering::SeqCst);
        metrics::gauge!("gantry_worker_healthy").set(1.0);
        self.recovered.notify_waiters();
    }

    fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }
}

/// Runs the worker until `shutdown` fires.
pub async fn run(
    config: Config,
    signer: PrivateKeySigner,
    shutdown: CancellationToken,
    mut hooks: Hooks,
) -> Result<(), WorkerError> {
    std::fs::create_dir_all(&config.work_dir)?;
    std::fs::create_dir_all(&config.cache_dir)?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&config.work_dir, std::fs::Permissions::from_mode(0o700))?;
    }
    let inventory = Inventory::detect(&config.work_dir);
    inventory.log();
    let chain = Arc::new(
        Chain::connect(
            config.rpc_url.clone(),
            config.chain_id,
            config.market,
            config.registry,
            config.token,
            signer,
        )
        .await?,
    );
    let capabilities = NodeRegistry::NodeCapabilities {
        gpuModel: inventory.gpu_model(),
        gpuCount: u16::try_from(inventory.gpus.len()).unwrap_or(u16::MAX),
        vramMiB: inventory.min_vram_mib(),
        cpuCores: inventory.cpu_cores,
        ramMiB: inventory.ram_mib,
        pricePerGpuHour: U96::saturating_from(config.node.price_per_gpu_hour),
        maxConcurrentJobs: config.jobs.max_concurrent,
    };
    let node_id = chain
        .ensure_node(
            config.node.node_id,
            capabilities.clone(),
            config.node.stake,
            &config.node.metadata_uri,
        )
        .await?;
    tracing::info!(node_id, agent = %chain.agent(), "serving node");
    if let Some(tx) = hooks.node_id.take() {
        let _ = tx.send(node_id);
    }

    let executor = Executor::connect(&config.docker_socket, node_id)
        .await
        .map_err(WorkerError::Node)?;
    executor
        .remove_leftovers()
        .await
        .map_err(WorkerError::Node)?;

    let address = gantry_protocol::nats::NatsAddress::parse(&config.nats_url);
    let nats = address
        .connect_options()
        .connect(&address.servers)
        .await
        .map_err(|e| WorkerError::Nats(format!("{}: {e}", address.servers)))?;
    let js = jetstream::new(nats.clone());
    // The indexer creates the chain stream; it may start after this worker.
    let stream_name = names::stream_name(config.chain_id);
    let mut waiting = false;
    let chain_stream = loop {
        match js.get_stream(&stream_name).await {
            Ok(stream) => break stream,
            Err(error) => {
                if !waiting {
                    tracing::info!(stream = %stream_name, %error, "waiting for the chain stream (is the indexer running?)");
                    metrics::gauge!("gantry_worker_waiting_for_chain_stream").set(1.0);
                    waiting = true;
                }
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(()),
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    };
    metrics::gauge!("gantry_worker_waiting_for_chain_stream").set(0.0);
    let jobs_js = jetstream::new(nats.clone());
    jobs_js
        .get_or_create_stream(storage::jobs_stream(config.chain_id, config.nats_replicas))
        .await
        .map_err(|e| WorkerError::Nats(format!("the jobs stream: {e}")))?;
    let results = store::bucket(
        &js,
        &names::results_bucket(config.chain_id),
        config.nats_replicas,
    )
    .await
    .map_err(WorkerError::Node)?;
    let checkpoints = store::bucket(
        &js,
        &names::checkpoints_bucket(config.chain_id),
        config.nats_replicas,
    )
    .await
    .map_err(WorkerError::Node)?;
    let fetcher = Fetcher::new(
        FetchConfig {
            cache_dir: config.cache_dir.clone(),
            ipfs_gateway: config.ipfs_gateway.clone(),
            local_root: config.local_inputs_root.clone(),
            default_max_bytes: config.jobs.max_input_bytes,
            s3: config.s3.as_ref().map(|s3| S3Settings {
                endpoint: s3.endpoint.clone(),
                region: s3.region.clone(),
                access_key_id: s3.access_key_id.clone().unwrap_or_default(),
                secret_access_key: s3.secret_access_key.clone().unwrap_or_default(),
                allow_http: s3.endpoint.as_ref().is_some_and(|u| u.scheme() == "http"),
            }),
            attempts: 3,
        },
        Some(js.clone()),
    )
    .map_err(|e| WorkerError::Node(Failure::from(&e)))?;

    let ctx = Arc::new(Ctx {
        chain_id: config.chain_id,
        node_id,
        chain: chain.clone(),
        executor: executor.clone(),
        fetcher,
        nats: nats.clone(),
        chain_stream: chain_stream.clone(),
        jobs_js,
        results,
        checkpoints,
        settings: config.jobs.clone(),
        limits: NodeLimits {
            gpus: capabilities.gpuCount,
            cpu_cores: inventory.cpu_cores,
            ram_mib: inventory.ram_mib,
        },
        gpus: std::sync::Mutex::new(GpuPool::new(inventory.gpus.clone())),
        monitor: GpuMonitor::new(),
        work_dir: config.work_dir.clone(),
        offline: CancellationToken::new(),
        parked: AtomicUsize::new(0),
        parked_changed: tokio::sync::Notify::new(),
        started: hooks.started.take(),
    });
    let health = Arc::new(Health::new());
    metrics::gauge!("gantry_worker_healthy").set(1.0);

    // Heartbeats stop last: they run until every job has been answered.
    let heartbeats_done = CancellationToken::new();
    let heartbeat = tokio::spawn(heartbeat_loop(
        chain.clone(),
        node_id,
        config.jobs.heartbeat_interval,
        health.clone(),
        heartbeats_done.clone(),
    ));
    let health_task = tokio::spawn(health_loop(
        executor.clone(),
        config.work_dir.clone(),
        health.clone(),
        heartbeats_done.clone(),
    ));

    let slots = Arc::new(Semaphore::new(usize::from(config.jobs.max_concurrent)));
    let claimed = Arc::new(Claimed::default());
    let stops: Arc<AsyncMutex<HashMap<(u64, u8), Stop>>> = Arc::default();
    let claimer = config.jobs.auto_accept.then(|| {
        tokio::spawn(claim_loop(
            ctx.clone(),
            capabilities.clone(),
            config.jobs.auto_accept_min_payment,
            Capacity {
                max: usize::from(config.jobs.max_concurrent),
                running: stops.clone(),
                claimed: claimed.clone(),
                health: health.clone(),
            },
            shutdown.clone(),
        ))
    });

    let consumer_name = names::worker_consumer(config.chain_id, node_id);
    let consumer = chain_stream
        .get_or_create_consumer(
            &consumer_name,
            storage::assignment_consumer(config.chain_id, node_id),
        )
        .await
        .map_err(|e| WorkerError::Nats(format!("consumer {consumer_name}: {e}")))?;
    let mut messages = consumer
        .messages()
        .await
        .map_err(|e| WorkerError::Nats(format!("consumer {consumer_name}: {e}")))?;

    let mut running = JoinSet::new();
    tracing::info!(node_id, "taking work");
    loop {
        // A free slot and a healthy node before the next assignment is pulled.
        let permit = tokio::select! {
            () = shutdown.cancelled() => break,
            permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
        };
        let message = tokio::select! {
            () = shutdown.cancelled() => break,
            message = messages.next() => message,
        };
        let received = Instant::now();
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "assignment consumer");
                continue;
            }
            None => return Err(WorkerError::Nats("the assignment consumer ended".into())),
        };
        let assignment = match parse_assignment(&message.payload, received) {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, subject = %message.subject, "not an assignment; skipping it");
                let _ = message.ack().await;
                continue;
            }
        };
        let key = (assignment.job_id, assignment.attempt);
        if stops.lock().await.contains_key(&key) {
            // A redelivery of a job this worker is running: its task acknowledges it.
            tracing::debug!(job_id = key.0, attempt = key.1, "already running");
            continue;
        }
        // An unhealthy node starts nothing: the assignment waits, kept alive, until the
        // node recovers (its heartbeats stop meanwhile, so no more work is sent).
        if !health.is_healthy() && !wait_until_healthy(&health, &shutdown, &message).await {
            let _ = message.ack_with(jetstream::AckKind::Nak(None)).await;
            break;
        }
        let stop = Stop::default();
        stops.lock().await.insert(key, stop.clone());
        // Running now: it counts against claim mode's capacity as such, no longer as a claim.
        claimed.taken_up(assignment.job_id);
        let ctx = ctx.clone();
        let health = health.clone();
        let stops = stops.clone();
        running.spawn(async move {
            let _permit = permit;
            let job_id = assignment.job_id;
            metrics::gauge!("gantry_worker_running_jobs").increment(1.0);
            let keep_alive = async {
                let mut tick = tokio::time::interval(storage::ASSIGNMENT_ACK_WAIT / 3);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let _ = message.ack_with(jetstream::AckKind::Progress).await;
                }
            };
            let outcome = tokio::select! {
                outcome = ctx.run(assignment, stop.clone()) => outcome,
                () = keep_alive => unreachable!("the keep-alive loop never ends"),
            };
            stops.lock().await.remove(&key);
            metrics::gauge!("gantry_worker_running_jobs").decrement(1.0);
            metrics::counter!("gantry_worker_jobs_total", "outcome" => outcome.label())
                .increment(1);
            tracing::info!(job_id, outcome = ?outcome, "job done");
            if let Some(fault) = outcome.node_fault() {
                health.fail(&fault.reason);
            }
            // Unanswered (the chain refused or stayed unreachable): redelivered, so the
            // on-chain check decides again.
            let answered = !matches!(outcome, Outcome::Unreported(_));
            if answered {
                let _ = message.double_ack().await;
            } else {
                let _ = message.ack_with(jetstream::AckKind::Nak(None)).await;
            }
            (job_id, outcome)
        });
        while running.try_join_next().is_some() {}
    }

    // Graceful shutdown: no new work; running jobs get the grace period, then are
    // checkpointed and given back.
    while running.try_join_next().is_some() {}
    tracing::info!(running = running.len(), grace = ?config.jobs.shutdown_grace, "stopping: finishing running jobs");
    if let Some(claimer) = claimer {
        claimer.abort();
    }
    let deadline = tokio::time::sleep(config.jobs.shutdown_grace);
    tokio::pin!(deadline);
    let finished = loop {
        tokio::select! {
            joined = running.join_next() => if joined.is_none() { break true },
            () = &mut deadline => break false,
        }
    };
    if !finished {
        // Each job stops its container, uploads its last checkpoint, and waits to be
        // given back until the node is offline.
        tracing::info!(
            running = running.len(),
            "grace period over: stopping and checkpointing"
        );
        for stop in stops.lock().await.values() {
            stop.stop(StopReason::Shutdown);
        }
        loop {
            let parked = ctx.parked.load(Ordering::SeqCst);
            if parked >= running.len() {
                break;
            }
            tokio::select! {
                joined = running.join_next() => if joined.is_none() { break },
                () = ctx.parked_changed.notified() => {}
                () = tokio::time::sleep(HEALTH_INTERVAL) => {}
            }
        }
    }
    // Offline: heartbeats stop and the node is marked inactive, so the matcher sends no
    // more work here and what is given back next is not assigned straight back.
    heartbeats_done.cancel();
    let _ = heartbeat.await;
    match chain.mark_inactive(node_id).await {
        Ok(()) => tracing::info!(node_id, "node marked inactive"),
        Err(e) => tracing::warn!(node_id, error = %e, "could not mark the node inactive"),
    }
    ctx.offline.cancel();
    while running.join_next().await.is_some() {}
    let _ = health_task.await;
    let _ = nats.flush().await;
    tracing::info!("stopped");
    Ok(())
}

/// Waits for the node to be healthy, renewing `message`'s claim meanwhile; `false` when
/// the worker is shutting down first.
async fn wait_until_healthy(
    health: &Health,
    shutdown: &CancellationToken,
    message: &jetstream::Message,
) -> bool {
    // Checked every health interval too: a recovery between the check and the wait is
    // not missed for long.
    let mut renew = tokio::time::interval(HEALTH_INTERVAL);
    while !health.is_healthy() {
        tokio::select! {
            () = shutdown.cancelled() => return false,
            () = health.recovered.notified() => {}
            _ = renew.tick() => {
                let _ = message.ack_with(jetstream::AckKind::Progress).await;
            }
        }
    }
    true
}

fn parse_assignment(payload: &[u8], received: Instant) -> Result<Assignment, String> {
    let envelope: EventEnvelope = serde_json::from_slice(payload).map_err(|e| e.to_string())?;
    let typed = envelope.event.typed().map_err(|e| e.to_string())?;
    let GantryEvent::Market(JobMarket::JobMarketEvents::JobAssigned(assigned)) = typed else {
        return Err(format!("event {}", envelope.event.name));
    };
    Ok(Assignment {
        job_id: assigned.jobId,
        attempt: assigned.attempt,
        received,
    })
}

async fn heartbeat_loop(
    chain: Arc<Chain>,
    node_id: u64,
    interval: Duration,
    health: Arc<Health>,
    done: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut under_stake = false;
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        // An unhealthy node lets its heartbeat lapse, so the matcher stops sending work.
        if !health.is_healthy() {
            continue;
        }
        match chain.heartbeat(node_id).await {
            Ok(()) => metrics::counter!("gantry_worker_heartbeats_total").increment(1),
            Err(e) => tracing::warn!(node_id, error = %e, "heartbeat failed"),
        }
        // Slashed below the minimum, the node gets no new jobs until the operator tops up.
        if let (Ok(node), Ok(min)) = (chain.node(node_id).await, chain.min_stake().await) {
            let low = U256::from(node.stake) < min;
            if low && !under_stake {
                tracing::warn!(node_id, stake = %node.stake, min_stake = %min, "stake below the registry's minimum: the node gets no new jobs until the operator tops it up (topUpStake)");
            }
            under_stake = low;
            metrics::gauge!("gantry_worker_stake_below_minimum").set(if low { 1.0 } else { 0.0 });
        }
    }
}

/// Checks the engine and the disk; marks the node broken or recovered.
async fn health_loop(
    executor: Executor,
    work_dir: std::path::PathBuf,
    health: Arc<Health>,
    done: CancellationToken,
) {
    let mut tick = tokio::time::interval(HEALTH_INTERVAL);
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        let problem = match executor.ping().await {
            Err(f) => Some(f.reason),
            Ok(()) => {
                let free = Inventory::free_disk_mib(&work_dir);
                (free < MIN_FREE_DISK_MIB)
                    .then(|| format!("disk full: {free} MiB free under the work directory"))
            }
        };
        match (problem, health.is_healthy()) {
            (Some(reason), true) => health.fail(&reason),
            (None, false) => {
                // Containers the outage kept the worker from removing go before any new
                // job starts (none starts while the node is unhealthy).
                match executor.remove_leftovers().await {
                    Ok(_) => health.recover(),
                    Err(f) => tracing::warn!(error = %f, "still unhealthy"),
                }
            }
            _ => {}
        }
    }
}

/// Claim mode: watch new and requeued jobs and claim those the node fits. The node's two
/// durable consumers (`storage::claim_consumer`) each hold one message at a time: while
/// the node has no free slot or is unhealthy the message is handed back for later, so a
/// job is considered when the node could take it, and a restart goes on where it stopped.
async fn claim_loop(
    ctx: Arc<Ctx>,
    capabilities: NodeRegistry::NodeCapabilities,
    min_payment: U256,
    capacity: Capacity,
    shutdown: CancellationToken,
) {
    let mut feeds = Vec::new();
    for event in names::CLAIM_EVENTS {
        let name = names::claim_consumer(ctx.chain_id, ctx.node_id, event);
        let config = storage::claim_consumer(ctx.chain_id, ctx.node_id, event);
        let messages = match ctx.chain_stream.get_or_create_consumer(&name, config).await {
            Ok(consumer) => consumer.messages().await,
            Err(e) => {
                return tracing::error!(consumer = %name, error = %e, "claim mode: no consumer");
            }
        };
        match messages {
            Ok(messages) => feeds.push(messages),
            Err(e) => {
                return tracing::error!(consumer = %name, error = %e, "claim mode: no consumer");
            }
        }
    }
    let mut messages = futures::stream::select_all(feeds);
    loop {
        let message = tokio::select! {
            () = shutdown.cancelled() => return,
            message = messages.next() => message,
        };
        let message = match message {
            Some(Ok(message)) => message,
            Some(Err(e)) => {
                tracing::debug!(error = %e, "claim mode: pull");
                continue;
            }
            None => return tracing::error!("claim mode: the consumers ended"),
        };
        let job_id = serde_json::from_slice::<EventEnvelope>(&message.payload)
            .ok()
            .and_then(|envelope| envelope.event.key.parse::<u64>().ok());
        let Some(job_id) = job_id else {
            let _ = message.ack().await;
            continue;
        };
        if !capacity.can_take_one().await {
            let _ = message
                .ack_with(jetstream::AckKind::Nak(Some(CLAIM_RETRY)))
                .await;
            continue;
        }
        match ctx.chain.job(job_id).await {
            Ok(info)
                if claimable(&info, &capabilities, min_payment)
                    && kind_accepted(&ctx, job_id, &info).await =>
            {
                let ack = match ctx.chain.claim(job_id, ctx.node_id).await {
                    Ok(()) => {
                        capacity.claimed.add(job_id);
                        tracing::info!(job_id, "claimed");
                        metrics::counter!("gantry_worker_claims_total", "outcome" => "claimed")
                            .increment(1);
                        jetstream::AckKind::Ack
                    }
                    // Unanswered: the job is considered again later.
                    Err(e @ ChainError::Rpc(_)) => {
                        tracing::debug!(job_id, error = %e, "claim not sent");
                        jetstream::AckKind::Nak(Some(CLAIM_RETRY))
                    }
                    // Refused (taken meanwhile, or the chain's checks said no).
                    Err(e) => {
                        tracing::debug!(job_id, error = %e, "claim refused");
                        metrics::counter!("gantry_worker_claims_total", "outcome" => "refused")
                            .increment(1);
                        jetstream::AckKind::Ack
                    }
                };
                let _ = message.ack_with(ack).await;
            }
            // Not open, not a fit, or not worth it: nothing to do, now or later (a requeue
            // is a new event).
            Ok(_) => {
                let _ = message.ack().await;
            }
            Err(e) => {
                tracing::debug!(job_id, error = %e, "claim mode: getJob");
                let _ = message
                    .ack_with(jetstream::AckKind::Nak(Some(CLAIM_RETRY)))
                    .await;
            }
        }
    }
}

/// What claim mode may take on: `max_concurrent` less the running jobs and the jobs
/// claimed but not started. (Not the slot semaphore: the assignment loop holds a permit
/// while it waits for the next assignment.)
#[derive(Debug)]
struct Capacity {
    max: usize,
    running: Arc<AsyncMutex<HashMap<(u64, u8), Stop>>>,
    claimed: Arc<Claimed>,
    health: Arc<Health>,
}

impl Capacity {
    async fn can_take_one(&self) -> bool {
        let running = self.running.lock().await.len();
        self.health.is_healthy() && running + self.claimed.outstanding() < self.max
    }
}

/// Jobs claimed whose assignment the worker has not pulled yet: each counts as a slot
/// taken, so that claim mode claims no more than the node can run.
#[derive(Debug, Default)]
struct Claimed(std::sync::Mutex<HashMap<u64, Instant>>);

impl Claimed {
    /// A claim's assignment that has not arrived after this long never will (the claim
    /// was reorganised away): it stops counting.
    const FORGET_AFTER: Duration = Duration::from_secs(60);

    fn add(&self, job_id: u64) {
        self.jobs().insert(job_id, Instant::now());
    }

    fn taken_up(&self, job_id: u64) {
        self.jobs().remove(&job_id);
    }

    fn outstanding(&self) -> usize {
        let mut jobs = self.jobs();
        jobs.retain(|_, at| at.elapsed() < Self::FORGET_AFTER);
        jobs.len()
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Instant>> {
        // Nothing panics while holding it; a poisoned map is still a valid map.
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Whether the job's kind (training, inference) is one the provider takes.
async fn kind_accepted(ctx: &Ctx, job_id: u64, info: &JobMarket::JobInfo) -> bool {
    let Ok(bytes) = ctx.spec_bytes(job_id, info.specHash).await else {
        return false;
    };
    match gantry_protocol::spec::JobSpec::from_slice(&bytes) {
        Ok(spec) => match spec.kind {
            gantry_protocol::spec::JobKind::Training => ctx.settings.accept_training,
            gantry_protocol::spec::JobKind::Inference => ctx.settings.accept_inference,
        },
        // A broken spec is not worth a claim (and a reject).
        Err(_) => false,
    }
}

/// Whether an Open job fits the node and pays enough (the chain re-checks on `claim`).
pub fn claimable(
    info: &JobMarket::JobInfo,
    node: &NodeRegistry::NodeCapabilities,
    min_payment: U256,
) -> bool {
    JobStatus::try_from(info.status as u8) == Ok(JobStatus::Open)
        && U256::from(info.bounty) >= min_payment
        && eligibility::capable(
            &Requirements::from(&info.requirements),
            &Capabilities::from(node),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_job_that_names_vram_is_claimable_only_with_that_vram_as_on_chain() {
        // The chain checks VRAM whatever the GPU count (`_checkEligible`); the worker's old
        // copy skipped it for CPU jobs and claimed jobs the chain then refused.
        let info = JobMarket::JobInfo {
            status: u8::from(JobStatus::Open),
            bounty: alloy::primitives::aliases::U96::from(100),
            requirements: JobMarket::JobRequirements {
                minGpuCount: 0,
                minVramMiB: 1_024,
                maxPricePerGpuHour: alloy::primitives::aliases::U96::from(10),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut node = NodeRegistry::NodeCapabilities {
            vramMiB: 512,
            ..Default::default()
        };
        assert!(!claimable(&info, &node, U256::ZERO));
        node.vramMiB = 1_024;
        assert!(claimable(&info, &node, U256::ZERO));
        assert!(!claimable(&info, &node, U256::from(101)), "pays too little");
        let assigned = JobMarket::JobInfo {
            status: u8::from(JobStatus::Assigned),
            ..info
        };
        assert!(!claimable(&assigned, &node, U256::ZERO));
    }

    #[tokio::test]
    async fn claimed_jobs_hold_slots_until_their_assignment_is_pulled() {
        let capacity = Capacity {
            max: 2,
            running: Arc::default(),
            claimed: Arc::default(),
            health: Arc::new(Health::new()),
        };
        assert!(capacity.can_take_one().await);
        capacity.claimed.add(7);
        assert!(capacity.can_take_one().await, "one slot left");
        capacity.claimed.add(8);
        assert!(!capacity.can_take_one().await, "both slots promised");
        // Job 7's assignment is pulled: it runs now instead of being promised.
        capacity.claimed.taken_up(7);
        capacity
            .running
            .lock()
            .await
            .insert((7, 1), Stop::default());
        assert!(!capacity.can_take_one().await, "one running, one promised");
        capacity.claimed.taken_up(8);
        assert!(capacity.can_take_one().await);
        capacity.health.fail("disk full");
        assert!(
            !capacity.can_take_one().await,
            "an unhealthy node takes nothing"
        );
    }
}
