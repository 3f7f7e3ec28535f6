//! The read model, as pure folds over the chain's events: a job's row and a node's row
//! are what their events say, applied in chain order. The projection stores each row and
//! every applied event; after a reorg it refolds the affected rows from the events that
//! remain. Amounts are decimal strings (uint96/uint256 do not fit SQL integers). The rows
//! are what the API serves, so they are `gantry_protocol::api` types.

use alloy::primitives::B256;
use gantry_protocol::api::{JobRow, NodeRow};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::envelope::EventEnvelope;
use serde::de::DeserializeOwned;

pub use gantry_protocol::status::{JOB_STATUS, NODE_STATUS};

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
#[error("event {name} at block {block}: {reason}")]
pub struct ModelError {
    pub name: String,
    pub block: u64,
    pub reason: String,
}

fn typed<T: DeserializeOwned>(event: &EventEnvelope) -> Result<T, ModelError> {
    serde_json::from_value(event.event.data.clone()).map_err(|e| ModelError {
        name: event.event.name.clone(),
        block: event.block_number,
        reason: e.to_string(),
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
pub fn touches(event: &EventEnvelope) -> (Option<u64>, Option<u64>) {
    let data = &event.event.data;
    let id = |field: &str| data.get(field).and_then(serde_json::Value::as_u64);
    (id("jobId"), id("nodeId"))
}

/// Applies a market event to the job's row (`None` before its `JobPosted`). Events that
/// do not concern jobs leave it as is.
pub fn apply_job(row: Option<JobRow>, event: &EventEnvelope) -> Result<Option<JobRow>, ModelError> {
    use JobMarket as M;
    let block = i(event.block_number);
    let at = i(event.block_timestamp);
    if event.event.name == "JobPosted" {
        let e: M::JobPosted = typed(event)?;
        return Ok(Some(JobRow {
            job_id: i(e.jobId),
            submitter: e.submitter.to_string(),
            status: JOB_STATUS[1].into(),
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
        }));
    }
    let Some(mut job) = row else {
        return Ok(None);
    };
    let status = |s: usize| JOB_STATUS[s].to_string();
    // An attempt's clock stops at its submission, reclaim, rejection or expiry.
    if job.status == JOB_STATUS[2]
        && matches!(
            event.event.name.as_str(),
            "ResultSubmitted" | "JobReclaimed" | "JobRejected" | "JobExpired"
        )
        && let Some(assigned_at) = job.assigned_at
    {
        job.gpu_seconds += (at - assigned_at).max(0) * job.gpus;
    }
    match event.event.name.as_str() {
        "JobAssigned" => {
            let e: M::JobAssigned = typed(event)?;
            job.status = status(2);
            job.attempts = i64::from(e.attempt);
            job.node_id = Some(i(e.nodeId));
            job.assigned_at = Some(i(e.assignedAt.to::<u64>()));
            job.result_hash = None;
            job.result_uri = None;
            job.challenge_ends_at = None;
        }
        "ResultSubmitted" => {
            let e: M::ResultSubmitted = typed(event)?;
            job.status = status(3);
            job.result_hash = Some(hex(e.resultHash));
            job.result_uri = Some(e.resultURI);
            job.challenge_ends_at = Some(i(e.challengeEndsAt.to::<u64>()));
        }
        "JobDisputed" => job.status = status(4),
        "JobCompleted" => {
            let e: M::JobCompleted = typed(event)?;
            job.status = status(5);
            job.payout = Some(e.payout.to_string());
            job.fee = Some(e.fee.to_string());
        }
        "JobReclaimed" => {
            let e: M::JobReclaimed = typed(event)?;
            job.reason = Some(
                match e.kind {
                    0 => "node inactive",
                    1 => "runtime exceeded",
                    _ => "given back by the node",
                }
                .into(),
            );
        }
        "JobRejected" => job.reason = Some(typed::<M::JobRejected>(event)?.reason),
        "JobRequeued" => {
            job.status = status(1);
            job.node_id = None;
            job.assigned_at = None;
        }
        "JobFailed" => {
            let e: M::JobFailed = typed(event)?;
            job.status = status(6);
            job.refund = Some(e.refund.to_string());
        }
        "JobCancelled" => {
            let e: M::JobCancelled = typed(event)?;
            job.status = status(7);
            job.refund = Some(e.refund.to_string());
        }
        "JobExpired" => {
            let e: M::JobExpired = typed(event)?;
            job.status = status(8);
            job.refund = Some(e.refund.to_string());
        }
        _ => return Ok(Some(job)),
    }
    job.updated_block = block;
    job.updated_at = at;
    Ok(Some(job))
}

/// Applies an event to the node's row (`None` before its `NodeRegistered`): the
/// registry's node events, and the market's events that move its slots, counters,
/// stake and earnings.
pub fn apply_node(
    row: Option<NodeRow>,
    event: &EventEnvelope,
) -> Result<Option<NodeRow>, ModelError> {
    use JobMarket as M;
    use NodeRegistry as R;
    let block = i(event.block_number);
    let caps = |node: &mut NodeRow, c: &R::NodeCapabilities| {
        node.gpu_model = String::from_utf8_lossy(c.gpuModel.as_slice())
            .trim_end_matches('\0')
            .to_owned();
        node.gpu_count = i64::from(c.gpuCount);
        node.vram_mib = i64::from(c.vramMiB);
        node.cpu_cores = i64::from(c.cpuCores);
        node.ram_mib = i64::from(c.ramMiB);
        node.price_per_gpu_hour = c.pricePerGpuHour.to_string();
        node.max_concurrent_jobs = i64::from(c.maxConcurrentJobs);
    };
    if event.event.name == "NodeRegistered" {
        let e: R::NodeRegistered = typed(event)?;
        let mut node = NodeRow {
            node_id: i(e.nodeId),
            operator: e.operator.to_string(),
            agent: e.agent.to_string(),
            status: NODE_STATUS[1].into(),
            metadata_uri: e.metadataURI.clone(),
            stake: e.stake.to_string(),
            slashed: "0".into(),
            earnings: "0".into(),
            last_heartbeat: i64::from(e.at),
            registered_at: i64::from(e.at),
            updated_block: block,
            ..NodeRow::default()
        };
        caps(&mut node, &e.capabilities);
        return Ok(Some(node));
    }
    let Some(mut node) = row else {
        return Ok(None);
    };
    let status = |s: usize| NODE_STATUS[s].to_string();
    match event.event.name.as_str() {
        "NodeHeartbeat" => node.last_heartbeat = i64::from(typed::<R::NodeHeartbeat>(event)?.at),
        "NodeReactivated" => node.status = status(1),
        "NodeMarkedInactive" => node.status = status(2),
        "NodeCapabilitiesUpdated" => {
            let e: R::NodeCapabilitiesUpdated = typed(event)?;
            caps(&mut node, &e.capabilities);
            node.metadata_uri = e.metadataURI;
        }
        "NodeAgentChanged" => node.agent = typed::<R::NodeAgentChanged>(event)?.agent.to_string(),
        "NodeStakeAdded" => node.stake = typed::<R::NodeStakeAdded>(event)?.stake.to_string(),
        "NodeSlashed" => {
            let e: R::NodeSlashed = typed(event)?;
            node.stake = e.stake.to_string();
            node.slashed = add(&node.slashed, e.amount.to::<u128>());
        }
        "NodeExitBegun" => node.status = status(3),
        "NodeStakeWithdrawn" => {
            node.status = status(4);
            node.stake = "0".into();
        }
        "JobAssigned" => node.active_jobs += 1,
        "ResultSubmitted" | "JobRejected" => node.active_jobs = (node.active_jobs - 1).max(0),
        "JobReclaimed" => {
            node.active_jobs = (node.active_jobs - 1).max(0);
            node.failed_jobs += 1;
        }
        "JobCompleted" => {
            let e: M::JobCompleted = typed(event)?;
            node.completed_jobs += 1;
            node.earnings = add(&node.earnings, e.payout.to::<u128>());
        }
        "DisputeResolved" => {
            if !typed::<M::DisputeResolved>(event)?.providerWon {
                node.failed_jobs += 1;
            }
        }
        "JobExpired" => {
            // An expiry of a running job frees its slot (nodeId 0: it was not running).
            let e: M::JobExpired = typed(event)?;
            if e.nodeId != 0 {
                node.active_jobs = (node.active_jobs - 1).max(0);
                node.failed_jobs += 1;
            }
        }
        _ => return Ok(Some(node)),
    }
    node.updated_block = block;
    Ok(Some(node))
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, B256, U256, aliases::U40, aliases::U96};
    use gantry_protocol::api::JobRow;
    use gantry_protocol::bindings::JobMarket as M;
    use gantry_protocol::envelope::EventEnvelope;
    use gantry_protocol::events::{ContractKind, DecodedEvent};

    use super::apply_job;

    fn at(block: u64, time: u64, name: &str, data: serde_json::Value) -> EventEnvelope {
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
                name: name.into(),
                key: "1".into(),
                data,
            },
        }
    }

    fn fold(events: &[EventEnvelope]) -> JobRow {
        let mut row = None;
        for event in events {
            row = apply_job(row, event).expect("applies");
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
        let json = |v: serde_json::Result<serde_json::Value>| v.unwrap();
        let events = [
            at(1, 100, "JobPosted", json(serde_json::to_value(&posted))),
            at(
                2,
                110,
                "JobAssigned",
                json(serde_json::to_value(assigned(1, 110))),
            ),
            // The first attempt is reclaimed after 50 s, and requeued.
            at(
                3,
                160,
                "JobReclaimed",
                json(serde_json::to_value(M::JobReclaimed {
                    jobId: 1,
                    nodeId: 1,
                    kind: 0,
                    slashed: U96::ZERO,
                    by: Address::ZERO,
                })),
            ),
            at(
                3,
                160,
                "JobRequeued",
                json(serde_json::to_value(M::JobRequeued {
                    jobId: 1,
                    attemptsUsed: 1,
                })),
            ),
            at(
                4,
                200,
                "JobAssigned",
                json(serde_json::to_value(assigned(2, 200))),
            ),
            // The second runs 300 s to its result.
            at(
                5,
                500,
                "ResultSubmitted",
                json(serde_json::to_value(M::ResultSubmitted {
                    jobId: 1,
                    nodeId: 1,
                    resultHash: B256::ZERO,
                    resultURI: String::new(),
                    challengeEndsAt: U40::from(600),
                })),
            ),
            // Expiry after the submission adds nothing.
            at(
                6,
                700,
                "JobExpired",
                json(serde_json::to_value(M::JobExpired {
                    jobId: 1,
                    nodeId: 1,
                    refund: U256::ZERO,
                    slashed: U96::ZERO,
                })),
            ),
        ];
        let row = fold(&events);
        assert_eq!(row.gpus, 2);
        assert_eq!(row.gpu_seconds, (50 + 300) * 2);
    }
}
