//! Building the [`View`] from the chain's stream: pure, no IO. A block's events are applied
//! when its commit arrives; a retraction rebuilds the view without the orphaned blocks
//! (retractions are rare, so a replay of what was applied is simple and enough). A block
//! the assembler refuses (damaged, or after a damaged one) is not applied: the view stays
//! at the last good block until the stream is whole again.

use std::collections::{BTreeSet, VecDeque};

use alloy::primitives::B256;
use gantry_protocol::bindings::JobMarket::JobMarketEvents;
use gantry_protocol::bindings::NodeRegistry::NodeRegistryEvents;
use gantry_protocol::chain_stream::{
    AssembleError, Assembled, BlockAssembler, BlockRef, ChainMessage, Stall,
};
use gantry_protocol::envelope::{BlockCommit, EventEnvelope, FinalityWatermark, Retraction};
use gantry_protocol::events::GantryEvent;
use gantry_protocol::market::{self, Policy};
use gantry_protocol::spec::JobSpec;
use gantry_protocol::status::{JobStatus, NodeStatus};

use crate::view::{Capabilities, Changes, JobView, NodeView, VerifiedView, View};

/// Why the stream could not be applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProjectError {
    #[error("event {name} of block {block}: {reason}")]
    BadEvent {
        name: String,
        block: u64,
        reason: String,
    },
    #[error(transparent)]
    Assemble(#[from] AssembleError),
}

/// What one message did to the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// An event, held until its block's commit.
    Held,
    /// A commit or a retraction: the view changed.
    Changed,
    /// A finality watermark.
    Other,
    /// A message refused or skipped (the stream is damaged, or it repeats a block):
    /// nothing changed.
    Refused,
}

/// The view and what it takes to rebuild it after a reorg: the state as of the oldest
/// block still reorganisable (`base`), and the blocks applied since (`retained`). A
/// retraction restores `base` and replays the retained blocks that stay canonical; blocks
/// leave `retained` into `base` once final, or once more than `max_retained` are kept
/// (the indexer refuses reorgs deeper than its window, so older blocks cannot be orphaned).
#[derive(Debug)]
pub struct Projection {
    live: State,
    base: State,
    retained: VecDeque<Block>,
    max_retained: usize,
    assembler: BlockAssembler,
}

impl Default for Projection {
    fn default() -> Self {
        Self::new(DEFAULT_RETAINED)
    }
}

/// Blocks kept for replay by default: well past the indexer's default reorg window (128).
pub const DEFAULT_RETAINED: usize = 1_024;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Block {
    number: u64,
    hash: B256,
    timestamp: u64,
    events: Vec<EventEnvelope>,
}

/// What a snapshot keeps of a [`Projection`]: the view as of the oldest block still
/// reorganisable, and the blocks applied since (the live view is rebuilt from them).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct Saved {
    pub base: View,
    pub retained: Vec<Block>,
    pub max_retained: usize,
}

/// The view, the one state the projection keeps, and what changed in it since the planner
/// last asked.
#[derive(Debug, Clone, Default)]
struct State {
    view: View,
    changes: Changes,
}

impl Projection {
    pub fn new(max_retained: usize) -> Self {
        Self {
            live: State::default(),
            base: State::default(),
            retained: VecDeque::new(),
            max_retained: max_retained.max(1),
            assembler: BlockAssembler::new(),
        }
    }

    pub fn view(&self) -> &View {
        &self.live.view
    }

    /// What changed in the view since the last call (everything, the first time).
    pub fn take_changes(&mut self) -> Changes {
        std::mem::replace(&mut self.live.changes, Changes::none())
    }

    /// The newest block no reorganisation can undo any more (final by the stream's
    /// watermark, or older than the retained window).
    pub fn final_block(&self) -> u64 {
        self.base.view.block
    }

    /// What the view waits for while the stream is damaged (it stays as it was).
    pub fn stall(&self) -> Option<Stall> {
        self.assembler.stall()
    }

    /// Whether every message so far has taken effect (no events wait for their commit,
    /// no block is missing).
    pub fn is_idle(&self) -> bool {
        self.assembler.is_idle()
    }

    /// Takes the stream's next message.
    pub fn on_message(&mut self, message: ChainMessage) -> Result<Applied, ProjectError> {
        match self.assembler.push(message)? {
            Assembled::Held => Ok(Applied::Held),
            Assembled::Block { commit, events } => {
                self.apply_commit(&commit, events)?;
                Ok(Applied::Changed)
            }
            Assembled::Retracted(retraction) => {
                self.undo(&retraction)?;
                Ok(Applied::Changed)
            }
            Assembled::Final(watermark) => {
                self.finalize(&watermark)?;
                Ok(Applied::Other)
            }
        }
    }

    /// An event; it takes effect with its block's commit.
    pub fn on_event(&mut self, event: EventEnvelope) {
        let held = self.on_message(ChainMessage::Event(event));
        debug_assert_eq!(held, Ok(Applied::Held));
    }

    /// Applies the committed block's events.
    pub fn on_commit(&mut self, commit: &BlockCommit) -> Result<(), ProjectError> {
        self.on_message(ChainMessage::Commit(commit.clone()))
            .map(drop)
    }

    /// Undoes the orphaned blocks by replaying the others onto the base.
    pub fn on_retraction(&mut self, retraction: &Retraction) -> Result<(), ProjectError> {
        self.on_message(ChainMessage::Retraction(retraction.clone()))
            .map(drop)
    }

    /// Blocks up to the watermark can no longer be orphaned: fold them into the base.
    pub fn on_finality(&mut self, watermark: &FinalityWatermark) -> Result<(), ProjectError> {
        self.on_message(ChainMessage::Finality(*watermark))
            .map(drop)
    }

    /// What a snapshot keeps of the projection, and the block it stands at (its last
    /// commit): `None` unless every message so far took effect and the last block applied
    /// is known by its hash (not right after a retraction).
    pub fn save(&self) -> Option<(Saved, BlockRef)> {
        if !self.is_idle() {
            return None;
        }
        let at = self.assembler.applied()?;
        at.hash?;
        let saved = Saved {
            base: self.base.view.clone(),
            retained: self.retained.iter().cloned().collect(),
            max_retained: self.max_retained,
        };
        Some((saved, at))
    }

    /// The projection a snapshot kept, standing at block `number` (hash `hash`): the base
    /// with the retained blocks applied again, reading on after that block.
    pub fn restore(saved: Saved, number: u64, hash: B256) -> Result<Self, ProjectError> {
        let base = State {
            view: saved.base,
            changes: Changes::everything(),
        };
        let mut projection = Self {
            live: base.clone(),
            base,
            retained: VecDeque::new(),
            max_retained: saved.max_retained.max(1),
            assembler: BlockAssembler::resuming_at(number, hash),
        };
        for block in saved.retained {
            projection.live.apply_block(&block)?;
            projection.retained.push_back(block);
        }
        Ok(projection)
    }

    fn apply_commit(
        &mut self,
        commit: &BlockCommit,
        events: Vec<EventEnvelope>,
    ) -> Result<(), ProjectError> {
        let block = Block {
            number: commit.block_number,
            hash: commit.block_hash,
            timestamp: commit.block_timestamp,
            events,
        };
        self.live.apply_block(&block)?;
        self.retained.push_back(block);
        while self.retained.len() > self.max_retained {
            self.settle_oldest()?;
        }
        Ok(())
    }

    fn undo(&mut self, retraction: &Retraction) -> Result<(), ProjectError> {
        let orphaned: Vec<B256> = retraction.orphaned.iter().map(|b| b.hash).collect();
        self.retained
            .retain(|block| !orphaned.contains(&block.hash));
        self.live = self.base.clone();
        self.live.changes = Changes::everything();
        for block in &self.retained {
            self.live.apply_block(block)?;
        }
        Ok(())
    }

    fn finalize(&mut self, watermark: &FinalityWatermark) -> Result<(), ProjectError> {
        while self
            .retained
            .front()
            .is_some_and(|block| block.number <= watermark.block_number)
        {
            self.settle_oldest()?;
        }
        Ok(())
    }

    fn settle_oldest(&mut self) -> Result<(), ProjectError> {
        if let Some(block) = self.retained.pop_front() {
            self.base.apply_block(&block)?;
        }
        Ok(())
    }
}

impl State {
    fn apply_block(&mut self, block: &Block) -> Result<(), ProjectError> {
        for event in &block.events {
            self.apply(event)?;
        }
        self.view.block = self.view.block.max(block.number);
        self.view.now = self.view.now.max(block.timestamp);
        Ok(())
    }

    fn apply(&mut self, event: &EventEnvelope) -> Result<(), ProjectError> {
        let typed = event.event.typed().map_err(|e| ProjectError::BadEvent {
            name: event.event.name.clone(),
            block: event.block_number,
            reason: e.source.to_string(),
        })?;
        // The event's node and job changed (a job's node too when a slot is taken or
        // given back: `node_slots`).
        if let Some(node) = typed.node_id() {
            self.changes.node(node);
        }
        if let Some(job) = typed.job_id() {
            self.changes.job(job);
        }
        match typed {
            GantryEvent::Registry(e) => self.apply_registry(e, event.block_timestamp),
            GantryEvent::Market(e) => self.apply_market(e, event),
            // The indexer could not read that log; nothing the matcher knows changed.
            GantryEvent::Unreadable(log) => tracing::warn!(
                block = event.block_number, tx = %event.tx_hash, reason = ?log.reason,
                "skipping a log the indexer could not read"
            ),
        }
        Ok(())
    }

    fn apply_registry(&mut self, event: NodeRegistryEvents, at: u64) {
        use NodeRegistryEvents as R;
        let view = &mut self.view;
        match event {
            R::NodeRegistered(e) => {
                let capabilities = Capabilities::from(&e.capabilities);
                let node = NodeView::registered(e.nodeId, e.agent, capabilities, e.stake.to(), at);
                view.nodes.insert(e.nodeId, node);
            }
            R::NodeHeartbeat(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.last_heartbeat = u64::from(e.at);
                }
            }
            R::NodeReactivated(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.status = NodeStatus::Active;
                    node.last_heartbeat = u64::from(e.at);
                }
            }
            R::NodeMarkedInactive(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.status = NodeStatus::Inactive;
                    node.inactive_since = at;
                }
            }
            R::NodeExitBegun(e) => set_status(view, e.nodeId, NodeStatus::Exiting),
            R::NodeStakeWithdrawn(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.stake = e.stake.to::<u128>();
                    if node.stake == 0 {
                        node.status = NodeStatus::Exited;
                    }
                }
            }
            R::NodeCapabilitiesUpdated(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.capabilities = Capabilities::from(&e.capabilities);
                }
            }
            R::NodeAgentChanged(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.agent = e.agent;
                }
            }
            R::NodeStakeAdded(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.stake = e.stake.to::<u128>();
                }
            }
            R::NodeSlashed(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.stake = e.stake.to::<u128>();
                }
            }
            // Money moving and roles do not change what the services decide.
            R::NodeEarningsWithdrawn(_)
            | R::FeesSwept(_)
            | R::EIP712DomainChanged(_)
            | R::RoleAdminChanged(_)
            | R::RoleGranted(_)
            | R::RoleRevoked(_)
            // The verification pool does not decide a tier-none placement.
            | R::PoolJoined(_)
            | R::PoolLeft(_) => {}
        }
    }

    fn apply_market(&mut self, event: JobMarketEvents, envelope: &EventEnvelope) {
        use JobMarketEvents as M;
        if let Some(job_id) = gantry_protocol::events::market_job_id(&event)
            && self.view.verified.contains_key(&job_id)
        {
            self.apply_verified(job_id, &event);
            return;
        }
        let (view, changes) = (&mut self.view, &mut self.changes);
        let job_id = match &event {
            M::JobPosted(e) => {
                match market::Job::posted(&e.terms, &view.policies) {
                    Ok(job) => {
                        let open = || JobView {
                            id: e.jobId,
                            terms: job.terms,
                            state: job.state,
                            barred: BTreeSet::new(),
                            posted_at: (envelope.block_number, envelope.log_index),
                            spec_error: JobSpec::from_slice(&e.spec).err().map(|e| e.to_string()),
                        };
                        if job.terms.verification.is_verified() {
                            // A verified job runs in the `Verification` and `Referees`
                            // extensions: no tier-none call applies to it; the keeper follows
                            // it apart. A refereed job's provider is placed by the planner,
                            // as a tier-none job's node is (`placing`).
                            let refereed =
                                job.terms.verification.tier == market::Verification::REFEREED;
                            view.verified.insert(
                                e.jobId,
                                VerifiedView {
                                    id: e.jobId,
                                    terms: job.terms,
                                    state: job.state,
                                    seats: market::Seats::default(),
                                    provider_revealed: false,
                                    placing: refereed.then(open),
                                },
                            );
                        } else {
                            view.jobs.insert(e.jobId, open());
                        }
                    }
                    // The market refuses a posting under an unknown policy; a stream
                    // missing its MarketParamsUpdated is not one the matcher can act on.
                    Err(error) => tracing::error!(
                        job_id = e.jobId, %error, "skipping a job posted under an unknown policy"
                    ),
                }
                return;
            }
            M::MarketParamsUpdated(e) => {
                view.policies
                    .insert(e.policyVersion, Policy::from(&e.params));
                view.heartbeat_timeout = u64::from(e.params.heartbeatTimeout);
                return;
            }
            M::JobCompleted(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.completed_jobs += 1;
                }
                e.jobId
            }
            M::DisputeResolved(e) => {
                if !e.providerWon
                    && let Some(node) = view.nodes.get_mut(&e.nodeId)
                {
                    node.failed_jobs += 1;
                }
                e.jobId
            }
            M::JobReclaimed(e) => {
                if let Some(node) = view.nodes.get_mut(&e.nodeId) {
                    node.failed_jobs += 1;
                }
                if let Some(job) = view.jobs.get_mut(&e.jobId) {
                    job.barred.insert(e.nodeId);
                }
                e.jobId
            }
            M::JobRejected(e) => {
                if let Some(job) = view.jobs.get_mut(&e.jobId) {
                    job.barred.insert(e.nodeId);
                }
                e.jobId
            }
            M::JobAssigned(e) => e.jobId,
            M::ResultSubmitted(e) => e.jobId,
            M::JobDisputed(e) => e.jobId,
            M::JobRequeued(e) => e.jobId,
            M::JobFailed(e) => e.jobId,
            M::JobCancelled(e) => e.jobId,
            M::JobExpired(e) => e.jobId,
            // The registry's events arrive as such; money and roles change no decision.
            M::NodeSlashed(_)
            | M::NodeMarkedInactive(_)
            | M::Deposited(_)
            | M::Withdrawn(_)
            | M::TreasuryWithdrawn(_)
            | M::PausedSet(_)
            | M::RoleAdminChanged(_)
            | M::RoleGranted(_)
            | M::RoleRevoked(_)
            | M::EIP712DomainChanged(_)
            // Verified jobs' own events (`apply_verified`), and their rules.
            | M::VerifiedJobPosted(_)
            | M::DrawArmed(_)
            | M::SeatDrawn(_)
            | M::Drawn(_)
            | M::SealCommitted(_)
            | M::SeatFreed(_)
            | M::SeatVacated(_)
            | M::HoldLocked(_)
            | M::HoldReleased(_)
            | M::HoldForfeited(_)
            | M::RefereesRequested(_)
            | M::RefereesDecided(_)
            | M::RevealsOpened(_)
            | M::ResultRevealed(_)
            | M::ProviderRevealed(_)
            | M::SeatReleased(_)
            | M::ReplicaPaid(_)
            | M::ReplicaForfeited(_)
            | M::JobVerified(_)
            | M::VerifyParamsSet(_) => return,
        };
        let Some(job) = view.jobs.get_mut(&job_id) else {
            return;
        };
        let before = job.state;
        job.state.apply(&event);
        let after = job.state;
        // A node's slot is taken from assignment to answer (or requeue, or failure).
        if after.status == JobStatus::Assigned && before.status != JobStatus::Assigned {
            node_slots(view, changes, after.node_id, 1);
        } else if before.status == JobStatus::Assigned && after.status != JobStatus::Assigned {
            node_slots(view, changes, before.node_id, -1);
        }
        if after.status.is_settled() {
            view.jobs.remove(&job_id);
        }
    }
}

impl State {
    /// One of a verified job's events: its words and seats as the market wrote them; a
    /// refereed provider takes a slot of its node from assignment to answer, as a
    /// tier-none job's does.
    fn apply_verified(&mut self, job_id: u64, event: &JobMarketEvents) {
        use JobMarketEvents as M;
        let (view, changes) = (&mut self.view, &mut self.changes);
        let Some(job) = view.verified.get_mut(&job_id) else {
            return;
        };
        let before = job.state;
        job.state.apply(event);
        job.seats.apply(&job.terms, event);
        match event {
            M::ProviderRevealed(_) => job.provider_revealed = true,
            // The decision deletes the provider's revealed digest.
            M::RefereesDecided(_) => job.provider_revealed = false,
            _ => {}
        }
        if let Some(placing) = job.placing.as_mut() {
            placing.state = job.state;
            // A provider that gave it back or was reclaimed is barred, as on a tier-none job.
            match event {
                M::JobRejected(e) => {
                    placing.barred.insert(e.nodeId);
                }
                M::JobReclaimed(e) => {
                    placing.barred.insert(e.nodeId);
                }
                _ => {}
            }
        }
        let after = job.state;
        if after.status.is_settled() {
            view.verified.remove(&job_id);
        }
        let (node, counted) = match event {
            M::JobCompleted(e) => (e.nodeId, Some(true)),
            M::JobReclaimed(e) => (e.nodeId, Some(false)),
            M::DisputeResolved(e) if !e.providerWon => (e.nodeId, Some(false)),
            _ => (0, None),
        };
        if let Some(completed) = counted
            && let Some(node) = view.nodes.get_mut(&node)
        {
            if completed {
                node.completed_jobs += 1;
            } else {
                node.failed_jobs += 1;
            }
        }
        if after.status == JobStatus::Assigned && before.status != JobStatus::Assigned {
            node_slots(view, changes, after.node_id, 1);
        } else if before.status == JobStatus::Assigned && after.status != JobStatus::Assigned {
            node_slots(view, changes, before.node_id, -1);
        }
    }
}

fn node_slots(view: &mut View, changes: &mut Changes, node: u64, delta: i32) {
    changes.node(node);
    if let Some(node) = view.nodes.get_mut(&node) {
        node.active_jobs = node.active_jobs.saturating_add_signed(delta);
    }
}

fn set_status(view: &mut View, node: u64, status: NodeStatus) {
    if let Some(node) = view.nodes.get_mut(&node) {
        node.status = status;
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, Bytes, aliases::U40, aliases::U96};
    use alloy::sol_types::SolEvent;
    use gantry_protocol::bindings::{JobMarket, NodeRegistry};
    use gantry_protocol::eligibility::Requirements;
    use gantry_protocol::envelope::{ENVELOPE_VERSION, OrphanedBlock};
    use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
    use gantry_protocol::market::Terms;

    use super::*;

    struct Chain {
        projection: Projection,
        block: u64,
        pending: Vec<EventEnvelope>,
    }

    impl Chain {
        fn new() -> Self {
            Self {
                projection: Projection::default(),
                block: 0,
                pending: Vec::new(),
            }
        }

        fn market<E: SolEvent + serde::Serialize>(&mut self, event: E) {
            self.event(ContractKind::Market, event_name::<E>(), event);
        }

        fn registry<E: SolEvent + serde::Serialize>(&mut self, event: E) {
            self.event(ContractKind::Registry, event_name::<E>(), event);
        }

        fn event<T: serde::Serialize>(&mut self, contract: ContractKind, name: &str, event: T) {
            self.pending.push(EventEnvelope {
                v: ENVELOPE_VERSION,
                chain_id: 1,
                block_number: self.block + 1,
                block_hash: B256::with_last_byte(self.block as u8 + 1),
                block_timestamp: 1_000 + self.block + 1,
                tx_hash: B256::ZERO,
                log_index: self.pending.len() as u64,
                event: DecodedEvent {
                    contract,
                    name: name.into(),
                    key: String::new(),
                    data: serde_json::to_value(event).unwrap(),
                },
            });
        }

        /// Commits the pending events as the next block; returns its time.
        fn commit_at(&mut self) -> u64 {
            self.commit();
            1_000 + self.block
        }

        /// Orphans block 2 (`hash`), back to block 1.
        fn orphan_second_block(&mut self, hash: B256) {
            self.projection
                .on_retraction(&Retraction {
                    v: ENVELOPE_VERSION,
                    chain_id: 1,
                    common_ancestor: 1,
                    orphaned: vec![OrphanedBlock { number: 2, hash }],
                })
                .unwrap();
        }

        /// Commits the pending events as the next block; returns its hash.
        fn commit(&mut self) -> B256 {
            self.block += 1;
            let hash = B256::with_last_byte(self.block as u8);
            let events = std::mem::take(&mut self.pending);
            let count = events.len() as u32;
            for event in events {
                self.projection.on_event(event);
            }
            self.projection
                .on_commit(&BlockCommit {
                    v: ENVELOPE_VERSION,
                    chain_id: 1,
                    block_number: self.block,
                    block_hash: hash,
                    parent_hash: B256::with_last_byte(self.block as u8 - 1),
                    block_timestamp: 1_000 + self.block,
                    event_count: count,
                })
                .unwrap();
            hash
        }
    }

    fn registered(id: u64) -> NodeRegistry::NodeRegistered {
        NodeRegistry::NodeRegistered {
            nodeId: id,
            operator: Address::repeat_byte(1),
            agent: Address::repeat_byte(2),
            capabilities: NodeRegistry::NodeCapabilities {
                gpuModel: B256::repeat_byte(9),
                gpuCount: 8,
                vramMiB: 81_920,
                cpuCores: 64,
                ramMiB: 524_288,
                pricePerGpuHour: U96::from(2),
                maxConcurrentJobs: 2,
                engines: gantry_protocol::eligibility::Engines::ALL.0,
            },
            metadataURI: String::new(),
            stake: U96::from(500),
            at: 0,
        }
    }

    fn params() -> JobMarket::MarketParamsUpdated {
        JobMarket::MarketParamsUpdated {
            params: JobMarket::MarketParams {
                treasury: Address::repeat_byte(4),
                challengeWindow: 3_600,
                protocolFeeBps: 250,
                maxAttempts: 3,
                disputeBond: U96::from(10),
                disputePeriod: 86_400,
                slashBps: 1_000,
                minStake: U96::from(100),
                heartbeatTimeout: 300,
                unbondingPeriod: 864_000,
            },
            policyVersion: 1,
        }
    }

    fn terms() -> Terms {
        Terms {
            submitter: Address::repeat_byte(3),
            bounty: 100,
            spec_hash: B256::ZERO,
            requirements: Requirements {
                min_gpu_count: 1,
                max_price_per_gpu_hour: 5,
                max_runtime: 60,
                priority: 5,
                ..Requirements::default()
            },
            deadline: 10_000,
            policy: 1,
            verification: gantry_protocol::market::Verification::NONE,
        }
    }

    fn posted(id: u64) -> JobMarket::JobPosted {
        JobMarket::JobPosted {
            jobId: id,
            submitter: Address::repeat_byte(3),
            terms: terms().pack(),
            fromCredits: U96::ZERO,
            spec: Bytes::new(),
        }
    }

    fn assigned(job: u64, node: u64, until: u64) -> JobMarket::JobAssigned {
        JobMarket::JobAssigned {
            jobId: job,
            nodeId: node,
            claimed: false,
            until: U40::from(until),
        }
    }

    fn requeued(job: u64, faults: u8, barred: u8) -> JobMarket::JobRequeued {
        JobMarket::JobRequeued {
            jobId: job,
            faults,
            barred,
        }
    }

    #[test]
    fn posted_jobs_are_open_until_assigned_and_slots_follow_the_lifecycle() {
        // Given a node and a posted job,
        let mut chain = Chain::new();
        chain.market(params());
        chain.registry(registered(1));
        chain.market(posted(7));
        chain.commit();
        let view = chain.projection.view();
        assert!(view.open_job(7).is_some());
        assert_eq!(view.jobs[&7].state.hash(), {
            let mut policies = market::Policies::default();
            policies.insert(1, Policy::from(&params().params));
            market::Job::posted(&terms().pack(), &policies)
                .unwrap()
                .state
                .hash()
        });

        // when it is assigned, the job leaves the queue and takes a slot;
        chain.market(assigned(7, 1, 1_062));
        chain.commit();
        let view = chain.projection.view();
        assert_eq!(view.open_jobs().count(), 0);
        assert_eq!(view.jobs[&7].state.until, 1_062);
        assert_eq!(view.nodes[&1].active_jobs, 1);

        // a reject requeues it, bars the node and frees the slot.
        chain.market(JobMarket::JobRejected {
            jobId: 7,
            nodeId: 1,
            reason: "bad image".into(),
        });
        chain.market(requeued(7, 0, 1));
        chain.commit();
        let view = chain.projection.view();
        let job = view.open_job(7).expect("open again");
        assert_eq!((job.state.faults, job.state.barred), (0, 1));
        assert!(job.barred.contains(&1));
        assert_eq!(view.nodes[&1].active_jobs, 0);
    }

    #[test]
    fn reclaims_free_the_slot_and_settled_jobs_leave_the_view() {
        // Given a node running two jobs,
        let mut chain = Chain::new();
        chain.market(params());
        chain.registry(registered(1));
        chain.market(posted(7));
        chain.market(posted(8));
        chain.market(assigned(7, 1, 1_061));
        chain.market(assigned(8, 1, 1_061));
        chain.commit();

        // when it goes inactive, one job is reclaimed and requeued, the other (out of
        // attempts) reclaimed and failed,
        chain.registry(NodeRegistry::NodeMarkedInactive {
            nodeId: 1,
            lastHeartbeat: 0,
            by: Address::repeat_byte(5),
        });
        for (job, kind) in [(7, 0_u8), (8, 200)] {
            chain.market(JobMarket::JobReclaimed {
                jobId: job,
                nodeId: 1,
                kind,
                by: Address::repeat_byte(5),
            });
        }
        chain.market(requeued(7, 1, 1));
        chain.market(JobMarket::JobFailed {
            jobId: 8,
            kind: 0,
            refund: U96::from(100),
        });
        let at = chain.commit_at();

        // then one is open again, the other gone, the slots are free, both failures
        // counted, and the node's inactivity dated.
        let view = chain.projection.view();
        assert_eq!(view.open_jobs().map(|j| j.id).collect::<Vec<_>>(), [7]);
        assert!(!view.jobs.contains_key(&8));
        assert_eq!(view.nodes[&1].active_jobs, 0);
        assert_eq!(view.nodes[&1].failed_jobs, 2);
        assert_eq!(view.nodes[&1].inactive_since, at);
    }

    #[test]
    fn events_wait_for_their_commit_and_retractions_undo_blocks() {
        let mut chain = Chain::new();
        chain.market(params());
        chain.registry(registered(1));
        chain.commit();
        chain.market(posted(7));
        let orphan = chain.commit();
        assert_eq!(chain.projection.view().open_jobs().count(), 1);

        // An event without its commit changes nothing.
        chain
            .projection
            .on_event(chain.projection.retained[0].events[1].clone());
        assert_eq!(chain.projection.view().nodes.len(), 1);

        chain.orphan_second_block(orphan);
        let view = chain.projection.view();
        assert!(view.jobs.is_empty(), "the orphaned posting is gone");
        assert_eq!(view.nodes.len(), 1, "the canonical registration stays");
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config::with_cases(128))]

        /// Whatever the history, every node and job that differs between two views is
        /// named by the changes taken in between (the incremental planner and the claims
        /// look at nothing else).
        #[test]
        fn changes_name_everything_that_changed(
            steps in proptest::collection::vec((0u8..12, proptest::prelude::any::<usize>(), proptest::prelude::any::<usize>()), 1..60),
        ) {
            let mut chain = Chain::new();
            chain.market(params());
            chain.commit();
            let _ = chain.projection.take_changes();
            let mut next_job = 1;
            let mut before = chain.projection.view().clone();
            for (kind, a, b) in steps {
                let view = chain.projection.view();
                let nodes: Vec<u64> = view.nodes.keys().copied().collect();
                let open: Vec<u64> = view.open_jobs().map(|j| j.id).collect();
                let running: Vec<(u64, u64)> = view
                    .jobs
                    .values()
                    .filter(|j| j.state.status == JobStatus::Assigned)
                    .map(|j| (j.id, j.state.node_id))
                    .collect();
                let pick = |n: usize, at: usize| at % n.max(1);
                match kind {
                    0 => chain.registry(registered(nodes.len() as u64 + 1)),
                    1 | 2 => {
                        chain.market(posted(next_job));
                        next_job += 1;
                    }
                    3 | 4 if !open.is_empty() && !nodes.is_empty() => {
                        let until = 1_000 + chain.block + 61;
                        chain.market(assigned(open[pick(open.len(), a)], nodes[pick(nodes.len(), b)], until));
                    }
                    5 if !running.is_empty() => {
                        let (job, node) = running[pick(running.len(), a)];
                        chain.market(JobMarket::JobRejected { jobId: job, nodeId: node, reason: String::new() });
                        chain.market(requeued(job, 0, 1));
                    }
                    6 if !running.is_empty() => {
                        let (job, node) = running[pick(running.len(), a)];
                        chain.market(JobMarket::JobReclaimed { jobId: job, nodeId: node, kind: 0, by: Address::ZERO });
                        chain.market(requeued(job, 1, 1));
                    }
                    7 if !running.is_empty() => {
                        let (job, node) = running[pick(running.len(), a)];
                        chain.market(JobMarket::ResultSubmitted { jobId: job, resultHash: B256::ZERO, resultURI: String::new(), until: U40::from(5_000) });
                        chain.market(JobMarket::JobCompleted { jobId: job, nodeId: node, payout: U96::from(90), fee: U96::from(10), kind: 0 });
                    }
                    8 if !open.is_empty() => {
                        chain.market(JobMarket::JobCancelled { jobId: open[pick(open.len(), a)], refund: U96::from(100) });
                    }
                    9 if !nodes.is_empty() => chain.registry(NodeRegistry::NodeMarkedInactive {
                        nodeId: nodes[pick(nodes.len(), a)],
                        lastHeartbeat: 0,
                        by: Address::ZERO,
                    }),
                    10 if !nodes.is_empty() => chain.registry(NodeRegistry::NodeReactivated {
                        nodeId: nodes[pick(nodes.len(), a)],
                        at: 0,
                    }),
                    11 if !nodes.is_empty() => {
                        let mut caps = registered(1).capabilities;
                        caps.maxConcurrentJobs = (b % 4) as u8;
                        caps.vramMiB = 1_024 * (1 + (b % 80) as u32);
                        chain.registry(NodeRegistry::NodeCapabilitiesUpdated {
                            nodeId: nodes[pick(nodes.len(), a)],
                            capabilities: caps,
                            metadataURI: String::new(),
                        });
                    }
                    _ => {}
                }
                if a % 3 == 0 {
                    chain.commit();
                    let changes = chain.projection.take_changes();
                    let after = chain.projection.view().clone();
                    let differ = crate::view::fixtures::diff(&before, &after);
                    proptest::prop_assert!(!changes.all);
                    for node in &differ.nodes {
                        proptest::prop_assert!(changes.nodes.contains(node), "node {node} changed unnamed");
                    }
                    for job in &differ.jobs {
                        proptest::prop_assert!(changes.jobs.contains(job), "job {job} changed unnamed");
                    }
                    before = after;
                }
            }
        }
    }

    #[test]
    fn a_retraction_says_everything_changed() {
        let mut chain = Chain::new();
        chain.market(params());
        chain.registry(registered(1));
        chain.commit();
        chain.market(posted(7));
        let orphan = chain.commit();
        let changes = chain.projection.take_changes();
        assert!(changes.all, "the first view is everything");
        assert!(chain.projection.take_changes().is_empty());
        chain.orphan_second_block(orphan);
        assert!(chain.projection.take_changes().all);
    }

    #[test]
    fn a_commit_with_missing_events_is_refused() {
        let mut projection = Projection::default();
        let error = projection
            .on_commit(&BlockCommit {
                v: ENVELOPE_VERSION,
                chain_id: 1,
                block_number: 5,
                block_hash: B256::ZERO,
                parent_hash: B256::ZERO,
                block_timestamp: 0,
                event_count: 2,
            })
            .unwrap_err();
        assert_eq!(
            error,
            ProjectError::Assemble(AssembleError::CountMismatch {
                block: 5,
                expected: 2,
                received: 0
            })
        );
    }
}
