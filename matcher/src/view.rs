//! The matcher's picture of the market: nodes and jobs as the chain's events describe them.

use std::collections::BTreeMap;

use alloy::primitives::Address;

pub use gantry_protocol::eligibility::{Capabilities, Requirements};
pub use gantry_protocol::status::NodeStatus;

/// A node as the matcher sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    pub id: u64,
    pub agent: Address,
    pub capabilities: Capabilities,
    pub status: NodeStatus,
    pub stake: u128,
    /// Jobs running on it (its taken slots).
    pub active_jobs: u32,
    pub completed_jobs: u32,
    pub failed_jobs: u32,
    /// Chain time of its last heartbeat (or registration, or reactivation), seconds.
    pub last_heartbeat: u64,
}

impl NodeView {
    pub fn free_slots(&self) -> u32 {
        u32::from(self.capabilities.max_concurrent_jobs).saturating_sub(self.active_jobs)
    }
}

/// An Open job waiting for a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobView {
    pub id: u64,
    pub submitter: Address,
    pub requirements: Requirements,
    pub bounty: u128,
    /// Chain time, seconds.
    pub deadline: u64,
    pub attempts: u8,
    /// Where it was posted, for age ordering: (block, log index).
    pub posted_at: (u64, u64),
}

/// A job a node is running (Assigned on-chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Assignment {
    pub node: u64,
    /// Chain time, seconds.
    pub assigned_at: u64,
    pub max_runtime: u64,
    pub deadline: u64,
}

/// A job whose result is in (Submitted or Disputed on-chain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submission {
    pub node: u64,
    /// Chain time the challenge window closes, seconds.
    pub challenge_ends_at: u64,
    /// A disputed result waits for the arbiter, not for the window.
    pub disputed: bool,
}

/// Nodes and jobs, plus the parameters the contracts check against.
#[derive(Debug, Clone, Default)]
pub struct View {
    pub nodes: BTreeMap<u64, NodeView>,
    pub open_jobs: BTreeMap<u64, JobView>,
    pub assignments: BTreeMap<u64, Assignment>,
    pub submissions: BTreeMap<u64, Submission>,
    pub min_stake: u128,
    /// Seconds without a heartbeat after which a node may be marked inactive.
    pub heartbeat_timeout: u64,
    pub max_attempts: u8,
    /// The newest committed block: its number and chain time (seconds).
    pub block: u64,
    pub now: u64,
}
