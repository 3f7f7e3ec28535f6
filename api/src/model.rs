//! The read model, as pure folds over the chain's events: a job's row, a node's row and an
//! account's row are what their events say, applied in chain order. The projection stores
//! each row and every applied event (with the job, node and account it touched); after a
//! reorg it refolds the affected rows from the events that remain. Amounts are decimal
//! strings, added and subtracted exactly as 256-bit integers (uint96/uint256 do not fit
//! SQL integers). The rows are what the API serves, so they are `gantry_protocol::api`
//! types.
//!
//! ```text
//!   event ──touches(event, job row before)──▶ job? node? account?
//!         ──apply_job(row, event, policy, treasury)──▶ job row  (the state by market::State::apply)
//!         ──apply_node(row, event, previous)─▶ node row
//!         ──apply_account(row, event)───────▶ account row
//!   MarketParamsUpdated ──policy_of──▶ JobPolicy (the store keeps them by version)
//!   job's attempts + workers' completion reports ──with_failure_reports──▶ its document's
//! ```

use alloy::primitives::aliases::U96;
use alloy::primitives::{Address, B256, U256};
use gantry_protocol::api::{
    AccountRow, AttemptFault, AttemptOutcome, AttemptRow, ChargeCause, ChargeRow, Completion,
    DisputeOutcome, DisputeRow, Failure, HeldStake, JobPolicy, JobRow, NodeRow, RefereesRow,
    RequirementsRow, SeatRow, SpecJson, StateWords, TermsWords, VerificationRow,
};
use gantry_protocol::bindings::JobMarket::{self, JobMarketEvents as M};
use gantry_protocol::bindings::NodeRegistry::{self, NodeRegistryEvents as R};
use gantry_protocol::eligibility::Engines;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::{EventDataError, GantryEvent};
use gantry_protocol::jobs::{CompletionReport, CompletionStatus};
use gantry_protocol::market::{Draw, Policy, State, Terms, Verification, Verified};
pub use gantry_protocol::status::{JobStatus, NodeStatus};

/// Now, unix seconds: the later of this machine's clock and `chain_time` (a dev chain may
/// run ahead of the clock).
pub fn now(chain_time: u64) -> u64 {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    wall.max(chain_time)
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

/// The rows an event is folded into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touches {
    pub job: Option<u64>,
    pub node: Option<u64>,
    /// Lowercase 0x address.
    pub account: Option<String>,
}

/// The job an event concerns: the market's job events, and a slash for a fault on a job.
pub fn job_of(event: &GantryEvent) -> Option<u64> {
    match event {
        GantryEvent::Registry(R::NodeSlashed(e)) => Some(e.jobId),
        GantryEvent::Market(M::NodeSlashed(e)) => Some(e.jobId),
        other => other.job_id(),
    }
}

/// The rows `event` touches, given the row of its job before it ([`job_of`]): a result
/// frees a slot of the job's node, and a refund or a returned bond goes to the job's
/// submitter, which those events do not name.
pub fn touches(event: &GantryEvent, job: Option<&JobRow>) -> Touches {
    let job_id = job_of(event);
    let node_of_job = job.and_then(|j| j.node_id);
    let submitter = job.map(|j| j.submitter.to_lowercase());
    let (node, account) = match event {
        GantryEvent::Market(market) => match market {
            M::JobPosted(e) => (None, Some(account(e.submitter))),
            M::Deposited(e) => (None, Some(account(e.account))),
            M::Withdrawn(e) => (None, Some(account(e.account))),
            M::ResultSubmitted(_) => (node_of_job, None),
            M::JobDisputed(e) => (Some(e.nodeId), submitter),
            M::DisputeResolved(e) => (Some(e.nodeId), submitter),
            M::JobFailed(_) | M::JobCancelled(_) | M::JobExpired(_) => (None, submitter),
            M::JobAssigned(e) => (Some(e.nodeId), None),
            M::JobCompleted(e) => (Some(e.nodeId), None),
            M::JobReclaimed(e) => (Some(e.nodeId), None),
            M::JobRejected(e) => (Some(e.nodeId), None),
            M::NodeSlashed(e) => (Some(e.nodeId), None),
            M::NodeMarkedInactive(e) => (Some(e.nodeId), None),
            M::JobRequeued(_)
            | M::VerifiedJobPosted(_)
            | M::DrawArmed(_)
            | M::Drawn(_)
            | M::RevealsOpened(_)
            | gantry_protocol::market_admin_events!() => (None, None),
            M::SeatDrawn(e) => (Some(e.nodeId), None),
            M::SealCommitted(e) => (Some(e.nodeId), None),
            M::ResultRevealed(e) => (Some(e.nodeId), None),
            M::ProviderRevealed(e) => (Some(e.nodeId), None),
            M::SeatFreed(e) => (Some(e.nodeId), None),
            M::SeatVacated(e) => (Some(e.nodeId), None),
            M::HoldLocked(e) => (Some(e.nodeId), None),
            M::HoldReleased(e) => (Some(e.nodeId), None),
            M::HoldForfeited(e) => (Some(e.nodeId), submitter),
            M::RefereesRequested(e) => (Some(e.nodeId), submitter),
            M::RefereesDecided(e) => (Some(e.nodeId), submitter),
            M::SeatReleased(e) => (Some(e.nodeId), None),
            M::ReplicaPaid(e) => (Some(e.nodeId), None),
            M::ReplicaForfeited(e) => (Some(e.nodeId), None),
            M::JobVerified(_) => (None, submitter),
        },
        GantryEvent::Registry(_) => (event.node_id(), None),
        GantryEvent::Unreadable(_) => (None, None),
    };
    Touches {
        job: job_id,
        node,
        account,
    }
}

/// The policy version a `JobPosted` names (the one whose rules the job gets).
pub fn posted_policy(event: &GantryEvent) -> Option<u32> {
    match event {
        GantryEvent::Market(M::JobPosted(e)) => Some(Terms::unpack(&e.terms).policy),
        _ => None,
    }
}

/// The policy a `MarketParamsUpdated` announces.
pub fn policy_of(event: &JobMarket::MarketParamsUpdated) -> JobPolicy {
    let policy = Policy::from(&event.params);
    JobPolicy {
        version: u64::from(event.policyVersion),
        fee_bps: u64::from(policy.fee_bps),
        challenge_window: u64::from(policy.challenge_window),
        dispute_bond: policy.dispute_bond.to_string(),
        dispute_period: u64::from(policy.dispute_period),
        slash_bps: u64::from(policy.slash_bps),
        max_attempts: u64::from(policy.max_attempts),
    }
}

/// Applies an event to its job's row (`None` before its `JobPosted`). `policy` is the
/// policy a `JobPosted` names, if the store knows it, and `treasury` the market's treasury
/// account when a `NodeSlashed` was emitted (where the slash went); other events read
/// neither. Events that do not concern jobs leave the row as is.
pub fn apply_job(
    row: Option<JobRow>,
    event: &EventEnvelope,
    typed: &GantryEvent,
    policy: Option<&JobPolicy>,
    treasury: Option<&str>,
) -> Option<JobRow> {
    apply_job_reading(row, event, typed, policy, treasury, &mut Specs::default())
}

/// [`apply_job`], with the specs read already (a `JobPosted`'s spec is read through
/// `specs`, and kept there).
pub fn apply_job_reading(
    row: Option<JobRow>,
    event: &EventEnvelope,
    typed: &GantryEvent,
    policy: Option<&JobPolicy>,
    treasury: Option<&str>,
    specs: &mut Specs,
) -> Option<JobRow> {
    let block = event.block_number;
    let at = event.block_timestamp;
    let market = match typed {
        GantryEvent::Market(M::JobPosted(e)) => {
            return Some(posted(e, block, at, policy, specs.read(&e.spec)));
        }
        GantryEvent::Market(market) => market,
        // A slash on the job: the amount of the charge its reject, reclaim or lost
        // dispute (the event before it in the transaction) announced.
        GantryEvent::Registry(R::NodeSlashed(e)) => {
            let mut job = row?;
            if !slashed_seat(&mut job, e.nodeId, &e.amount.to_string()) {
                charged(&mut job, e.nodeId, e.amount, at);
                slashed_on_attempt(&mut job, e.nodeId, e.amount, treasury);
            }
            touched(&mut job, block, at);
            return Some(job);
        }
        GantryEvent::Registry(_) | GantryEvent::Unreadable(_) => return row,
    };
    let mut job = row?;
    // An attempt's clock stops at its result, reclaim or rejection.
    if job.status == JobStatus::Assigned
        && matches!(
            market,
            M::ResultSubmitted(_) | M::JobReclaimed(_) | M::JobRejected(_)
        )
        && let Some(assigned_at) = job.assigned_at
    {
        job.gpu_seconds += at.saturating_sub(assigned_at) * job.gpus;
    }
    match market {
        M::JobAssigned(e) => {
            job.attempts += 1;
            job.claimed = e.claimed;
            let assigned_at = e.until.to::<u64>().saturating_sub(job.max_runtime);
            job.assigned_at = Some(assigned_at);
            job.result_hash = None;
            job.result_uri = None;
            job.attempt_rows.push(AttemptRow {
                attempt: job.attempts,
                node_id: e.nodeId,
                claimed: e.claimed,
                assigned_at,
                slashed: "0".into(),
                ..AttemptRow::default()
            });
        }
        M::ResultSubmitted(e) => {
            job.result_hash = Some(hex(e.resultHash));
            job.result_uri = Some(e.resultURI.clone());
            if let Some(node) = job.node_id {
                ended(&mut job, node, at, AttemptOutcome::Submitted, None);
            }
        }
        M::JobDisputed(e) => {
            job.dispute = Some(DisputeRow {
                bond: e.bond.to_string(),
                exposure: e.exposure.to_string(),
                disputed_at: at,
                deadline: e.until.to::<u64>(),
                outcome: None,
            });
        }
        M::DisputeResolved(e) => {
            if let Some(dispute) = &mut job.dispute {
                dispute.outcome = Some(DisputeOutcome {
                    provider_won: e.providerWon,
                    lapsed: e.lapsed,
                    bond_to_submitter: e.bondToSubmitter.to_string(),
                    bond_to_provider: e.bondToProvider.to_string(),
                    by: e.by.to_string(),
                    at,
                });
            }
            if !e.providerWon {
                charge(&mut job, e.nodeId, ChargeCause::DisputeLost, at);
                // The attempt ended at its result; the arbiter's decision recasts it.
                if let Some(attempt) = attempt_of(&mut job, e.nodeId) {
                    attempt.outcome = AttemptOutcome::DisputeLost;
                    attempt.fault = AttemptFault::Node;
                    attempt.reason =
                        Some("the arbiter decided the dispute for the submitter".into());
                }
            }
        }
        M::JobCompleted(e) => {
            job.payout = Some(e.payout.to_string());
            job.fee = Some(e.fee.to_string());
            job.completion = Completion::from_kind(e.kind);
        }
        M::JobReclaimed(e) => {
            let cause = ChargeCause::of_reclaim(e.kind);
            let (reason, outcome) = match cause {
                Some(ChargeCause::NodeInactive) => (
                    "the node was marked inactive",
                    AttemptOutcome::ReclaimedNodeInactive,
                ),
                Some(ChargeCause::RuntimeExceeded) => (
                    "the attempt ran past its runtime",
                    AttemptOutcome::ReclaimedRuntimeExceeded,
                ),
                _ => ("reclaimed", AttemptOutcome::ReclaimedRuntimeExceeded),
            };
            job.reason = Some(reason.into());
            ended(&mut job, e.nodeId, at, outcome, Some(reason.into()));
            job.faults += 1;
            bar(&mut job, e.nodeId);
            charge(
                &mut job,
                e.nodeId,
                cause.unwrap_or(ChargeCause::RuntimeExceeded),
                at,
            );
        }
        M::JobRejected(e) => {
            job.reason = Some(e.reason.clone());
            ended(
                &mut job,
                e.nodeId,
                at,
                AttemptOutcome::Rejected,
                Some(e.reason.clone()),
            );
            bar(&mut job, e.nodeId);
            charge(&mut job, e.nodeId, ChargeCause::Reject, at);
        }
        M::JobRequeued(e) => {
            debug_assert_eq!(
                (job.faults, job.barred),
                (u64::from(e.faults), u64::from(e.barred)),
                "the row counts what the market counts"
            );
        }
        M::JobFailed(e) => {
            job.refund = Some(e.refund.to_string());
            job.failure = Failure::from_kind(e.kind);
        }
        M::JobCancelled(e) => job.refund = Some(e.refund.to_string()),
        M::JobExpired(e) => job.refund = Some(e.refund.to_string()),
        // The registry's slash, read as the market's (the same event in both ABIs).
        M::NodeSlashed(e) => {
            if !slashed_seat(&mut job, e.nodeId, &e.amount.to_string()) {
                charged(&mut job, e.nodeId, e.amount, at);
                slashed_on_attempt(&mut job, e.nodeId, e.amount, treasury);
            }
        }
        M::JobVerified(e) => {
            job.refund = Some(e.refund.to_string());
            job.completion = Some(Completion::Verified);
            if let Some(row) = job.verification.as_mut() {
                row.verified_digest = Some(hex(e.digest));
                row.agreed = Some(u64::from(e.agreed));
            }
        }
        // Seats and the referees' dispute; the job's words are the shared fold's (below).
        M::SeatDrawn(_)
        | M::SealCommitted(_)
        | M::ResultRevealed(_)
        | M::SeatFreed(_)
        | M::SeatReleased(_)
        | M::ReplicaPaid(_)
        | M::ReplicaForfeited(_)
        | M::RefereesRequested(_)
        | M::RefereesDecided(_)
        | M::ProviderRevealed(_) => {
            let max_runtime = job.max_runtime;
            if let Some(row) = job.verification.as_mut() {
                seat_event(row, market, max_runtime, at);
            }
        }
        M::VerifiedJobPosted(_)
        | M::DrawArmed(_)
        | M::Drawn(_)
        | M::SeatVacated(_)
        | M::HoldLocked(_)
        | M::HoldReleased(_)
        | M::HoldForfeited(_)
        | M::RevealsOpened(_) => {}
        M::JobPosted(_)
        | M::NodeMarkedInactive(_)
        | M::Deposited(_)
        | M::Withdrawn(_)
        | gantry_protocol::market_admin_events!() => return Some(job),
    }
    // The state as the market moves it: the one fold every consumer shares.
    let mut state = state_of(&job);
    state.apply(market);
    job.status = state.status;
    job.node_id = (state.node_id != 0).then_some(state.node_id);
    job.until = (state.until != 0).then_some(state.until);
    if let (Some(row), Some(verified)) = (job.verification.as_mut(), state.verified) {
        set_verified(row, &verified);
    }
    set_state(&mut job, &state);
    touched(&mut job, block, at);
    Some(job)
}

/// A verified job's seat or dispute event, into its row: each seat's holder gets a row
/// when drawn, which its commit, reveal, decline, reclaim and the decision fill in.
fn seat_event(row: &mut VerificationRow, event: &M, max_runtime: u64, at: u64) {
    let role = if row.tier == "refereed" {
        "referee"
    } else {
        "replica"
    };
    match event {
        M::SeatDrawn(e) => {
            let until = e.until.to::<u64>();
            row.seat_rows.push(SeatRow {
                seat: u64::from(e.seat),
                node_id: e.nodeId,
                role: role.into(),
                seated_at: until.saturating_sub(max_runtime),
                until,
                locked: e.locked.to_string(),
                outcome: "seated".into(),
                ..SeatRow::default()
            });
        }
        M::SealCommitted(e) => {
            if let Some(seat) = live(row, e.seat) {
                seat.committed_at = Some(at);
                seat.seal = Some(hex(e.seal));
                seat.outcome = "committed".into();
            }
        }
        M::ResultRevealed(e) => {
            if let Some(seat) = live(row, e.seat) {
                seat.revealed_at = Some(at);
                seat.digest = Some(hex(e.digest));
                seat.outcome = "revealed".into();
            }
        }
        M::SeatFreed(e) => {
            if let Some(seat) = live(row, e.seat) {
                seat.outcome = if e.fault { "reclaimed" } else { "declined" }.into();
                seat.charged = Some(e.charged.to_string());
            }
        }
        // The decision: released, then paid (`ReplicaPaid`) or slashed (`NodeSlashed`,
        // `slashed_seat`); a seat neither is `unpaid`.
        M::SeatReleased(e) => {
            if let Some(seat) = live(row, e.seat) {
                seat.outcome = "unpaid".into();
            }
        }
        M::ReplicaPaid(e) => {
            if let Some(seat) = decided_seat(row, e.nodeId) {
                seat.outcome = "paid".into();
                seat.payout = Some(e.payout.to_string());
            }
        }
        // A Docker job's seat that revealed apart from the quorum: not slashed, its share
        // to the treasury.
        M::ReplicaForfeited(e) => {
            if let Some(seat) = decided_seat(row, e.nodeId) {
                seat.outcome = "parted".into();
            }
        }
        M::RefereesRequested(e) => {
            row.referees = Some(RefereesRow {
                bond: e.bond.to_string(),
                prepay: e.prepay.to_string(),
                requested_at: at,
                commit_end: e.commitEnd.to::<u64>(),
                ..RefereesRow::default()
            });
        }
        M::ProviderRevealed(e) => {
            if let Some(referees) = row.referees.as_mut() {
                referees.provider_digest = Some(hex(e.digest));
            }
        }
        M::RefereesDecided(e) => {
            if let Some(referees) = row.referees.as_mut() {
                referees.outcome = Some(
                    match e.outcome {
                        0 => "upheld",
                        1 => "overturned",
                        2 => "arbiter",
                        3 => "notRevealed",
                        _ => "unknown",
                    }
                    .into(),
                );
                referees.digest = (!e.digest.is_zero()).then(|| hex(e.digest));
                referees.paid = u64::from(e.paid);
                referees.to_submitter = Some(e.toSubmitter.to_string());
                referees.to_provider = Some(e.toProvider.to_string());
            }
        }
        _ => {}
    }
}

/// The live holder of seat `seat` (the last row drawn into it).
fn live(row: &mut VerificationRow, seat: u8) -> Option<&mut SeatRow> {
    row.seat_rows
        .iter_mut()
        .rev()
        .find(|s| s.seat == u64::from(seat))
}

/// The seat node `node` held until the decision now under way (released, not yet paid or
/// slashed).
fn decided_seat(row: &mut VerificationRow, node: u64) -> Option<&mut SeatRow> {
    row.seat_rows.iter_mut().rev().find(|s| {
        s.node_id == node && s.outcome == "unpaid" && s.payout.is_none() && s.charged.is_none()
    })
}

/// A slash of node `node` in a verified job's decision: its released seat's (not one of
/// the job's attempts' charges). Whether it was one.
fn slashed_seat(job: &mut JobRow, node: u64, amount: &str) -> bool {
    let Some(seat) = job
        .verification
        .as_mut()
        .and_then(|row| decided_seat(row, node))
    else {
        return false;
    };
    seat.outcome = "slashed".into();
    seat.charged = Some(amount.to_owned());
    true
}

/// A posted spec as a job's row shows it: `(spec, spec_text)`, the object when it is a
/// spec workers run, else the bytes as text.
type PostedSpec = (Option<SpecJson>, Option<String>);

/// Posted specs read, by their bytes. Reading one parses it twice and checks its
/// image reference, a third of a fold's time with distinct specs: a range's postings are
/// read before its fold ([`Specs::add`]), each distinct spec once, and each posting then
/// takes its copy (the last one takes it out). A spec not added is read when its posting
/// is folded.
#[derive(Debug, Default)]
pub struct Specs {
    read: std::collections::HashMap<alloy::primitives::Bytes, (PostedSpec, usize)>,
}

impl Specs {
    /// Room for `postings` distinct specs.
    pub fn with_capacity(postings: usize) -> Self {
        Self {
            read: std::collections::HashMap::with_capacity(postings),
        }
    }

    /// Reads `bytes` (once, however many postings add it) for a posting to take.
    pub fn add(&mut self, bytes: &alloy::primitives::Bytes) {
        self.read
            .entry(bytes.clone())
            .or_insert_with(|| (read_spec(bytes), 0))
            .1 += 1;
    }

    fn read(&mut self, bytes: &alloy::primitives::Bytes) -> PostedSpec {
        if let Some((spec, postings)) = self.read.get_mut(bytes)
            && *postings > 1
        {
            *postings -= 1;
            return spec.clone();
        }
        match self.read.remove(bytes) {
            Some((spec, _)) => spec,
            None => read_spec(bytes),
        }
    }
}

/// The spec as an object only when it is one workers run (no key given twice, no unknown
/// field: what JSON parsing alone would let through and show differently).
fn read_spec(bytes: &[u8]) -> PostedSpec {
    let spec = gantry_protocol::spec::JobSpec::from_slice(bytes)
        .ok()
        .and_then(|_| SpecJson::from_posted(bytes));
    match spec {
        Some(spec) => (Some(spec), None),
        // NUL replaced too: PostgreSQL's `jsonb`, which builds the job's document, takes
        // no `\u0000` (a valid spec has none: its paths, command and env refuse it).
        None => (
            None,
            Some(String::from_utf8_lossy(bytes).replace('\0', "\u{FFFD}")),
        ),
    }
}

/// The row of a job just posted, its spec read already.
fn posted(
    e: &JobMarket::JobPosted,
    block: u64,
    at: u64,
    policy: Option<&JobPolicy>,
    (spec, spec_text): PostedSpec,
) -> JobRow {
    let terms = Terms::unpack(&e.terms);
    let r = &terms.requirements;
    let policy = policy.filter(|p| p.version == u64::from(terms.policy));
    let mut job = JobRow {
        job_id: e.jobId,
        submitter: e.submitter.to_string(),
        status: JobStatus::Open,
        bounty: terms.bounty.to_string(),
        from_credits: e.fromCredits.to_string(),
        deadline: terms.deadline,
        max_runtime: u64::from(r.max_runtime),
        spec_hash: hex(terms.spec_hash),
        spec,
        spec_text,
        requirements: RequirementsRow::new(r),
        terms: TermsWords::new(&e.terms),
        engine: r
            .engine()
            .map_or_else(|| format!("engine {}", r.engine), |e| e.to_string()),
        priority: u64::from(r.priority),
        policy_version: u64::from(terms.policy),
        policy: policy.cloned(),
        terms_hash: hex(terms.hash()),
        gpus: u64::from(r.min_gpu_count),
        verification: verification_row(&terms),
        posted_block: block,
        posted_at: at,
        updated_block: block,
        updated_at: at,
        ..JobRow::default()
    };
    let state = state_of(&job);
    set_state(&mut job, &state);
    job
}

/// The job's state as the market holds it, from its row.
fn state_of(job: &JobRow) -> State {
    let policy = job.policy.as_ref();
    State {
        terms: job.terms_hash.parse().unwrap_or_default(),
        status: job.status,
        faults: u8::try_from(job.faults).unwrap_or(u8::MAX),
        barred: u8::try_from(job.barred).unwrap_or(u8::MAX),
        node_id: job.node_id.unwrap_or(0),
        until: job.until.unwrap_or(0),
        bounty: job.bounty.parse().unwrap_or(0),
        fee_bps: policy.map_or(0, |p| u16::try_from(p.fee_bps).unwrap_or(u16::MAX)),
        challenge_window: policy
            .map_or(0, |p| u32::try_from(p.challenge_window).unwrap_or(u32::MAX)),
        verified: job.verification.as_ref().and_then(verified_of),
    }
}

/// A verified job's row as posted (its draw comes with `VerifiedJobPosted`); none for a
/// tier-none job.
fn verification_row(terms: &Terms) -> Option<VerificationRow> {
    let v = &terms.verification;
    if !v.is_verified() {
        return None;
    }
    let tier = match v.tier {
        Verification::REPLICATED => "replicated".to_owned(),
        Verification::REFEREED => "refereed".to_owned(),
        other => format!("tier {other}"),
    };
    Some(VerificationRow {
        tier,
        size: u64::from(v.size),
        quorum: u64::from(v.quorum),
        reveal_window: u64::from(v.reveal_window),
        escrow: terms.escrow().to_string(),
        seats: format!("{:#x}", U256::ZERO),
        ..VerificationRow::default()
    })
}

/// The further words of a verified job's state, from its row: none until
/// `VerifiedJobPosted` gave them (the row has no seat stake before).
fn verified_of(row: &VerificationRow) -> Option<Verified> {
    if row.seat_stake.is_empty() {
        return None;
    }
    Some(Verified {
        seats: row.seats.parse().unwrap_or_default(),
        draw: Draw {
            draw_block: row.draw_block.unwrap_or(0),
            rounds: u8::try_from(row.rounds).unwrap_or(u8::MAX),
            commit_end: row.commit_end.unwrap_or(0),
            seat_stake: row.seat_stake.parse().unwrap_or(0),
            paid: u8::try_from(row.paid_referees).unwrap_or(u8::MAX),
        },
        result: row
            .result
            .as_deref()
            .and_then(|r| r.parse().ok())
            .unwrap_or_default(),
    })
}

/// The row's copy of the state's further words.
fn set_verified(row: &mut VerificationRow, verified: &Verified) {
    let draw = &verified.draw;
    row.seat_stake = draw.seat_stake.to_string();
    row.commit_end = (draw.commit_end != 0).then_some(draw.commit_end);
    row.draw_block = (draw.draw_block != 0).then_some(draw.draw_block);
    row.rounds = u64::from(draw.rounds);
    row.paid_referees = u64::from(draw.paid);
    row.seats = format!("{:#x}", verified.seats);
    row.result = (verified.result != B256::ZERO).then(|| hex(verified.result));
}

/// The hash the market stores for the job, and the words its calls take, while it stores
/// one: unsettled, and with the policy (fee, window) its state copies known. (A verified
/// job's calls take its `VerifiedState`, which the row does not give.)
fn set_state(job: &mut JobRow, state: &State) {
    let stored = job.policy.is_some() && !job.status.is_settled();
    job.state_hash = stored.then(|| hex(state.hash()));
    job.state = (stored && job.verification.is_none()).then(|| StateWords::new(&state.pack()));
}

/// Bars `node` from the job, as the market does (its count stops at 255).
fn bar(job: &mut JobRow, node: u64) {
    job.barred_nodes.push(node);
    job.barred = (job.barred + 1).min(u64::from(u8::MAX));
}

/// A charge on `node`, its amount to come with the `NodeSlashed` that follows (none when
/// there was nothing to take).
fn charge(job: &mut JobRow, node: u64, cause: ChargeCause, at: u64) {
    job.charges.push(ChargeRow {
        node_id: node,
        cause,
        amount: "0".into(),
        at,
    });
}

/// `amount` taken from `node` for the job: the last charge of that node.
fn charged(job: &mut JobRow, node: u64, amount: U96, at: u64) {
    match job.charges.iter_mut().rev().find(|c| c.node_id == node) {
        Some(charge) => charge.amount = plus(&charge.amount, u96(amount)),
        // Every slash follows the event that causes it; kept even without one.
        None => job.charges.push(ChargeRow {
            node_id: node,
            cause: if job.status == JobStatus::Disputed {
                ChargeCause::DisputeLost
            } else {
                ChargeCause::Reject
            },
            amount: amount.to_string(),
            at,
        }),
    }
}

/// The latest attempt of `node` on the job.
fn attempt_of(job: &mut JobRow, node: u64) -> Option<&mut AttemptRow> {
    job.attempt_rows
        .iter_mut()
        .rev()
        .find(|a| a.node_id == node)
}

/// The running attempt of `node` ended at `at`: its outcome, whose fault (a reject's by
/// its reason, a reclaim the node's, a result no one's) and why.
fn ended(job: &mut JobRow, node: u64, at: u64, outcome: AttemptOutcome, reason: Option<String>) {
    let Some(attempt) = attempt_of(job, node) else {
        return;
    };
    attempt.fault = match (outcome, &reason) {
        (AttemptOutcome::Rejected, Some(reason)) => AttemptFault::of_reject(reason),
        (AttemptOutcome::Submitted | AttemptOutcome::Running, _) => AttemptFault::None,
        _ => AttemptFault::Node,
    };
    attempt.ended_at = Some(at);
    attempt.outcome = outcome;
    attempt.reason = reason;
}

/// `amount` taken from `node`'s stake for its latest attempt on the job, to `treasury`.
fn slashed_on_attempt(job: &mut JobRow, node: u64, amount: U96, treasury: Option<&str>) {
    if let Some(attempt) = attempt_of(job, node) {
        attempt.slashed = plus(&attempt.slashed, u96(amount));
        if !amount.is_zero() {
            attempt.slashed_to = treasury.map(str::to_owned);
        }
    }
}

/// The attempts of a job's document, completed by its workers' reports: an attempt that
/// ended in a result whose report carries an error was answered with the worker's
/// failure report (the job failed by itself: non-zero exit, out of memory, its limits),
/// the job's fault, for the report's reason. A report of another node or attempt, or
/// without an error, changes nothing.
pub fn with_failure_reports(attempts: &mut [AttemptRow], reports: &[CompletionReport]) {
    for attempt in attempts
        .iter_mut()
        .filter(|a| a.outcome == AttemptOutcome::Submitted)
    {
        let failure = reports.iter().find(|r| {
            u64::from(r.attempt) == attempt.attempt
                && r.node_id == attempt.node_id
                && r.status != CompletionStatus::NodeFault
        });
        if let Some(error) = failure.and_then(|r| r.error.as_ref()) {
            attempt.outcome = AttemptOutcome::FailedByItself;
            attempt.fault = AttemptFault::Job;
            attempt.reason = Some(error.clone());
        }
    }
}

fn touched(job: &mut JobRow, block: u64, at: u64) {
    job.updated_block = block;
    job.updated_at = at;
}

/// Applies an event to its node's row (`None` before its `NodeRegistered`): the node
/// events, and the market's events that move its slots, counters, stake and money.
/// `previous` is the event before this one in the node's events (a `NodeMarkedInactive`
/// right after a slash in the same transaction is the market's, for a stake below the
/// minimum: it does not make the node's running jobs reclaimable).
pub fn apply_node(
    row: Option<NodeRow>,
    event: &EventEnvelope,
    typed: &GantryEvent,
    previous: Option<&EventEnvelope>,
) -> Option<NodeRow> {
    let block = event.block_number;
    if let GantryEvent::Registry(R::NodeRegistered(e)) = typed {
        return Some(registered(e, block));
    }
    let mut node = row?;
    let changed = match typed {
        GantryEvent::Registry(e) => apply_registry(&mut node, e, event, previous),
        GantryEvent::Market(e) => apply_market_to_node(&mut node, e, event, previous),
        // It names no node (see `touches`).
        GantryEvent::Unreadable(_) => false,
    };
    if changed {
        node.updated_block = block;
    }
    Some(node)
}

fn registered(e: &NodeRegistry::NodeRegistered, block: u64) -> NodeRow {
    let mut node = NodeRow {
        node_id: e.nodeId,
        operator: e.operator.to_string(),
        agent: e.agent.to_string(),
        status: NodeStatus::Active,
        metadata_uri: e.metadataURI.clone(),
        stake: e.stake.to_string(),
        locked_stake: "0".into(),
        slashed: "0".into(),
        earnings: "0".into(),
        earnings_withdrawn: "0".into(),
        fees_owed: "0".into(),
        fees_swept: "0".into(),
        stake_withdrawn: "0".into(),
        last_heartbeat: u64::from(e.at),
        registered_at: u64::from(e.at),
        updated_block: block,
        ..NodeRow::default()
    };
    set_capabilities(&mut node, &e.capabilities);
    node
}

fn set_capabilities(node: &mut NodeRow, c: &NodeRegistry::NodeCapabilities) {
    node.gpu_model = String::from_utf8_lossy(c.gpuModel.as_slice())
        .trim_end_matches('\0')
        .to_owned();
    node.gpu_count = u64::from(c.gpuCount);
    node.vram_mib = u64::from(c.vramMiB);
    node.cpu_cores = u64::from(c.cpuCores);
    node.ram_mib = u64::from(c.ramMiB);
    node.price_per_gpu_hour = c.pricePerGpuHour.to_string();
    node.max_concurrent_jobs = u64::from(c.maxConcurrentJobs);
    node.engines = Engines(c.engines).iter().map(|e| e.to_string()).collect();
}

/// A node event's effect on its node's row; whether it changed.
fn apply_registry(
    node: &mut NodeRow,
    event: &NodeRegistry::NodeRegistryEvents,
    envelope: &EventEnvelope,
    previous: Option<&EventEnvelope>,
) -> bool {
    match event {
        R::NodeHeartbeat(e) => node.last_heartbeat = u64::from(e.at),
        R::NodeReactivated(e) => {
            node.status = NodeStatus::Active;
            node.last_heartbeat = u64::from(e.at);
        }
        R::NodeMarkedInactive(e) => marked_inactive(node, e.nodeId, envelope, previous),
        R::NodeCapabilitiesUpdated(e) => {
            set_capabilities(node, &e.capabilities);
            node.metadata_uri = e.metadataURI.clone();
        }
        R::NodeAgentChanged(e) => node.agent = e.agent.to_string(),
        R::NodeStakeAdded(e) => node.stake = e.stake.to_string(),
        R::NodeSlashed(e) => slashed(node, e.amount, e.stake),
        R::NodeExitBegun(e) => {
            node.status = NodeStatus::Exiting;
            node.unbonding_ends_at = Some(e.unbondingEndsAt.to::<u64>());
        }
        R::NodeStakeWithdrawn(e) => {
            node.stake = e.stake.to_string();
            node.stake_withdrawn = plus(&node.stake_withdrawn, u96(e.amount));
            // What is left is held for open disputes; the node is gone once nothing is.
            if e.stake.is_zero() {
                node.status = NodeStatus::Exited;
            }
        }
        R::NodeEarningsWithdrawn(e) => moved(
            &mut node.earnings,
            &mut node.earnings_withdrawn,
            u96(e.amount),
        ),
        R::FeesSwept(e) => moved(&mut node.fees_owed, &mut node.fees_swept, u96(e.amount)),
        R::PoolJoined(_) => node.in_pool = true,
        R::PoolLeft(_) => node.in_pool = false,
        R::NodeRegistered(_)
        | R::EIP712DomainChanged(_)
        | R::RoleAdminChanged(_)
        | R::RoleGranted(_)
        | R::RoleRevoked(_) => return false,
    }
    true
}

/// A market event's effect on the row of the node it concerns; whether it changed.
fn apply_market_to_node(
    node: &mut NodeRow,
    event: &JobMarket::JobMarketEvents,
    envelope: &EventEnvelope,
    previous: Option<&EventEnvelope>,
) -> bool {
    match event {
        M::JobAssigned(_) => node.active_jobs += 1,
        M::ResultSubmitted(_) => free_slot(node),
        M::JobRejected(_) => {
            free_slot(node);
            node.rejected_jobs += 1;
        }
        M::JobReclaimed(_) => {
            free_slot(node);
            node.failed_jobs += 1;
        }
        // A seat's stake is held like a dispute's exposure, until the seat is freed or
        // the job decided (a slash follows as `NodeSlashed`).
        M::SeatDrawn(e) => node.locked_stake = plus(&node.locked_stake, u96(e.locked)),
        M::SeatFreed(e) => node.locked_stake = minus(&node.locked_stake, u96(e.unlocked)),
        M::SeatReleased(e) => node.locked_stake = minus(&node.locked_stake, u96(e.unlocked)),
        // A refereed provider's hold, likewise.
        M::HoldLocked(e) => node.locked_stake = plus(&node.locked_stake, u96(e.amount)),
        M::HoldReleased(e) => node.locked_stake = minus(&node.locked_stake, u96(e.amount)),
        // An overturned provider repays the referees out of its stake (to the submitter).
        M::HoldForfeited(e) => node.stake = minus(&node.stake, u96(e.amount)),
        // An upheld provider wins the bond.
        M::RefereesDecided(e) => node.earnings = plus(&node.earnings, u96(e.toProvider)),
        M::ReplicaPaid(e) => {
            node.completed_jobs += 1;
            node.earnings = plus(&node.earnings, u96(e.payout));
            node.fees_owed = plus(&node.fees_owed, u96(e.fee));
        }
        M::JobDisputed(e) => {
            node.locked_stake = plus(&node.locked_stake, u96(e.exposure));
            node.disputes.push(HeldStake {
                job_id: e.jobId,
                exposure: e.exposure.to_string(),
            });
        }
        M::DisputeResolved(e) => {
            let job = e.jobId;
            if let Some(at) = node.disputes.iter().position(|d| d.job_id == job) {
                let held = node.disputes.remove(at);
                node.locked_stake = minus(&node.locked_stake, amount(&held.exposure));
            }
            node.earnings = plus(&node.earnings, u96(e.bondToProvider));
            if !e.providerWon {
                node.failed_jobs += 1;
            }
        }
        M::JobCompleted(e) => {
            node.completed_jobs += 1;
            node.earnings = plus(&node.earnings, u96(e.payout));
            node.fees_owed = plus(&node.fees_owed, u96(e.fee));
        }
        // The node events the market emits itself, read as the market's.
        M::NodeSlashed(e) => slashed(node, e.amount, e.stake),
        M::NodeMarkedInactive(e) => marked_inactive(node, e.nodeId, envelope, previous),
        M::JobPosted(_)
        | M::JobRequeued(_)
        | M::JobFailed(_)
        | M::JobCancelled(_)
        | M::JobExpired(_)
        | M::Deposited(_)
        | M::Withdrawn(_)
        | M::VerifiedJobPosted(_)
        | M::DrawArmed(_)
        | M::Drawn(_)
        | M::SealCommitted(_)
        | M::ReplicaForfeited(_)
        | M::SeatVacated(_)
        | M::RefereesRequested(_)
        | M::RevealsOpened(_)
        | M::ResultRevealed(_)
        | M::ProviderRevealed(_)
        | M::JobVerified(_)
        | gantry_protocol::market_admin_events!() => return false,
    }
    true
}

fn free_slot(node: &mut NodeRow) {
    node.active_jobs = node.active_jobs.saturating_sub(1);
}

fn slashed(node: &mut NodeRow, amount: U96, stake: U96) {
    node.stake = stake.to_string();
    node.slashed = plus(&node.slashed, u96(amount));
}

/// The node was marked inactive. When its agent or anyone (for a missed heartbeat) did it,
/// the market records the time (`inactiveSince`): jobs assigned to it before are
/// reclaimable. When a slash in the same transaction took its stake below the minimum,
/// the market only stops its new work.
fn marked_inactive(
    node: &mut NodeRow,
    node_id: u64,
    event: &EventEnvelope,
    previous: Option<&EventEnvelope>,
) {
    node.status = NodeStatus::Inactive;
    let after_slash = previous.is_some_and(|p| {
        p.tx_hash == event.tx_hash
            && p.log_index + 1 == event.log_index
            && matches!(
                p.event.typed(),
                Ok(GantryEvent::Registry(R::NodeSlashed(ref s))) if s.nodeId == node_id
            )
    });
    if !after_slash {
        node.inactive_since = Some(event.block_timestamp);
    }
}

/// Applies an event to the row of the account it concerns (`touches`): its credits and
/// their flows. An account's row starts at its first event.
pub fn apply_account(
    row: Option<AccountRow>,
    account: &str,
    event: &EventEnvelope,
    typed: &GantryEvent,
) -> AccountRow {
    let mut row = row.unwrap_or_else(|| AccountRow {
        account: account.to_owned(),
        credits: "0".into(),
        deposited: "0".into(),
        withdrawn: "0".into(),
        bounties: "0".into(),
        from_credits: "0".into(),
        refunded: "0".into(),
        bonds_posted: "0".into(),
        bonds_returned: "0".into(),
        ..AccountRow::default()
    });
    let GantryEvent::Market(market) = typed else {
        return row;
    };
    match market {
        M::JobPosted(e) => {
            row.jobs_posted += 1;
            row.bounties = plus(&row.bounties, U256::from(Terms::unpack(&e.terms).escrow()));
            moved(&mut row.credits, &mut row.from_credits, u96(e.fromCredits));
        }
        M::Deposited(e) => credited(&mut row.credits, &mut row.deposited, e.amount),
        M::Withdrawn(e) => moved(&mut row.credits, &mut row.withdrawn, e.amount),
        M::JobFailed(e) => refunded(&mut row, e.refund),
        M::JobCancelled(e) => refunded(&mut row, e.refund),
        M::JobExpired(e) => refunded(&mut row, e.refund),
        M::JobVerified(e) => refunded(&mut row, e.refund),
        // Paid from its tokens, not its credits.
        M::JobDisputed(e) => row.bonds_posted = plus(&row.bonds_posted, u96(e.bond)),
        // A refereed dispute's bond and prepay, from its credits first.
        M::RefereesRequested(e) => {
            row.bonds_posted = plus(&row.bonds_posted, u96(e.bond) + u96(e.prepay));
            moved(&mut row.credits, &mut row.from_credits, u96(e.fromCredits));
        }
        M::RefereesDecided(e) => credited(
            &mut row.credits,
            &mut row.bonds_returned,
            u96(e.toSubmitter),
        ),
        M::HoldForfeited(e) => refunded(&mut row, e.amount),
        M::DisputeResolved(e) => credited(
            &mut row.credits,
            &mut row.bonds_returned,
            u96(e.bondToSubmitter),
        ),
        M::JobAssigned(_)
        | M::ResultSubmitted(_)
        | M::JobCompleted(_)
        | M::JobReclaimed(_)
        | M::JobRejected(_)
        | M::JobRequeued(_)
        | M::NodeSlashed(_)
        | M::NodeMarkedInactive(_)
        | M::VerifiedJobPosted(_)
        | M::DrawArmed(_)
        | M::SeatDrawn(_)
        | M::Drawn(_)
        | M::SealCommitted(_)
        | M::SeatFreed(_)
        | M::SeatVacated(_)
        | M::HoldLocked(_)
        | M::HoldReleased(_)
        | M::RevealsOpened(_)
        | M::ResultRevealed(_)
        | M::ProviderRevealed(_)
        | M::SeatReleased(_)
        | M::ReplicaPaid(_)
        | M::ReplicaForfeited(_)
        | gantry_protocol::market_admin_events!() => return row,
    }
    row.updated_block = event.block_number;
    row
}

fn refunded(row: &mut AccountRow, refund: U96) {
    credited(&mut row.credits, &mut row.refunded, u96(refund));
}

// ------------------------------------------------------------------------------- helpers

fn account(address: Address) -> String {
    format!("{address:#x}")
}

fn hex(hash: B256) -> String {
    format!("{hash:#x}")
}

/// A stored amount (decimal); 0 for none.
pub fn amount(text: &str) -> U256 {
    U256::from_str_radix(text, 10).unwrap_or_default()
}

fn u96(value: U96) -> U256 {
    U256::from(value.to::<u128>())
}

fn plus(a: &str, b: U256) -> String {
    amount(a).saturating_add(b).to_string()
}

fn minus(a: &str, b: U256) -> String {
    amount(a).saturating_sub(b).to_string()
}

/// `amount` leaves the balance `from` and adds to the total `to` (withdrawn, swept, spent).
fn moved(from: &mut String, to: &mut String, amount: U256) {
    *from = minus(from, amount);
    *to = plus(to, amount);
}

/// `amount` adds to the balance `to` and to the total `flow` that brought it.
fn credited(to: &mut String, flow: &mut String, amount: U256) {
    *to = plus(to, amount);
    *flow = plus(flow, amount);
}

#[cfg(test)]
mod tests;
