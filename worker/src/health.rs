//! Whether the node may take work: the heartbeat that keeps it active on-chain, and the
//! check of the Docker engine and the disk that marks it broken or recovered. An
//! unhealthy node gives back at once whatever is assigned to it, and lets its heartbeat
//! lapse once it holds no job, so the matcher stops sending work; while it holds one the
//! heartbeats go on, since a node marked inactive under a job it holds is slashed for it.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use alloy::primitives::{Address, U256};
use gantry_protocol::status::NodeStatus;
use gantry_runtime::health::NotReady;
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

/// Why the node takes no new work, as the worker sees it after a heartbeat: one reason,
/// the first that applies (a node fault, then what the chain says).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NoWork {
    /// A node fault (engine, disk): the worker lets the heartbeat lapse.
    Unhealthy(String),
    /// The chain did not answer the heartbeat or the reads after it.
    ChainUnreachable(String),
    /// The node's agent is another key now (`setAgent`): this worker cannot serve it.
    KeyRefused { agent: Address },
    /// The node is exiting (or exited): it takes no new jobs for good.
    Exiting,
    /// Slashed below the market's minimum: Inactive until the operator tops it up.
    StakeBelowMinimum { stake: U256, min: U256 },
    /// The market refused the heartbeat for another reason.
    HeartbeatRefused(String),
    /// Inactive on chain still (the next heartbeat reactivates it).
    Inactive,
}

impl NoWork {
    /// Every label, for the gauge (a bounded set).
    pub(crate) const LABELS: [&'static str; 7] = [
        "unhealthy",
        "chain_unreachable",
        "key_refused",
        "exiting",
        "stake_below_minimum",
        "heartbeat_refused",
        "inactive",
    ];

    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Unhealthy(_) => "unhealthy",
            Self::ChainUnreachable(_) => "chain_unreachable",
            Self::KeyRefused { .. } => "key_refused",
            Self::Exiting => "exiting",
            Self::StakeBelowMinimum { .. } => "stake_below_minimum",
            Self::HeartbeatRefused(_) => "heartbeat_refused",
            Self::Inactive => "inactive",
        }
    }
}

impl std::fmt::Display for NoWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unhealthy(why) => write!(f, "node unhealthy: {why}"),
            Self::ChainUnreachable(why) => write!(f, "chain unreachable: {why}"),
            Self::KeyRefused { agent } => write!(
                f,
                "the node's agent is {agent}, not this worker's key: the market refuses its heartbeats"
            ),
            Self::Exiting => write!(f, "the node is exiting: it takes no new jobs"),
            Self::StakeBelowMinimum { stake, min } => write!(
                f,
                "stake {stake} below the market's minimum {min}: inactive until the operator tops it up (gantry node topup)"
            ),
            Self::HeartbeatRefused(why) => write!(f, "heartbeat refused: {why}"),
            Self::Inactive => write!(f, "the node is inactive on chain"),
        }
    }
}

/// What became of one heartbeat.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Beat {
    /// Not sent: the node is unhealthy and holds no job.
    Skipped,
    Sent,
    /// Not mined: `retryable` when the chain could not be reached.
    Failed {
        retryable: bool,
        reason: String,
    },
}

/// The node as the chain has it after the heartbeat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeFacts {
    pub(crate) status: NodeStatus,
    pub(crate) agent: Address,
    pub(crate) stake: U256,
    pub(crate) min_stake: U256,
    /// Its place in the verification pool (0: not a member).
    pub(crate) pool_index: u64,
}

/// How long a node that serves seats and is out of the verification pool waits between
/// two tries to join it (a try costs a transaction; a node under the pool's floor stays
/// out until topped up).
const POOL_RETRY: Duration = Duration::from_secs(600);

/// Why the node takes no new work, if it does not: `problem` is the node fault (if
/// any), `facts` the node as read after the heartbeat (`None`: not readable), `agent`
/// this worker's key. Pure.
pub(crate) fn no_work(
    problem: Option<String>,
    beat: &Beat,
    facts: Option<NodeFacts>,
    agent: Address,
) -> Option<NoWork> {
    if let Some(why) = problem {
        return Some(NoWork::Unhealthy(why));
    }
    if let Beat::Failed {
        retryable: true,
        reason,
    } = beat
    {
        return Some(NoWork::ChainUnreachable(reason.clone()));
    }
    let Some(facts) = facts else {
        return Some(NoWork::ChainUnreachable(
            "the node could not be read".into(),
        ));
    };
    if facts.agent != agent {
        return Some(NoWork::KeyRefused { agent: facts.agent });
    }
    if matches!(facts.status, NodeStatus::Exiting | NodeStatus::Exited) {
        return Some(NoWork::Exiting);
    }
    if facts.stake < facts.min_stake {
        return Some(NoWork::StakeBelowMinimum {
            stake: facts.stake,
            min: facts.min_stake,
        });
    }
    if let Beat::Failed { reason, .. } = beat {
        return Some(NoWork::HeartbeatRefused(reason.clone()));
    }
    (facts.status != NodeStatus::Active).then_some(NoWork::Inactive)
}

/// Sends a heartbeat every `interval` while the node is healthy or holds a job
/// (`holds_jobs`), until `done` fires. After each it says why the node takes no work, if
/// it does not: the log (on a change), `gantry_worker_not_taking_work{reason}` and
/// `/readyz`. A heartbeat brings an Inactive node back to Active by itself (after a
/// pause, a restart, an outage), unless its stake is below the minimum.
pub(crate) async fn heartbeat_loop(
    chain: Arc<Chain>,
    node_id: u64,
    interval: Duration,
    health: Arc<Health>,
    holds_jobs: impl Fn() -> bool,
    serves_seats: bool,
    done: CancellationToken,
) {
    let mut tick = tokio::time::interval(interval);
    let mut pool_tried: Option<std::time::Instant> = None;
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let not_ready = NotReady::new();
    let mut last: Option<NoWork> = None;
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        // An unhealthy node lets its heartbeat lapse, so the matcher stops sending work;
        // not under a job it holds, which a keeper would reclaim with the slash.
        let beat = if !health.is_healthy() && !holds_jobs() {
            Beat::Skipped
        } else {
            match chain.heartbeat(node_id).await {
                Ok(()) => {
                    metrics::heartbeat_sent();
                    Beat::Sent
                }
                Err(e) => {
                    tracing::warn!(node_id, error = %e, "heartbeat failed");
                    Beat::Failed {
                        retryable: e.is_retryable(),
                        reason: e.to_string(),
                    }
                }
            }
        };
        let facts = node_facts(&chain, node_id).await;
        // A node that serves seats joins the verification pool (at start, and again after
        // an inactivity took it out): anyone may ask, and nobody else has a reason to.
        if serves_seats
            && let Some(f) = &facts
            && f.status == NodeStatus::Active
            && f.pool_index == 0
            && pool_tried.is_none_or(|at| at.elapsed() >= POOL_RETRY)
        {
            pool_tried = Some(std::time::Instant::now());
            match chain.sync_pool(node_id).await {
                Ok(()) => tracing::info!(node_id, "asked to join the verification pool"),
                Err(e) => tracing::warn!(node_id, error = %e, "joining the verification pool"),
            }
        }
        if let Some(facts) = facts {
            metrics::stake_below_minimum(facts.stake < facts.min_stake);
        }
        let why = no_work(health.problem(), &beat, facts, chain.agent());
        if why != last {
            match &why {
                Some(why) => {
                    tracing::warn!(node_id, reason = why.label(), %why, "the node takes no work");
                }
                None => tracing::info!(node_id, "the node is active and takes work"),
            }
        }
        metrics::not_taking_work(why.as_ref().map(NoWork::label));
        match &why {
            Some(why) => not_ready.set(format!("node {node_id} takes no work: {why}")),
            None => not_ready.clear(),
        }
        last = why;
    }
}

/// The node's status, agent and stake, and the market's minimum; `None` when the chain
/// could not be read.
async fn node_facts(chain: &Chain, node_id: u64) -> Option<NodeFacts> {
    let (Ok(node), Ok(min_stake)) = (chain.node(node_id).await, chain.min_stake().await) else {
        return None;
    };
    Some(NodeFacts {
        status: NodeStatus::try_from(node.status).unwrap_or_default(),
        agent: node.agent,
        stake: U256::from(node.stake),
        min_stake,
        pool_index: u64::from(node.poolIndex),
    })
}

/// How often a healthy node removes containers of its own that it does not run, in
/// health checks: those a dead run's request created after the reaper and this run's
/// start had looked (a container create takes a second or more on a loaded engine).
const SWEEP_EVERY: u32 = 5;

/// Checks the engine and the disk; marks the node broken or recovered. Every
/// [`SWEEP_EVERY`] checks a healthy node also removes the leftovers of earlier runs.
pub(crate) async fn health_loop(
    executor: Option<Executor>,
    work_dir: PathBuf,
    health: Arc<Health>,
    done: CancellationToken,
) {
    let mut tick = tokio::time::interval(HEALTH_INTERVAL);
    let mut checks = 0u32;
    loop {
        tokio::select! {
            () = done.cancelled() => return,
            _ = tick.tick() => {}
        }
        checks = checks.wrapping_add(1);
        let pinged = match &executor {
            Some(executor) => executor.ping().await,
            None => Ok(()),
        };
        let problem = match pinged {
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
                let removed = match &executor {
                    Some(executor) => executor.remove_leftovers().await.map(|_| ()),
                    None => Ok(()),
                };
                match removed {
                    Ok(()) => health.recover(),
                    Err(f) => tracing::warn!(error = %f, "still unhealthy"),
                }
            }
            (None, true) if checks.is_multiple_of(SWEEP_EVERY) => {
                if let Some(executor) = &executor
                    && let Err(f) = executor.remove_leftovers().await
                {
                    tracing::debug!(error = %f, "could not look for leftover containers");
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: Address = Address::repeat_byte(0xa6);

    fn facts(status: NodeStatus, stake: u64) -> Option<NodeFacts> {
        Some(NodeFacts {
            status,
            agent: AGENT,
            stake: U256::from(stake),
            min_stake: U256::from(100),
            pool_index: 0,
        })
    }

    #[test]
    fn the_node_says_why_it_takes_no_work_first_reason_first() {
        let refused = Beat::Failed {
            retryable: false,
            reason: "heartbeat reverted: paused".into(),
        };
        let down = Beat::Failed {
            retryable: true,
            reason: "rpc: connection refused".into(),
        };
        let check = |problem: Option<&str>, beat: &Beat, facts, expected: Option<&str>| {
            let why = no_work(problem.map(str::to_owned), beat, facts, AGENT);
            assert_eq!(why.as_ref().map(NoWork::label), expected, "{why:?}");
        };
        check(None, &Beat::Sent, facts(NodeStatus::Active, 150), None);
        // A heartbeat that reactivated it: Active again by itself.
        check(
            None,
            &Beat::Sent,
            facts(NodeStatus::Inactive, 150),
            Some("inactive"),
        );
        check(
            Some("disk full"),
            &Beat::Skipped,
            facts(NodeStatus::Active, 150),
            Some("unhealthy"),
        );
        check(
            None,
            &down,
            facts(NodeStatus::Active, 150),
            Some("chain_unreachable"),
        );
        check(None, &Beat::Sent, None, Some("chain_unreachable"));
        check(
            None,
            &Beat::Sent,
            facts(NodeStatus::Inactive, 99),
            Some("stake_below_minimum"),
        );
        check(
            None,
            &Beat::Sent,
            facts(NodeStatus::Exiting, 150),
            Some("exiting"),
        );
        check(
            None,
            &refused,
            facts(NodeStatus::Active, 150),
            Some("heartbeat_refused"),
        );
        let other = Some(NodeFacts {
            agent: Address::repeat_byte(1),
            ..facts(NodeStatus::Active, 150).unwrap()
        });
        check(None, &refused, other, Some("key_refused"));
        for why in NoWork::LABELS {
            assert!(!why.is_empty());
        }
    }
}
