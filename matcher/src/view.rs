//! The matcher's picture of the market: nodes and jobs as the chain's events describe them.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use alloy::primitives::Address;
use gantry_protocol::market::{self, Policies, Seats, State, Terms, Verified};
use gantry_protocol::status::JobStatus;

pub use gantry_protocol::eligibility::{Capabilities, Requirements};
pub use gantry_protocol::status::NodeStatus;

/// A node as the matcher sees it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct NodeView {
    pub id: u64,
    pub agent: Address,
    pub capabilities: Capabilities,
    pub status: NodeStatus,
    pub stake: u128,
    /// Jobs assigned to it and not yet answered (its taken slots).
    pub active_jobs: u32,
    pub completed_jobs: u32,
    pub failed_jobs: u32,
    /// Chain time of its last heartbeat (or registration, or reactivation), seconds.
    pub last_heartbeat: u64,
    /// Chain time it was last marked Inactive (0: never). A job assigned at or before it
    /// may be reclaimed, as the market checks.
    pub inactive_since: u64,
}

impl NodeView {
    /// A node just registered (Active, nothing run yet) at chain time `at`.
    pub fn registered(
        id: u64,
        agent: Address,
        capabilities: Capabilities,
        stake: u128,
        at: u64,
    ) -> Self {
        Self {
            id,
            agent,
            capabilities,
            status: NodeStatus::Active,
            stake,
            active_jobs: 0,
            completed_jobs: 0,
            failed_jobs: 0,
            last_heartbeat: at,
            inactive_since: 0,
        }
    }

    pub fn free_slots(&self) -> u32 {
        u32::from(self.capabilities.max_concurrent_jobs).saturating_sub(self.active_jobs)
    }
}

/// A job that is not settled: its terms and state as the market holds them (every call on
/// it passes both), and what the market keeps beside them.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct JobView {
    pub id: u64,
    pub terms: Terms,
    pub state: State,
    /// Nodes the market bars from it (they gave it back or faulted on it).
    pub barred: BTreeSet<u64>,
    /// Where it was posted, for age ordering: (block, log index).
    pub posted_at: (u64, u64),
    /// Why no worker can run its spec, if so: the matcher never assigns it (no node
    /// spends a transaction on it), explains why, and the keeper expires it at its
    /// deadline (refunded), unless its submitter cancels it first.
    pub spec_error: Option<String>,
}

impl JobView {
    /// A job just posted with `terms` (under a default policy: the planner does not read
    /// it); for tests and benchmarks.
    pub fn open(id: u64, terms: Terms, posted_at: (u64, u64)) -> Self {
        Self {
            id,
            state: State::posted(&terms, &market::Policy::default()),
            terms,
            barred: BTreeSet::new(),
            posted_at,
            spec_error: None,
        }
    }

    pub fn requirements(&self) -> &Requirements {
        &self.terms.requirements
    }

    pub fn submitter(&self) -> Address {
        self.terms.submitter
    }

    /// Terms and state, as a call on the job takes them.
    pub fn market(&self) -> market::Job {
        market::Job {
            terms: self.terms,
            state: self.state,
        }
    }

    pub fn is_open(&self) -> bool {
        self.state.status == JobStatus::Open
    }
}

/// A verified job that is not settled (design 18): run by the market's `Verification`
/// and `Referees` extensions, never by the tier-none planner. The keeper drives its draws,
/// phases and decision ([`crate::liveness`]); its seats are folded as the market writes
/// their words.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct VerifiedView {
    pub id: u64,
    pub terms: Terms,
    /// Its five words (`state.verified` is always set).
    pub state: State,
    pub seats: Seats,
    /// Refereed, in a dispute: the provider opened its seal (`ProviderRevealed`).
    pub provider_revealed: bool,
    /// A refereed job as the planner places its provider (`assignRefereed`), like a
    /// tier-none job's node: its terms, its state (kept with the job's), the nodes it bars
    /// and where it was posted. `None` for a replicated job: its seats are drawn.
    pub placing: Option<JobView>,
}

impl VerifiedView {
    /// Terms and state, as a call on the job takes them.
    pub fn market(&self) -> market::Job {
        market::Job {
            terms: self.terms,
            state: self.state,
        }
    }

    /// The verified words (draw, seats, result).
    pub fn verified(&self) -> Verified {
        self.state.verified.unwrap_or_default()
    }

    pub fn is_refereed(&self) -> bool {
        self.terms.verification.tier == market::Verification::REFEREED
    }

    /// Its seats: n replicas, or r referees.
    pub fn size(&self) -> usize {
        usize::from(self.terms.verification.size)
    }
}

/// Nodes and unsettled jobs, plus the parameters the market checks against.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct View {
    pub nodes: BTreeMap<u64, NodeView>,
    pub jobs: BTreeMap<u64, JobView>,
    /// Unsettled verified jobs, kept apart: no tier-none call applies to them.
    pub verified: BTreeMap<u64, VerifiedView>,
    /// Every policy version the market announced.
    pub policies: Policies,
    /// Seconds without a heartbeat after which a node may be marked inactive.
    pub heartbeat_timeout: u64,
    /// The newest committed block: its number and chain time (seconds).
    pub block: u64,
    pub now: u64,
}

impl View {
    /// Jobs waiting for a node: tier-none jobs, and refereed jobs waiting for a provider.
    pub fn open_jobs(&self) -> impl Iterator<Item = &JobView> {
        self.jobs
            .values()
            .chain(self.verified.values().filter_map(|v| v.placing.as_ref()))
            .filter(|job| job.is_open())
    }

    /// The job, if it is waiting for a node.
    pub fn open_job(&self, id: u64) -> Option<&JobView> {
        self.jobs
            .get(&id)
            .or_else(|| self.verified.get(&id).and_then(|v| v.placing.as_ref()))
            .filter(|job| job.is_open())
    }
}

/// What changed in a [`View`] since it was last asked: the nodes and jobs that any applied
/// event named (a node's slots taken or given back included), or everything (the first
/// view, a reorganisation, or more changes than are worth listing). It may name what did
/// not change; it never leaves out what did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changes {
    pub all: bool,
    pub nodes: HashSet<u64>,
    pub jobs: HashSet<u64>,
}

impl Changes {
    /// Past this many ids, everything is said to have changed (a replay, a long stall).
    pub const LIMIT: usize = 65_536;

    /// Everything changed.
    pub fn everything() -> Self {
        Self {
            all: true,
            nodes: HashSet::new(),
            jobs: HashSet::new(),
        }
    }

    /// Nothing changed.
    pub fn none() -> Self {
        Self {
            all: false,
            nodes: HashSet::new(),
            jobs: HashSet::new(),
        }
    }

    pub fn node(&mut self, id: u64) {
        if !self.all {
            self.nodes.insert(id);
            self.cap();
        }
    }

    pub fn job(&mut self, id: u64) {
        if !self.all {
            self.jobs.insert(id);
            self.cap();
        }
    }

    /// Adds what `other` names.
    pub fn merge(&mut self, other: Changes) {
        if other.all {
            *self = Self::everything();
            return;
        }
        for node in other.nodes {
            self.node(node);
        }
        for job in other.jobs {
            self.job(job);
        }
    }

    pub fn is_empty(&self) -> bool {
        !self.all && self.nodes.is_empty() && self.jobs.is_empty()
    }

    fn cap(&mut self) {
        if self.nodes.len() + self.jobs.len() > Self::LIMIT {
            *self = Self::everything();
        }
    }
}

impl Default for Changes {
    fn default() -> Self {
        Self::everything()
    }
}

/// Builders for the pure cores' unit tests.
#[cfg(test)]
pub(crate) mod fixtures {
    use alloy::primitives::{Address, B256};
    use gantry_protocol::market::Terms;

    use super::{Capabilities, JobView, NodeView, Requirements};

    /// An Open job of account `submitter` (its last byte), bounty 100, posted at block
    /// `id` (so that earlier ids were posted first).
    pub(crate) fn job(
        id: u64,
        submitter: u8,
        deadline: u64,
        requirements: Requirements,
    ) -> JobView {
        let terms = Terms {
            submitter: Address::with_last_byte(submitter),
            bounty: 100,
            spec_hash: B256::ZERO,
            deadline,
            policy: 1,
            requirements,
            verification: gantry_protocol::market::Verification::NONE,
        };
        JobView::open(id, terms, (id, 0))
    }

    /// What differs between two views: nodes, and jobs waiting for a node (for tests of
    /// what [`super::Changes`] must name).
    pub(crate) fn diff(old: &super::View, new: &super::View) -> super::Changes {
        let mut changes = super::Changes::none();
        let ids: std::collections::BTreeSet<u64> =
            old.nodes.keys().chain(new.nodes.keys()).copied().collect();
        for id in ids {
            if old.nodes.get(&id) != new.nodes.get(&id) {
                changes.node(id);
            }
        }
        let ids: std::collections::BTreeSet<u64> = [old, new]
            .iter()
            .flat_map(|v| v.jobs.keys().chain(v.verified.keys()))
            .copied()
            .collect();
        for id in ids {
            if old.open_job(id) != new.open_job(id) || old.jobs.get(&id) != new.jobs.get(&id) {
                changes.job(id);
            }
        }
        changes
    }

    /// An Active node whose agent's last byte is `id`, staking `stake`, last heard at
    /// `heartbeat`.
    pub(crate) fn node(
        id: u64,
        capabilities: Capabilities,
        stake: u128,
        heartbeat: u64,
    ) -> NodeView {
        let agent = Address::with_last_byte(u8::try_from(id).expect("a small test id"));
        NodeView::registered(id, agent, capabilities, stake, heartbeat)
    }
}
