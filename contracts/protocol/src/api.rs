//! The read API's JSON answers (`gantry-api` serves them under `/v1`, the `gantry` CLI
//! reads them): jobs and nodes as rows, lists as pages, a job's and a node's detail,
//! network statistics, and the error body.
//!
//! ```text
//!   GET /v1/jobs           Page<JobSummary>  JobRow + latest ProgressUpdate
//!   GET /v1/jobs/{id}      JobDetail         JobRow + timeline, progress, completions, pending
//!   GET /v1/nodes          Page<NodeView>    NodeRow + reputation, heartbeat age
//!   GET /v1/nodes/{id}     NodeDetail        NodeView + its running jobs
//!   GET /v1/stats          Stats
//!   GET /v1/stats/history  History           Minute by minute
//!   GET /v1/token          TokenInfo         how amounts are shown
//!   GET /v1/events (SSE)   job: JobRow, node: NodeView, progress: ProgressUpdate
//!   a 400, 404 or 500      ErrorBody
//! ```
//!
//! Field names are camelCase; integers are `i64` (the API's SQL BIGINTs; never negative)
//! and amounts are decimal strings of token base units (uint96/uint256 do not fit).
//! Unknown fields are ignored on reading, so the API may add fields.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::jobs::{CompletionReport, ProgressUpdate};
use crate::pending::PendingExplanation;
use crate::status::{JobStatus, NodeStatus};

/// The names of the Server-Sent Events the API sends (`/v1/events`,
/// `/v1/jobs/{id}/logs?follow=true`); their data is the type named beside each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LiveEventName {
    /// A [`JobRow`] changed.
    Job,
    /// A [`NodeView`] changed.
    Node,
    /// A worker's `ProgressUpdate`.
    Progress,
    /// A `LogLine` (its `id` the line's stream sequence).
    Log,
    /// A block was applied: `{number, timestamp}`.
    Block,
    /// Blocks after `commonAncestor` were orphaned: refetch.
    Reorg,
    /// The client fell behind and missed events: refetch.
    Lagged,
    /// The followed job settled: the log stream ends.
    End,
}

impl LiveEventName {
    pub const ALL: [LiveEventName; 8] = [
        LiveEventName::Job,
        LiveEventName::Node,
        LiveEventName::Progress,
        LiveEventName::Log,
        LiveEventName::Block,
        LiveEventName::Reorg,
        LiveEventName::Lagged,
        LiveEventName::End,
    ];

    /// The `event:` field on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            LiveEventName::Job => "job",
            LiveEventName::Node => "node",
            LiveEventName::Progress => "progress",
            LiveEventName::Log => "log",
            LiveEventName::Block => "block",
            LiveEventName::Reorg => "reorg",
            LiveEventName::Lagged => "lagged",
            LiveEventName::End => "end",
        }
    }

    /// The name of an `event:` field; `None` for one this version does not know (a newer
    /// API's), which clients skip.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == name)
    }
}

/// A job as the API shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobRow {
    pub job_id: i64,
    pub submitter: String,
    pub status: JobStatus,
    pub attempts: i64,
    pub bounty: String,
    pub deadline: i64,
    pub spec_hash: String,
    /// The spec JSON as posted (raw text; not necessarily valid).
    pub spec: String,
    /// `JobRequirements` as JSON.
    pub requirements: String,
    pub priority: i64,
    pub node_id: Option<i64>,
    pub assigned_at: Option<i64>,
    pub result_hash: Option<String>,
    pub result_uri: Option<String>,
    pub challenge_ends_at: Option<i64>,
    pub payout: Option<String>,
    pub fee: Option<String>,
    pub refund: Option<String>,
    pub reason: Option<String>,
    pub posted_block: i64,
    pub posted_at: i64,
    pub updated_block: i64,
    pub updated_at: i64,
    /// GPUs the job asks for (`minGpuCount`).
    #[serde(default)]
    pub gpus: i64,
    /// GPU-seconds its attempts ran on nodes (assignment to submission, reclaim,
    /// rejection or expiry, times `gpus`).
    #[serde(default)]
    pub gpu_seconds: i64,
}

/// A node as the API shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub node_id: i64,
    pub operator: String,
    pub agent: String,
    pub status: NodeStatus,
    pub gpu_model: String,
    pub gpu_count: i64,
    pub vram_mib: i64,
    pub cpu_cores: i64,
    pub ram_mib: i64,
    pub price_per_gpu_hour: String,
    pub max_concurrent_jobs: i64,
    pub metadata_uri: String,
    pub stake: String,
    pub slashed: String,
    pub earnings: String,
    pub active_jobs: i64,
    pub completed_jobs: i64,
    pub failed_jobs: i64,
    pub last_heartbeat: i64,
    pub registered_at: i64,
    pub updated_block: i64,
}

/// A node as listed: its row, its reputation and how long ago it last beat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    #[serde(flatten)]
    pub node: NodeRow,
    /// Smoothed success rate, 0 to 1 (a new node: 0.5), as the matcher scores it.
    pub reputation: f64,
    /// Seconds since its last heartbeat, by the later of this clock and the chain's.
    pub heartbeat_age_secs: i64,
}

impl NodeView {
    /// The node as listed at `now` (unix seconds).
    pub fn new(node: NodeRow, now: i64) -> Self {
        Self {
            reputation: crate::reputation::reputation(
                node.completed_jobs.max(0) as u64,
                node.failed_jobs.max(0) as u64,
            ),
            heartbeat_age_secs: (now - node.last_heartbeat).max(0),
            node,
        }
    }
}

/// One event of a job's timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TimelineEntry {
    pub block: i64,
    pub log_index: i64,
    pub at: i64,
    pub tx: String,
    pub name: String,
    pub data: serde_json::Value,
}

/// A page of a list; `nextCursor` fetches the next one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// A job in a list: its row and the latest progress its worker reported.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    #[serde(flatten)]
    pub job: JobRow,
    pub progress: Option<ProgressUpdate>,
}

/// `GET /v1/jobs/{id}`: the row, its timeline, what its workers reported, and why it
/// waits while it is open. The answer is built by the database (gantry-api's
/// `Store::job_document`); this type describes it (OpenAPI) and reads it back (tests,
/// clients).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: JobRow,
    pub timeline: Vec<TimelineEntry>,
    /// The latest progress the worker reported.
    pub progress: Option<ProgressUpdate>,
    /// The workers' completion reports, by attempt.
    pub completions: Vec<CompletionReport>,
    /// While the job is open: the matcher's explanation of why it is not placed.
    pub pending: Option<PendingExplanation>,
}

/// `GET /v1/nodes/{id}`: the node and the jobs it is running.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeDetail {
    #[serde(flatten)]
    pub node: NodeView,
    /// Its assigned, submitted and disputed jobs, newest first.
    pub jobs: Vec<JobRow>,
}

/// `GET /v1/stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub jobs_by_status: BTreeMap<String, i64>,
    pub nodes_by_status: BTreeMap<String, i64>,
    pub active_nodes: i64,
    /// GPUs on active nodes.
    pub active_gpus: i64,
    /// GPU-hours the network's nodes ran jobs for.
    pub gpu_hours: f64,
    /// Bounties posted (token base units).
    pub volume: String,
    /// Paid to providers (token base units).
    pub paid_to_providers: String,
}

/// `GET /v1/stats/history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct History {
    /// Every minute of the window, oldest first.
    pub buckets: Vec<Minute>,
}

/// One minute of `GET /v1/stats/history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Minute {
    /// Unix seconds of the minute's start.
    pub at: i64,
    pub posted: i64,
    pub completed: i64,
    /// Failed or expired.
    pub failed: i64,
    /// GPUs of the jobs that reported progress in the minute.
    pub gpus_in_use: i64,
    /// Their mean GPU utilisation, percent.
    pub gpu_utilization: Option<f64>,
}

/// `GET /v1/token`: the payment token, for showing amounts (base units as decimal
/// strings everywhere else).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    pub symbol: String,
    /// Base units per token: 10^decimals.
    pub decimals: u8,
}

impl Default for TokenInfo {
    /// The dev network's token.
    fn default() -> Self {
        Self {
            symbol: "gUSD".into(),
            decimals: 6,
        }
    }
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_view_flattens_its_row_and_scores_it() {
        let row = NodeRow {
            node_id: 2,
            completed_jobs: 8,
            last_heartbeat: 100,
            ..NodeRow::default()
        };
        let view = NodeView::new(row, 130);
        assert_eq!(view.reputation, 0.9);
        assert_eq!(view.heartbeat_age_secs, 30);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["nodeId"], 2);
        assert_eq!(json["heartbeatAgeSecs"], 30);
        assert_eq!(serde_json::from_value::<NodeView>(json).unwrap(), view);
        // A heartbeat ahead of this clock is no negative age.
        assert_eq!(NodeView::new(NodeRow::default(), -5).heartbeat_age_secs, 0);
    }

    #[test]
    fn a_job_detail_reads_the_document_the_database_builds_and_ignores_unknown_fields() {
        let detail: JobDetail = serde_json::from_value(serde_json::json!({
            "jobId": 3, "submitter": "0x1", "status": "assigned", "attempts": 1,
            "bounty": "12500000", "deadline": 100, "specHash": "0x2", "spec": "{}",
            "requirements": "{}", "priority": 0, "nodeId": 2, "assignedAt": 50,
            "resultHash": null, "resultUri": null, "challengeEndsAt": null, "payout": null,
            "fee": null, "refund": null, "reason": null, "postedBlock": 4, "postedAt": 40,
            "updatedBlock": 5, "updatedAt": 50,
            "timeline": [{"block": 5, "logIndex": 0, "at": 50, "tx": "0x3",
                "name": "JobAssigned", "data": {"jobId": 3}}],
            "progress": null, "completions": [], "pending": null, "addedLater": true
        }))
        .unwrap();
        assert_eq!(detail.job.job_id, 3);
        assert_eq!(detail.job.node_id, Some(2));
        assert_eq!(detail.job.gpus, 0, "rows stored before `gpus` existed");
        assert_eq!(detail.timeline[0].name, "JobAssigned");
        let again = serde_json::to_value(&detail).unwrap();
        assert_eq!(serde_json::from_value::<JobDetail>(again).unwrap(), detail);
    }
}
