//! A job as the market keeps it: its [`Terms`], fixed at posting, and its [`State`], which
//! the chain stores only as a hash (one word per job). Both are packed and unpacked bit for
//! bit as the contract's `JobCodec` does, and [`State::apply`] folds a job's events into
//! the state every call on that job must pass. Pure.
//!
//! ```text
//!  JobPosted(terms) ──▶ State::posted(terms, policy) ──apply(JobAssigned)──▶ … ──pack()──▶ market.submitResult(jobId, state, …)
//!  MarketParamsUpdated(params, version) ──▶ Policies
//! ```

use std::collections::BTreeMap;

use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::sol_types::SolValue;

use crate::bindings::{
    JobMarket, Referees as RefereesContract, Verification as VerificationContract,
};
use crate::eligibility::Requirements;
use crate::status::JobStatus;

/// Everything a job was posted with (`JobTerms`, unpacked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Terms {
    pub submitter: Address,
    pub bounty: u128,
    pub spec_hash: B256,
    pub requirements: Requirements,
    /// Chain time by which a result must be in.
    pub deadline: u64,
    /// The market's policy version in force at posting.
    pub policy: u32,
    /// A verified job's policy; [`Verification::NONE`] for a tier-none job.
    pub verification: Verification,
}

/// A job's verification policy (`VerifyPolicy`), kept in its terms (`limits`' high 40 bits:
/// tier 8 @248 | size 8 @240 | quorum 8 @232 | revealWindow 16 @216); all zero for tier none.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Verification {
    /// [`Verification::NONE_TIER`], [`Verification::REPLICATED`] or [`Verification::REFEREED`].
    pub tier: u8,
    /// Replicated: n, the nodes that run the job; refereed: r, the referees of a dispute.
    pub size: u8,
    /// Replicated: k, the equal reveals that decide; refereed: 0.
    pub quorum: u8,
    /// Seconds from the end of the commit phase to the end of the reveal phase.
    pub reveal_window: u16,
}

impl Verification {
    pub const NONE_TIER: u8 = 0;
    pub const REPLICATED: u8 = 1;
    pub const REFEREED: u8 = 2;
    /// Tier none: the optimistic challenge window (every job posted with `postJob`).
    pub const NONE: Self = Self {
        tier: 0,
        size: 0,
        quorum: 0,
        reveal_window: 0,
    };

    /// Whether the job is verified (served by the `Verification` extension: no
    /// `JobMarket` call, assignment or claim, applies to it).
    pub const fn is_verified(&self) -> bool {
        self.tier != Self::NONE_TIER
    }
}

fn bits(word: U256, shift: usize, width: usize) -> u128 {
    let mask = (U256::from(1u8) << width) - U256::from(1u8);
    ((word >> shift) & mask).to::<u128>()
}

/// The highest scheduling priority a job may ask for (`MarketStorage.MAX_PRIORITY`).
pub const MAX_PRIORITY: u8 = 10;
/// The longest `maxRuntime` a job may ask for, seconds (`MarketStorage.MAX_RUNTIME`).
pub const MAX_RUNTIME_SECS: u32 = 7 * 24 * 3600;

/// Why the market refuses to post a job with `r` (`MarketStorage._checkRequirements`,
/// `JobMarket_InvalidRequirements`), as the field and a reason, in the contract's order;
/// `None` when it takes them. The CLI refuses before it sends and the web app's
/// `validate.js` mirrors it, held to it by `tests/requirements_corpus.json`.
pub fn requirements_refusal(r: &JobMarket::JobRequirements) -> Option<(&'static str, String)> {
    use crate::spec::Engine;
    if r.priority == 0 || r.priority > MAX_PRIORITY {
        return Some(("priority", format!("must be 1 to {MAX_PRIORITY}")));
    }
    if r.maxRuntime == 0 || r.maxRuntime > MAX_RUNTIME_SECS {
        return Some((
            "maxRuntime",
            format!("must be 1 to {MAX_RUNTIME_SECS} seconds (7 days)"),
        ));
    }
    if r.gpuModel != B256::ZERO && r.minGpuCount == 0 {
        return Some(("minGpuCount", "a GPU model needs at least one GPU".into()));
    }
    match Engine::from_code(r.engine) {
        None => Some(("engine", format!("unknown engine {}", r.engine))),
        Some(Engine::Wasm) if r.minGpuCount != 0 || r.minVramMiB != 0 => Some((
            "minGpuCount",
            "a WASM job runs on the CPU: no GPU and no VRAM".into(),
        )),
        Some(_) => None,
    }
}

impl Terms {
    /// What posting escrowed: n bounties for a replicated job, the bounty otherwise.
    pub fn escrow(&self) -> u128 {
        if self.verification.tier == Verification::REPLICATED {
            self.bounty * u128::from(self.verification.size)
        } else {
            self.bounty
        }
    }

    /// The five words the market takes and emits.
    pub fn pack(&self) -> JobMarket::JobTerms {
        let r = &self.requirements;
        let limits = (U256::from(r.engine) << 208)
            | (U256::from(self.deadline) << 168)
            | (U256::from(r.max_runtime) << 136)
            | (U256::from(r.min_gpu_count) << 120)
            | (U256::from(r.min_vram_mib) << 88)
            | (U256::from(r.min_cpu_cores) << 72)
            | (U256::from(r.min_ram_mib) << 40)
            | (U256::from(r.priority) << 32)
            | U256::from(self.policy)
            | (U256::from(self.verification.tier) << 248)
            | (U256::from(self.verification.size) << 240)
            | (U256::from(self.verification.quorum) << 232)
            | (U256::from(self.verification.reveal_window) << 216);
        JobMarket::JobTerms {
            party: (U256::from_be_slice(self.submitter.as_slice()) << 96) | U256::from(self.bounty),
            specHash: self.spec_hash,
            gpuModel: r.gpu_model,
            limits,
            maxPricePerGpuHour: U256::from(r.max_price_per_gpu_hour),
        }
    }

    /// The terms as `JobPosted` carries them.
    pub fn unpack(t: &JobMarket::JobTerms) -> Self {
        let party = t.party.to_be_bytes::<32>();
        let l = t.limits;
        Self {
            submitter: Address::from_slice(&party[..20]),
            bounty: bits(t.party, 0, 96),
            spec_hash: t.specHash,
            requirements: Requirements {
                gpu_model: t.gpuModel,
                min_gpu_count: bits(l, 120, 16) as u16,
                min_vram_mib: bits(l, 88, 32) as u32,
                min_cpu_cores: bits(l, 72, 16) as u16,
                min_ram_mib: bits(l, 40, 32) as u32,
                max_price_per_gpu_hour: bits(t.maxPricePerGpuHour, 0, 96),
                max_runtime: bits(l, 136, 32) as u32,
                priority: bits(l, 32, 8) as u8,
                engine: bits(l, 208, 8) as u8,
            },
            deadline: bits(l, 168, 40) as u64,
            policy: bits(l, 0, 32) as u32,
            verification: Verification {
                tier: bits(l, 248, 8) as u8,
                size: bits(l, 240, 8) as u8,
                quorum: bits(l, 232, 8) as u8,
                reveal_window: bits(l, 216, 16) as u16,
            },
        }
    }

    /// keccak256(abi.encode(JobTerms)): what the state holds.
    pub fn hash(&self) -> B256 {
        keccak256(self.pack().abi_encode())
    }

    /// Whether an attempt assigned at `now` would end by the deadline.
    pub fn fits(&self, now: u64) -> bool {
        now + u64::from(self.requirements.max_runtime) <= self.deadline
    }
}

/// The rules a job gets from its policy version (`JobPolicy`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Policy {
    pub fee_bps: u16,
    pub challenge_window: u32,
    pub dispute_bond: u128,
    pub dispute_period: u32,
    pub slash_bps: u16,
    pub max_attempts: u8,
}

/// The gas limit to send a market or registry call with, from its estimate. An estimate
/// is taken against the last block; the call is mined in a later second, where its cost
/// can be higher: a reject estimated within its grace charges nothing (no stake or
/// treasury write) and charges for the time held once mined past it; a heartbeat right after
/// registration rewrites a slot that was just set. A fifth above the estimate plus one
/// fresh storage write and an event covers both; unused gas is not paid.
pub fn gas_limit(estimate: u64) -> u64 {
    estimate + estimate / 5 + 30_000
}

/// The dev network's market parameters: short windows for a local network where a demo
/// job runs in seconds; token amounts in gUSD base units (6 decimals). The unbonding
/// period is the contract's least (the longest runtime plus the longest challenge window).
/// `make dev` and the test kit deploy them; the benches and fold tests reuse them.
pub fn dev_params(treasury: alloy::primitives::Address) -> JobMarket::MarketParams {
    use alloy::primitives::aliases::U96;
    JobMarket::MarketParams {
        treasury,
        challengeWindow: 30,
        protocolFeeBps: 250,
        maxAttempts: 3,
        disputeBond: U96::from(10_000_000u64),
        disputePeriod: 300,
        slashBps: 1_000,
        minStake: U96::from(100_000_000u64),
        heartbeatTimeout: 60,
        unbondingPeriod: 10 * 24 * 3600,
    }
}

/// The dev network's verification rules (`setVerifyParams`): a pool ticket costs 100 gUSD
/// of free stake, a seat at least 20 gUSD or twice the bounty; verified bounties from
/// 1 gUSD; reveal windows from 30 s; a replicated draw needs three members.
pub fn dev_verify_params() -> VerificationContract::VerifyParams {
    use alloy::primitives::aliases::U96;
    VerificationContract::VerifyParams {
        poolFloor: U96::from(100_000_000u64),
        seatFloor: U96::from(20_000_000u64),
        seatBps: 20_000,
        minVerifiedBounty: U96::from(1_000_000u64),
        minRevealWindow: 30,
        minPool: 3,
    }
}

impl From<&JobMarket::MarketParams> for Policy {
    fn from(p: &JobMarket::MarketParams) -> Self {
        Self {
            fee_bps: p.protocolFeeBps,
            challenge_window: p.challengeWindow,
            dispute_bond: p.disputeBond.to::<u128>(),
            dispute_period: p.disputePeriod,
            slash_bps: p.slashBps,
            max_attempts: p.maxAttempts,
        }
    }
}

impl Policy {
    /// A job's dispute bond: the floor, or a tenth of the bounty if larger.
    pub fn bond(&self, bounty: u128) -> u128 {
        (bounty / 10).max(self.dispute_bond)
    }
}

/// Every policy version, folded from `MarketParamsUpdated`.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policies(BTreeMap<u32, Policy>);

impl Policies {
    pub fn insert(&mut self, version: u32, policy: Policy) {
        self.0.insert(version, policy);
    }

    pub fn get(&self, version: u32) -> Option<&Policy> {
        self.0.get(&version)
    }
}

/// A job's state (`JobState`, unpacked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct State {
    /// The hash of the job's terms.
    pub terms: B256,
    pub status: JobStatus,
    /// Attempts that ended in the node's fault.
    pub faults: u8,
    /// Nodes barred from the job (gave it back or faulted on it).
    pub barred: u8,
    /// The node of the current attempt; 0 when Open.
    pub node_id: u64,
    /// Assigned: the attempt's end; Submitted: the challenge window's end; Disputed: the
    /// arbiter's deadline; otherwise 0.
    pub until: u64,
    pub bounty: u128,
    pub fee_bps: u16,
    pub challenge_window: u32,
    /// A verified job's further words (`VerifiedState`: its state is those five words,
    /// the two above and these three); `None` for a tier-none job.
    pub verified: Option<Verified>,
}

/// The words a verified job's state adds to a tier-none job's (`VerifiedState`).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Verified {
    /// Seat i's node id at bits [48i, 48i + 47]; 0: empty.
    pub seats: U256,
    pub draw: Draw,
    /// Refereed: the seal of the provider's result once submitted (its digest is revealed
    /// only in a dispute, `ProviderRevealed`).
    pub result: B256,
}

impl Verified {
    /// The node in seat `i` (0: empty), as `JobCodec.seat` reads it.
    pub fn seat(&self, i: usize) -> u64 {
        bits(self.seats, 48 * i, 48) as u64
    }
}

/// The same five words, as the `Verification` extension's binding types them.
impl From<JobMarket::JobTerms> for VerificationContract::JobTerms {
    fn from(t: JobMarket::JobTerms) -> Self {
        Self {
            party: t.party,
            specHash: t.specHash,
            gpuModel: t.gpuModel,
            limits: t.limits,
            maxPricePerGpuHour: t.maxPricePerGpuHour,
        }
    }
}

/// The same five words, as the `Referees` extension's binding types them.
impl From<JobMarket::JobTerms> for RefereesContract::JobTerms {
    fn from(t: JobMarket::JobTerms) -> Self {
        Self {
            party: t.party,
            specHash: t.specHash,
            gpuModel: t.gpuModel,
            limits: t.limits,
            maxPricePerGpuHour: t.maxPricePerGpuHour,
        }
    }
}

impl From<VerificationContract::VerifiedState> for RefereesContract::VerifiedState {
    fn from(s: VerificationContract::VerifiedState) -> Self {
        Self {
            terms: s.terms,
            fields: s.fields,
            seats: s.seats,
            draw: s.draw,
            result: s.result,
        }
    }
}

impl From<VerificationContract::Seat> for RefereesContract::Seat {
    fn from(s: VerificationContract::Seat) -> Self {
        Self {
            fields: s.fields,
            seal: s.seal,
            digest: s.digest,
        }
    }
}

/// A verified job's `draw` word: drawBlock 40 @0 | rounds 8 @40 | commitEnd 40 @48 |
/// seatStake 96 @88 | paid 8 @184.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Draw {
    /// The first block the next round may be drawn in; 0: no round armed.
    pub draw_block: u64,
    /// Rounds drawn so far.
    pub rounds: u8,
    /// A replicated job's end of the commit phase (chain time); 0 for a refereed job
    /// before a dispute.
    pub commit_end: u64,
    /// What each seat locks of its node's stake.
    pub seat_stake: u128,
    /// Arbitrating: the referees paid from the prepay (a lost arbitration repays them).
    pub paid: u8,
}

impl Draw {
    pub fn pack(&self) -> U256 {
        U256::from(self.draw_block)
            | (U256::from(self.rounds) << 40)
            | (U256::from(self.commit_end) << 48)
            | (U256::from(self.seat_stake) << 88)
            | (U256::from(self.paid) << 184)
    }

    pub fn unpack(word: U256) -> Self {
        Self {
            draw_block: bits(word, 0, 40) as u64,
            rounds: bits(word, 40, 8) as u8,
            commit_end: bits(word, 48, 40) as u64,
            seat_stake: bits(word, 88, 96),
            paid: bits(word, 184, 8) as u8,
        }
    }
}

/// One seat of a verified job (`Seat`, unpacked): the market keeps its hash
/// (`_seats[job][seat]`), and `commitSeat`, `rejectSeat`, `reclaimSeat`, `revealSeat`,
/// `openReveals` and `decide` take it. A job's seats are folded together by [`Seats`].
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Seat {
    /// 0 (empty), [`Seat::SEATED`], [`Seat::COMMITTED`], [`Seat::REVEALED`] or
    /// [`Seat::DECLINED`].
    pub phase: u8,
    pub node_id: u64,
    /// When the seat was drawn (chain time).
    pub seated_at: u64,
    /// The end of the seat's run: its commit is due by then.
    pub until: u64,
    /// What the seat holds of its node's stake (0 once Declined).
    pub locked: u128,
    /// keccak256 of the committed result ([`seal`]); zero until committed.
    pub seal: B256,
    /// The revealed digest; zero until revealed.
    pub digest: B256,
}

impl Seat {
    pub const SEATED: u8 = 1;
    pub const COMMITTED: u8 = 2;
    pub const REVEALED: u8 = 3;
    /// Given back by its node (`rejectSeat`): its lock released, until vacated.
    pub const DECLINED: u8 = 4;

    /// The seat `SeatDrawn` announced, for a job of `terms` (the seat was drawn its max
    /// runtime before `until`).
    pub fn drawn(event: &JobMarket::SeatDrawn, terms: &Terms) -> Self {
        let until = event.until.to::<u64>();
        Self {
            phase: Self::SEATED,
            node_id: event.nodeId,
            seated_at: until.saturating_sub(u64::from(terms.requirements.max_runtime)),
            until,
            locked: event.locked.to::<u128>(),
            seal: B256::ZERO,
            digest: B256::ZERO,
        }
    }

    /// The three words the market takes (all zero for an empty seat: `Seat::default()`).
    pub fn pack(&self) -> VerificationContract::Seat {
        if self.phase == 0 {
            return VerificationContract::Seat::default();
        }
        let fields = (U256::from(self.phase) << 248)
            | (U256::from(self.node_id & ((1 << 48) - 1)) << 200)
            | (U256::from(self.seated_at) << 160)
            | (U256::from(self.until) << 120)
            | U256::from(self.locked);
        VerificationContract::Seat {
            fields,
            seal: self.seal,
            digest: self.digest,
        }
    }
}

/// A verified job's seats (at most five), folded from its events as the market writes
/// their words: [`Seats::apply`] for each of the job's events, [`Seats::list`] for the
/// full list `openReveals` and `decide` take.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
pub struct Seats(pub [Seat; 5]);

impl Seats {
    /// The seats after one of the job's events (of a job with `terms`).
    pub fn apply(&mut self, terms: &Terms, event: &JobMarket::JobMarketEvents) {
        use JobMarket::JobMarketEvents as M;
        // The market names seats 0..5 only (`revealSeat` and the rest refuse any other);
        // an event naming another is not a seat's and is skipped, never folded into one.
        let Some(i) = (match event {
            M::SeatDrawn(e) => Some(e.seat),
            M::SealCommitted(e) => Some(e.seat),
            M::ResultRevealed(e) => Some(e.seat),
            M::SeatFreed(e) => Some(e.seat),
            M::SeatVacated(e) => Some(e.seat),
            M::SeatReleased(e) => Some(e.seat),
            _ => None,
        }) else {
            return;
        };
        let Some(s) = self.0.get_mut(usize::from(i)) else {
            return;
        };
        match event {
            M::SeatDrawn(e) => *s = Seat::drawn(e, terms),
            M::SealCommitted(e) => {
                s.phase = Seat::COMMITTED;
                s.seal = e.seal;
            }
            M::ResultRevealed(e) => {
                s.phase = Seat::REVEALED;
                s.digest = e.digest;
            }
            // A decline leaves the seat Declined, its lock gone; a reclaim's lock ends
            // here and its `SeatVacated` follows.
            M::SeatFreed(e) if !e.fault => {
                s.phase = Seat::DECLINED;
                s.locked = 0;
            }
            M::SeatVacated(_) | M::SeatReleased(_) => *s = Seat::default(),
            _ => {}
        }
    }

    /// The first `n` seats' words, in order (an empty seat: zeros).
    pub fn list(&self, n: usize) -> Vec<VerificationContract::Seat> {
        self.0.iter().take(n).map(Seat::pack).collect()
    }
}

/// The seat number in a refereed provider's seal (`submitRefereedResult`,
/// `revealRefereed`): no seat's (seats are 0..5).
pub const PROVIDER_SEAT: u8 = u8::MAX;

/// A seat's seal of its result's `digest`: keccak256(abi.encode(chainid, market, jobId,
/// seat, nodeId, digest, salt)), as `revealSeat` checks it. The node id defeats a copied
/// seal; the chain and the market's address a replay elsewhere.
pub fn seal(
    chain_id: u64,
    market: Address,
    job: u64,
    seat: u8,
    node: u64,
    digest: B256,
    salt: B256,
) -> B256 {
    keccak256(
        (
            U256::from(chain_id),
            market,
            U256::from(job),
            U256::from(seat),
            U256::from(node),
            digest,
            salt,
        )
            .abi_encode(),
    )
}

/// Why an event could not be folded into a state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("policy version {0} is unknown (no MarketParamsUpdated for it was seen)")]
    UnknownPolicy(u32),
}

impl State {
    /// The state of a job just posted with `terms` under `policy`.
    pub fn posted(terms: &Terms, policy: &Policy) -> Self {
        Self {
            terms: terms.hash(),
            status: JobStatus::Open,
            faults: 0,
            barred: 0,
            node_id: 0,
            until: 0,
            bounty: terms.bounty,
            fee_bps: policy.fee_bps,
            challenge_window: policy.challenge_window,
            verified: None,
        }
    }

    /// The two words the market takes.
    pub fn pack(&self) -> JobMarket::JobState {
        let fields = (U256::from(self.status as u8) << 248)
            | (U256::from(self.faults) << 240)
            | (U256::from(self.barred) << 232)
            | (U256::from(self.node_id & ((1 << 48) - 1)) << 184)
            | (U256::from(self.until) << 144)
            | (U256::from(self.bounty) << 48)
            | (U256::from(self.fee_bps) << 32)
            | U256::from(self.challenge_window);
        JobMarket::JobState {
            terms: self.terms,
            fields,
        }
    }

    /// A packed state back; `None` when its status byte names no status.
    pub fn unpack(s: &JobMarket::JobState) -> Option<Self> {
        let f = s.fields;
        Some(Self {
            terms: s.terms,
            status: JobStatus::try_from(bits(f, 248, 8) as u8).ok()?,
            faults: bits(f, 240, 8) as u8,
            barred: bits(f, 232, 8) as u8,
            node_id: bits(f, 184, 48) as u64,
            until: bits(f, 144, 40) as u64,
            bounty: bits(f, 48, 96),
            fee_bps: bits(f, 32, 16) as u16,
            challenge_window: bits(f, 0, 32) as u32,
            verified: None,
        })
    }

    /// The five words a verified job's calls take; `None` for a tier-none job.
    pub fn pack_verified(&self) -> Option<VerificationContract::VerifiedState> {
        let verified = self.verified?;
        let two = self.pack();
        Some(VerificationContract::VerifiedState {
            terms: two.terms,
            fields: two.fields,
            seats: verified.seats,
            draw: verified.draw.pack(),
            result: verified.result,
        })
    }

    /// The word the market stores for the job: keccak256(abi.encode(JobState)), or of the
    /// `VerifiedState` for a verified job.
    pub fn hash(&self) -> B256 {
        match self.pack_verified() {
            Some(verified) => keccak256(verified.abi_encode()),
            None => keccak256(self.pack().abi_encode()),
        }
    }

    /// The state after one of the job's events, as the market moved it.
    pub fn apply(&mut self, event: &JobMarket::JobMarketEvents) {
        use JobMarket::JobMarketEvents as M;
        match event {
            M::JobAssigned(e) => {
                self.status = JobStatus::Assigned;
                self.node_id = e.nodeId;
                self.until = e.until.to::<u64>();
            }
            M::ResultSubmitted(e) => {
                self.status = JobStatus::Submitted;
                self.until = e.until.to::<u64>();
                // A refereed job keeps the result's seal in its state.
                if let Some(verified) = self.verified.as_mut() {
                    verified.result = e.resultHash;
                }
            }
            M::JobDisputed(e) => {
                self.status = JobStatus::Disputed;
                self.until = e.until.to::<u64>();
            }
            M::JobRequeued(e) => {
                self.status = JobStatus::Open;
                self.faults = e.faults;
                self.barred = e.barred;
                self.node_id = 0;
                self.until = 0;
            }
            M::JobCompleted(_) => self.settle(JobStatus::Completed),
            M::JobFailed(_) => self.settle(JobStatus::Failed),
            M::JobCancelled(_) => self.settle(JobStatus::Cancelled),
            M::JobExpired(_) => self.settle(JobStatus::Expired),
            M::VerifiedJobPosted(e) => {
                let commit_end = e.commitEnd.to::<u64>();
                if commit_end != 0 {
                    self.status = JobStatus::Committing;
                    self.until = commit_end;
                }
                self.verified = Some(Verified {
                    draw: Draw {
                        commit_end,
                        seat_stake: e.seatStake.to::<u128>(),
                        ..Draw::default()
                    },
                    ..Verified::default()
                });
            }
            M::DrawArmed(e) => {
                if let Some(verified) = self.verified.as_mut() {
                    verified.draw.draw_block = e.drawBlock.to::<u64>();
                    verified.draw.rounds = e.round;
                }
            }
            M::Drawn(e) => {
                if let Some(verified) = self.verified.as_mut() {
                    verified.seats = e.seats;
                    verified.draw.draw_block = 0;
                    verified.draw.rounds = e.round.saturating_add(1);
                }
            }
            M::SeatVacated(e) => {
                self.barred = self.barred.saturating_add(1);
                if e.fault {
                    self.faults = self.faults.saturating_add(1);
                }
                if let Some(verified) = self.verified.as_mut() {
                    verified.seats &= !(U256::from((1u64 << 48) - 1) << (48 * usize::from(e.seat)));
                }
            }
            M::RevealsOpened(e) => {
                self.status = JobStatus::Revealing;
                self.until = e.revealBy.to::<u64>();
            }
            M::JobVerified(_) => self.settle(JobStatus::Completed),
            // A refereed dispute: referees are drawn for the provider (kept in `node_id`).
            M::RefereesRequested(e) => {
                self.status = JobStatus::Committing;
                self.until = e.commitEnd.to::<u64>();
                if let Some(verified) = self.verified.as_mut() {
                    verified.seats = U256::ZERO;
                    verified.draw = Draw {
                        commit_end: e.commitEnd.to::<u64>(),
                        seat_stake: verified.draw.seat_stake,
                        ..Draw::default()
                    };
                }
            }
            // Upheld or overturned settle with their `JobCompleted` or `JobFailed`; without
            // a majority the arbiter has it.
            M::RefereesDecided(e) => {
                if e.outcome == 2 {
                    self.status = JobStatus::Arbitrating;
                    self.until = e.until.to::<u64>();
                    if let Some(verified) = self.verified.as_mut() {
                        verified.seats = U256::ZERO;
                        verified.draw.draw_block = 0;
                        verified.draw.paid = e.paid;
                    }
                }
            }
            // A seat is a word of its own, not the job's ([`Seat::apply`]), as is the
            // provider's revealed digest; pay is the node's.
            M::SeatDrawn(_)
            | M::ProviderRevealed(_)
            | M::HoldForfeited(_)
            | M::HoldLocked(_)
            | M::HoldReleased(_)
            | M::SeatFreed(_)
            | M::SealCommitted(_)
            | M::ResultRevealed(_)
            | M::SeatReleased(_)
            | M::ReplicaPaid(_)
            | M::ReplicaForfeited(_) => {}
            // Their state change (if any) comes with the events above.
            M::JobPosted(_)
            | M::JobReclaimed(_)
            | M::JobRejected(_)
            | M::DisputeResolved(_)
            | M::NodeSlashed(_)
            | M::NodeMarkedInactive(_)
            | M::Withdrawn(_)
            | M::Deposited(_)
            | crate::market_admin_events!() => {}
        }
    }

    fn settle(&mut self, status: JobStatus) {
        // The market cleared the job's word; nothing can be called on it any more.
        self.status = status;
        self.until = 0;
    }

    /// When the job was assigned (Assigned only): the one clock of the attempt.
    pub fn assigned_at(&self, terms: &Terms) -> Option<u64> {
        (self.status == JobStatus::Assigned)
            .then(|| self.until - u64::from(terms.requirements.max_runtime))
    }

    /// The chain time by which the worker stops the job (Assigned only): the job's own
    /// `timeout_secs` counted from the assignment, but never later than `until` less the
    /// `margin` the worker needs to upload and submit its answer. A job still running then
    /// has reached its own limit: the job's fault, answered with a result in time.
    pub fn stop_by(&self, terms: &Terms, timeout_secs: u64, margin: u64) -> Option<u64> {
        let assigned_at = self.assigned_at(terms)?;
        Some(
            assigned_at
                .saturating_add(timeout_secs)
                .min(self.until.saturating_sub(margin)),
        )
    }
}

/// A job as a caller needs it: its terms and its current state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Job {
    pub terms: Terms,
    pub state: State,
}

impl Job {
    /// The job `JobPosted` announced, under the policies seen so far.
    pub fn posted(terms: &JobMarket::JobTerms, policies: &Policies) -> Result<Self, FoldError> {
        let terms = Terms::unpack(terms);
        let policy = policies
            .get(terms.policy)
            .ok_or(FoldError::UnknownPolicy(terms.policy))?;
        Ok(Self {
            state: State::posted(&terms, policy),
            terms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn terms() -> impl Strategy<Value = Terms> {
        (
            any::<[u8; 20]>(),
            0u128..(1 << 96),
            any::<[u8; 32]>(),
            any::<[u8; 32]>(),
            (any::<u16>(), any::<u32>(), any::<u16>(), any::<u32>()),
            (0u128..(1 << 96), any::<u32>(), any::<u8>(), any::<u8>()),
            0u64..(1 << 40),
            any::<u32>(),
            (any::<u8>(), any::<u8>(), any::<u8>(), any::<u16>()),
        )
            .prop_map(
                |(
                    who,
                    bounty,
                    spec,
                    model,
                    (gpus, vram, cpus, ram),
                    (price, runtime, priority, engine),
                    deadline,
                    policy,
                    (tier, size, quorum, reveal_window),
                )| Terms {
                    submitter: Address::from(who),
                    bounty,
                    spec_hash: B256::from(spec),
                    requirements: Requirements {
                        gpu_model: B256::from(model),
                        min_gpu_count: gpus,
                        min_vram_mib: vram,
                        min_cpu_cores: cpus,
                        min_ram_mib: ram,
                        max_price_per_gpu_hour: price,
                        max_runtime: runtime,
                        priority,
                        engine,
                    },
                    deadline,
                    policy,
                    verification: Verification {
                        tier,
                        size,
                        quorum,
                        reveal_window,
                    },
                },
            )
    }

    proptest! {
        #[test]
        fn terms_pack_and_unpack_to_themselves(t in terms()) {
            prop_assert_eq!(Terms::unpack(&t.pack()), t);
        }

        #[test]
        fn states_pack_and_unpack_to_themselves(
            status in 1u8..=11, faults: u8, barred: u8, node in 0u64..(1 << 48),
            until in 0u64..(1 << 40), bounty in 0u128..(1 << 96), fee: u16, window: u32, terms: [u8; 32],
        ) {
            let state = State {
                terms: B256::from(terms),
                status: JobStatus::try_from(status).unwrap(),
                faults, barred, node_id: node, until, bounty, fee_bps: fee, challenge_window: window,
                verified: None,
            };
            prop_assert_eq!(State::unpack(&state.pack()), Some(state));
        }
    }

    #[test]
    fn a_posted_job_starts_open_with_its_policy() {
        let terms = Terms {
            submitter: Address::repeat_byte(7),
            bounty: 50_000_000,
            spec_hash: B256::repeat_byte(1),
            requirements: Requirements {
                max_runtime: 3600,
                priority: 5,
                ..Requirements::default()
            },
            deadline: 1_750_086_400,
            policy: 1,
            verification: Verification::NONE,
        };
        let mut policies = Policies::default();
        policies.insert(
            1,
            Policy {
                fee_bps: 250,
                challenge_window: 3600,
                ..Policy::default()
            },
        );
        let job = Job::posted(&terms.pack(), &policies).unwrap();
        assert_eq!(job.state.status, JobStatus::Open);
        assert_eq!((job.state.fee_bps, job.state.challenge_window), (250, 3600));
        assert_eq!(job.state.terms, terms.hash());
        assert!(terms.fits(1_750_086_400 - 3600));
        assert!(!terms.fits(1_750_086_400 - 3599));
        assert_eq!(
            Job::posted(&Terms { policy: 2, ..terms }.pack(), &policies),
            Err(FoldError::UnknownPolicy(2))
        );
    }

    #[test]
    fn the_worker_stops_a_job_in_time_to_answer_before_the_chain_does() {
        let terms = Terms {
            submitter: Address::ZERO,
            bounty: 1,
            spec_hash: B256::ZERO,
            requirements: Requirements {
                max_runtime: 3_600,
                ..Requirements::default()
            },
            deadline: 10_000,
            policy: 1,
            verification: Verification::NONE,
        };
        let mut state = State::posted(&terms, &Policy::default());
        assert_eq!(state.stop_by(&terms, 60, 30), None, "not assigned");
        state.apply(&JobMarket::JobMarketEvents::JobAssigned(
            JobMarket::JobAssigned {
                jobId: 1,
                nodeId: 1,
                claimed: false,
                until: alloy::primitives::aliases::U40::from(5_600u64),
            },
        ));
        assert_eq!(state.assigned_at(&terms), Some(2_000));
        // The job's own limit, when it comes first.
        assert_eq!(state.stop_by(&terms, 600, 30), Some(2_600));
        // A spec whose timeout is the whole runtime stops early enough to answer.
        assert_eq!(state.stop_by(&terms, 3_600, 30), Some(5_570));
    }

    /// A seat through its life as the market writes its word: drawn, committed, declined
    /// (its lock gone, the word the contract's `withPhase(fields, 4)` with `locked` cleared),
    /// vacated (empty: the zero entry the lists carry).
    #[test]
    fn seats_fold_as_the_market_writes_their_words() {
        use JobMarket::JobMarketEvents as M;
        use alloy::primitives::aliases::{U40, U96};
        let terms = Terms {
            submitter: Address::ZERO,
            bounty: 1,
            spec_hash: B256::ZERO,
            requirements: Requirements {
                max_runtime: 600,
                ..Requirements::default()
            },
            deadline: 10_000,
            policy: 1,
            verification: Verification::NONE,
        };
        let mut seats = Seats::default();
        seats.apply(
            &terms,
            &M::SeatDrawn(JobMarket::SeatDrawn {
                jobId: 1,
                nodeId: 7,
                seat: 1,
                until: U40::from(1_600u64),
                locked: U96::from(20u64),
            }),
        );
        let drawn = seats.0[1];
        assert_eq!((drawn.seated_at, drawn.locked), (1_000, 20));
        let word = drawn.pack().fields;
        seats.apply(
            &terms,
            &M::SeatFreed(JobMarket::SeatFreed {
                jobId: 1,
                nodeId: 7,
                seat: 1,
                fault: false,
                unlocked: U96::from(20u64),
                charged: U96::ZERO,
            }),
        );
        let locked_bits: U256 = (U256::from(1u8) << 96usize) - U256::from(1u8);
        let declined = (U256::from(Seat::DECLINED) << 248)
            | (word & ((U256::from(1u8) << 248usize) - U256::from(1u8)) & !locked_bits);
        assert_eq!(seats.0[1].pack().fields, declined);
        assert_eq!(seats.list(3)[0], VerificationContract::Seat::default());
        seats.apply(
            &terms,
            &M::SeatVacated(JobMarket::SeatVacated {
                jobId: 1,
                nodeId: 7,
                seat: 1,
                fault: false,
            }),
        );
        assert_eq!(seats.0[1], Seat::default());
        // A seat number the market never gives a seat (the provider's, 255) changes none:
        // a forged or misread event cannot corrupt the list `decide` takes.
        let before = seats;
        seats.apply(
            &terms,
            &M::ResultRevealed(JobMarket::ResultRevealed {
                jobId: 1,
                nodeId: 7,
                seat: PROVIDER_SEAT,
                digest: B256::repeat_byte(1),
            }),
        );
        assert_eq!(seats, before);
    }
}
