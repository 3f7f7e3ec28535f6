//! The keeper's rules: which settling calls the chain accepts now, from the view alone.
//! Pure, no IO.
//!
//! ```text
//!  View (chain time = newest committed block) ──▶ due() ──▶ MarkInactive | Reclaim | Expire | Finalize | SettleDispute
//!                                                            verified jobs: Draw | ReclaimSeat | OpenReveals | Decide
//!                                                            | ExpireVerified | ReclaimRefereed | FinalizeVerified | SettleVerified
//!                                                  Keeper: each action at most once per condition
//! ```
//!
//! Each rule mirrors the contract's check, evaluated at the newest block's time; the
//! transaction lands in a later block, whose time is not earlier, so a due action is
//! accepted unless the chain moved on meanwhile (a heartbeat in between, say). Every rule
//! is monotone in time except a node's heartbeat, so nothing due becomes undue by waiting.

use std::collections::{HashMap, HashSet};

use gantry_protocol::status::JobStatus;

use gantry_protocol::market::Seat;

use crate::view::{NodeStatus, VerifiedView, View};

/// A call the keeper makes. The job's terms and state go with the call (the view has
/// them); the action names only what it acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// `markInactive`: the node's heartbeat is older than the timeout.
    MarkInactive { node: u64 },
    /// `reclaim`: the assigned node went Inactive during the attempt, or the attempt is
    /// past its `until` without an answer. The node is slashed: its fault.
    Reclaim { job: u64, node: u64 },
    /// `expire`: an Open job whose deadline no attempt can meet any more; refunded.
    Expire { job: u64 },
    /// `finalize`: a submitted result's challenge window closed undisputed; paid.
    Finalize { job: u64 },
    /// `settleDispute`: the arbiter let a dispute's period pass; the result stands.
    SettleDispute { job: u64 },
    // Verified jobs (design 18): every call permissionless, so the keeper is not
    // safety-critical; if it stops, anyone can send them.
    /// `draw`: a verified job's armed round, from its draw block on, while a seat's run
    /// still fits before the commit phase ends.
    Draw { job: u64 },
    /// `reclaimSeat`: in the commit phase, a seat its node gave back (Declined: vacated
    /// and redrawn), or one whose node was marked Inactive since it was seated (slashed).
    ReclaimSeat { job: u64, seat: u8 },
    /// `openReveals`: every filled seat committed or ran out of time, one committed, and
    /// the empty ones cannot fill.
    OpenReveals { job: u64 },
    /// `decide` (replicated) or `decideReferees` (a refereed dispute): the reveal phase is
    /// over, or nothing is left to reveal in it.
    Decide { job: u64 },
    /// `expireVerified`: a replicated job no seat can be drawn for, or an Open refereed
    /// job whose deadline no attempt can meet; refunded.
    ExpireVerified { job: u64 },
    /// `reclaimRefereed`: as `Reclaim`, for a refereed job's provider.
    ReclaimRefereed { job: u64, node: u64 },
    /// `finalizeVerified`: a refereed result's challenge window closed undisputed.
    FinalizeVerified { job: u64 },
    /// `settleVerified`: the arbiter let a refereed dispute's period pass.
    SettleVerified { job: u64 },
}

impl Action {
    /// A bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MarkInactive { .. } => "mark_inactive",
            Self::Reclaim { .. } => "reclaim",
            Self::Expire { .. } => "expire",
            Self::Finalize { .. } => "finalize",
            Self::SettleDispute { .. } => "settle_dispute",
            Self::Draw { .. } => "draw",
            Self::ReclaimSeat { .. } => "reclaim_seat",
            Self::OpenReveals { .. } => "open_reveals",
            Self::Decide { .. } => "decide",
            Self::ExpireVerified { .. } => "expire_verified",
            Self::ReclaimRefereed { .. } => "reclaim_refereed",
            Self::FinalizeVerified { .. } => "finalize_verified",
            Self::SettleVerified { .. } => "settle_verified",
        }
    }

    /// The job it acts on, if any.
    pub fn job(&self) -> Option<u64> {
        match *self {
            Self::MarkInactive { .. } => None,
            Self::Reclaim { job, .. }
            | Self::Expire { job }
            | Self::Finalize { job }
            | Self::SettleDispute { job }
            | Self::Draw { job }
            | Self::ReclaimSeat { job, .. }
            | Self::OpenReveals { job }
            | Self::Decide { job }
            | Self::ExpireVerified { job }
            | Self::ReclaimRefereed { job, .. }
            | Self::FinalizeVerified { job }
            | Self::SettleVerified { job } => Some(job),
        }
    }
}

/// Draw rounds a verified job may use (`VerificationBase.MAX_ROUNDS`).
pub const MAX_ROUNDS: u8 = 8;

/// Every action the chain accepts at the view's time, in a stable order.
pub fn due(view: &View) -> Vec<Action> {
    let now = view.now;
    let mut actions = Vec::new();
    for node in view.nodes.values() {
        if node.status == NodeStatus::Active
            && view.heartbeat_timeout > 0
            && now > node.last_heartbeat + view.heartbeat_timeout
        {
            actions.push(Action::MarkInactive { node: node.id });
        }
    }
    for (&job, tracked) in &view.jobs {
        let state = &tracked.state;
        let action = match state.status {
            JobStatus::Open => (!tracked.terms.fits(now)).then_some(Action::Expire { job }),
            JobStatus::Assigned => {
                let assigned_at = state.assigned_at(&tracked.terms).unwrap_or(0);
                let went_inactive = view.nodes.get(&state.node_id).is_some_and(|node| {
                    node.inactive_since != 0 && node.inactive_since >= assigned_at
                });
                (went_inactive || now > state.until).then_some(Action::Reclaim {
                    job,
                    node: state.node_id,
                })
            }
            JobStatus::Submitted => (now >= state.until).then_some(Action::Finalize { job }),
            JobStatus::Disputed => (now >= state.until).then_some(Action::SettleDispute { job }),
            _ => None,
        };
        actions.extend(action);
    }
    for job in view.verified.values() {
        verified_due(view, job, &mut actions);
    }
    actions.sort_unstable();
    actions
}

/// A verified job's due actions, as `Verification` and `Referees` check them.
fn verified_due(view: &View, job: &VerifiedView, actions: &mut Vec<Action>) {
    let (now, id, state) = (view.now, job.id, &job.state);
    let verified = job.verified();
    let run = u64::from(job.terms.requirements.max_runtime);
    let commit_end = verified.draw.commit_end;
    let seats = &job.seats.0[..job.size().min(job.seats.0.len())];
    // A seat's run still fits before the commit phase ends, with rounds left.
    let can_fill = now + run <= commit_end && verified.draw.rounds < MAX_ROUNDS;
    let can_draw = verified.draw.draw_block != 0 && can_fill;
    match state.status {
        JobStatus::Open if job.is_refereed() && !job.terms.fits(now) => {
            actions.push(Action::ExpireVerified { job: id });
        }
        JobStatus::Assigned if job.is_refereed() => {
            let assigned_at = state.until.saturating_sub(run);
            let went_inactive = view
                .nodes
                .get(&state.node_id)
                .is_some_and(|node| node.inactive_since != 0 && node.inactive_since >= assigned_at);
            if went_inactive || now > state.until {
                actions.push(Action::ReclaimRefereed {
                    job: id,
                    node: state.node_id,
                });
            }
        }
        JobStatus::Submitted if job.is_refereed() && now >= state.until => {
            actions.push(Action::FinalizeVerified { job: id });
        }
        JobStatus::Arbitrating if now >= state.until => {
            actions.push(Action::SettleVerified { job: id });
        }
        // No seat filled and none can be drawn: refunded (never a refereed dispute's).
        JobStatus::Committing if !job.is_refereed() && verified.seats.is_zero() && !can_draw => {
            actions.push(Action::ExpireVerified { job: id });
        }
        // Each of these changes the job's word, so a second one sent from the same view
        // would be stale: one per view, the next from the view its block makes.
        JobStatus::Committing if now <= commit_end => {
            let mut next = None;
            for (i, seat) in seats.iter().enumerate() {
                let gone_inactive = seat.phase == Seat::SEATED
                    && view.nodes.get(&seat.node_id).is_some_and(|node| {
                        node.inactive_since != 0 && node.inactive_since >= seat.seated_at
                    });
                if next.is_none() && (seat.phase == Seat::DECLINED || gone_inactive) {
                    let seat = u8::try_from(i).unwrap_or(u8::MAX);
                    next = Some(Action::ReclaimSeat { job: id, seat });
                }
            }
            // A transaction sent now lands in the next block at the earliest.
            if next.is_none() && can_draw && view.block + 1 >= verified.draw.draw_block {
                next = Some(Action::Draw { job: id });
            }
            let committed = seats
                .iter()
                .any(|s| matches!(s.phase, Seat::COMMITTED | Seat::REVEALED));
            let running = seats
                .iter()
                .any(|s| s.phase == Seat::SEATED && now <= s.until);
            let empty = seats
                .iter()
                .any(|s| s.phase == 0 || s.phase == Seat::DECLINED);
            if next.is_none() && committed && !running && !(empty && can_fill) {
                next = Some(Action::OpenReveals { job: id });
            }
            actions.extend(next);
        }
        _ => {}
    }
    // The reveal phase: decided once it is over, or once nothing is left to reveal (and,
    // in a dispute, the provider revealed). A replicated job with no seat filled is
    // expired instead (`decide` refuses it).
    let reveal_by = match state.status {
        JobStatus::Revealing => Some(state.until),
        JobStatus::Committing if now > commit_end => {
            Some(commit_end + u64::from(job.terms.verification.reveal_window))
        }
        _ => None,
    };
    if let Some(reveal_by) = reveal_by {
        let filled = seats.iter().any(|s| s.phase != 0);
        let pending = seats.iter().any(|s| s.phase == Seat::COMMITTED);
        let shown = !job.is_refereed() || job.provider_revealed;
        if (job.is_refereed() || filled) && (now > reveal_by || (!pending && shown)) {
            actions.push(Action::Decide { job: id });
        }
    }
}

/// Remembers which actions it already handed out, so a condition that stays true for many
/// blocks (until the action's transaction lands) is acted on once; and where each landed,
/// so that one a reorganisation undoes is acted on again.
#[derive(Debug, Default)]
pub struct Keeper {
    attempted: HashSet<Action>,
    /// The block each attempted action's transaction was mined in.
    confirmed: HashMap<Action, u64>,
}

impl Keeper {
    /// The due actions not yet attempted; they count as attempted from now on. An action
    /// still due in a view that holds the block its transaction was mined in was undone
    /// by a reorganisation (its effect would be in the view otherwise): it is due again.
    /// (Held as attempted for good, the job it settles stayed unsettled: the chaos suite
    /// found a result never paid after its finalize was reorganised away.)
    pub fn next(&mut self, view: &View) -> Vec<Action> {
        let due = due(view);
        let current: HashSet<Action> = due.iter().copied().collect();
        self.attempted.retain(|action| current.contains(action));
        self.confirmed.retain(|action, _| current.contains(action));
        let undone: Vec<Action> = self
            .confirmed
            .iter()
            .filter(|(_, mined_in)| view.block >= **mined_in)
            .map(|(action, _)| *action)
            .collect();
        for action in undone {
            self.confirmed.remove(&action);
            self.attempted.remove(&action);
        }
        due.into_iter()
            .filter(|action| self.attempted.insert(*action))
            .collect()
    }

    /// The action's transaction was mined in `block`.
    pub fn confirmed(&mut self, action: &Action, block: u64) {
        if self.attempted.contains(action) {
            self.confirmed.insert(*action, block);
        }
    }

    /// The action's transaction never landed: it may be attempted again.
    pub fn forget(&mut self, action: &Action) {
        self.attempted.remove(action);
    }
}

/// Why verified job `job` is waiting, for people (the dashboard and `gantry job status`
/// show it as a pending job's explanation): what the market waits for next, and until
/// when by the chain's time. `None` when it waits for nothing a person could follow
/// (settled, or its provider running it).
pub fn waiting(view: &View, job: &VerifiedView) -> Option<String> {
    let verified = job.verified();
    let n = job.size().min(job.seats.0.len());
    let seats = &job.seats.0[..n];
    let filled = seats
        .iter()
        .filter(|s| s.node_id != 0 && s.phase != Seat::DECLINED)
        .count();
    let committed = seats
        .iter()
        .filter(|s| matches!(s.phase, Seat::COMMITTED | Seat::REVEALED))
        .count();
    let revealed = seats.iter().filter(|s| s.phase == Seat::REVEALED).count();
    let (role, tier) = if job.is_refereed() {
        ("referee", "refereed")
    } else {
        ("replica", "replicated")
    };
    let run = u64::from(job.terms.requirements.max_runtime);
    let commit_end = verified.draw.commit_end;
    Some(match job.state.status {
        // Placed and explained by the matcher, as any open job.
        JobStatus::Open => return None,
        JobStatus::Committing if filled < n => {
            let can_fill = view.now + run <= commit_end && verified.draw.rounds < MAX_ROUNDS;
            if !can_fill {
                format!(
                    "{tier}: {filled} of {n} {role} seats filled, and no further round fits \
                     before the commit phase ends at {commit_end}: it is decided with the seats \
                     it has"
                )
            } else if verified.draw.draw_block != 0 {
                format!(
                    "{tier}: {filled} of {n} {role} seats filled; round {} draws at block {} \
                     from the verification pool",
                    verified.draw.rounds + 1,
                    verified.draw.draw_block
                )
            } else {
                format!("{tier}: {filled} of {n} {role} seats filled")
            }
        }
        JobStatus::Committing => format!(
            "{tier}: commit phase: {committed} of {n} {role}s committed; the reveals open at \
             {commit_end} (chain time), or once every seat has committed"
        ),
        JobStatus::Revealing => format!(
            "{tier}: reveal phase: {revealed} of {committed} commitments opened{}",
            if job.is_refereed() && !job.provider_revealed {
                "; the provider has not opened its seal"
            } else {
                ""
            }
        ),
        JobStatus::Arbitrating => format!(
            "refereed: the referees did not settle the dispute: the arbiter decides by {} \
             (chain time), else the provider's result stands",
            job.state.until
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use alloy::primitives::B256;
    use proptest::prelude::{prop, prop_assert, proptest};

    use super::*;
    use crate::view::fixtures;
    use crate::view::{Capabilities, JobView, NodeView, Requirements};

    fn node(id: u64, last_heartbeat: u64, status: NodeStatus) -> NodeView {
        let capabilities = Capabilities {
            gpu_model: B256::ZERO,
            gpu_count: 1,
            vram_mib: 1,
            cpu_cores: 1,
            ram_mib: 1,
            price_per_gpu_hour: 1,
            max_concurrent_jobs: 1,
            engines: Default::default(),
        };
        let mut node = fixtures::node(id, capabilities, 1, last_heartbeat);
        node.status = status;
        node
    }

    /// A job with a 60 s max runtime, Open.
    fn open_job(id: u64, deadline: u64) -> JobView {
        let requirements = Requirements {
            max_runtime: 60,
            ..Requirements::default()
        };
        fixtures::job(id, 0, deadline, requirements)
    }

    fn with_status(mut job: JobView, status: JobStatus, node: u64, until: u64) -> JobView {
        job.state.status = status;
        job.state.node_id = node;
        job.state.until = until;
        job
    }

    fn view(now: u64) -> View {
        View {
            heartbeat_timeout: 60,
            now,
            ..View::default()
        }
    }

    #[test]
    fn a_silent_node_is_marked_inactive_only_after_the_timeout() {
        let mut v = view(160);
        v.nodes.insert(1, node(1, 100, NodeStatus::Active));
        assert_eq!(due(&v), []);
        v.now = 161;
        assert_eq!(due(&v), [Action::MarkInactive { node: 1 }]);
        v.nodes.get_mut(&1).unwrap().status = NodeStatus::Inactive;
        assert_eq!(due(&v), []);
    }

    #[test]
    fn only_faults_of_the_node_are_reclaimed_and_only_jobs_that_cannot_fit_expire() {
        let mut v = view(1_000);
        // Node 1 went inactive at 995; node 2 went inactive at 900, then came back.
        let mut one = node(1, 1_000, NodeStatus::Inactive);
        one.inactive_since = 995;
        let mut two = node(2, 1_000, NodeStatus::Active);
        two.inactive_since = 900;
        v.nodes.insert(1, one);
        v.nodes.insert(2, two);
        let assigned =
            |id, node, until| with_status(open_job(id, 5_000), JobStatus::Assigned, node, until);
        v.jobs.insert(10, assigned(10, 1, 990 + 60)); // assigned at 990: went inactive during it
        v.jobs.insert(11, assigned(11, 2, 999)); // past its until (999 < 1 000)
        v.jobs.insert(12, assigned(12, 2, 1_000)); // until is now: still in time
        v.jobs.insert(13, assigned(13, 2, 950 + 60)); // inactive before this attempt: not its fault
        v.jobs.insert(14, open_job(14, 1_059)); // 1 000 + 60 > 1 059: cannot fit
        v.jobs.insert(15, open_job(15, 1_060)); // fits exactly
        assert_eq!(
            due(&v),
            [
                Action::Reclaim { job: 10, node: 1 },
                Action::Reclaim { job: 11, node: 2 },
                Action::Expire { job: 14 },
            ]
        );
    }

    #[test]
    fn results_are_paid_when_the_window_closes_and_lapsed_disputes_settled() {
        let mut v = view(500);
        v.jobs.insert(
            1,
            with_status(open_job(1, 9_999), JobStatus::Submitted, 1, 500),
        );
        v.jobs.insert(
            2,
            with_status(open_job(2, 9_999), JobStatus::Submitted, 1, 501),
        );
        v.jobs.insert(
            3,
            with_status(open_job(3, 9_999), JobStatus::Disputed, 1, 400),
        );
        v.jobs.insert(
            4,
            with_status(open_job(4, 9_999), JobStatus::Disputed, 1, 600),
        );
        assert_eq!(
            due(&v),
            [
                Action::Finalize { job: 1 },
                Action::SettleDispute { job: 3 }
            ]
        );
    }

    #[test]
    fn the_keeper_acts_once_per_condition() {
        let mut v = view(161);
        v.nodes.insert(1, node(1, 100, NodeStatus::Active));
        let mut keeper = Keeper::default();
        assert_eq!(keeper.next(&v), [Action::MarkInactive { node: 1 }]);
        // Still overdue a block later: already attempted.
        v.now = 162;
        assert_eq!(keeper.next(&v), []);
        // A heartbeat clears the condition; when it recurs, it is acted on again.
        v.nodes.get_mut(&1).unwrap().last_heartbeat = 162;
        assert_eq!(keeper.next(&v), []);
        v.now = 300;
        assert_eq!(keeper.next(&v), [Action::MarkInactive { node: 1 }]);
        // A dropped transaction may be retried.
        keeper.forget(&Action::MarkInactive { node: 1 });
        assert_eq!(keeper.next(&v), [Action::MarkInactive { node: 1 }]);
    }

    #[test]
    fn an_action_a_reorganisation_undid_is_acted_on_again() {
        let mut v = view(400);
        v.block = 20;
        v.jobs.insert(
            7,
            with_status(open_job(7, 9_999), JobStatus::Submitted, 1, 300),
        );
        let mut keeper = Keeper::default();
        let finalize = Action::Finalize { job: 7 };
        assert_eq!(keeper.next(&v), [finalize]);
        // Mined in block 22: until the view holds it, the job still looks due.
        keeper.confirmed(&finalize, 22);
        v.block = 21;
        assert_eq!(keeper.next(&v), []);
        // The view reaches block 22 (a new branch's) with the job still Submitted: the
        // finalize was reorganised away, and it is sent again.
        v.block = 22;
        assert_eq!(keeper.next(&v), [finalize]);
        // Where it lands and holds, the job is settled and nothing is due.
        keeper.confirmed(&finalize, 24);
        v.block = 24;
        v.jobs.remove(&7);
        assert_eq!(keeper.next(&v), []);
    }

    // ---------------------------------------------------------------- verified jobs

    use gantry_protocol::market::{Draw, Seats, Verification, Verified};

    /// A verified job (3 seats, 600 s runs, 60 s reveal window) in `status` until `until`,
    /// its commit phase ending at 5 000 and its round `draw_block` armed (0: none).
    fn verified_job(
        id: u64,
        tier: u8,
        status: JobStatus,
        until: u64,
        draw_block: u64,
    ) -> VerifiedView {
        let mut terms = open_job(id, 9_999).terms;
        terms.requirements.max_runtime = 600;
        terms.verification = Verification {
            tier,
            size: 3,
            quorum: if tier == Verification::REPLICATED {
                2
            } else {
                0
            },
            reveal_window: 60,
        };
        let mut state = open_job(id, 9_999).state;
        state.status = status;
        state.until = until;
        state.verified = Some(Verified {
            draw: Draw {
                draw_block,
                commit_end: 5_000,
                ..Draw::default()
            },
            ..Verified::default()
        });
        VerifiedView {
            id,
            terms,
            state,
            seats: Seats::default(),
            provider_revealed: false,
            placing: None,
        }
    }

    /// Seat `i` of `job` held by `node` in `phase`, drawn at `seated_at`.
    fn seat(job: &mut VerifiedView, i: usize, node: u64, phase: u8, seated_at: u64) {
        job.seats.0[i] = Seat {
            phase,
            node_id: node,
            seated_at,
            until: seated_at + 600,
            locked: 20,
            ..Seat::default()
        };
        if let Some(v) = job.state.verified.as_mut() {
            v.seats |= alloy::primitives::U256::from(node) << (48 * i);
        }
    }

    fn with_verified(mut v: View, job: VerifiedView) -> View {
        v.verified.insert(job.id, job);
        v
    }

    #[test]
    fn a_waiting_verified_job_is_explained_by_what_the_market_waits_for() {
        let v = view(1_000);
        let mut job = verified_job(
            1,
            Verification::REPLICATED,
            JobStatus::Committing,
            5_000,
            12,
        );
        seat(&mut job, 0, 7, Seat::SEATED, 900);
        assert_eq!(
            waiting(&v, &job).unwrap(),
            "replicated: 1 of 3 replica seats filled; round 1 draws at block 12 from the \
             verification pool"
        );
        seat(&mut job, 1, 8, Seat::COMMITTED, 900);
        seat(&mut job, 2, 9, Seat::SEATED, 900);
        assert!(
            waiting(&v, &job)
                .unwrap()
                .starts_with("replicated: commit phase: 1 of 3 replicas committed"),
        );
        let late = View {
            now: 4_500,
            ..v.clone()
        };
        seat(&mut job, 2, 0, 0, 0);
        assert!(
            waiting(&late, &job)
                .unwrap()
                .contains("no further round fits before the commit phase ends at 5000"),
        );
        job.state.status = JobStatus::Completed;
        assert_eq!(waiting(&v, &job), None, "settled: nothing to explain");
        // Waiting for a provider: the matcher's to place and explain, as any open job.
        let refereed = verified_job(2, Verification::REFEREED, JobStatus::Open, 0, 0);
        assert_eq!(waiting(&v, &refereed), None);
    }

    #[test]
    fn a_round_is_drawn_from_the_block_before_its_own_while_a_run_fits() {
        let job = verified_job(
            1,
            Verification::REPLICATED,
            JobStatus::Committing,
            5_000,
            12,
        );
        let mut v = with_verified(view(1_000), job);
        v.block = 10;
        assert_eq!(due(&v), [], "two blocks early");
        v.block = 11;
        assert_eq!(due(&v), [Action::Draw { job: 1 }], "lands in block 12");
        v.now = 4_401;
        assert_eq!(
            due(&v),
            [Action::ExpireVerified { job: 1 }],
            "no run fits before the commit phase ends, no seat filled: expired"
        );
    }

    #[test]
    fn declined_seats_and_seats_of_nodes_gone_inactive_are_reclaimed_in_the_commit_phase() {
        let mut job = verified_job(1, Verification::REPLICATED, JobStatus::Committing, 5_000, 0);
        seat(&mut job, 0, 7, Seat::DECLINED, 1_000);
        seat(&mut job, 1, 8, Seat::SEATED, 1_000);
        seat(&mut job, 2, 9, Seat::SEATED, 1_000);
        let mut v = with_verified(view(1_200), job);
        let mut eight = node(8, 1_200, NodeStatus::Inactive);
        eight.inactive_since = 1_100; // since it was seated: its fault
        let mut nine = node(9, 1_200, NodeStatus::Active);
        nine.inactive_since = 900; // before: not this seat's
        v.nodes.insert(8, eight);
        v.nodes.insert(9, nine);
        // One per view: each reclaim changes the job's word.
        assert_eq!(due(&v), [Action::ReclaimSeat { job: 1, seat: 0 }]);
        v.verified.get_mut(&1).unwrap().seats.0[0] = Seat::default();
        assert_eq!(
            due(&v),
            [Action::ReclaimSeat { job: 1, seat: 1 }],
            "the next, from the next view"
        );
        v.now = 5_001;
        assert!(
            !due(&v)
                .iter()
                .any(|a| matches!(a, Action::ReclaimSeat { .. })),
            "not after the commit phase"
        );
    }

    #[test]
    fn reveals_open_once_no_seat_runs_and_no_empty_seat_can_fill() {
        let mut job = verified_job(1, Verification::REPLICATED, JobStatus::Committing, 5_000, 0);
        seat(&mut job, 0, 7, Seat::COMMITTED, 1_000);
        seat(&mut job, 1, 8, Seat::SEATED, 1_000);
        seat(&mut job, 2, 9, Seat::COMMITTED, 1_000);
        let mut v = with_verified(view(1_500), job.clone());
        assert_eq!(due(&v), [], "seat 1 still runs");
        v.now = 1_601;
        assert_eq!(
            due(&v),
            [Action::OpenReveals { job: 1 }],
            "seat 1's run is over: absent"
        );
        // An empty seat that a later round could still fill holds the reveals.
        job.seats.0[1] = Seat::default();
        let mut v = with_verified(view(1_500), job);
        assert_eq!(due(&v), []);
        v.now = 4_401;
        assert_eq!(
            due(&v),
            [Action::OpenReveals { job: 1 }],
            "no run fits any more"
        );
    }

    #[test]
    fn a_replicated_job_is_decided_when_its_reveals_are_in_or_the_phase_is_over() {
        let mut job = verified_job(1, Verification::REPLICATED, JobStatus::Revealing, 2_000, 0);
        seat(&mut job, 0, 7, Seat::REVEALED, 1_000);
        seat(&mut job, 1, 8, Seat::COMMITTED, 1_000);
        seat(&mut job, 2, 9, Seat::REVEALED, 1_000);
        let mut v = with_verified(view(1_900), job.clone());
        assert_eq!(due(&v), [], "seat 1 may still reveal");
        v.now = 2_001;
        assert_eq!(due(&v), [Action::Decide { job: 1 }]);
        job.seats.0[1].phase = Seat::REVEALED;
        let v = with_verified(view(1_900), job);
        assert_eq!(due(&v), [Action::Decide { job: 1 }], "every seat revealed");
    }

    #[test]
    fn a_dispute_waits_for_the_providers_reveal_until_the_phase_ends() {
        // Committing past its commit phase: the reveal phase runs to 5 060.
        let mut job = verified_job(1, Verification::REFEREED, JobStatus::Committing, 5_000, 0);
        seat(&mut job, 0, 7, Seat::REVEALED, 4_000);
        let mut v = with_verified(view(5_010), job.clone());
        assert_eq!(due(&v), [], "the provider has not revealed");
        v.now = 5_061;
        assert_eq!(due(&v), [Action::Decide { job: 1 }], "it loses");
        job.provider_revealed = true;
        let v = with_verified(view(5_010), job);
        assert_eq!(due(&v), [Action::Decide { job: 1 }]);
    }

    #[test]
    fn a_refereed_provider_is_reclaimed_paid_or_settled_as_a_tier_none_one() {
        let mut v = view(1_000);
        v.nodes.insert(3, node(3, 1_000, NodeStatus::Active));
        let mut assigned = verified_job(1, Verification::REFEREED, JobStatus::Assigned, 999, 0);
        assigned.state.node_id = 3;
        v = with_verified(v, assigned);
        v = with_verified(
            v,
            verified_job(2, Verification::REFEREED, JobStatus::Submitted, 1_000, 0),
        );
        v = with_verified(
            v,
            verified_job(3, Verification::REFEREED, JobStatus::Arbitrating, 1_000, 0),
        );
        v = with_verified(
            v,
            verified_job(4, Verification::REFEREED, JobStatus::Submitted, 1_001, 0),
        );
        let mut open = verified_job(5, Verification::REFEREED, JobStatus::Open, 0, 0);
        open.terms.deadline = 1_599;
        v = with_verified(v, open);
        assert_eq!(
            due(&v),
            [
                Action::ExpireVerified { job: 5 },
                Action::ReclaimRefereed { job: 1, node: 3 },
                Action::FinalizeVerified { job: 2 },
                Action::SettleVerified { job: 3 },
            ]
        );
    }

    proptest! {
        /// Whatever the view, a job gets at most one action, and every action's condition
        /// holds in the contract's terms.
        #[test]
        fn due_actions_match_the_contract_conditions(
            now in 0u64..2_000,
            nodes in prop::collection::vec((0u64..2_000, prop::bool::ANY, 0u64..2_000), 1..8),
            jobs in prop::collection::vec((0u64..8, 0u64..2_000, 0u64..2_000, 0u8..4), 0..16),
        ) {
            let mut v = view(now);
            for (id, (beat, active, inactive_since)) in nodes.iter().enumerate() {
                let status = if *active { NodeStatus::Active } else { NodeStatus::Inactive };
                let mut n = node(id as u64, *beat, status);
                n.inactive_since = *inactive_since;
                v.nodes.insert(id as u64, n);
            }
            for (id, (node, until, deadline, status)) in jobs.iter().enumerate() {
                let id = id as u64;
                let status = [JobStatus::Open, JobStatus::Assigned, JobStatus::Submitted, JobStatus::Disputed][*status as usize];
                let node = node % nodes.len() as u64;
                let job = if status == JobStatus::Open {
                    open_job(id, *deadline)
                } else {
                    with_status(open_job(id, 9_999), status, node, *until + 60)
                };
                v.jobs.insert(id, job);
            }
            let actions = due(&v);
            let mut jobs_acted = HashSet::new();
            for action in &actions {
                if let Some(job) = action.job() {
                    prop_assert!(jobs_acted.insert(job), "one action per job");
                }
                match *action {
                    Action::MarkInactive { node } => {
                        let n = &v.nodes[&node];
                        prop_assert!(n.status == NodeStatus::Active && now > n.last_heartbeat + 60);
                    }
                    Action::Reclaim { job, node } => {
                        let j = &v.jobs[&job];
                        prop_assert!(j.state.status == JobStatus::Assigned && j.state.node_id == node);
                        let assigned_at = j.state.until - 60;
                        prop_assert!(v.nodes[&node].inactive_since >= assigned_at || now > j.state.until);
                    }
                    Action::Expire { job } => {
                        let j = &v.jobs[&job];
                        prop_assert!(j.state.status == JobStatus::Open && now + 60 > j.terms.deadline);
                    }
                    Action::Finalize { job } => {
                        let j = &v.jobs[&job];
                        prop_assert!(j.state.status == JobStatus::Submitted && now >= j.state.until);
                    }
                    Action::SettleDispute { job } => {
                        let j = &v.jobs[&job];
                        prop_assert!(j.state.status == JobStatus::Disputed && now >= j.state.until);
                    }
                    other => prop_assert!(false, "no verified job, yet {:?}", other),
                }
            }
        }
    }
}
