//! `cargo bench -p gantry-matcher --bench decide`
//!
//! Decisions per second of the pure planner with 10,000 nodes and 100,000 queued jobs
//! (10 GPU models; a tenth of the jobs accept any model), per strategy. A baseline in the
//! same run: one linear eligibility scan of every node per job, the planner's work without
//! its model index. Prints a final JSON line with the `score` strategy's rate.

use std::time::Instant;

use alloy::primitives::{Address, B256};
use gantry_matcher::decide::{Decision, Planner, Strategy, Weights, violations};
use gantry_matcher::view::{Capabilities, JobView, NodeStatus, NodeView, Requirements, View};
use gantry_protocol::market::Terms;

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
    let jobs = (1..=JOBS)
        .map(|id| {
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
            (id, JobView::open(id, terms, (id, 0)))
        })
        .collect();
    View {
        nodes,
        jobs,
        ..View::default()
    }
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
}
