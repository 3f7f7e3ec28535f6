//! The incremental planner against the full plan, on random histories.

use std::collections::HashSet;

use alloy::primitives::B256;
use gantry_protocol::status::JobStatus;
use proptest::prelude::{Strategy as _, any, prop, prop_assert_eq, prop_oneof, proptest};

use super::*;
use crate::decide::{Decision, Planner};
use crate::view::{NodeView, Requirements, fixtures};

fn model(i: u8) -> B256 {
    if i == 3 {
        B256::ZERO
    } else {
        B256::right_padding_from(format!("M{i}").as_bytes())
    }
}

fn node(id: u64, m: u8, vram: u32, slots: u8, price: u128) -> NodeView {
    fixtures::node(
        id,
        Capabilities {
            gpu_model: model(m % 3),
            gpu_count: 1 + u16::from(m % 2),
            vram_mib: vram * 1024,
            cpu_cores: 8,
            ram_mib: 32 * 1024,
            price_per_gpu_hour: price,
            max_concurrent_jobs: slots,
            engines: Default::default(),
        },
        500,
        0,
    )
}

fn job(id: u64, submitter: u8, m: u8, vram: u32, priority: u8, deadline: u64) -> JobView {
    let mut job = fixtures::job(
        id,
        submitter,
        deadline,
        Requirements {
            gpu_model: model(m),
            min_gpu_count: 1,
            min_vram_mib: vram * 1024,
            min_cpu_cores: 4,
            min_ram_mib: 8 * 1024,
            max_price_per_gpu_hour: 6,
            max_runtime: 100,
            priority,
            engine: 0,
        },
    );
    // Posted in the order of their ids, several to a block.
    job.posted_at = (id / 3, id % 3);
    job
}

/// Something that happens to the market between two rounds.
#[derive(Debug, Clone)]
enum Step {
    Post {
        submitter: u8,
        model: u8,
        vram: u32,
        priority: u8,
        deadline: u64,
        spec_error: bool,
    },
    Register {
        model: u8,
        vram: u32,
        slots: u8,
        price: u128,
    },
    /// The pick-th open job assigned to the pick-th node (the chain did it).
    Assign(usize, usize),
    /// The pick-th assigned job requeued, its node barred.
    Requeue(usize),
    /// The pick-th job settled (cancelled, paid, expired).
    Settle(usize),
    NodeStatus(usize, u8),
    NodeSlots(usize, u8),
    NodeVram(usize, u32),
    Time(u64),
    /// An assignment of the round's plan sent (in flight), or one in flight resolved.
    Send(usize),
    Resolve(usize),
    Exclude(usize, usize),
    Unexclude(usize),
    /// A reorganisation: time back, everything said to have changed.
    Reorg(u64),
}

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    prop_oneof![
        3 => (0u8..6, 0u8..4, prop::sample::select(vec![8u32, 16, 40, 80]), 0u8..3, 100u64..600, prop::bool::weighted(0.1)).prop_map(
            |(submitter, model, vram, priority, deadline, spec_error)| Step::Post {
                submitter, model, vram, priority, deadline, spec_error
            }
        ),
        1 => (0u8..3, prop::sample::select(vec![8u32, 24, 48, 80]), 0u8..4, 1u128..9).prop_map(|(model, vram, slots, price)| Step::Register { model, vram, slots, price }),
        3 => (any::<usize>(), any::<usize>()).prop_map(|(j, n)| Step::Assign(j, n)),
        2 => any::<usize>().prop_map(Step::Requeue),
        2 => any::<usize>().prop_map(Step::Settle),
        1 => (any::<usize>(), 0u8..3).prop_map(|(n, s)| Step::NodeStatus(n, s)),
        1 => (any::<usize>(), 0u8..4).prop_map(|(n, s)| Step::NodeSlots(n, s)),
        1 => (any::<usize>(), prop::sample::select(vec![8u32, 24, 48, 80])).prop_map(|(n, v)| Step::NodeVram(n, v)),
        2 => (0u64..80).prop_map(Step::Time),
        3 => any::<usize>().prop_map(Step::Send),
        2 => any::<usize>().prop_map(Step::Resolve),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(j, n)| Step::Exclude(j, n)),
        1 => any::<usize>().prop_map(Step::Unexclude),
        1 => (0u64..40).prop_map(Step::Reorg),
    ]
}

fn pick<T: Copy>(items: &[T], at: usize) -> Option<T> {
    (!items.is_empty()).then(|| items[at % items.len()])
}

fn full(planner: &mut Planner, view: &View, reservations: &Reservations) -> Vec<(u64, u64)> {
    planner
        .plan_with(view, reservations)
        .into_iter()
        .filter_map(|d| match d {
            Decision::Assign { job, node } => Some((job, node)),
            Decision::Unplaceable { .. } => None,
        })
        .collect()
}

/// Plays `steps`, planning after each with both planners; returns how many rounds placed
/// something (so the test can require that the histories are not all idle).
fn play(strategy: Strategy, steps: &[Step]) -> Result<usize, proptest::test_runner::TestCaseError> {
    let mut view = View {
        now: 10,
        block: 1,
        ..View::default()
    };
    for id in 1..=4 {
        view.nodes
            .insert(id, node(id, id as u8, 24 * id as u32, 2, id as u128));
    }
    let mut reference = Planner::new(strategy, Weights::default());
    let mut incremental = IncrementalPlanner::new(strategy, Weights::default());
    let mut reservations = Reservations::default();
    let mut last_view = view.clone();
    let mut last_plan: Vec<(u64, u64)> = Vec::new();
    let mut next_job = 1;
    let mut placing_rounds = 0;
    let mut first = true;
    for step in steps {
        let mut reorg = false;
        let node_ids: Vec<u64> = view.nodes.keys().copied().collect();
        let open: Vec<u64> = view.open_jobs().map(|j| j.id).collect();
        let assigned: Vec<u64> = view
            .jobs
            .values()
            .filter(|j| j.state.status == JobStatus::Assigned)
            .map(|j| j.id)
            .collect();
        match step.clone() {
            Step::Post {
                submitter,
                model,
                vram,
                priority,
                deadline,
                spec_error,
            } => {
                let mut j = job(
                    next_job,
                    submitter,
                    model,
                    vram,
                    priority,
                    view.now + deadline,
                );
                if spec_error {
                    j.spec_error = Some("bad".into());
                }
                view.jobs.insert(next_job, j);
                next_job += 1;
            }
            Step::Register {
                model,
                vram,
                slots,
                price,
            } => {
                let id = view.nodes.len() as u64 + 1;
                view.nodes.insert(id, node(id, model, vram, slots, price));
            }
            Step::Assign(j, n) => {
                if let (Some(j), Some(n)) = (pick(&open, j), pick(&node_ids, n)) {
                    let job = view.jobs.get_mut(&j).unwrap();
                    job.state.status = JobStatus::Assigned;
                    job.state.node_id = n;
                    view.nodes.get_mut(&n).unwrap().active_jobs += 1;
                }
            }
            Step::Requeue(j) => {
                if let Some(j) = pick(&assigned, j) {
                    let job = view.jobs.get_mut(&j).unwrap();
                    let n = job.state.node_id;
                    job.state.status = JobStatus::Open;
                    job.barred.insert(n);
                    let node = view.nodes.get_mut(&n).unwrap();
                    node.active_jobs = node.active_jobs.saturating_sub(1);
                }
            }
            Step::Settle(j) => {
                let ids: Vec<u64> = view.jobs.keys().copied().collect();
                if let Some(j) = pick(&ids, j) {
                    let job = view.jobs.remove(&j).unwrap();
                    if job.state.status == JobStatus::Assigned {
                        let node = view.nodes.get_mut(&job.state.node_id).unwrap();
                        node.active_jobs = node.active_jobs.saturating_sub(1);
                    }
                }
            }
            Step::NodeStatus(n, s) => {
                if let Some(n) = pick(&node_ids, n) {
                    view.nodes.get_mut(&n).unwrap().status = [
                        NodeStatus::Active,
                        NodeStatus::Inactive,
                        NodeStatus::Exiting,
                    ][s as usize];
                }
            }
            Step::NodeSlots(n, s) => {
                if let Some(n) = pick(&node_ids, n) {
                    view.nodes
                        .get_mut(&n)
                        .unwrap()
                        .capabilities
                        .max_concurrent_jobs = s;
                }
            }
            Step::NodeVram(n, v) => {
                if let Some(n) = pick(&node_ids, n) {
                    view.nodes.get_mut(&n).unwrap().capabilities.vram_mib = v * 1024;
                }
            }
            Step::Time(dt) => {
                view.now += dt;
                view.block += 1;
            }
            Step::Send(i) => {
                if let Some((job, node)) = pick(&last_plan, i) {
                    reservations.in_flight.insert(job, node);
                }
            }
            Step::Resolve(i) => {
                let jobs: Vec<u64> = reservations.in_flight.keys().copied().collect();
                if let Some(job) = pick(&jobs, i) {
                    reservations.in_flight.remove(&job);
                }
            }
            Step::Exclude(j, n) => {
                if let (Some(j), Some(n)) = (pick(&open, j), pick(&node_ids, n)) {
                    reservations.excluded.insert((j, n));
                }
            }
            Step::Unexclude(i) => {
                let pairs: Vec<(u64, u64)> = reservations.excluded.iter().copied().collect();
                if let Some(pair) = pick(&pairs, i) {
                    reservations.excluded.remove(&pair);
                }
            }
            Step::Reorg(back) => {
                view.now = view.now.saturating_sub(back);
                reorg = true;
            }
        }
        // The books forget reservations of jobs no longer open, as `Books::sync` does.
        reservations
            .in_flight
            .retain(|job, _| view.open_job(*job).is_some());
        let mut changes = fixtures::diff(&last_view, &view);
        if reorg || first {
            changes = Changes::everything();
        }
        first = false;
        let expected = full(&mut reference, &view, &reservations);
        let got = incremental.plan(&view, &changes, &reservations);
        prop_assert_eq!(&got, &expected, "after {:?}", step);
        if !got.is_empty() {
            placing_rounds += 1;
        }
        last_plan = got;
        last_view = view.clone();
    }
    Ok(placing_rounds)
}

proptest! {
    #![proptest_config(proptest::test_runner::Config::with_cases(256))]

    /// On any history of posts, assignments, requeues, settlements, node changes, time,
    /// assignments in flight, excluded pairs and reorganisations, the incremental planner
    /// makes the full plan's assignments, in the same order, round after round.
    #[test]
    fn incremental_equals_full_on_random_histories(
        steps in prop::collection::vec(step(), 1..80),
        strategy in prop::sample::select(vec![Strategy::Score, Strategy::RoundRobin, Strategy::BestFit, Strategy::Cheapest]),
    ) {
        play(strategy, &steps)?;
    }
}

/// The histories place jobs, and the merge stops early: with a queue far longer than the
/// free slots, a round decides a handful of jobs, not the queue.
#[test]
fn a_round_decides_what_changed_not_the_queue() {
    let mut view = View {
        now: 10,
        ..View::default()
    };
    for id in 1..=100 {
        view.nodes.insert(id, node(id, (id % 3) as u8, 80, 1, 1));
    }
    // A node too small for any job: its free slot keeps the supply from being empty.
    view.nodes.insert(101, node(101, 0, 8, 1, 1));
    for id in 1..=5_000 {
        view.jobs
            .insert(id, job(id, (id % 7) as u8, 3, 16, (id % 3) as u8, 1_000));
    }
    let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
    let mut reservations = Reservations::default();
    let first = planner.plan(&view, &Changes::everything(), &reservations);
    assert_eq!(first.len(), 100, "every node but the small one takes a job");
    // The assignments land: the jobs are assigned, the nodes full.
    let mut changes = Changes::none();
    for &(job, node) in &first {
        let job = view.jobs.get_mut(&job).unwrap();
        job.state.status = JobStatus::Assigned;
        job.state.node_id = node;
        view.nodes.get_mut(&node).unwrap().active_jobs += 1;
        changes.job(job.id);
        changes.node(node);
    }
    // The next round: nothing free that a job may take, nothing walked (the small node
    // was found exhausted by the first round, which went through the queue).
    let walked = planner.stats.jobs_walked;
    assert!(planner.plan(&view, &changes, &reservations).is_empty());
    assert_eq!(planner.stats.jobs_walked, walked);
    // One job is paid: its node's slot is free.
    let (paid, node) = first[0];
    view.jobs.remove(&paid);
    view.nodes.get_mut(&node).unwrap().active_jobs -= 1;
    let mut changes = Changes::none();
    changes.job(paid);
    changes.node(node);
    let second = planner.plan(&view, &changes, &reservations);
    let mut reference = Planner::new(Strategy::Score, Weights::default());
    assert_eq!(second, full(&mut reference, &view, &reservations));
    assert_eq!(second.len(), 1);
    // The walk stops at the first job that takes the slot; jobs of the other models (a
    // third of the queue each) may come before it.
    let walked = planner.stats.jobs_walked - walked;
    assert!(walked <= 10, "{walked} jobs walked for one free slot");
    // A job posted that the small node can take wakes it.
    let mut small = job(9_001, 9, 0, 8, 9, 1_000);
    small.terms.requirements.gpu_model = model(0);
    view.jobs.insert(9_001, small);
    let mut changes = Changes::none();
    changes.job(9_001);
    reservations.in_flight.extend(second.iter().copied());
    let third = planner.plan(&view, &changes, &reservations);
    assert_eq!(third, full(&mut reference, &view, &reservations));
    assert_eq!(third, [(9_001, 101)]);
    assert_eq!(planner.stats.rebuilds, 1);
}

#[test]
fn random_histories_do_place_jobs() {
    // A fixed history with posts and registrations places something (the proptest's
    // histories are not all idle ones).
    let steps: Vec<Step> = (0..20)
        .map(|i| Step::Post {
            submitter: (i % 3) as u8,
            model: (i % 4) as u8,
            vram: 8,
            priority: 1,
            deadline: 500,
            spec_error: false,
        })
        .collect();
    let placed = play(Strategy::Score, &steps).expect("equal plans");
    assert!(placed > 0);
}

/// A job barred from the only fitting node does not end its class's turn: the next job of
/// the same requirements still gets the node.
#[test]
fn a_barred_job_does_not_hold_up_its_class() {
    let mut view = View {
        now: 10,
        ..View::default()
    };
    view.nodes.insert(1, node(1, 0, 80, 1, 1));
    let mut barred = job(1, 1, 0, 16, 1, 1_000);
    barred.barred.insert(1);
    view.jobs.insert(1, barred);
    view.jobs.insert(2, job(2, 1, 0, 16, 1, 1_000));
    let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
    let reservations = Reservations {
        excluded: HashSet::from([(2, 9)]),
        ..Reservations::default()
    };
    assert_eq!(
        planner.plan(&view, &Changes::everything(), &reservations),
        [(2, 1)]
    );
    // Excluded from it, the same.
    view.jobs.get_mut(&1).unwrap().barred.clear();
    let reservations = Reservations {
        excluded: HashSet::from([(1, 1)]),
        ..Reservations::default()
    };
    let mut changes = Changes::none();
    changes.job(1);
    assert_eq!(planner.plan(&view, &changes, &reservations), [(2, 1)]);
}

/// Jobs at the head of the queue (priority 10) that no node meets (a price cap below every
/// node's) are set aside after one walk: a slot freed later walks the jobs that may take
/// it, not them; a node that meets them brings them back.
#[test]
fn jobs_no_node_meets_are_set_aside_until_a_node_that_meets_them_comes() {
    let mut view = View {
        now: 10,
        ..View::default()
    };
    for id in 1..=50 {
        view.nodes.insert(id, node(id, (id % 3) as u8, 80, 1, 5));
    }
    for id in 1..=2_000 {
        let mut hostile = job(id, (id % 20) as u8, 3, 8, 10, 1_000);
        hostile.terms.requirements.max_price_per_gpu_hour = 1;
        view.jobs.insert(id, hostile);
    }
    for id in 2_001..=2_500 {
        view.jobs
            .insert(id, job(id, 30 + (id % 5) as u8, 3, 16, 1, 1_000));
    }
    let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
    let mut reference = Planner::new(Strategy::Score, Weights::default());
    let reservations = Reservations::default();
    let first = planner.plan(&view, &Changes::everything(), &reservations);
    assert_eq!(first, full(&mut reference, &view, &reservations));
    assert_eq!(first.len(), 50);
    let mut changes = Changes::none();
    for &(id, node) in &first {
        let placed = view.jobs.get_mut(&id).unwrap();
        placed.state.status = JobStatus::Assigned;
        placed.state.node_id = node;
        view.nodes.get_mut(&node).unwrap().active_jobs += 1;
        changes.job(id);
        changes.node(node);
    }
    assert!(planner.plan(&view, &changes, &reservations).is_empty());
    // One job is paid: its node's slot is free. The 2,000 jobs ahead of it are not walked.
    let walked = planner.stats.jobs_walked;
    let (paid, freed) = first[0];
    view.jobs.remove(&paid);
    view.nodes.get_mut(&freed).unwrap().active_jobs -= 1;
    let mut changes = Changes::none();
    changes.job(paid);
    changes.node(freed);
    let second = planner.plan(&view, &changes, &reservations);
    assert_eq!(second, full(&mut reference, &view, &reservations));
    assert_eq!(second.len(), 1);
    let walked = planner.stats.jobs_walked - walked;
    assert!(walked <= 5, "{walked} jobs walked for one free slot");
    // A node cheap enough registers: the jobs set aside come back, the first takes it.
    view.nodes.insert(99, node(99, 0, 80, 1, 1));
    let mut changes = Changes::none();
    changes.node(99);
    let reservations = Reservations {
        in_flight: second.iter().copied().collect(),
        ..Reservations::default()
    };
    let third = planner.plan(&view, &changes, &reservations);
    assert_eq!(third, full(&mut reference, &view, &reservations));
    assert_eq!(third.len(), 1);
    assert!(third[0].0 <= 2_000, "a job set aside takes it: {third:?}");
}
