//! The folds, given a job's and a node's events as the market emits them (in the order of
//! `JobMarket.sol`), checked against what the market holds.

use alloy::primitives::aliases::{U40, U96};
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::sol_types::SolEvent;
use gantry_protocol::api::{
    AccountRow, AttemptFault, AttemptOutcome, AttemptRow, ChargeCause, Completion, Failure, JobRow,
    NodeRow,
};
use gantry_protocol::bindings::{JobMarket as M, NodeRegistry as R};
use gantry_protocol::eligibility::Requirements;
use gantry_protocol::envelope::EventEnvelope;
use gantry_protocol::events::{ContractKind, DecodedEvent, GantryEvent};
use gantry_protocol::jobs::{CompletionReport, CompletionStatus};
use gantry_protocol::market::{self, Policies, Terms};
use gantry_protocol::status::{JobStatus, NodeStatus};

use super::*;

const SUBMITTER: Address = Address::repeat_byte(0x5b);
const NODE: u64 = 1;
const BOUNTY: u128 = 50_000_000;
const MAX_RUNTIME: u32 = 600;
/// The market's treasury account as the store finds it for a slash.
const TREASURY: &str = "0x7E7e7e7E7e7E7e7e7e7e7E7E7e7e7E7e7e7e7e7E";

/// Events as the indexer publishes them, each in its own transaction unless `same_tx`.
#[derive(Default)]
struct Chain {
    events: Vec<EventEnvelope>,
    time: u64,
}

impl Chain {
    fn new() -> Self {
        Self {
            events: Vec::new(),
            time: 1_000,
        }
    }

    /// `event` `secs` after the last one, in a transaction of its own.
    fn at<E: SolEvent + serde::Serialize>(&mut self, secs: u64, event: E) -> &mut Self {
        self.time += secs;
        let number = self.events.len() as u64 + 1;
        self.push(event, B256::from(U256::from(number)), 0)
    }

    /// `event` in the transaction of the last one, right after it.
    fn then<E: SolEvent + serde::Serialize>(&mut self, event: E) -> &mut Self {
        let last = self.events.last().expect("an event before");
        let (tx, index) = (last.tx_hash, last.log_index + 1);
        self.push(event, tx, index)
    }

    fn push<E: SolEvent + serde::Serialize>(
        &mut self,
        event: E,
        tx: B256,
        log_index: u64,
    ) -> &mut Self {
        let number = self.events.len() as u64 + 1;
        let mut decoded = DecodedEvent {
            contract: ContractKind::Registry,
            name: gantry_protocol::events::event_name::<E>().into(),
            key: String::new(),
            data: serde_json::to_value(event).unwrap(),
        };
        // As the indexer publishes them: node events as the registry's.
        if decoded.typed().is_err() {
            decoded.contract = ContractKind::Market;
        }
        self.events.push(EventEnvelope {
            v: 1,
            chain_id: 31337,
            block_number: number,
            block_hash: B256::repeat_byte(number as u8),
            block_timestamp: self.time,
            tx_hash: tx,
            log_index,
            event: decoded,
        });
        self
    }

    /// A node staking `stake` registered, job 1 posted 5 s later and assigned to it.
    fn running(stake: u64) -> Self {
        let mut chain = Self::new();
        chain.at(0, registered(stake)).at(5, posted(0));
        let assignment = assigned(&chain);
        chain.at(0, assignment);
        chain
    }

    /// Job 1 given back by its node `secs` later, in one transaction with the slash
    /// that charges it `charge` and leaves it `stake`.
    fn given_back(&mut self, secs: u64, reason: &str, charge: u64, stake: u64) -> &mut Self {
        self.at(secs, rejected(reason)).then(slashed(charge, stake))
    }

    /// Chain time passes.
    fn wait(&mut self, secs: u64) -> &mut Self {
        self.time += secs;
        self
    }

    fn typed(&self) -> Vec<(EventEnvelope, GantryEvent)> {
        self.events
            .iter()
            .map(|e| (e.clone(), super::typed(e).expect("typed")))
            .collect()
    }

    /// Job 1's row, with the dev policy known.
    fn job(&self) -> JobRow {
        let mut row = None;
        for (event, typed) in self.typed() {
            if job_of(&typed) == Some(1) {
                row = apply_job(row, &event, &typed, Some(&policy()), Some(TREASURY));
            }
        }
        row.expect("posted")
    }

    fn node(&self) -> NodeRow {
        let mut row = None;
        let mut job: Option<JobRow> = None;
        let mut previous: Option<EventEnvelope> = None;
        for (event, typed) in self.typed() {
            if touches(&typed, job.as_ref()).node == Some(NODE) {
                row = apply_node(row, &event, &typed, previous.as_ref());
                previous = Some(event.clone());
            }
            if job_of(&typed) == Some(1) {
                job = apply_job(job, &event, &typed, Some(&policy()), Some(TREASURY));
            }
        }
        row.expect("registered")
    }

    fn account(&self, account: Address) -> AccountRow {
        let address = format!("{account:#x}");
        let mut row = None;
        let mut job: Option<JobRow> = None;
        for (event, typed) in self.typed() {
            if touches(&typed, job.as_ref()).account.as_deref() == Some(address.as_str()) {
                row = Some(apply_account(row, &address, &event, &typed));
            }
            if job_of(&typed) == Some(1) {
                job = apply_job(job, &event, &typed, Some(&policy()), Some(TREASURY));
            }
        }
        row.expect("an event of the account")
    }
}

fn params() -> M::MarketParams {
    market::dev_params(Address::repeat_byte(0x7e))
}

fn policy() -> gantry_protocol::api::JobPolicy {
    policy_of(&M::MarketParamsUpdated {
        params: params(),
        policyVersion: 1,
    })
}

fn terms() -> Terms {
    Terms {
        submitter: SUBMITTER,
        bounty: BOUNTY,
        spec_hash: B256::repeat_byte(1),
        requirements: Requirements {
            min_gpu_count: 2,
            max_runtime: MAX_RUNTIME,
            priority: 5,
            ..Requirements::default()
        },
        deadline: 100_000,
        policy: 1,
        verification: gantry_protocol::market::Verification::NONE,
    }
}

fn posted(from_credits: u64) -> M::JobPosted {
    M::JobPosted {
        jobId: 1,
        submitter: SUBMITTER,
        terms: terms().pack(),
        fromCredits: U96::from(from_credits),
        spec: Bytes::from_static(b"{}"),
    }
}

fn registered(stake: u64) -> R::NodeRegistered {
    R::NodeRegistered {
        nodeId: NODE,
        operator: Address::repeat_byte(0x10),
        agent: Address::repeat_byte(0x20),
        capabilities: R::NodeCapabilities {
            gpuCount: 8,
            cpuCores: 64,
            maxConcurrentJobs: 2,
            engines: gantry_protocol::eligibility::Engines::ALL.0,
            ..Default::default()
        },
        metadataURI: String::new(),
        stake: U96::from(stake),
        at: 1_000,
    }
}

fn assigned(chain: &Chain) -> M::JobAssigned {
    M::JobAssigned {
        jobId: 1,
        nodeId: NODE,
        claimed: false,
        until: U40::from(chain.time + u64::from(MAX_RUNTIME)),
    }
}

fn submitted(chain: &Chain, window: u64) -> M::ResultSubmitted {
    M::ResultSubmitted {
        jobId: 1,
        resultHash: B256::repeat_byte(7),
        resultURI: "ipfs://out".into(),
        until: U40::from(chain.time + window),
    }
}

/// Job 1 given back by its node.
fn rejected(reason: &str) -> M::JobRejected {
    M::JobRejected {
        jobId: 1,
        nodeId: NODE,
        reason: reason.into(),
    }
}

/// Job 1 back in the queue, with the market's counts.
fn requeued(faults: u8, barred: u8) -> M::JobRequeued {
    M::JobRequeued {
        jobId: 1,
        faults,
        barred,
    }
}

/// Job 1 paid to its node (`kind`: `CompletionKind`): the bounty less the 2.5% fee.
fn completed(kind: u8) -> M::JobCompleted {
    M::JobCompleted {
        jobId: 1,
        nodeId: NODE,
        payout: U96::from(48_750_000u64),
        fee: U96::from(1_250_000u64),
        kind,
    }
}

fn slashed(amount: u64, stake: u64) -> R::NodeSlashed {
    R::NodeSlashed {
        nodeId: NODE,
        jobId: 1,
        amount: U96::from(amount),
        stake: U96::from(stake),
    }
}

/// Job 1's state as the protocol folds it from the same market events.
fn protocol_state(chain: &Chain) -> market::State {
    let mut policies = Policies::default();
    policies.insert(1, market::Policy::from(&params()));
    let mut job = market::Job::posted(&terms().pack(), &policies).unwrap();
    for (_, typed) in chain.typed() {
        if let GantryEvent::Market(event) = typed
            && job_of(&GantryEvent::Market(event.clone())) == Some(1)
        {
            job.state.apply(&event);
        }
    }
    job.state
}

#[test]
fn a_job_shows_its_engine_and_a_node_the_engines_it_runs() {
    let chain = Chain::running(500_000_000);
    assert_eq!(chain.job().engine, "docker");
    assert_eq!(chain.node().engines, ["docker", "wasm"]);

    let mut wasm = terms();
    wasm.requirements.engine = gantry_protocol::spec::Engine::Wasm.code();
    wasm.requirements.min_gpu_count = 0;
    let mut chain = Chain::new();
    let mut registered = registered(500_000_000);
    registered.capabilities.engines = gantry_protocol::eligibility::Engines::WASM.0;
    chain.at(0, registered).at(
        5,
        M::JobPosted {
            terms: wasm.pack(),
            ..posted(0)
        },
    );
    assert_eq!(chain.job().engine, "wasm");
    assert_eq!(chain.node().engines, ["wasm"]);
}

#[test]
fn gpu_seconds_count_every_attempt_s_time_on_a_node_times_its_gpus() {
    let mut chain = Chain::new();
    chain
        .at(0, registered(500_000_000))
        .at(0, posted(0))
        .wait(10);
    let first = assigned(&chain);
    chain.at(0, first);
    // The first attempt is reclaimed after 50 s (the node went inactive), and requeued.
    chain
        .at(
            50,
            M::JobReclaimed {
                jobId: 1,
                nodeId: NODE,
                kind: 0,
                by: Address::ZERO,
            },
        )
        .then(slashed(50_000_000, 450_000_000))
        .then(requeued(1, 1))
        .wait(40);
    let second = assigned(&chain);
    chain.at(0, second).wait(300);
    // The second runs 300 s to its result; the window's close adds nothing.
    let result = submitted(&chain, 30);
    chain.at(0, result);
    let row = chain.job();
    assert_eq!(row.gpus, 2);
    assert_eq!(row.gpu_seconds, (50 + 300) * 2);
    assert_eq!(row.attempts, 2);
}

#[test]
fn the_row_s_state_is_the_market_s_at_every_step_and_none_once_settled() {
    let mut chain = Chain::new();
    chain.at(0, registered(500_000_000)).at(5, posted(0));
    let check = |chain: &Chain, status: JobStatus| {
        let row = chain.job();
        let state = protocol_state(chain);
        assert_eq!(row.status, status);
        assert_eq!(row.status, state.status);
        assert_eq!(
            row.state_hash,
            Some(format!("{:#x}", state.hash())),
            "{status}"
        );
        assert_eq!(row.until, (state.until != 0).then_some(state.until));
        row
    };
    check(&chain, JobStatus::Open);
    let assignment = assigned(&chain);
    chain.at(0, assignment);
    let row = check(&chain, JobStatus::Assigned);
    assert_eq!(row.assigned_at, Some(chain.time));
    assert_eq!(row.until, Some(chain.time + u64::from(MAX_RUNTIME)));
    let result = submitted(&chain, 30);
    chain.at(0, result);
    let row = check(&chain, JobStatus::Submitted);
    assert_eq!(row.until, Some(chain.time + 30), "the window's end");
    assert_eq!(row.result_uri.as_deref(), Some("ipfs://out"));

    chain.at(30, completed(1));
    let row = chain.job();
    assert_eq!(row.status, JobStatus::Completed);
    assert_eq!(
        row.state_hash, None,
        "the market clears a settled job's word"
    );
    assert_eq!(row.until, None);
    assert_eq!(row.node_id, Some(NODE), "paid to its node");
    assert_eq!(
        (row.payout.as_deref(), row.fee.as_deref(), row.completion),
        (
            Some("48750000"),
            Some("1250000"),
            Some(Completion::Finalized)
        )
    );
    let node = chain.node();
    assert_eq!(
        (node.earnings.as_str(), node.fees_owed.as_str()),
        ("48750000", "1250000")
    );
    assert_eq!((node.active_jobs, node.completed_jobs), (0, 1));
}

#[test]
fn a_rejected_job_bars_its_node_and_shows_the_charge() {
    let mut chain = Chain::running(500_000_000);
    // Given back after 60 s of a 600 s runtime: a tenth of one slash (10% of 500).
    chain
        .given_back(60, "image not found", 5_000_000, 495_000_000)
        .then(requeued(0, 1));
    let row = chain.job();
    assert_eq!(row.status, JobStatus::Open);
    assert_eq!((row.faults, row.barred), (0, 1));
    assert_eq!(row.barred_nodes, [NODE]);
    assert_eq!(row.node_id, None);
    assert_eq!(row.reason.as_deref(), Some("image not found"));
    assert_eq!(row.charges.len(), 1);
    assert_eq!(
        (row.charges[0].cause, row.charges[0].amount.as_str()),
        (ChargeCause::Reject, "5000000")
    );
    assert_eq!(
        row.state_hash,
        Some(format!("{:#x}", protocol_state(&chain).hash()))
    );
    let node = chain.node();
    assert_eq!(
        (node.stake.as_str(), node.slashed.as_str()),
        ("495000000", "5000000")
    );
    assert_eq!(
        (node.active_jobs, node.rejected_jobs, node.failed_jobs),
        (0, 1, 0)
    );
}

#[test]
fn each_attempt_shows_its_node_its_end_whose_fault_why_and_the_slash_to_the_treasury() {
    let mut chain = Chain::running(500_000_000);
    let first_assigned = chain.time;
    // Node 1 gives the job back for the job's fault after 60 s: a tenth of a slash.
    chain
        .given_back(60, "sha256 mismatch for input data", 5_000_000, 495_000_000)
        .then(requeued(0, 1));
    let given_back = chain.time;
    // Node 2 claims it, is marked inactive, and the job is reclaimed: a full slash.
    let second = M::JobAssigned {
        jobId: 1,
        nodeId: 2,
        claimed: true,
        until: U40::from(chain.time + 10 + u64::from(MAX_RUNTIME)),
    };
    chain.at(10, second);
    let second_assigned = chain.time;
    let slash = R::NodeSlashed {
        nodeId: 2,
        jobId: 1,
        amount: U96::from(10_000_000u64),
        stake: U96::from(90_000_000u64),
    };
    let reclaimed = M::JobReclaimed {
        jobId: 1,
        nodeId: 2,
        kind: 0,
        by: Address::ZERO,
    };
    chain.at(100, reclaimed).then(slash).then(requeued(1, 2));
    let reclaimed_at = chain.time;
    // A third node gives it back for its own trouble (nothing held long enough to
    // charge), and a fourth is running it.
    for (node, reason) in [(3, "node unhealthy: docker engine unreachable"), (4, "")] {
        let assignment = M::JobAssigned {
            jobId: 1,
            nodeId: node,
            claimed: false,
            until: U40::from(chain.time + u64::from(MAX_RUNTIME)),
        };
        chain.at(0, assignment);
        if !reason.is_empty() {
            let rejected = M::JobRejected {
                jobId: 1,
                nodeId: node,
                reason: reason.into(),
            };
            chain.at(0, rejected).then(requeued(1, 3));
        }
    }
    let row = chain.job();
    let expected = [
        AttemptRow {
            attempt: 1,
            node_id: NODE,
            claimed: false,
            assigned_at: first_assigned,
            ended_at: Some(given_back),
            outcome: AttemptOutcome::Rejected,
            fault: AttemptFault::Job,
            reason: Some("sha256 mismatch for input data".into()),
            slashed: "5000000".into(),
            slashed_to: Some(TREASURY.into()),
        },
        AttemptRow {
            attempt: 2,
            node_id: 2,
            claimed: true,
            assigned_at: second_assigned,
            ended_at: Some(reclaimed_at),
            outcome: AttemptOutcome::ReclaimedNodeInactive,
            fault: AttemptFault::Node,
            reason: Some("the node was marked inactive".into()),
            slashed: "10000000".into(),
            slashed_to: Some(TREASURY.into()),
        },
        AttemptRow {
            attempt: 3,
            node_id: 3,
            claimed: false,
            assigned_at: reclaimed_at,
            ended_at: Some(reclaimed_at),
            outcome: AttemptOutcome::Rejected,
            fault: AttemptFault::Node,
            reason: Some("node unhealthy: docker engine unreachable".into()),
            slashed: "0".into(),
            slashed_to: None,
        },
        AttemptRow {
            attempt: 4,
            node_id: 4,
            claimed: false,
            assigned_at: reclaimed_at,
            slashed: "0".into(),
            ..AttemptRow::default()
        },
    ];
    assert_eq!(row.attempt_rows, expected);
    assert_eq!(row.attempts, 4);
}

#[test]
fn a_result_answered_with_a_failure_report_is_the_job_s_failure() {
    let mut chain = Chain::running(500_000_000);
    let result = submitted(&chain, 30);
    chain.at(120, result);
    let row = chain.job();
    assert_eq!(
        (row.attempt_rows[0].outcome, row.attempt_rows[0].fault),
        (AttemptOutcome::Submitted, AttemptFault::None)
    );
    let report = |node_id: u64, attempt: u8, status, error: Option<&str>| CompletionReport {
        v: 1,
        job_id: 1,
        node_id,
        attempt,
        status,
        result_hash: None,
        result_uri: None,
        output_bytes: None,
        compute_secs: 120,
        gpu_secs: 240,
        avg_gpu_utilization: None,
        error: error.map(str::to_owned),
        at_ms: 0,
    };
    // Reports that do not make it one: a success, another attempt's, another node's.
    let mut attempts = row.attempt_rows.clone();
    with_failure_reports(
        &mut attempts,
        &[
            report(NODE, 1, CompletionStatus::Submitted, None),
            report(NODE, 2, CompletionStatus::JobFault, Some("exit code 1")),
            report(9, 1, CompletionStatus::JobFault, Some("exit code 1")),
        ],
    );
    assert_eq!(attempts, row.attempt_rows);
    // The worker's failure report, as the worker sends it (submitted, with the reason)
    // or as a job fault.
    for status in [CompletionStatus::Submitted, CompletionStatus::JobFault] {
        let mut attempts = row.attempt_rows.clone();
        let reason = "the job exited with code 137 (out of memory)";
        with_failure_reports(&mut attempts, &[report(NODE, 1, status, Some(reason))]);
        assert_eq!(
            (
                attempts[0].outcome,
                attempts[0].fault,
                attempts[0].reason.as_deref()
            ),
            (
                AttemptOutcome::FailedByItself,
                AttemptFault::Job,
                Some(reason)
            ),
            "{status:?}"
        );
    }
}

#[test]
fn a_lost_dispute_holds_then_slashes_the_exposure_and_refunds_bounty_and_bond() {
    let mut chain = Chain::new();
    chain
        .at(0, registered(500_000_000))
        .at(
            0,
            M::Deposited {
                account: SUBMITTER,
                amount: U256::from(80_000_000u64),
            },
        )
        .at(5, posted(50_000_000));
    let assignment = assigned(&chain);
    chain.at(0, assignment);
    let result = submitted(&chain, 30);
    chain.at(0, result);
    let deadline = chain.time + 300;
    chain.at(
        10,
        M::JobDisputed {
            jobId: 1,
            nodeId: NODE,
            bond: U96::from(10_000_000u64),
            exposure: U96::from(50_000_000u64),
            until: U40::from(deadline + 10),
        },
    );
    let row = chain.job();
    assert_eq!(row.status, JobStatus::Disputed);
    let dispute = row.dispute.clone().expect("disputed");
    assert_eq!(
        (dispute.bond.as_str(), dispute.exposure.as_str()),
        ("10000000", "50000000")
    );
    assert_eq!(row.until, Some(dispute.deadline), "the arbiter's deadline");
    assert_eq!(
        row.state_hash,
        Some(format!("{:#x}", protocol_state(&chain).hash()))
    );
    let node = chain.node();
    assert_eq!(node.locked_stake, "50000000");
    assert_eq!(node.disputes[0].job_id, 1);

    chain
        .at(
            100,
            M::DisputeResolved {
                jobId: 1,
                nodeId: NODE,
                providerWon: false,
                lapsed: false,
                bondToSubmitter: U96::from(10_000_000u64),
                bondToProvider: U96::ZERO,
                by: Address::repeat_byte(0xa1),
            },
        )
        .then(slashed(50_000_000, 450_000_000))
        .then(M::JobFailed {
            jobId: 1,
            kind: 2,
            refund: U96::from(BOUNTY as u64),
        });
    let row = chain.job();
    assert_eq!(
        (row.status, row.failure, row.refund.as_deref()),
        (
            JobStatus::Failed,
            Some(Failure::DisputeLost),
            Some("50000000")
        )
    );
    let outcome = row.dispute.unwrap().outcome.expect("resolved");
    assert!(!outcome.provider_won && !outcome.lapsed);
    assert_eq!(
        (row.charges[0].cause, row.charges[0].amount.as_str()),
        (ChargeCause::DisputeLost, "50000000")
    );
    // Its one attempt: the result, recast by the arbiter as the node's fault, its
    // exposure slashed to the treasury.
    let attempt = &row.attempt_rows[0];
    assert_eq!(
        (attempt.outcome, attempt.fault, attempt.slashed.as_str()),
        (AttemptOutcome::DisputeLost, AttemptFault::Node, "50000000")
    );
    assert_eq!(attempt.slashed_to.as_deref(), Some(TREASURY));
    let node = chain.node();
    assert_eq!(node.locked_stake, "0");
    assert!(node.disputes.is_empty());
    assert_eq!((node.stake.as_str(), node.failed_jobs), ("450000000", 1));
    // 80 deposited, 50 of it escrowed, then bounty and bond credited back.
    let account = chain.account(SUBMITTER);
    assert_eq!(
        account.credits,
        (80_000_000u64 - 50_000_000 + 50_000_000 + 10_000_000).to_string()
    );
    assert_eq!(
        (
            account.refunded.as_str(),
            account.bonds_posted.as_str(),
            account.bonds_returned.as_str()
        ),
        ("50000000", "10000000", "10000000")
    );
    assert_eq!(
        (account.jobs_posted, account.from_credits.as_str()),
        (1, "50000000")
    );
}

#[test]
fn credits_follow_deposits_postings_refunds_and_withdrawals() {
    let mut chain = Chain::new();
    chain
        .at(
            0,
            M::Deposited {
                account: SUBMITTER,
                amount: U256::from(20_000_000u64),
            },
        )
        // 20 of the 50 from credits, the rest from tokens.
        .at(5, posted(20_000_000))
        .at(
            5,
            M::JobCancelled {
                jobId: 1,
                refund: U96::from(BOUNTY as u64),
            },
        );
    let account = chain.account(SUBMITTER);
    assert_eq!(account.credits, "50000000");
    assert_eq!(chain.job().refund.as_deref(), Some("50000000"));
    assert_eq!(chain.job().state_hash, None);
    chain.at(
        5,
        M::Withdrawn {
            account: SUBMITTER,
            amount: U256::from(50_000_000u64),
        },
    );
    let account = chain.account(SUBMITTER);
    assert_eq!(
        (
            account.credits.as_str(),
            account.deposited.as_str(),
            account.withdrawn.as_str()
        ),
        ("0", "20000000", "50000000")
    );
    assert_eq!(account.bounties, "50000000");
}

#[test]
fn only_an_inactivity_the_market_did_not_cause_by_a_slash_marks_the_time() {
    let mut chain = Chain::running(110_000_000);
    // A reject's charge takes the stake below the minimum: the market stops its new work.
    chain
        .given_back(60, "no", 20_000_000, 90_000_000)
        .then(R::NodeMarkedInactive {
            nodeId: NODE,
            lastHeartbeat: 1_000,
            by: Address::repeat_byte(0x33),
        });
    let node = chain.node();
    assert_eq!(node.status, NodeStatus::Inactive);
    assert_eq!(node.inactive_since, None);
    // Its agent tops up and heartbeats back, then takes it offline itself.
    chain
        .at(
            10,
            R::NodeStakeAdded {
                nodeId: NODE,
                amount: U96::from(20_000_000u64),
                stake: U96::from(110_000_000u64),
            },
        )
        .at(
            10,
            R::NodeReactivated {
                nodeId: NODE,
                at: 2_000,
            },
        )
        .at(
            10,
            R::NodeMarkedInactive {
                nodeId: NODE,
                lastHeartbeat: 2_000,
                by: Address::repeat_byte(0x20),
            },
        );
    let node = chain.node();
    assert_eq!(node.status, NodeStatus::Inactive);
    assert_eq!(node.inactive_since, Some(chain.time));
    assert_eq!(node.stake, "110000000");
}

#[test]
fn an_exit_unbonds_then_withdraws_the_stake_and_the_earnings_sweep_the_fees() {
    let mut chain = Chain::running(500_000_000);
    let result = submitted(&chain, 30);
    chain
        .at(0, result)
        .at(1, completed(0))
        .at(
            1,
            R::FeesSwept {
                nodeId: NODE,
                amount: U96::from(1_250_000u64),
            },
        )
        .then(R::NodeEarningsWithdrawn {
            nodeId: NODE,
            operator: Address::repeat_byte(0x10),
            amount: U96::from(48_750_000u64),
        })
        .at(
            1,
            R::NodeExitBegun {
                nodeId: NODE,
                unbondingEndsAt: U40::from(900_000u64),
            },
        );
    let node = chain.node();
    assert_eq!(node.status, NodeStatus::Exiting);
    assert_eq!(node.unbonding_ends_at, Some(900_000));
    assert_eq!(
        (node.earnings.as_str(), node.earnings_withdrawn.as_str()),
        ("0", "48750000")
    );
    assert_eq!(
        (node.fees_owed.as_str(), node.fees_swept.as_str()),
        ("0", "1250000")
    );
    chain.at(
        900_000,
        R::NodeStakeWithdrawn {
            nodeId: NODE,
            operator: Address::repeat_byte(0x10),
            amount: U96::from(500_000_000u64),
            stake: U96::ZERO,
        },
    );
    let node = chain.node();
    assert_eq!(node.status, NodeStatus::Exited);
    assert_eq!(
        (node.stake.as_str(), node.stake_withdrawn.as_str()),
        ("0", "500000000")
    );
}

/// A replicated 3/2 job's seats, as the API shows them: who was seated, committed,
/// revealed and agreed; the one that gave its seat back, the liar slashed, the two that
/// agreed paid; the digest the quorum revealed.
#[test]
fn a_replicated_job_shows_who_committed_revealed_and_agreed() {
    let mut verified_terms = terms();
    verified_terms.requirements.engine = 1;
    verified_terms.verification = gantry_protocol::market::Verification {
        tier: gantry_protocol::market::Verification::REPLICATED,
        size: 3,
        quorum: 2,
        reveal_window: 60,
    };
    let posted = M::JobPosted {
        terms: verified_terms.pack(),
        ..posted(0)
    };
    let seat = |seat: u8, node: u64, until: u64| M::SeatDrawn {
        jobId: 1,
        nodeId: node,
        seat,
        until: U40::from(until),
        locked: U96::from(20u64),
    };
    let (truth, lie) = (B256::repeat_byte(0xaa), B256::repeat_byte(0xbb));
    let mut chain = Chain::new();
    chain.at(5, posted);
    let t = chain.time + 10;
    chain
        .at(10, seat(0, 7, t + 600))
        .then(seat(1, 8, t + 600))
        .then(seat(2, 9, t + 600));
    // Node 9 gives its seat back; node 10 is drawn into it.
    chain.at(
        5,
        M::SeatFreed {
            jobId: 1,
            nodeId: 9,
            seat: 2,
            fault: false,
            unlocked: U96::from(20u64),
            charged: U96::ZERO,
        },
    );
    let later = chain.time + 20;
    chain.at(20, seat(2, 10, later + 600));
    for (seat, node) in [(0u8, 7u64), (1, 8), (2, 10)] {
        chain.at(
            30,
            M::SealCommitted {
                jobId: 1,
                nodeId: node,
                seat,
                seal: B256::repeat_byte(seat + 1),
            },
        );
    }
    for (seat, node, digest) in [(0u8, 7u64, truth), (1, 8, lie), (2, 10, truth)] {
        chain.at(
            30,
            M::ResultRevealed {
                jobId: 1,
                nodeId: node,
                seat,
                digest,
            },
        );
    }
    let released = |seat: u8, node: u64| M::SeatReleased {
        jobId: 1,
        nodeId: node,
        seat,
        unlocked: U96::from(20u64),
    };
    let paid = |node: u64| M::ReplicaPaid {
        jobId: 1,
        nodeId: node,
        payout: U96::from(48_750_000u64),
        fee: U96::from(1_250_000u64),
    };
    chain
        .at(10, released(0, 7))
        .then(paid(7))
        .then(released(1, 8))
        .then(R::NodeSlashed {
            nodeId: 8,
            jobId: 1,
            amount: U96::from(20u64),
            stake: U96::from(480u64),
        })
        .then(released(2, 10))
        .then(paid(10))
        .then(M::JobVerified {
            jobId: 1,
            digest: truth,
            agreed: 2,
            refund: U96::from(BOUNTY),
        });

    let row = chain.job();
    assert_eq!(row.status, JobStatus::Completed);
    assert_eq!(row.completion, Some(Completion::Verified));
    let v = row.verification.expect("a verified job's row");
    assert_eq!(v.verified_digest, Some(format!("{truth:#x}")));
    assert_eq!(v.agreed, Some(2));
    let seats: Vec<(u64, u64, &str, Option<String>)> = v
        .seat_rows
        .iter()
        .map(|s| (s.seat, s.node_id, s.outcome.as_str(), s.digest.clone()))
        .collect();
    assert_eq!(
        seats,
        [
            (0, 7, "paid", Some(format!("{truth:#x}"))),
            (1, 8, "slashed", Some(format!("{lie:#x}"))),
            (2, 9, "declined", None),
            (2, 10, "paid", Some(format!("{truth:#x}"))),
        ]
    );
    let eight = &v.seat_rows[1];
    assert_eq!(
        eight.charged.as_deref(),
        Some("20"),
        "the liar's seat stake"
    );
    assert_eq!(eight.role, "replica");
    assert!(eight.committed_at.is_some() && eight.revealed_at > eight.committed_at);
    assert_eq!(v.seat_rows[0].payout.as_deref(), Some("48750000"));
    assert_eq!(
        v.seat_rows[0].seated_at, t,
        "drawn its max runtime before its until"
    );
    assert!(
        row.charges.is_empty(),
        "a seat's slash is not an attempt's charge"
    );
}

#[test]
fn a_spec_posted_several_times_in_a_range_is_read_once_and_each_posting_gets_it() {
    let valid = Bytes::from(gantry_testkit::scenario::example_spec());
    let invalid = Bytes::from_static(b"{\"version\":1}");
    let mut specs = Specs::default();
    for bytes in [&valid, &invalid, &valid, &valid] {
        specs.add(bytes);
    }
    let expected = read_spec(&valid);
    assert!(expected.0.is_some(), "a spec workers run");
    for _ in 0..3 {
        assert_eq!(specs.read(&valid), expected);
    }
    assert_eq!(
        specs.read(&invalid),
        (None, Some("{\"version\":1}".to_owned()))
    );
    // Every posting took its copy: nothing kept; one not added is read where it is.
    assert!(specs.read.is_empty());
    assert_eq!(specs.read(&valid), expected);
}
