//! Whether the node may take work: the heartbeat that keeps it active on-chain, and the
//! check of the Docker engine and the disk that marks it broken or recovered. An
//! unhealthy node gives back at once whatever is assigned to it, and lets its heartbeat
//! lapse once it holds no job, so the matcher stops sending work; while it holds one the
//! heartbeats go on, since a node marked inactive under a job it holds is slashed for it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use alloy::primitives::U256;
use tokio_util::sync::CancellationToken;

use crate::chain::Chain;
use crate::docker::Executor;
use crate::inventory::Inventory;
use crate::metrics;

/// How often an unhealthy node checks whether it recovered.
pub(crate) const HEALTH_INTERVAL: Duration = Duration::from_secs(2);
/// Free disk below which the node stops taking work, MiB.
const MIN_FREE_DISK_MIB: u64 = 1024;

/// Whether the node may take work, and why not.
#[derive(Debug, Default)]
pub(crate) struct Health {
    broken: std::sync::Mutex<Option<String>>,
    healthy: AtomicBool,
}

impl Health {
    pub(crate) fn new() -> Self {
        let health = Self::default();
        health.healthy.store(true, Ordering::SeqCst);
        health
    }

    pub(crate) fn fail(&self, reason: &str) {
        tracing::error!(reason, "node fault: taking no work until healthy");
        *self.broken.lock().expect("never poisoned") = Some(reason.to_owned());
        self.healthy.store(false, Ordering::SeqCst);
        metrics::healthy(false);
    }

    fn recover(&self) {
        tracing::info!("healthy again: taking work");
        *self.broken.lock().expect("never poisoned") = None;
        self.healthy.store(true, Ordering::SeqCst);
        metrics::healthy(true);
    }

    pub(crate) fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    /// Why the node takes no work, while it is unhealthy.
    pub(crate) fn problem(&self) -> Option<String> {
        if self.is_healthy() {
            return None;
        }
        self.broken.lock().expect("never poisoned").clone()
    }
}

/// Sends a heartbeat every `interval` while the node is healthy or holds a job
/// (`holds_jobs`), and watches the node's stake against the market's minimum, until
/// `done` fires.
pub(crate) async fn heartbeat_loop(
    chain: Arc<Chain>,
    node_id: u64,
    interval: Duration,
    health: Arc<Health>,
    holds_jobs: impl Fn() -> bool,
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
        // An unhealthy node lets its heartbeat lapse, so the matcher stops sending work;
        // not under a job it holds, which a keeper would reclaim with the slash.
        if !health.is_healthy() && !holds_jobs() {
            continue;
        }
        match chain.heartbeat(node_id).await {
            Ok(()) => metrics::heartbeat_sent(),
            Err(e) => tracing::warn!(node_id, error = %e, "heartbeat failed"),
        }
        under_stake = check_stake(&chain, node_id, under_stake).await;
    }
}

/// Whether the node's stake is below the minimum now (`was_low`: it was at the last
/// check); warns when it falls below. Unknown (the chain unreachable) keeps `was_low`.
async fn check_stake(chain: &Chain, node_id: u64, was_low: bool) -> bool {
    // Slashed below the minimum, the node is inactive and gets no new jobs until the
    // operator tops up (and the next heartbeat reactivates it).
    let (Ok(node), Ok(min)) = (chain.node(node_id).await, chain.min_stake().await) else {
        return was_low;
    };
    let low = U256::from(node.stake) < min;
    if low && !was_low {
        tracing::warn!(node_id, stake = %node.stake, min_stake = %min, "stake below the market's minimum: the node gets no new jobs until the operator tops it up (topUpStake)");
    }
    metrics::stake_below_minimum(low);
    low
}

/// Checks the engine and the disk; marks the node broken or recovered.
pub(crate) async fn health_loop(
    executor: Executor,
    work_dir: PathBuf,
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
