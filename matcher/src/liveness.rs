//! The keeper's rules: which settling calls the chain accepts now, from the view alone.
//! Pure, no IO.
//!
//! ```text
//!  View (chain time = newest committed block) ──▶ due() ──▶ MarkInactive | Reclaim | Expire | Finalize
//!                                                  Keeper: each action at most once per condition
//! ```
//!
//! Each rule mirrors the contract's check, evaluated at the newest block's time; the
//! transaction lands in a later block, whose time is not earlier, so a due action is
//! accepted unless the chain moved on meanwhile (a heartbeat in between, say).

use std::collections::HashSet;

use crate::view::{NodeStatus, View};

/// A call the keeper makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// `NodeRegistry.markInactive`: the node's heartbeat is older than the timeout.
    MarkInactive { node: u64 },
    /// `JobMarket.reclaim`: the assigned node is Inactive or overran the job's max runtime.
    Reclaim { job: u64, node: u64 },
    /// `JobMarket.expire`: an Open or Assigned job is past its deadline.
    Expire { job: u64 },
    /// `JobMarket.finalize`: a submitted result's challenge window closed undisputed.
    Finalize { job: u64 },
}

impl Action {
    /// A bounded label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::MarkInactive { .. } => "mark_inactive",
            Self::Reclaim { .. } => "reclaim",
            Self::Expire { .. } => "expire",
            Self::Finalize { .. } => "finalize",
        }
    }
}

/// Every action the chain accepts at the view's time, in a stable order.
pub fn due(view: &View) -> Vec<Action> {
    let now = view.now;
    let mut actions = Vec::new();
    for node in view.nodes.values() {
        // markInactive requires block.timestamp > lastHeartbeat + timeout.
        if node.status == NodeStatus::Active
            && view.heartbeat_timeout > 0
            && now > node.last_heartbeat + view.heartbeat_timeout
        {
            actions.push(Action::MarkInactive { node: node.id });
        }
    }
    for (job, assignment) in &view.assignments {
        // expire requires block.timestamp >= deadline; it wins over reclaim, which would
        // only requeue a job that can no longer finish in time.
        if now >= assignment.deadline {
            actions.push(Action::Expire { job: *job });
            continue;
        }
        let node_inactive = view
            .nodes
            .get(&assignment.node)
            .is_some_and(|node| node.status == NodeStatus::Inactive);
        let overran = now > assignment.assigned_at + assignment.max_runtime;
        if node_inactive || overran {
            actions.push(Action::Reclaim {
                job: *job,
                node: assignment.node,
            });
        }
    }
    for (id, job) in &view.open_jobs {
        if now >= job.deadline {
            actions.push(Action::Expire { job: *id });
        }
    }
    for (job, submission) in &view.submissions {
        // finalize requires block.timestamp >= challengeEndsAt.
        if !submission.disputed && now >= submission.challenge_ends_at {
            actions.push(Action::Finalize { job: *job });
        }
    }
    actions.sort_unstable();
    actions
}

/// Remembers what was already attempted, so each condition is acted on at most once: an
/// action is attempted again only after its condition went away and came back, or after
/// its transaction was dropped without an outcome ([`forget`](Self::forget)).
#[derive(Debug, Default)]
pub struct Keeper {
    attempted: HashSet<Action>,
}

impl Keeper {
    /// The due actions not yet attempted; they count as attempted from now on.
    pub fn next(&mut self, view: &View) -> Vec<Action> {
        let due = due(view);
        let current: HashSet<Action> = due.iter().copied().collect();
        self.attempted.retain(|action| current.contains(action));
        due.into_iter()
            .filter(|action| self.attempted.insert(*action))
            .collect()
    }

    /// The action's transaction never landed: it may be attempted again.
    pub fn forget(&mut self, action: &Action) {
        self.attempted.remove(action);
    }
}

#[cfg(test)]
mod tests {
    use alloy::primitives::{Address, B256};
    use proptest::prelude::{prop, prop_assert, proptest};

    use super::*;
    use crate::view::{Assignment, Capabilities, JobView, NodeView, Requirements, Submission};

    fn node(id: u64, last_heartbeat: u64, status: NodeStatus) -> NodeView {
        NodeView {
            id,
            agent: Address::with_last_byte(id as u8),
            capabilities: Capabilities {
                gpu_model: B256::ZERO,
                gpu_count: 1,
                vram_mib: 1,
                cpu_cores: 1,
                ram_mib: 1,
                price_per_gpu_hour: 1,
                max_concurrent_jobs: 1,
            },
            status,
            stake: 1,
            active_jobs: 0,
            completed_jobs: 0,
            failed_jobs: 0,
            last_heartbeat,
        }
    }

    fn open_job(id: u64, deadline: u64) -> JobView {
        JobView {
            id,
            submitter: Address::ZERO,
            requirements: Requirements {
                gpu_model: B256::ZERO,
                min_gpu_count: 1,
                min_vram_mib: 1,
                min_cpu_cores: 1,
                min_ram_mib: 1,
                max_price_per_gpu_hour: 1,
                max_runtime: 60,
                priority: 0,
            },
            bounty: 1,
            deadline,
            attempts: 0,
            posted_at: (0, 0),
        }
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
        // Given a node that last beat at t=100 with a 60 s timeout,
        let mut v = view(160);
        v.nodes.insert(1, node(1, 100, NodeStatus::Active));
        // at t=160 it is not yet overdue (the contract wants strictly later),
        assert_eq!(due(&v), []);
        // at t=161 it is.
        v.now = 161;
        assert_eq!(due(&v), [Action::MarkInactive { node: 1 }]);
        // An inactive node is not marked again.
        v.nodes.get_mut(&1).unwrap().status = NodeStatus::Inactive;
        assert_eq!(due(&v), []);
    }

    #[test]
    fn jobs_of_an_inactive_or_overrunning_node_are_reclaimed_and_late_jobs_expire() {
        let mut v = view(1_000);
        v.nodes.insert(1, node(1, 1_000, NodeStatus::Inactive));
        v.nodes.insert(2, node(2, 1_000, NodeStatus::Active));
        let assignment = |node, assigned_at, deadline| Assignment {
            node,
            assigned_at,
            max_runtime: 60,
            deadline,
        };
        v.assignments.insert(10, assignment(1, 990, 5_000)); // inactive node
        v.assignments.insert(11, assignment(2, 900, 5_000)); // ran 100 s of 60
        v.assignments.insert(12, assignment(2, 990, 5_000)); // fine
        v.assignments.insert(13, assignment(1, 990, 1_000)); // deadline reached: expire
        v.open_jobs.insert(14, open_job(14, 999));
        v.open_jobs.insert(15, open_job(15, 1_001));
        assert_eq!(
            due(&v),
            [
                Action::Reclaim { job: 10, node: 1 },
                Action::Reclaim { job: 11, node: 2 },
                Action::Expire { job: 13 },
                Action::Expire { job: 14 },
            ]
        );
    }

    #[test]
    fn results_are_finalized_when_the_window_closes_unless_disputed() {
        let mut v = view(500);
        let submission = |challenge_ends_at, disputed| Submission {
            node: 1,
            challenge_ends_at,
            disputed,
        };
        v.submissions.insert(1, submission(500, false));
        v.submissions.insert(2, submission(501, false));
        v.submissions.insert(3, submission(400, true));
        assert_eq!(due(&v), [Action::Finalize { job: 1 }]);
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

    proptest! {
        /// Whatever the view, a job gets at most one action, and every action's condition
        /// holds in the contract's terms.
        #[test]
        fn due_actions_match_the_contract_conditions(
            now in 0u64..2_000,
            beats in prop::collection::vec((0u64..2_000, prop::bool::ANY), 1..8),
            jobs in prop::collection::vec((0u64..8, 0u64..2_000, 0u64..2_000, prop::bool::ANY), 0..16),
        ) {
            let mut v = view(now);
            for (id, (beat, active)) in beats.iter().enumerate() {
                let status = if *active { NodeStatus::Active } else { NodeStatus::Inactive };
                v.nodes.insert(id as u64, node(id as u64, *beat, status));
            }
            for (id, (node, assigned_at, deadline, open)) in jobs.iter().enumerate() {
                let id = id as u64;
                if *open {
                    v.open_jobs.insert(id, open_job(id, *deadline));
                } else {
                    v.assignments.insert(id, Assignment {
                        node: node % beats.len() as u64,
                        assigned_at: *assigned_at,
                        max_runtime: 60,
                        deadline: *deadline,
                    });
                }
            }
            let actions = due(&v);
            let mut jobs_acted = HashSet::new();
            for action in &actions {
                match *action {
                    Action::MarkInactive { node } => {
                        let n = &v.nodes[&node];
                        prop_assert!(n.status == NodeStatus::Active && now > n.last_heartbeat + 60);
                    }
                    Action::Reclaim { job, node } => {
                        prop_assert!(jobs_acted.insert(job));
                        let a = v.assignments[&job];
                        prop_assert!(a.node == node && now < a.deadline);
                        prop_assert!(v.nodes[&node].status == NodeStatus::Inactive
                            || now > a.assigned_at + a.max_runtime);
                    }
                    Action::Expire { job } => {
                        prop_assert!(jobs_acted.insert(job));
                        let deadline = v.open_jobs.get(&job).map(|j| j.deadline)
                            .or(v.assignments.get(&job).map(|a| a.deadline));
                        prop_assert!(deadline.is_some_and(|d| now >= d));
                    }
                    Action::Finalize { .. } => prop_assert!(false, "no submissions here"),
                }
            }
        }
    }
}
