//! The one clock of a job on this node: chain time, counted from the assignment on chain.
//! The job may run until its own `timeoutSecs` from the assignment, but never later than
//! the attempt's end (`until`) less the node's `answer_margin`, so that the answer (a
//! result, or a failure report when the job ran into its limit) is uploaded and mined by
//! `until` and the node is never reclaimed for a job's own slowness. Pure.
//!
//! ```text
//!  assigned_at ─────── timeoutSecs ───────▶ stop_by ──── margin ────▶ until
//!      │ download, run (the job's time)        │ pack, upload, submitResult mined
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use gantry_protocol::market::Job;

/// When an attempt started, when its job must stop, and when the chain stops waiting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    /// Chain time of the assignment.
    pub assigned_at: u64,
    /// Chain time by which the job is stopped (`State::stop_by`).
    pub stop_by: u64,
    /// Chain time by which the answer must be mined (`state.until`).
    pub until: u64,
}

impl Clock {
    /// The clock of an Assigned `job` whose spec allows `timeout_secs`, answered `margin`
    /// before the attempt ends; `None` when the job is not Assigned.
    pub fn of(job: &Job, timeout_secs: u64, margin: Duration) -> Option<Self> {
        let state = &job.state;
        Some(Self {
            assigned_at: state.assigned_at(&job.terms)?,
            stop_by: state.stop_by(&job.terms, timeout_secs, margin.as_secs())?,
            until: state.until,
        })
    }

    /// How long the job may still run at chain time `now` (zero once it must stop).
    pub fn left(&self, now: u64) -> Duration {
        Duration::from_secs(self.stop_by.saturating_sub(now))
    }

    /// Whether the job must stop at chain time `now`.
    pub fn is_up(&self, now: u64) -> bool {
        now >= self.stop_by
    }

    /// Seconds the job has had at chain time `now`, counted from the assignment.
    pub fn ran(&self, now: u64) -> u64 {
        now.min(self.stop_by).saturating_sub(self.assigned_at)
    }

    /// Whose time it was, when the job's time is up at chain time `now` before it could
    /// start, the assignment having reached this worker `since_received` ago: the job's,
    /// when the assignment arrived in its time (its limit was too short for the node to
    /// get it going); the node's, when it arrived after (the worker was down, or behind).
    /// `None` while the job still has time.
    pub fn late_start(&self, now: u64, since_received: Duration) -> Option<Late> {
        if !self.is_up(now) {
            return None;
        }
        let received_at = now.saturating_sub(since_received.as_secs());
        Some(if received_at < self.stop_by {
            Late::JobsTime
        } else {
            Late::NodesTime
        })
    }
}

/// Whose time ran out when a job's time was up before it could start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Late {
    /// The assignment arrived in the job's time: its limit left too little to start it.
    JobsTime,
    /// The assignment arrived after the job's stop: the worker was late.
    NodesTime,
}

/// The chain's time as this machine can tell it: the later of the newest block's
/// timestamp (it lags while no block is mined) and this machine's clock (which the
/// provider keeps synchronised). Taking the later stops a job early rather than late.
pub fn chain_now(newest_block: u64, local: SystemTime) -> u64 {
    let local = local
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    newest_block.max(local)
}

#[cfg(test)]
mod tests {
    use alloy::primitives::aliases::U40;
    use alloy::primitives::{Address, B256};
    use gantry_protocol::bindings::JobMarket;
    use gantry_protocol::eligibility::Requirements;
    use gantry_protocol::market::{Policy, State, Terms};

    use super::*;

    fn assigned(max_runtime: u32, until: u64) -> Job {
        let terms = Terms {
            submitter: Address::ZERO,
            bounty: 1,
            spec_hash: B256::ZERO,
            requirements: Requirements {
                max_runtime,
                ..Requirements::default()
            },
            deadline: until + 10_000,
            policy: 1,
            verification: gantry_protocol::market::Verification::NONE,
        };
        let mut state = State::posted(&terms, &Policy::default());
        state.apply(&JobMarket::JobMarketEvents::JobAssigned(
            JobMarket::JobAssigned {
                jobId: 1,
                nodeId: 1,
                claimed: false,
                until: U40::from(until),
            },
        ));
        Job { terms, state }
    }

    #[test]
    fn a_job_runs_for_its_own_timeout_from_the_assignment() {
        // Assigned at 1 000 for 600 s; the spec allows 3 s.
        let clock = Clock::of(&assigned(600, 1_600), 3, Duration::from_secs(60)).unwrap();
        assert_eq!(
            clock,
            Clock {
                assigned_at: 1_000,
                stop_by: 1_003,
                until: 1_600
            }
        );
        // The worker started it a second after the assignment: two seconds are left.
        assert_eq!(clock.left(1_001), Duration::from_secs(2));
        assert!(!clock.is_up(1_002));
        assert!(clock.is_up(1_003));
        assert_eq!(clock.left(1_010), Duration::ZERO);
        assert_eq!(clock.ran(1_010), 3);
    }

    #[test]
    fn a_job_whose_time_ran_out_before_it_started_is_its_own_affair_only_if_it_arrived_in_time() {
        let clock = Clock::of(&assigned(600, 1_600), 2, Duration::from_secs(60)).unwrap();
        assert_eq!(clock.late_start(1_001, Duration::from_secs(1)), None);
        // Arrived at 1 000, checked at 1 003 (a busy node): the job's 2 s are gone.
        assert_eq!(
            clock.late_start(1_003, Duration::from_secs(3)),
            Some(Late::JobsTime)
        );
        // Arrived at 1 300 (redelivered after the worker restarted): the node was late.
        assert_eq!(
            clock.late_start(1_301, Duration::from_secs(1)),
            Some(Late::NodesTime)
        );
    }

    #[test]
    fn a_timeout_as_long_as_the_runtime_still_leaves_the_margin_to_answer() {
        let clock = Clock::of(&assigned(600, 1_600), 600, Duration::from_secs(60)).unwrap();
        assert_eq!(clock.stop_by, 1_540);
        assert_eq!(clock.left(1_000), Duration::from_secs(540));
    }

    #[test]
    fn an_open_job_has_no_clock() {
        let mut job = assigned(600, 1_600);
        job.state.apply(&JobMarket::JobMarketEvents::JobRequeued(
            JobMarket::JobRequeued {
                jobId: 1,
                faults: 0,
                barred: 1,
            },
        ));
        assert_eq!(Clock::of(&job, 3, Duration::from_secs(60)), None);
    }

    #[test]
    fn chain_time_is_the_later_of_the_newest_block_and_the_local_clock() {
        let at = |secs| UNIX_EPOCH + Duration::from_secs(secs);
        // No block for a while: the local clock is ahead.
        assert_eq!(chain_now(1_000, at(1_030)), 1_030);
        // Chain time moved ahead of the wall clock (a test's evm_increaseTime).
        assert_eq!(chain_now(2_000, at(1_030)), 2_000);
    }
}
