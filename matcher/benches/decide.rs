//! `cargo bench -p gantry-matcher --bench decide`
//!
//! Planning per block at 100,000 open jobs and 10,000 nodes, incremental against the full
//! plan in the same run (`matcher_plan_block`). Before it: decisions per second of the pure planner with 10,000 nodes and 100,000 queued jobs
//! (10 GPU models; a tenth of the jobs accept any model), per strategy. A baseline in the
//! same run: one linear eligibility scan of every node per job, the planner's work without
//! its model index. Prints a final JSON line with the `score` strategy's rate.

use std::time::Instant;

use alloy::primitives::{Address, B256};
use gantry_matcher::decide::{Decision, Planner, Reservations, Strategy, Weights, violations};
use gantry_matcher::incremental::IncrementalPlanner;
use gantry_matcher::view::{
    Capabilities, Changes, JobView, NodeStatus, NodeView, Requirements, View,
};
use gantry_protocol::market::Terms;
use gantry_protocol::status::JobStatus;

const NODES: u64 = 10_000;
const JOBS: u64 = 100_000;
const MODELS: u64 = 10;

/// A deterministic pseudo-random stream (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn model(i: u64) -> B256 {
    B256::right_padding_from(format!("GPU-{i}").as_bytes())
}

fn market() -> View {
    let mut rng = Rng(42);
    let nodes = (1..=NODES)
        .map(|id| {
            let node = NodeView {
                id,
                agent: Address::with_last_byte(id as u8),
                capabilities: Capabilities {
                    gpu_model: model(rng.below(MODELS)),
                    gpu_count: 1 << rng.below(4),
                    vram_mib: [16, 24, 40, 80][rng.below(4) as usize] * 1024,
                    cpu_cores: 8 << rng.below(4),
                    ram_mib: (64 << rng.below(4)) * 1024,
                    price_per_gpu_hour: 1 + u128::from(rng.below(10)),
                    max_concurrent_jobs: 1 + rng.below(4) as u8,
                    engines: Default::default(),
                },
                status: if rng.below(10) == 0 {
                    NodeStatus::Inactive
                } else {
                    NodeStatus::Active
                },
                stake: 500,
                active_jobs: 0,
                completed_jobs: rng.below(100) as u32,
                failed_jobs: rng.below(5) as u32,
                last_heartbeat: 0,
                inactive_since: 0,
            };
            (id, node)
        })
        .collect();
    let jobs = (1..=JOBS).map(|id| (id, job(&mut rng, id))).collect();
    View {
        nodes,
        jobs,
        ..View::default()
    }
}

/// An open job with requirements drawn from the market's mix, posted at block `id`.
fn job(rng: &mut Rng, id: u64) -> JobView {
    let terms = Terms {
        submitter: Address::with_last_byte(rng.below(50) as u8),
        bounty: 100,
        spec_hash: B256::ZERO,
        deadline: 1_000_000,
        policy: 1,
        requirements: Requirements {
            gpu_model: if rng.below(10) == 0 {
                B256::ZERO
            } else {
                model(rng.below(MODELS))
            },
            min_gpu_count: 1 << rng.below(3),
            min_vram_mib: [8, 16, 24, 40, 80][rng.below(5) as usize] * 1024,
            min_cpu_cores: 4 << rng.below(3),
            min_ram_mib: (32 << rng.below(3)) * 1024,
            max_price_per_gpu_hour: 2 + u128::from(rng.below(10)),
            max_runtime: 3600,
            priority: 1 + rng.below(10) as u8,
            engine: 0,
        },
        verification: gantry_protocol::market::Verification::NONE,
    };
    JobView::open(id, terms, (id, 0))
}

fn main() {
    let view = market();

    // Baseline: a plain scan of all nodes for each of the first 10k jobs.
    let started = Instant::now();
    let mut eligible = 0u64;
    for job in view.open_jobs().take(10_000) {
        eligible += view
            .nodes
            .values()
            .filter(|n| violations(n, job).is_empty())
            .count() as u64;
    }
    let scan_per_s = 10_000.0 / started.elapsed().as_secs_f64();
    println!(
        "baseline: linear eligibility scan of {NODES} nodes: {scan_per_s:.0} jobs/s ({eligible} eligible pairs)"
    );

    let mut score_rate = 0.0;
    for strategy in [
        Strategy::Score,
        Strategy::BestFit,
        Strategy::Cheapest,
        Strategy::RoundRobin,
    ] {
        let mut planner = Planner::new(strategy, Weights::default());
        let started = Instant::now();
        let decisions = planner.plan(&view);
        let secs = started.elapsed().as_secs_f64();
        let placed = decisions
            .iter()
            .filter(|d| matches!(d, Decision::Assign { .. }))
            .count();
        let rate = decisions.len() as f64 / secs;
        println!(
            "{strategy:?}: {} decisions in {secs:.2} s = {rate:.0}/s ({placed} placed, {} unplaceable); {:.1}x the baseline",
            decisions.len(),
            decisions.len() - placed,
            rate / scan_per_s
        );
        if strategy == Strategy::Score {
            score_rate = rate;
        }
    }
    println!(
        "{}",
        serde_json::json!({"bench": "matcher_decide", "nodes": NODES, "jobs": JOBS, "decisions_per_s": score_rate.round()})
    );
    per_block();
}

/// Blocks measured; the full plan (the baseline) runs on every tenth.
const BLOCKS: u64 = 200;

/// Planning per block at 100,000 open jobs and 10,000 nodes, the incremental planner
/// against the full plan of the same view in the same run: the market starts with its
/// nodes busy (the first plan's assignments landed) and the queue topped up to 100,000;
/// each block then lands the last block's assignments, pays 20 running jobs (their slots
/// free), posts 20 jobs, takes 300 heartbeats and moves one node out and one back in.
/// Every tenth block the full plan runs too and must make the same assignments.
fn per_block() {
    let mut rng = Rng(7);
    let mut view = market();
    view.now = 1;
    let mut next_job = JOBS + 1;
    let mut planner = IncrementalPlanner::new(Strategy::Score, Weights::default());
    let mut full = Planner::new(Strategy::Score, Weights::default());
    let mut reservations = Reservations::default();
    let mut changes = Changes::everything();
    let started = Instant::now();
    let first = planner.plan(&view, &changes, &reservations);
    let rebuild = started.elapsed();
    changes = Changes::none();
    land(&mut view, &mut changes, &first);
    while view.open_jobs().count() < JOBS as usize {
        view.jobs.insert(next_job, job(&mut rng, next_job));
        changes.job(next_job);
        next_job += 1;
    }
    let mut in_flight: Vec<(u64, u64)> = Vec::new();
    let (mut incremental, mut baseline) = (Vec::new(), Vec::new());
    let before = planner.stats;
    for block in 1..=BLOCKS {
        view.block = block;
        view.now += 2;
        land(&mut view, &mut changes, &in_flight);
        reservations.in_flight.clear();
        let running: Vec<(u64, u64)> = view
            .jobs
            .values()
            .filter(|j| !j.is_open())
            .map(|j| (j.id, j.state.node_id))
            .collect();
        for _ in 0..20 {
            let (job, node) = running[rng.below(running.len() as u64) as usize];
            if view.jobs.remove(&job).is_some() {
                view.nodes.get_mut(&node).unwrap().active_jobs -= 1;
                changes.job(job);
                changes.node(node);
            }
        }
        for _ in 0..20 {
            view.jobs.insert(next_job, job(&mut rng, next_job));
            changes.job(next_job);
            next_job += 1;
        }
        for _ in 0..300 {
            let node = 1 + rng.below(NODES);
            view.nodes.get_mut(&node).unwrap().last_heartbeat = view.now;
            changes.node(node);
        }
        for status in [NodeStatus::Inactive, NodeStatus::Active] {
            let node = 1 + rng.below(NODES);
            view.nodes.get_mut(&node).unwrap().status = status;
            changes.node(node);
        }
        let started = Instant::now();
        let planned = planner.plan(&view, &changes, &reservations);
        incremental.push(started.elapsed().as_secs_f64());
        changes = Changes::none();
        if block % 10 == 0 {
            let started = Instant::now();
            let decisions = full.plan_with(&view, &reservations);
            baseline.push(started.elapsed().as_secs_f64());
            let expected: Vec<(u64, u64)> = decisions
                .into_iter()
                .filter_map(|d| match d {
                    Decision::Assign { job, node } => Some((job, node)),
                    Decision::Unplaceable { .. } => None,
                })
                .collect();
            assert_eq!(planned, expected, "block {block}: the plans differ");
        }
        reservations.in_flight.extend(planned.iter().copied());
        in_flight = planned;
    }
    let decided = (planner.stats.jobs_walked - before.jobs_walked) as f64 / BLOCKS as f64;
    let (inc_p50, inc_p99) = (
        percentile(&mut incremental, 0.5),
        percentile(&mut incremental, 0.99),
    );
    let full_p50 = percentile(&mut baseline, 0.5);
    println!(
        "per block at {} open jobs and {NODES} nodes: incremental p50 {:.3} ms, p99 {:.3} ms ({decided:.1} jobs walked a block; first round, a rebuild: {:.0} ms); the full plan (baseline, same run) p50 {:.1} ms: {:.0}x",
        view.open_jobs().count(),
        inc_p50 * 1e3,
        inc_p99 * 1e3,
        rebuild.as_secs_f64() * 1e3,
        full_p50 * 1e3,
        full_p50 / inc_p50
    );
    println!(
        "{}",
        serde_json::json!({
            "bench": "matcher_plan_block", "nodes": NODES, "open_jobs": JOBS,
            "incremental_ms_p50": (inc_p50 * 1e6).round() / 1e3,
            "incremental_ms_p99": (inc_p99 * 1e6).round() / 1e3,
            "full_ms_p50": (full_p50 * 1e4).round() / 10.0,
            "speedup": (full_p50 / inc_p50).round(),
        })
    );
}

/// The chain took the assignments: each job Assigned, a slot of its node taken.
fn land(view: &mut View, changes: &mut Changes, assignments: &[(u64, u64)]) {
    for &(job, node) in assignments {
        let job_view = view.jobs.get_mut(&job).unwrap();
        job_view.state.status = JobStatus::Assigned;
        job_view.state.node_id = node;
        view.nodes.get_mut(&node).unwrap().active_jobs += 1;
        changes.job(job);
        changes.node(node);
    }
}

fn percentile(samples: &mut [f64], at: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[((samples.len() - 1) as f64 * at).round() as usize]
}
