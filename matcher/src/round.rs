//! The matcher's books and one planning round, pure: what it sent and what came of it
//! (assignments in flight, pairs that reverted, batches to split), the explanations it
//! published, and — from the view and the jobs this replica holds — the calls to send and
//! the explanations to write. `matcher_service` does the IO (claims, the sender, the KV
//! bucket) and tells the books what happened.
//!
//! ```text
//!  Report ──on_report──▶ Books ◀──sync(view)
//!  (view, held) ──plan──▶ Round { calls: assignBatch contents, explanations to write }
//!  sender took a call ──sent──▶ Books (slots held until the view shows the outcome)
//! ```

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant};

use gantry_protocol::pending::{PENDING_VERSION, PendingCandidate, PendingExplanation};

use crate::decide::{Explanation, Reservations, explain};
use crate::incremental::IncrementalPlanner;
use crate::sender::{Assign, Call, MAX_BATCH, Outcome, Report};
use crate::view::{Changes, JobView, Requirements, View};

/// Held jobs explained in one round at most: a job claimed or changed since the last round
/// first, then the others in turn. Below this many held jobs, every waiting job's
/// explanation is brought up to date every round; above it, within a sweep of the queue.
pub const EXPLAINED_PER_ROUND: usize = 128;
/// Jobs waiting to be explained first, at most.
pub const TO_EXPLAIN_KEPT: usize = 65_536;

/// The jobs a replica holds claims on.
pub trait Holding {
    fn holds(&self, job: u64) -> bool;
    /// Held jobs from `from` on, by id, then from the lowest.
    fn from(&self, from: u64) -> impl Iterator<Item = u64> + '_;
}

impl Holding for BTreeSet<u64> {
    fn holds(&self, job: u64) -> bool {
        self.contains(&job)
    }

    fn from(&self, from: u64) -> impl Iterator<Item = u64> + '_ {
        self.range(from..).chain(self.range(..from)).copied()
    }
}

/// What one round decided.
#[derive(Debug, Default)]
pub struct Round {
    /// Each call's assignments (`assign` for one, `assignBatch` for more).
    pub calls: Vec<Vec<Assign>>,
    /// Explanations that are new or changed since this replica last wrote them.
    pub explanations: Vec<PendingExplanation>,
}

/// What a replica remembers between rounds.
#[derive(Debug)]
pub struct Books {
    reservations: Reservations,
    /// Jobs whose assignment was mined, with its block: the reservation holds until the
    /// view has applied that block (if the job is still open then, a reorg undid it).
    confirmed: HashMap<u64, u64>,
    /// (job, node) pairs whose assignment reverted, not tried again until then.
    excluded_until: HashMap<(u64, u64), Instant>,
    /// Jobs of an assignment batch that reverted: sent alone until placed.
    alone: HashSet<u64>,
    /// Explanations this replica wrote, by job, and how many name each reason.
    published: HashMap<u64, PendingExplanation>,
    reasons: HashMap<&'static str, usize>,
    /// Jobs to explain first (claimed or changed since they were last explained), each
    /// once, at most [`TO_EXPLAIN_KEPT`] (the sweep reaches the others).
    to_explain: VecDeque<u64>,
    queued: HashSet<u64>,
    /// Where the sweep over the other held jobs goes on.
    sweep_from: u64,
    revert_backoff: Duration,
}

impl Books {
    pub fn new(revert_backoff: Duration) -> Self {
        Self {
            reservations: Reservations::default(),
            confirmed: HashMap::new(),
            excluded_until: HashMap::new(),
            alone: HashSet::new(),
            published: HashMap::new(),
            reasons: HashMap::new(),
            to_explain: VecDeque::new(),
            queued: HashSet::new(),
            sweep_from: 0,
            revert_backoff,
        }
    }

    /// A sent call's outcome, at `now`.
    pub fn on_report(&mut self, report: &Report, now: Instant) {
        let Call::Assign(batch) = &report.call else {
            return;
        };
        let batched = batch.len() > 1;
        for &Assign { job, node, .. } in batch {
            match report.outcome {
                Outcome::Confirmed { block } => {
                    tracing::info!(job_id = job, node_id = node, block, tx = %report.tx_hash, "assignment confirmed");
                    // The view may have shown the assignment already and ended the
                    // reservation.
                    if self.reservations.in_flight.contains_key(&job) {
                        self.confirmed.insert(job, block);
                    }
                }
                Outcome::Reverted { block } if batched => {
                    // One stale item reverts the whole batch: each goes alone next, so
                    // the one that fails is found and the others are not held up.
                    tracing::info!(job_id = job, node_id = node, block, tx = %report.tx_hash, "assignment batch reverted; sending its jobs one by one");
                    self.reservations.in_flight.remove(&job);
                    self.alone.insert(job);
                }
                Outcome::Reverted { block } => {
                    // Expected now and then (another replica or a claim took the job, the
                    // node went inactive): try the next candidate, and not this pair again
                    // soon.
                    tracing::info!(job_id = job, node_id = node, block, tx = %report.tx_hash, "assignment reverted; trying the next candidate");
                    self.reservations.in_flight.remove(&job);
                    self.excluded_until
                        .insert((job, node), now + self.revert_backoff);
                }
                Outcome::Dropped => {
                    tracing::warn!(
                        job_id = job,
                        node_id = node,
                        "assignment dropped; planning it again"
                    );
                    self.reservations.in_flight.remove(&job);
                }
            }
        }
    }

    /// Ends the reverted pairs' backoff that passed by `now`; whether any did.
    pub fn expire(&mut self, now: Instant) -> bool {
        let before = self.excluded_until.len();
        self.excluded_until.retain(|_, until| *until > now);
        self.excluded_until.len() != before
    }

    /// Brings the books up to the view: reservations end once the view shows their
    /// outcome, and what concerned jobs no longer open is forgotten.
    pub fn sync(&mut self, view: &View) {
        let confirmed = &mut self.confirmed;
        self.reservations.in_flight.retain(|job, _| {
            let open = view.open_job(*job).is_some();
            let undone = confirmed.get(job).is_some_and(|block| view.block >= *block);
            if !open || undone {
                confirmed.remove(job);
                false
            } else {
                true
            }
        });
        self.excluded_until
            .retain(|(job, _), _| view.open_job(*job).is_some());
        self.alone.retain(|job| view.open_job(*job).is_some());
        self.reservations.excluded = self.excluded_until.keys().copied().collect();
    }

    /// A claim on `job` arrived, or the view changed it: explain it first.
    pub fn touched(&mut self, job: u64) {
        if self.to_explain.len() < TO_EXPLAIN_KEPT && self.queued.insert(job) {
            self.to_explain.push_back(job);
        }
    }

    /// Plans one round for the jobs `held` claims: the assignments (from `planner`, told
    /// what `changes` since its last round), in calls of at most [`MAX_BATCH`] (a job of a
    /// batch that reverted alone), and the explanations of held jobs that cannot be placed,
    /// where new or changed ([`EXPLAINED_PER_ROUND`] looked at).
    pub fn plan(
        &mut self,
        planner: &mut IncrementalPlanner,
        view: &View,
        changes: &Changes,
        held: &impl Holding,
    ) -> Round {
        let mut assign: Vec<Assign> = Vec::new();
        let mut placed: HashSet<u64> = HashSet::new();
        for (job, node) in planner.plan(view, changes, &self.reservations) {
            placed.insert(job);
            if held.holds(job)
                && let Some(open) = view.open_job(job)
            {
                assign.push(Assign {
                    job,
                    node,
                    with: open.market(),
                });
            }
        }
        // A refereed job's provider is placed with `assignRefereed`, which takes one job.
        let (alone, batched): (Vec<Assign>, Vec<Assign>) = assign
            .into_iter()
            .partition(|a| self.alone.contains(&a.job) || a.with.terms.verification.is_verified());
        let calls = alone
            .into_iter()
            .map(|a| vec![a])
            .chain(batched.chunks(MAX_BATCH).map(<[Assign]>::to_vec))
            .collect();

        // The held jobs to explain this round: the touched ones, then the sweep.
        if !changes.all {
            for job in &changes.jobs {
                self.touched(*job);
            }
        }
        let waiting = |job: u64| {
            held.holds(job)
                && !placed.contains(&job)
                && !self.reservations.in_flight.contains_key(&job)
                && view.open_job(job).is_some()
        };
        let mut chosen: Vec<u64> = Vec::new();
        let mut seen: HashSet<u64> = HashSet::new();
        while chosen.len() < EXPLAINED_PER_ROUND
            && let Some(job) = self.to_explain.pop_front()
        {
            self.queued.remove(&job);
            if seen.insert(job) && waiting(job) {
                chosen.push(job);
            }
        }
        let mut next = None;
        for (looked, job) in held.from(self.sweep_from).enumerate() {
            if chosen.len() >= EXPLAINED_PER_ROUND || looked >= 4 * EXPLAINED_PER_ROUND {
                next = Some(job);
                break;
            }
            if seen.insert(job) && waiting(job) {
                chosen.push(job);
            }
        }
        self.sweep_from = next.unwrap_or(0);

        // Jobs with the same requirements, a runnable spec and no barred node share one
        // explanation.
        let mut by_requirements: HashMap<Requirements, Explanation> = HashMap::new();
        let mut explanations = Vec::new();
        for open in chosen.into_iter().filter_map(|job| view.open_job(job)) {
            let own;
            let explanation = if open.barred.is_empty() && open.spec_error.is_none() {
                by_requirements
                    .entry(*open.requirements())
                    .or_insert_with(|| explain(view, open))
            } else {
                own = explain(view, open);
                &own
            };
            let pending = pending_explanation(open, explanation, view.block);
            let unchanged = self.published.get(&open.id).is_some_and(|old| {
                PendingExplanation {
                    block: old.block,
                    ..pending.clone()
                } == *old
            });
            if !unchanged {
                explanations.push(pending);
            }
        }
        Round {
            calls,
            explanations,
        }
    }

    /// The sender took `call`: its jobs hold their node's slot until the view shows the
    /// outcome. Returns the jobs whose published explanation is now stale (to delete).
    pub fn sent(&mut self, call: &[Assign]) -> Vec<u64> {
        call.iter()
            .filter_map(|a| {
                self.reservations.in_flight.insert(a.job, a.node);
                self.unpublish(a.job).then_some(a.job)
            })
            .collect()
    }

    /// The explanation was written.
    pub fn published(&mut self, pending: PendingExplanation) {
        self.unpublish(pending.job_id);
        *self.reasons.entry(reason(&pending)).or_default() += 1;
        self.published.insert(pending.job_id, pending);
    }

    /// The claim on `job` was released; whether its explanation must be deleted.
    pub fn released(&mut self, job: u64) -> bool {
        self.unpublish(job)
    }

    fn unpublish(&mut self, job: u64) -> bool {
        let Some(old) = self.published.remove(&job) else {
            return false;
        };
        let reason = reason(&old);
        if let Some(count) = self.reasons.get_mut(reason) {
            *count -= 1;
            if *count == 0 {
                self.reasons.remove(reason);
            }
        }
        true
    }

    /// The published explanations, by the constraint that rules out the most nodes
    /// ("none" when nothing does: the slots went to jobs ahead).
    pub fn pending_by_reason(&self) -> &HashMap<&'static str, usize> {
        &self.reasons
    }
}

fn reason(pending: &PendingExplanation) -> &'static str {
    pending
        .rejected
        .iter()
        .max_by_key(|(_, count)| **count)
        .map_or("none", |(constraint, _)| constraint.name())
}

fn pending_explanation(job: &JobView, explanation: &Explanation, block: u64) -> PendingExplanation {
    PendingExplanation {
        v: PENDING_VERSION,
        job_id: job.id,
        summary: explanation.summary(job.requirements()),
        nodes: explanation.nodes as u64,
        rejected: explanation
            .rejected
            .iter()
            .map(|(constraint, count)| (*constraint, *count as u64))
            .collect(),
        best: explanation
            .best
            .iter()
            .map(|candidate| PendingCandidate {
                node_id: candidate.node,
                score: (candidate.score * 1_000.0).round() / 1_000.0,
                failed: candidate.failed.clone(),
            })
            .collect(),
        block,
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::B256;

    use super::*;
    use crate::decide::{Strategy, Weights};
    use crate::view::fixtures;
    use crate::view::{Capabilities, NodeView};

    fn node(id: u64) -> NodeView {
        let capabilities = Capabilities {
            gpu_model: B256::ZERO,
            gpu_count: 1,
            vram_mib: 1_024,
            cpu_cores: 8,
            ram_mib: 8_192,
            price_per_gpu_hour: 1,
            max_concurrent_jobs: 20,
            engines: Default::default(),
        };
        fixtures::node(id, capabilities, 500, 0)
    }

    fn job(id: u64, vram_mib: u32) -> JobView {
        fixtures::job(
            id,
            1,
            1_000_000,
            Requirements {
                min_gpu_count: 1,
                min_vram_mib: vram_mib,
                max_price_per_gpu_hour: 5,
                max_runtime: 3_600,
                ..Requirements::default()
            },
        )
    }

    fn view(jobs: impl IntoIterator<Item = JobView>) -> View {
        View {
            nodes: [(1, node(1))].into(),
            jobs: jobs.into_iter().map(|j| (j.id, j)).collect(),
            ..View::default()
        }
    }

    /// Every job of the view held.
    fn all(v: &View) -> BTreeSet<u64> {
        v.jobs.keys().chain(v.verified.keys()).copied().collect()
    }

    fn report(call: &[Assign], outcome: Outcome) -> Report {
        Report {
            call: Call::Assign(call.to_vec()),
            outcome,
            tx_hash: B256::ZERO,
        }
    }

    /// A refereed job waiting for a provider is planned as an open job (the planner's
    /// rules, the node's slots) and sent alone (`assignRefereed` takes one job); once
    /// placed, it is no longer open.
    #[test]
    fn a_refereed_job_is_placed_alone_beside_the_batches() {
        use gantry_protocol::market::{Verification, Verified};

        use crate::view::VerifiedView;

        let mut v = view((1..=3).map(|id| job(id, 512)));
        let mut refereed = job(9, 512);
        refereed.terms.verification = Verification {
            tier: Verification::REFEREED,
            size: 3,
            quorum: 0,
            reveal_window: 60,
        };
        refereed.state.verified = Some(Verified::default());
        v.verified.insert(
            9,
            VerifiedView {
                id: 9,
                terms: refereed.terms,
                state: refereed.state,
                seats: Default::default(),
                provider_revealed: false,
                placing: Some(refereed.clone()),
            },
        );
        assert_eq!(v.open_jobs().count(), 4);
        assert!(v.open_job(9).is_some());
        let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
        let mut books = Books::new(Duration::from_secs(30));
        let round = books.plan(&mut planner, &v, &Changes::everything(), &all(&v));
        let mut calls: Vec<Vec<u64>> = round
            .calls
            .iter()
            .map(|call| call.iter().map(|a| a.job).collect())
            .collect();
        calls.sort();
        assert_eq!(calls, [vec![1, 2, 3], vec![9]]);
        let alone = round.calls.iter().find(|c| c[0].job == 9).unwrap();
        assert_eq!(alone[0].with.state.verified, Some(Verified::default()));

        // Placed: the view shows it assigned, and nobody plans it again.
        let placing = v.verified.get_mut(&9).unwrap().placing.as_mut().unwrap();
        placing.state.status = gantry_protocol::status::JobStatus::Assigned;
        assert!(v.open_job(9).is_none());
    }

    #[test]
    fn placeable_jobs_go_in_batches_and_a_reverted_batch_splits() {
        let v = view((1..=12).map(|id| job(id, 512)));
        let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
        let mut books = Books::new(Duration::from_secs(30));

        // Twelve jobs for a node with twenty slots: a batch of ten and one of two.
        let round = books.plan(&mut planner, &v, &Changes::everything(), &all(&v));
        let sizes: Vec<usize> = round.calls.iter().map(Vec::len).collect();
        assert_eq!(sizes, [10, 2]);
        for call in &round.calls {
            books.sent(call);
        }
        // Sent: nothing is planned again while in flight.
        assert!(
            books
                .plan(&mut planner, &v, &Changes::everything(), &all(&v))
                .calls
                .is_empty()
        );

        // The batch of two reverts: its jobs go alone; the first pair is not avoided.
        books.on_report(
            &report(&round.calls[1], Outcome::Reverted { block: 3 }),
            Instant::now(),
        );
        books.sync(&v);
        let round = books.plan(&mut planner, &v, &Changes::everything(), &all(&v));
        let alone: Vec<Vec<u64>> = round
            .calls
            .iter()
            .map(|c| c.iter().map(|a| a.job).collect())
            .collect();
        assert_eq!(alone, [vec![11], vec![12]]);

        // One of those reverts alone: that pair waits out the backoff.
        let now = Instant::now();
        books.sent(&round.calls[0]);
        books.on_report(
            &report(&round.calls[0], Outcome::Reverted { block: 4 }),
            now,
        );
        books.sync(&v);
        assert!(
            books
                .plan(&mut planner, &v, &Changes::everything(), &all(&v))
                .calls
                .iter()
                .all(|c| c[0].job != 11)
        );
        assert!(books.expire(now + Duration::from_secs(31)));
    }

    #[test]
    fn explanations_are_brought_up_to_date_a_bounded_number_a_round_touched_jobs_first() {
        // 300 held jobs no node can run.
        let v = view((1..=300).map(|id| job(id, 2_048)));
        let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
        let mut books = Books::new(Duration::from_secs(30));
        let held = all(&v);
        let mut explained: Vec<u64> = Vec::new();
        for _ in 0..3 {
            let round = books.plan(&mut planner, &v, &Changes::none(), &held);
            assert!(round.explanations.len() <= EXPLAINED_PER_ROUND);
            for pending in round.explanations {
                explained.push(pending.job_id);
                books.published(pending);
            }
        }
        // Three rounds explained every job once, in turn.
        explained.sort_unstable();
        assert_eq!(explained, (1..=300).collect::<Vec<_>>());
        // A job claimed again (or changed) is looked at first; unchanged, not written.
        books.touched(250);
        let round = books.plan(&mut planner, &v, &Changes::none(), &held);
        assert!(round.explanations.is_empty());
        assert_eq!(books.pending_by_reason().get("vram"), Some(&300));
    }

    #[test]
    fn an_explanation_is_written_when_new_or_changed_and_dropped_once_assigned() {
        // A job no node can run (2 GiB on a 1 GiB node), held by this replica.
        let mut v = view([job(1, 2_048)]);
        let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
        let mut books = Books::new(Duration::from_secs(30));
        let round = books.plan(&mut planner, &v, &Changes::everything(), &all(&v));
        assert!(round.calls.is_empty());
        assert_eq!(round.explanations.len(), 1);
        assert_eq!(
            round.explanations[0].summary,
            "0 of 1 nodes have ≥ 2 GiB VRAM per GPU"
        );
        books.published(round.explanations[0].clone());
        assert_eq!(books.pending_by_reason().get("vram"), Some(&1));

        // The same a block later: not written again.
        v.block += 1;
        assert!(
            books
                .plan(&mut planner, &v, &Changes::everything(), &all(&v))
                .explanations
                .is_empty()
        );
        // A job this replica does not hold is not its to explain.
        assert!(
            books
                .plan(&mut planner, &v, &Changes::everything(), &BTreeSet::new())
                .explanations
                .is_empty()
        );

        // A bigger node registers: the job is assigned and its explanation is stale.
        let mut big = node(2);
        big.capabilities.vram_mib = 4_096;
        v.nodes.insert(2, big);
        let round = books.plan(&mut planner, &v, &Changes::everything(), &all(&v));
        assert_eq!(round.calls.len(), 1);
        assert_eq!(books.sent(&round.calls[0]), [1]);
        assert!(books.pending_by_reason().is_empty());
    }
}
