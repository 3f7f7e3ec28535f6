//! The read model, as pure folds over the chain's events: a job's row and a node's row
//! are what their events say, applied in chain order. The projection stores each row and
//! every applied event; after a reorg it refolds the affected rows from the events that
//! remain. Amounts are decimal strings (uint96/uint256 do not fit SQL integers). The rows
//! are what the API serves, so they are `gantry_protocol::api` types.

use alloy::primitives::B256;
use gantry_protocol::api::{JobRow, NodeRow};
use gantry_protocol::bindings::JobMarket::JobMarketEvents::{self, self as M};
use gantry_protocol::bindings::NodeRegistry::{
    self,
    NodeRegistryEvents::{self, self as R},
};
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::{EventDataError, GantryEvent};
pub use gantry_protocol::status::{JobStatus, NodeStatus};

/// Now, unix seconds: the later of this machine's clock and `chain_time` (a dev chain may
/// run ahead of the clock).
pub fn now(chain_time: u64) -> i64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    wall.max(chain_time) as i64
}

/// Why an event could not be applied.
#[derive(Debug, thiserror::Error)]
#[error("event {name} at block {block}")]
pub struct ModelError {
    pub name: String,
    pub block: u64,
    #[source]
    pub source: EventDataError,
}

/// The event, typed.
pub fn typed(event: &EventEnvelope) -> Result<GantryEvent, ModelError> {
    event.event.typed().map_err(|source| ModelError {
        name: event.event.name.clone(),
        block: event.block_number,
        source,
    })
}

fn hex(hash: B256) -> String {
    format!("{hash:#x}")
}

fn add(a: &str, b: impl Into<u128>) -> String {
    (a.parse::<u128>().unwrap_or(0) + b.into()).to_string()
}

fn i(v: impl TryInto<i64>) -> i64 {
    v.try_into().unwrap_or(i64::MAX)
}

/// The job and node ids an event touches (a row to update for each).
pub fn touches(event: &GantryEvent) -> (Option<u64>, Option<u64>) {
    (event.job_id(), event.node_id())
}

/// Applies a market event to the job's row (`None` before its `JobPosted`). Events that
/// do not concern jobs leave it as is.
pub fn apply_job(
    row: Option<JobRow>,
    event: &EventEnvelope,
    typed: &GantryEvent,
) -> Option<JobRow> {
    let block = i(event.block_number);
    let at = i(event.block_timestamp);
    let GantryEvent::Market(typed) = typed else {
        return row;
    };
    if let M::JobPosted(e) = typed {
        return Some(JobRow {
            job_id: i(e.jobId),
            submitter: e.submitter.to_string(),
            status: JobStatus::Open,
            attempts: 0,
            bounty: e.bounty.to_string(),
            deadline: i(e.deadline.to::<u64>()),
            spec_hash: hex(e.specHash),
            spec: String::from_utf8_lossy(&e.spec).into_owned(),
            requirements: serde_json::to_string(&e.requirements).expect("serializes"),
            priority: i64::from(e.requirements.priority),
            gpus: i64::from(e.requirements.minGpuCount),
            posted_block: block,
            posted_at: at,
            updated_block: block,
            updated_at: at,
            ..JobRow::default()
        });
    }
    let mut job = row?;
    // An attempt's clock stops at its submission, reclaim, rejection or expiry.
    if job.status == JobStatus::Assigned
        && matches!(
            typed,
            M::ResultSubmitted(_) | M::JobReclaimed(_) | M::JobRejected(_) | M::JobExpired(_)
        )
        && let Some(assigned_at) = job.assigned_at
    {
        job.gpu_seconds += (at - assigned_at).max(0) * job.gpus;
    }
    match typed {
        M::JobAssigned(e) => {
            job.status = JobStatus::Assigned;
            job.attempts = i64::from(e.attempt);
            job.node_id = Some(i(e.nodeId));
            job.assigned_at = Some(i(e.assignedAt.to::<u64>()));
            job.result_hash = None;
            job.result_uri = None;
            job.challenge_ends_at = None;
        }
        M::ResultSubmitted(e) => {
            job.status = JobStatus::Submitted;
            job.result_hash = Some(hex(e.resultHash));
            job.result_uri = Some(e.resultURI.clone());
            job.challenge_ends_at = Some(i(e.challengeEndsAt.to::<u64>()));
        }
        M::JobDisputed(_) => job.status = JobStatus::Disputed,
        M::JobCompleted(e) => {
            job.status = JobStatus::Completed;
            job.payout = Some(e.payout.to_string());
            job.fee = Some(e.fee.to_string());
        }
        M::JobReclaimed(e) => {
            job.reason = Some(
                match e.kind {
                    0 => "node inactive",
                    1 => "runtime exceeded",
                    _ => "given back by the node",
                }
                .into(),
            );
        }
        M::JobRejected(e) => job.reason = Some(e.reason.clone()),
        M::JobRequeued(_) => {
            job.status = JobStatus::Open;
            job.node_id = None;
            job.assigned_at = None;
        }
        M::JobFailed(e) => {
            job.status = JobStatus::Failed;
            job.refund = Some(e.refund.to_string());
        }
        M::JobCancelled(e) => {
            job.status = JobStatus::Cancelled;
            job.refund = Some(e.refund.to_string());
        }
        M::JobExpired(e) => {
            job.status = JobStatus::Expired;
            job.refund = Some(e.refund.to_string());
        }
        // A dispute's ruling shows in the JobCompleted or JobFailed that follows it.
        M::DisputeResolved(_)
        | M::JobPosted(_)
        | M::MarketParamsUpdated(_)
        | M::Paused(_)
        | M::Unpaused(_)
        | M::RoleAdminChanged(_)
        | M::RoleGranted(_)
        | M::RoleRevoked(_)
        | M::Withdrawn(_) => return Some(job),
    }
    job.updated_block = block;
    job.updated_at = at;
    Some(job)
}

/// Applies an event to the node's row (`None` before its `NodeRegistered`): the
/// registry's node events, and the market's events that move its slots, counters,
/// stake and earnings.
pub fn apply_node(
    row: Option<NodeRow>,
    event: &EventEnvelope,
    typed: &GantryEvent,
) -> Option<NodeRow> {
    let block = i(event.block_number);
    if let GantryEvent::Registry(R::NodeRegistered(e)) = typed {
        let mut node = NodeRow {
            node_id: i(e.nodeId),
            operator: e.operator.to_string(),
            agent: e.agent.to_string(),
            status: NodeStatus::Active,
            metadata_uri: e.metadataURI.clone(),
            stake: e.stake.to_string(),
            slashed: "0".into(),
            earnings: "0".into(),
            last_heartbeat: i64::from(e.at),
            registered_at: i64::from(e.at),
            updated_block: block,
            ..NodeRow::default()
        };
        set_capabilities(&mut node, &e.capabilities);
        return Some(node);
    }
    let mut node = row?;
    let changed = match typed {
        GantryEvent::Registry(e) => apply_registry(&mut node, e),
        GantryEvent::Market(e) => apply_market_to_node(&mut node, e),
        // It names no node (see `touches`).
        GantryEvent::Unreadable(_) => false,
    };
    if changed {
        node.updated_block = block;
    }
    Some(node)
}

fn set_capabilities(node: &mut NodeRow, c: &NodeRegistry::NodeCapabilities) {
    node.gpu_model = String::from_utf8_lossy(c.gpuModel.as_slice())
        .trim_end_matches('\0')
        .to_owned();
    node.gpu_count = i64::from(c.gpuCount);
    node.vram_mib = i64::from(c.vramMiB);
    node.cpu_cores = i64::from(c.cpuCores);
    node.ram_mib = i64::from(c.ramMiB);
    node.price_per_gpu_hour = c.pricePerGpuHour.to_string();
    node.max_concurrent_jobs = i64::from(c.maxConcurrentJobs);
}

/// A registry event's effect on its node's row; whether it changed.
fn apply_registry(node: &mut NodeRow, event: &NodeRegistryEvents) -> bool {
    match event {
        R::NodeHeartbeat(e) => node.last_heartbeat = i64::from(e.at),
        R::NodeReactivated(_) => node.status = NodeStatus::Active,
        R::NodeMarkedInactive(_) => node.status = NodeStatus::Inactive,
        R::NodeCapabilitiesUpdated(e) => {
            set_capabilities(node, &e.capabilities);
            node.metadata_uri = e.metadataURI.clone();
        }
        R::NodeAgentChanged(e) => node.agent = e.agent.to_string(),
        R::NodeStakeAdded(e) => node.stake = e.stake.to_string(),
        R::NodeSlashed(e) => {
            node.stake = e.stake.to_string();
            node.slashed = add(&node.slashed, e.amount.to::<u128>());
        }
        R::NodeExitBegun(_) => node.status = NodeStatus::Exiting,
        R::NodeStakeWithdrawn(_) => {
            node.status = NodeStatus::Exited;
            node.stake = "0".into();
        }
        R::NodeRegistered(_)
        | R::RegistryParamsUpdated(_)
        | R::Paused(_)
        | R::Unpaused(_)
        | R::RoleAdminChanged(_)
        | R::RoleGranted(_)
        | R::RoleRevoked(_) => return false,
    }
    true
}

/// A market event's effect on the row of the node it names; whether it changed.
fn apply_market_to_node(node: &mut NodeRow, event: &JobMarketEvents) -> bool {
    match event {
        M::JobAssigned(_) => node.active_jobs += 1,
        M::ResultSubmitted(_) | M::JobRejected(_) => {
            node.active_jobs = (node.active_jobs - 1).max(0);
        }
        M::JobReclaimed(_) => {
            node.active_jobs = (node.active_jobs - 1).max(0);
            node.failed_jobs += 1;
        }
        M::JobCompleted(e) => {
            node.completed_jobs += 1;
            node.earnings = add(&node.earnings, e.payout.to::<u128>());
        }
        M::DisputeResolved(e) => {
            if !e.providerWon {
                node.failed_jobs += 1;
            }
        }
        M::JobExpired(e) => {
            // An expiry of a running job frees its slot (nodeId 0: it was not running).
            if e.nodeId != 0 {
                node.active_jobs = (node.active_jobs - 1).max(0);
                node.failed_jobs += 1;
            }
        }
        M::JobPosted(_)
        | M::JobDisputed(_)
        | M::JobRequeued(_)
        | M::JobFailed(_)
        | M::JobCancelled(_)
        | M::MarketParamsUpdated(_)
        | M::Paused(_)
        | M::Unpaused(_)
        | M::RoleAdminChanged(_)
        | M::RoleGranted(_)
        | M::RoleRevoked(_)
        | M::Withdrawn(_) => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, B256, U256, aliases::U40, aliases::U96};
    use alloy::sol_types::SolEvent;
    use gantry_protocol::api::JobRow;
    use gantry_protocol::bindings::JobMarket as M;
    use gantry_protocol::envelope::EventEnvelope;
    use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};

    use super::apply_job;

    fn at<E: SolEvent + serde::Serialize>(block: u64, time: u64, event: E) -> EventEnvelope {
        EventEnvelope {
            v: 1,
            chain_id: 31337,
            block_number: block,
            block_hash: B256::repeat_byte(block as u8),
            block_timestamp: time,
            tx_hash: B256::ZERO,
            log_index: 0,
            event: DecodedEvent {
                contract: ContractKind::Market,
                name: event_name::<E>().into(),
                key: "1".into(),
                data: serde_json::to_value(event).unwrap(),
            },
        }
    }

    fn fold(events: &[EventEnvelope]) -> JobRow {
        let mut row = None;
        for event in events {
            let typed = super::typed(event).expect("typed");
            row = apply_job(row, event, &typed);
        }
        row.expect("posted")
    }

    #[test]
    fn gpu_seconds_count_every_attempt_s_time_on_a_node_times_its_gpus() {
        let posted = M::JobPosted {
            jobId: 1,
            submitter: Address::ZERO,
            requirements: M::JobRequirements {
                minGpuCount: 2,
                ..Default::default()
            },
            bounty: U96::from(5),
            deadline: U40::from(10_000),
            specHash: B256::ZERO,
            spec: Default::default(),
        };
        let assigned = |attempt: u8, time: u64| M::JobAssigned {
            jobId: 1,
            nodeId: 1,
            agent: Address::ZERO,
            attempt,
            claimed: false,
            assignedAt: U40::from(time),
        };
        let events = [
            at(1, 100, posted.clone()),
            at(2, 110, assigned(1, 110)),
            // The first attempt is reclaimed after 50 s, and requeued.
            at(
                3,
                160,
                M::JobReclaimed {
                    jobId: 1,
                    nodeId: 1,
                    kind: 0,
                    slashed: U96::ZERO,
                    by: Address::ZERO,
                },
            ),
            at(
                3,
                160,
                M::JobRequeued {
                    jobId: 1,
                    attemptsUsed: 1,
                },
            ),
            at(4, 200, assigned(2, 200)),
            // The second runs 300 s to its result.
            at(
                5,
                500,
                M::ResultSubmitted {
                    jobId: 1,
                    nodeId: 1,
                    resultHash: B256::ZERO,
                    resultURI: String::new(),
                    challengeEndsAt: U40::from(600),
                },
            ),
            // Expiry after the submission adds nothing.
            at(
                6,
                700,
                M::JobExpired {
                    jobId: 1,
                    nodeId: 1,
                    refund: U256::ZERO,
                    slashed: U96::ZERO,
                },
            ),
        ];
        let row = fold(&events);
        assert_eq!(row.gpus, 2);
        assert_eq!(row.gpu_seconds, (50 + 300) * 2);
    }
}
