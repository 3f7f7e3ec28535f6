//! The matcher's decision core: pure functions over a [`View`], no IO.
//!
//! ```text
//!  View ──▶ queue order (priority, fairness between submitters, age)
//!        ──▶ per job: hard constraints (what the contract checks) ──▶ strategy picks a node
//!        ──▶ Decision::Assign { job, node } | Decision::Unplaceable { job, explanation }
//! ```

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use alloy::primitives::{Address, B256};

pub use gantry_protocol::eligibility::Constraint;
use gantry_protocol::eligibility::{Constraints, capability_violations};

use crate::view::{JobView, NodeStatus, NodeView, Requirements, View};

/// How to choose among eligible nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Weighted score over price, reputation, hardware fit and load.
    #[default]
    Score,
    /// Eligible nodes in turn.
    RoundRobin,
    /// The node the job wastes least of.
    BestFit,
    /// The lowest price per GPU-hour.
    Cheapest,
}

/// Weights of the `Score` strategy; each term is in 0..=1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Weights {
    pub price: f64,
    pub reputation: f64,
    pub fit: f64,
    pub load: f64,
}

impl Default for Weights {
    fn default() -> Self {
        Self {
            price: 0.35,
            reputation: 0.25,
            fit: 0.25,
            load: 0.15,
        }
    }
}

/// Why a job could not be placed.
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// Whether an attempt assigned now would still end by the job's deadline; when not,
    /// no node can take it and the keeper expires it.
    pub fits: bool,
    /// Nodes considered (every known node that is not Exited).
    pub nodes: usize,
    /// How many of them fail each constraint (a node may fail several).
    pub rejected: BTreeMap<Constraint, usize>,
    /// The nodes closest to taking it: fewest constraints failed, then best score.
    pub best: Vec<Candidate>,
    /// Why no worker can run its spec, if so (then no node is asked to).
    pub spec_error: Option<String>,
}

/// A node that came close, with what rules it out.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub node: u64,
    /// Its `Score` strategy score with default weights, were it eligible.
    pub score: f64,
    pub failed: Vec<Constraint>,
}

/// Candidates an explanation names.
pub const EXPLAINED_CANDIDATES: usize = 3;

impl Explanation {
    /// A sentence for people, naming the constraint that rules out the most nodes, e.g.
    /// "0 of 12 nodes have ≥ 80 GiB VRAM per GPU".
    pub fn summary(&self, requirements: &Requirements) -> String {
        if let Some(error) = &self.spec_error {
            return format!(
                "no worker can run it ({error}): cancel it, or it expires at its deadline, refunded"
            );
        }
        if !self.fits {
            return format!(
                "its deadline leaves less than its max runtime ({} s): it expires, refunded",
                requirements.max_runtime
            );
        }
        let Some((constraint, count)) = self.rejected.iter().max_by_key(|(_, count)| **count)
        else {
            return if self.nodes == 0 {
                "no nodes are registered".to_string()
            } else {
                format!(
                    "{} nodes could take it, but their free slots go to jobs ahead in the queue",
                    self.nodes
                )
            };
        };
        let meeting = self.nodes - count;
        let what = match constraint {
            Constraint::Barred => "have not given it back or faulted on it".to_string(),
            Constraint::NotActive => "are active".to_string(),
            Constraint::NoFreeSlot => "have a free slot".to_string(),
            Constraint::Engine => match requirements.engine() {
                Some(engine) => format!("run {engine} jobs"),
                None => format!("run engine {}", requirements.engine),
            },
            Constraint::GpuModel => {
                format!("have GPU model {}", model_name(requirements.gpu_model))
            }
            Constraint::GpuCount => format!("have ≥ {} GPUs", requirements.min_gpu_count),
            Constraint::Vram => format!(
                "have ≥ {} GiB VRAM per GPU",
                requirements.min_vram_mib / 1024
            ),
            Constraint::Cpu => format!("have ≥ {} CPU cores", requirements.min_cpu_cores),
            Constraint::Ram => format!("have ≥ {} GiB RAM", requirements.min_ram_mib / 1024),
            Constraint::Price => format!(
                "charge ≤ {} per GPU-hour",
                requirements.max_price_per_gpu_hour
            ),
        };
        format!("{meeting} of {} nodes {what}", self.nodes)
    }
}

/// What to do about one open job. Why a job is unplaceable is [`explain`]ed separately,
/// when the service publishes explanations, not on the planning path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Assign { job: u64, node: u64 },
    Unplaceable { job: u64 },
}

/// The constraints `node` fails for `job` (empty: eligible): the market's checks of the
/// job's bars and the node's status and capabilities, in its order, and the matcher's own
/// count of free slots.
pub fn violations(node: &NodeView, job: &JobView) -> Constraints {
    let mut failed = node_violations(node, job.requirements());
    if job.barred.contains(&node.id) {
        failed.insert(Constraint::Barred);
    }
    failed
}

/// What rules `node` out for every job of `requirements`: all of [`violations`] but a
/// job's own bar.
pub(crate) fn node_violations(node: &NodeView, requirements: &Requirements) -> Constraints {
    let mut failed = capability_violations(requirements, &node.capabilities);
    if node.status != NodeStatus::Active {
        failed.insert(Constraint::NotActive);
    }
    if node.free_slots() == 0 {
        failed.insert(Constraint::NoFreeSlot);
    }
    failed
}

fn eligible(node: &NodeView, job: &JobView) -> bool {
    violations(node, job).is_empty()
}

/// The `Score` strategy's score of an eligible node for a job, in 0..=1.
pub fn score(node: &NodeView, requirements: &Requirements, weights: &Weights) -> f64 {
    let total = weights.price + weights.reputation + weights.fit + weights.load;
    if total <= 0.0 {
        return 0.0;
    }
    let price = if requirements.max_price_per_gpu_hour == 0 {
        1.0
    } else {
        1.0 - node.capabilities.price_per_gpu_hour as f64
            / requirements.max_price_per_gpu_hour as f64
    };
    let reputation = gantry_protocol::reputation::reputation(
        u64::from(node.completed_jobs),
        u64::from(node.failed_jobs),
    );
    let load =
        f64::from(node.free_slots()) / f64::from(node.capabilities.max_concurrent_jobs.max(1));
    (weights.price * price
        + weights.reputation * reputation
        + weights.fit * fit(node, requirements)
        + weights.load * load)
        / total
}

/// How much of the node the job uses, in 0..=1: 1 when the job needs exactly what the node
/// has, low when an 80 GB GPU would run an 8 GB job.
pub fn fit(node: &NodeView, requirements: &Requirements) -> f64 {
    let ratio = |needed: f64, offered: f64| {
        if offered <= 0.0 {
            1.0
        } else {
            (needed / offered).clamp(0.0, 1.0)
        }
    };
    let offered = &node.capabilities;
    let gpus = ratio(
        f64::from(requirements.min_gpu_count.max(1)),
        f64::from(offered.gpu_count.max(1)),
    );
    let vram = ratio(
        f64::from(requirements.min_vram_mib),
        f64::from(offered.vram_mib),
    );
    let cpu = ratio(
        f64::from(requirements.min_cpu_cores),
        f64::from(offered.cpu_cores),
    );
    let ram = ratio(
        f64::from(requirements.min_ram_mib),
        f64::from(offered.ram_mib),
    );
    // GPUs and their memory dominate what a node is worth.
    0.4 * gpus + 0.4 * vram + 0.1 * cpu + 0.1 * ram
}

/// Open jobs in the order they are served: higher priority first; at equal priority the
/// submitters take turns (each submitter's jobs oldest first), so no submitter starves the
/// others by posting many jobs.
pub fn queue(view: &View) -> Vec<&JobView> {
    let mut by_priority: BTreeMap<std::cmp::Reverse<u8>, BTreeMap<Address, VecDeque<&JobView>>> =
        BTreeMap::new();
    let mut jobs: Vec<&JobView> = view.open_jobs().collect();
    jobs.sort_by_key(|job| (job.posted_at, job.id));
    for job in jobs {
        by_priority
            .entry(std::cmp::Reverse(job.requirements().priority))
            .or_default()
            .entry(job.submitter())
            .or_default()
            .push_back(job);
    }
    let mut order = Vec::new();
    for submitters in by_priority.into_values() {
        // Submitters in the order of their oldest waiting job.
        let mut turns: Vec<VecDeque<&JobView>> = submitters.into_values().collect();
        turns.sort_by_key(|jobs| jobs.front().map(|job| (job.posted_at, job.id)));
        let mut turns: VecDeque<VecDeque<&JobView>> = turns.into();
        while let Some(mut jobs) = turns.pop_front() {
            if let Some(job) = jobs.pop_front() {
                order.push(job);
            }
            if !jobs.is_empty() {
                turns.push_back(jobs);
            }
        }
    }
    order
}

/// What the service knows beyond the view: assignments sent but not yet seen on the
/// stream, and (job, node) pairs whose assignment reverted for a reason the view does not
/// show yet.
#[derive(Debug, Clone, Default)]
pub struct Reservations {
    /// Job → node of each assignment in flight.
    pub in_flight: HashMap<u64, u64>,
    pub excluded: HashSet<(u64, u64)>,
}

/// Decides every open job against the view, in queue order. Each assignment takes a slot
/// of its node in a scratch copy, so one plan never overfills a node.
#[derive(Debug)]
pub struct Planner {
    pub strategy: Strategy,
    pub weights: Weights,
    /// Where round-robin continues.
    cursor: u64,
}

impl Planner {
    pub fn new(strategy: Strategy, weights: Weights) -> Self {
        Self {
            strategy,
            weights,
            cursor: 0,
        }
    }

    pub fn plan(&mut self, view: &View) -> Vec<Decision> {
        self.plan_with(view, &Reservations::default())
    }

    /// Plans as [`plan`](Self::plan), with the assignments already sent holding their
    /// slots (their jobs are not decided again), and the pairs that reverted left out.
    pub fn plan_with(&mut self, view: &View, reservations: &Reservations) -> Vec<Decision> {
        let mut index = SlotIndex::new(view);
        for node in reservations.in_flight.values() {
            index.take_slot(*node);
        }
        let mut decisions = Vec::new();
        for job in queue(view) {
            if reservations.in_flight.contains_key(&job.id) {
                continue;
            }
            if job.spec_error.is_some() {
                decisions.push(Decision::Unplaceable { job: job.id });
                continue;
            }
            let decision = self.decide_with(view, &mut index, job, &reservations.excluded);
            decisions.push(decision);
        }
        decisions
    }

    /// Decides one job against the view as it is.
    pub fn decide(&mut self, view: &View, job: &JobView) -> Decision {
        self.decide_with(view, &mut SlotIndex::new(view), job, &HashSet::new())
    }

    fn decide_with(
        &mut self,
        view: &View,
        index: &mut SlotIndex,
        job: &JobView,
        excluded: &HashSet<(u64, u64)>,
    ) -> Decision {
        let requirements = job.requirements();
        // The market refuses an attempt that could not end by the deadline.
        if !job.terms.fits(view.now) {
            return Decision::Unplaceable { job: job.id };
        }
        // Candidates come with the most VRAM first: the scan stops at the first node with
        // too little.
        let candidates = index
            .candidates(requirements.gpu_model)
            .filter_map(|id| view.nodes.get(id))
            .take_while(|node| node.capabilities.vram_mib >= requirements.min_vram_mib);
        match self.pick(job, candidates, excluded) {
            Some(node) => {
                index.take_slot(node);
                Decision::Assign { job: job.id, node }
            }
            None => Decision::Unplaceable { job: job.id },
        }
    }

    /// What the strategy ranks an eligible node by for a job of `requirements`: the
    /// highest wins, ties going to the lower node id (so plans are deterministic). `None`
    /// for round-robin, which follows its cursor.
    pub(crate) fn value(&self, node: &NodeView, requirements: &Requirements) -> Option<f64> {
        match self.strategy {
            Strategy::Score => Some(score(node, requirements, &self.weights)),
            Strategy::BestFit => Some(fit(node, requirements)),
            Strategy::Cheapest => Some(-(node.capabilities.price_per_gpu_hour as f64)),
            Strategy::RoundRobin => None,
        }
    }

    /// The node the strategy picks for `job` among `candidates` (nodes with a free slot in
    /// this plan, most VRAM per GPU first, then by id), leaving out ineligible nodes and
    /// excluded pairs; round-robin's cursor moves to it.
    pub(crate) fn pick<'a>(
        &mut self,
        job: &JobView,
        candidates: impl Iterator<Item = &'a NodeView>,
        excluded: &HashSet<(u64, u64)>,
    ) -> Option<u64> {
        let requirements = job.requirements();
        let mut best: Option<(f64, u64)> = None;
        let mut first_after_cursor: Option<u64> = None;
        let mut first: Option<u64> = None;
        for node in candidates {
            if !eligible(node, job)
                || (!excluded.is_empty() && excluded.contains(&(job.id, node.id)))
            {
                continue;
            }
            match self.value(node, requirements) {
                None => {
                    first.get_or_insert(node.id);
                    if node.id > self.cursor && first_after_cursor.is_none_or(|id| node.id < id) {
                        first_after_cursor = Some(node.id);
                    }
                }
                Some(value) => {
                    if best.is_none_or(|(best_value, best_id)| {
                        value > best_value || (value == best_value && node.id < best_id)
                    }) {
                        best = Some((value, node.id));
                    }
                }
            }
        }
        let chosen = match self.strategy {
            Strategy::RoundRobin => first_after_cursor.or(first),
            _ => best.map(|(_, id)| id),
        };
        if let Some(node) = chosen {
            self.cursor = node;
        }
        chosen
    }
}

/// Counts, over every node that has not exited, which constraints rule it out.
pub fn explain(view: &View, job: &JobView) -> Explanation {
    let requirements = job.requirements();
    let mut rejected = BTreeMap::new();
    let mut nodes = 0;
    let mut best: Vec<Candidate> = Vec::with_capacity(EXPLAINED_CANDIDATES + 1);
    let weights = Weights::default();
    for node in view
        .nodes
        .values()
        .filter(|n| n.status != NodeStatus::Exited)
    {
        nodes += 1;
        let failed = violations(node, job);
        for constraint in failed.iter() {
            *rejected.entry(constraint).or_insert(0) += 1;
        }
        let closer = |c: &Candidate| {
            (
                c.failed.len(),
                std::cmp::Reverse(OrderedScore(c.score)),
                c.node,
            )
        };
        let candidate = Candidate {
            node: node.id,
            score: score(node, requirements, &weights),
            failed: failed.iter().collect(),
        };
        if best.len() < EXPLAINED_CANDIDATES
            || best
                .last()
                .is_some_and(|last| closer(&candidate) < closer(last))
        {
            let at = best.partition_point(|c| closer(c) < closer(&candidate));
            best.insert(at, candidate);
            best.truncate(EXPLAINED_CANDIDATES);
        }
    }
    Explanation {
        fits: job.terms.fits(view.now),
        nodes,
        rejected,
        best,
        spec_error: job.spec_error.clone(),
    }
}

/// Scores compare totally (they are never NaN).
#[derive(Debug, Clone, Copy, PartialEq)]
struct OrderedScore(f64);

impl Eq for OrderedScore {}

impl PartialOrd for OrderedScore {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for OrderedScore {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

/// Active nodes with a free slot, grouped by GPU model, so a job that names a model scans
/// only those nodes, and a node that fills up during a plan drops out of every scan. Each
/// list is ordered by VRAM per GPU, most first.
struct SlotIndex {
    by_model: HashMap<B256, Vec<u64>>,
    /// Slots still free in this plan.
    free: HashMap<u64, u32>,
    /// Every node with a free slot, by id (for jobs that accept any model).
    all: Vec<u64>,
}

impl SlotIndex {
    fn new(view: &View) -> Self {
        let mut by_model: HashMap<B256, Vec<u64>> = HashMap::new();
        let mut free = HashMap::new();
        let mut all = Vec::new();
        for node in view
            .nodes
            .values()
            .filter(|n| n.status == NodeStatus::Active && n.free_slots() > 0)
        {
            by_model
                .entry(node.capabilities.gpu_model)
                .or_default()
                .push(node.id);
            free.insert(node.id, node.free_slots());
            all.push(node.id);
        }
        let vram_first = |ids: &mut Vec<u64>| {
            ids.sort_by_key(|id| (std::cmp::Reverse(view.nodes[id].capabilities.vram_mib), *id));
        };
        vram_first(&mut all);
        by_model.values_mut().for_each(vram_first);
        Self {
            by_model,
            free,
            all,
        }
    }

    fn candidates(&self, model: B256) -> std::slice::Iter<'_, u64> {
        if model == B256::ZERO {
            self.all.iter()
        } else {
            self.by_model
                .get(&model)
                .map_or([].iter(), |ids| ids.iter())
        }
    }

    fn take_slot(&mut self, node: u64) {
        let Some(free) = self.free.get_mut(&node) else {
            return;
        };
        *free -= 1;
        if *free == 0 {
            self.free.remove(&node);
            self.all.retain(|id| *id != node);
            for ids in self.by_model.values_mut() {
                ids.retain(|id| *id != node);
            }
        }
    }
}

fn model_name(model: B256) -> String {
    let bytes: Vec<u8> = model.iter().copied().take_while(|b| *b != 0).collect();
    String::from_utf8(bytes).unwrap_or_else(|_| model.to_string())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};

    use super::*;
    use crate::view::Capabilities;
    use crate::view::fixtures;
    use gantry_protocol::eligibility::Engines;
    use gantry_protocol::spec::Engine;

    fn model(name: &str) -> B256 {
        B256::right_padding_from(name.as_bytes())
    }

    fn node(id: u64, name: &str, gpus: u16, vram_gib: u32, price: u128) -> NodeView {
        let capabilities = Capabilities {
            gpu_model: model(name),
            gpu_count: gpus,
            vram_mib: vram_gib * 1024,
            cpu_cores: 32,
            ram_mib: 256 * 1024,
            price_per_gpu_hour: price,
            max_concurrent_jobs: 1,
            engines: Default::default(),
        };
        fixtures::node(id, capabilities, 500, 0)
    }

    fn job(id: u64, submitter: u8, name: &str, vram_gib: u32, priority: u8) -> JobView {
        fixtures::job(
            id,
            submitter,
            10_000,
            Requirements {
                gpu_model: if name.is_empty() {
                    B256::ZERO
                } else {
                    model(name)
                },
                min_gpu_count: 1,
                min_vram_mib: vram_gib * 1024,
                min_cpu_cores: 4,
                min_ram_mib: 16 * 1024,
                max_price_per_gpu_hour: 10,
                max_runtime: 3600,
                priority,
                engine: 0,
            },
        )
    }

    fn view(nodes: Vec<NodeView>, jobs: Vec<JobView>) -> View {
        View {
            nodes: nodes.into_iter().map(|n| (n.id, n)).collect(),
            jobs: jobs.into_iter().map(|j| (j.id, j)).collect(),
            ..View::default()
        }
    }

    fn assignments(decisions: &[Decision]) -> Vec<(u64, u64)> {
        decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Assign { job, node } => Some((*job, *node)),
                Decision::Unplaceable { .. } => None,
            })
            .collect()
    }

    #[test]
    fn best_fit_keeps_the_big_gpu_for_the_big_job() {
        // Given an 80 GB and a 24 GB node, and a small job queued before a big one,
        let v = view(
            vec![node(1, "H100", 1, 80, 5), node(2, "L4", 1, 24, 5)],
            vec![job(1, 1, "", 8, 5), job(2, 1, "", 60, 5)],
        );
        // when the best-fit and score strategies plan,
        for strategy in [Strategy::BestFit, Strategy::Score] {
            let decisions = Planner::new(strategy, Weights::default()).plan(&v);
            // then the small job takes the small GPU and the big job still fits.
            assert_eq!(assignments(&decisions), [(1, 2), (2, 1)], "{strategy:?}");
        }
    }

    #[test]
    fn cheapest_takes_the_lowest_price_and_round_robin_rotates() {
        let v = view(
            vec![
                node(1, "A", 1, 80, 9),
                node(2, "A", 1, 80, 3),
                node(3, "A", 1, 80, 6),
            ],
            vec![job(1, 1, "A", 8, 5)],
        );
        let cheapest = Planner::new(Strategy::Cheapest, Weights::default()).plan(&v);
        assert_eq!(assignments(&cheapest), [(1, 2)]);

        let mut planner = Planner::new(Strategy::RoundRobin, Weights::default());
        let picks: Vec<u64> = (0..4)
            .map(|_| assignments(&planner.plan(&v))[0].1)
            .collect();
        assert_eq!(picks, [1, 2, 3, 1]);
    }

    #[test]
    fn a_wasm_job_goes_only_to_a_node_running_wasm_and_says_so_when_none_does() {
        let mut wasm = job(1, 1, "", 0, 5);
        let terms = &mut wasm.terms.requirements;
        (terms.engine, terms.min_gpu_count) = (Engine::Wasm.code(), 0);
        let docker_only = vec![node(1, "L4", 1, 24, 5), node(2, "L4", 1, 24, 5)];
        let v = view(docker_only.clone(), vec![wasm.clone()]);
        let decisions = Planner::new(Strategy::Score, Weights::default()).plan(&v);
        assert_eq!(decisions, [Decision::Unplaceable { job: 1 }]);
        assert_eq!(
            explain(&v, &v.jobs[&1]).summary(v.jobs[&1].requirements()),
            "0 of 2 nodes run wasm jobs"
        );
        let mut both = node(3, "L4", 1, 24, 5);
        both.capabilities.engines = Engines::ALL;
        let v = view([docker_only, vec![both]].concat(), vec![wasm]);
        let decisions = Planner::new(Strategy::Score, Weights::default()).plan(&v);
        assert_eq!(assignments(&decisions), [(1, 3)]);
    }

    #[test]
    fn an_impossible_job_is_explained_by_its_constraint() {
        let v = view(
            vec![node(1, "L4", 1, 24, 5), node(2, "L4", 2, 24, 5)],
            vec![job(1, 1, "", 80, 5)],
        );
        let decisions = Planner::new(Strategy::Score, Weights::default()).plan(&v);
        assert_eq!(decisions, [Decision::Unplaceable { job: 1 }]);
        let explanation = explain(&v, &v.jobs[&1]);
        assert_eq!(explanation.rejected.get(&Constraint::Vram), Some(&2));
        assert_eq!(
            explanation.summary(v.jobs[&1].requirements()),
            "0 of 2 nodes have ≥ 80 GiB VRAM per GPU"
        );
        // Both fail the same one constraint; the two-GPU node fits the one-GPU job worse.
        let best: Vec<(u64, Vec<Constraint>)> = explanation
            .best
            .iter()
            .map(|c| (c.node, c.failed.clone()))
            .collect();
        assert_eq!(
            best,
            [(1, vec![Constraint::Vram]), (2, vec![Constraint::Vram])]
        );
    }

    #[test]
    fn a_job_no_worker_can_run_is_never_assigned_and_says_why() {
        // Given a node that fits both jobs, and job 1's spec refused by the validator,
        let mut v = view(
            vec![node(1, "A", 1, 80, 1)],
            vec![job(1, 1, "A", 8, 9), job(2, 2, "A", 8, 5)],
        );
        v.nodes
            .get_mut(&1)
            .unwrap()
            .capabilities
            .max_concurrent_jobs = 2;
        let error = "spec field image: must be an image reference Docker accepts";
        v.jobs.get_mut(&1).unwrap().spec_error = Some(error.into());
        // then only the runnable job is assigned, although job 1 comes first,
        let decisions = Planner::new(Strategy::Score, Weights::default()).plan(&v);
        assert_eq!(
            decisions,
            [
                Decision::Unplaceable { job: 1 },
                Decision::Assign { job: 2, node: 1 }
            ]
        );
        // and job 1's explanation names the spec's fault.
        let summary = explain(&v, &v.jobs[&1]).summary(v.jobs[&1].requirements());
        assert!(
            summary.starts_with("no worker can run it (spec field image"),
            "{summary}"
        );
    }

    #[test]
    fn a_barred_node_is_passed_over_and_a_job_that_no_longer_fits_waits_to_expire() {
        // Given two nodes, the better one barred from job 1 (it gave the job back),
        let mut v = view(
            vec![node(1, "A", 1, 80, 1), node(2, "A", 1, 80, 9)],
            vec![job(1, 1, "A", 40, 5), job(2, 2, "A", 40, 5)],
        );
        v.jobs.get_mut(&1).unwrap().barred.insert(1);
        let mut planner = Planner::new(Strategy::Cheapest, Weights::default());
        // then job 1 goes to the other node, and job 2 to the barred one;
        assert_eq!(assignments(&planner.plan(&v)), [(1, 2), (2, 1)]);
        let explanation = explain(&v, &v.jobs[&1]);
        assert_eq!(explanation.rejected.get(&Constraint::Barred), Some(&1));

        // once less than its max runtime (3600 s) is left before its deadline (10 000),
        // no attempt fits: nobody is assigned it, the explanation says it expires.
        v.now = 10_000 - 3_599;
        assert_eq!(
            planner.plan(&v),
            [
                Decision::Unplaceable { job: 1 },
                Decision::Unplaceable { job: 2 }
            ]
        );
        let explanation = explain(&v, &v.jobs[&1]);
        assert!(!explanation.fits);
        assert!(
            explanation
                .summary(v.jobs[&1].requirements())
                .contains("expires")
        );
    }

    #[test]
    fn assignments_in_flight_hold_their_slots_and_reverted_pairs_are_avoided() {
        // Given two one-slot nodes and three jobs,
        let v = view(
            vec![node(1, "A", 1, 80, 1), node(2, "A", 1, 80, 2)],
            (1..=3).map(|id| job(id, 1, "A", 8, 5)).collect(),
        );
        let mut planner = Planner::new(Strategy::Cheapest, Weights::default());
        // when job 1 is in flight to node 1 and job 2 reverted on node 2,
        let reservations = Reservations {
            in_flight: HashMap::from([(1, 1)]),
            excluded: HashSet::from([(2, 2)]),
        };
        // then job 1 is not planned again, job 2 has nowhere to go, job 3 takes node 2.
        let decisions = planner.plan_with(&v, &reservations);
        assert_eq!(
            decisions,
            [
                Decision::Unplaceable { job: 2 },
                Decision::Assign { job: 3, node: 2 }
            ]
        );
    }

    #[test]
    fn priority_first_then_submitters_take_turns() {
        // Submitter 1 floods the queue before submitter 2 posts; a high-priority job comes last.
        let mut jobs: Vec<JobView> = (1..=4).map(|id| job(id, 1, "", 8, 5)).collect();
        jobs.push(job(5, 2, "", 8, 5));
        jobs.push(job(6, 3, "", 8, 9));
        let v = view(vec![], jobs);
        let order: Vec<u64> = queue(&v).iter().map(|j| j.id).collect();
        assert_eq!(order, [6, 1, 5, 2, 3, 4]);
    }

    #[test]
    fn a_plan_never_overfills_a_node() {
        let v = view(
            vec![node(1, "A", 1, 80, 5)],
            (1..=3).map(|id| job(id, 1, "A", 8, 5)).collect(),
        );
        let decisions = Planner::new(Strategy::Score, Weights::default()).plan(&v);
        assert_eq!(assignments(&decisions), [(1, 1)]);
        assert!(
            decisions[1..]
                .iter()
                .all(|d| matches!(d, Decision::Unplaceable { .. }))
        );
    }

    proptest! {
        /// Whatever the nodes, jobs and strategy: every assignment satisfies every hard
        /// constraint, and no node gets more jobs than it has free slots.
        #[test]
        fn assignments_are_always_eligible(
            nodes in prop::collection::vec((0u8..3, 1u16..9, 8u32..96, 1u128..12, 1u8..4, 0u32..3, prop::bool::ANY), 0..12),
            jobs in prop::collection::vec((0u8..4, 1u16..9, 4u32..96, 1u8..11, 0u8..4), 0..24),
            strategy in prop::sample::select(vec![Strategy::Score, Strategy::RoundRobin, Strategy::BestFit, Strategy::Cheapest]),
        ) {
            let models = ["A", "B", "C"];
            let nodes: Vec<NodeView> = nodes.into_iter().enumerate().map(|(i, (m, gpus, vram, price, slots, active, up))| {
                let mut n = node(i as u64 + 1, models[m as usize], gpus, vram, price);
                n.capabilities.max_concurrent_jobs = slots;
                n.active_jobs = active;
                n.status = if up { NodeStatus::Active } else { NodeStatus::Inactive };
                n
            }).collect();
            let jobs: Vec<JobView> = jobs.into_iter().enumerate().map(|(i, (m, gpus, vram, priority, submitter))| {
                let name = if m == 3 { "" } else { models[m as usize] };
                let mut j = job(i as u64 + 1, submitter, name, vram, priority);
                j.terms.requirements.min_gpu_count = gpus;
                j
            }).collect();
            let v = view(nodes, jobs);
            let decisions = Planner::new(strategy, Weights::default()).plan(&v);
            prop_assert_eq!(decisions.len(), v.jobs.len());
            let mut given: HashMap<u64, u32> = HashMap::new();
            for (job, node) in assignments(&decisions) {
                let n = &v.nodes[&node];
                prop_assert!(violations(n, &v.jobs[&job]).is_empty());
                *given.entry(node).or_default() += 1;
            }
            for (node, count) in given {
                prop_assert!(count <= v.nodes[&node].free_slots());
            }
            // An unplaceable job's explanation names a constraint for every node, unless
            // the node's slots went to earlier jobs of this plan.
            for decision in &decisions {
                if let Decision::Unplaceable { job } = decision {
                    let explanation = explain(&v, &v.jobs[job]);
                    prop_assert!(explanation.nodes <= v.nodes.len());
                }
            }
        }
    }
}
