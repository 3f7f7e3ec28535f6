//! Why a job is still waiting: what the matcher publishes for each Open job it cannot
//! place, in the KV bucket [`crate::names::pending_bucket`] under the job id, for the
//! API and the CLI to show. The entry is deleted once the job is placed or settled.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::eligibility::Constraint;

/// Version of the explanation format.
pub const PENDING_VERSION: u16 = 1;

/// One unplaceable job's explanation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingExplanation {
    pub v: u16,
    pub job_id: u64,
    /// A sentence for people, e.g. "0 of 12 nodes have ≥ 80 GiB VRAM per GPU".
    pub summary: String,
    /// Nodes considered: every registered node that has not exited.
    pub nodes: u64,
    /// How many of them fail each constraint, by constraint name (see [`Constraint`]);
    /// a node may fail several.
    #[cfg_attr(feature = "openapi", schema(value_type = BTreeMap<String, u64>))]
    pub rejected: BTreeMap<Constraint, u64>,
    /// The nodes closest to taking the job, closest first.
    pub best: Vec<PendingCandidate>,
    /// The newest block the matcher had seen when it decided.
    pub block: u64,
}

/// A node that came close.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PendingCandidate {
    pub node_id: u64,
    /// The matcher's score for it (0 to 1), were it eligible.
    pub score: f64,
    /// The constraints it fails, in the chain's order.
    pub failed: Vec<Constraint>,
}
