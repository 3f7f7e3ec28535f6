//! Incremental planning, pure: the assignments [`Planner::plan_with`] makes over the whole
//! queue, with work per round that grows with what changed since the last round, not with
//! the queue.
//!
//! ```text
//!  Changes (nodes, jobs) ──▶ Queue    every open job in its submitter's list, oldest first
//!                       └─▶ Supply   nodes with a slot free after the assignments in flight
//!  plan: walk the queue in order (a merge of the lists) ──▶ Planner::pick ──▶ assignments,
//!        stopping once every node of the supply that some job may take is full
//! ```
//!
//! Why it is the same plan: the full plan serves open jobs in queue order, each taking the
//! node the strategy picks among those with a slot still free (the supply). The queue's
//! order is a sort key — (priority, the job's turn among its submitter's open jobs at that
//! priority, the submitter's oldest such job) — so a merge of the submitters' lists walks
//! it without sorting the queue. Once no node of the supply has a slot left, every later
//! job is unplaceable and takes nothing: the walk stops there. A node with a slot that no
//! open job may take (the walk went through the whole queue and left it free) is
//! *exhausted*: the walk does not wait for it to fill, until a job that may take it appears
//! (posted, requeued, back from an assignment that was not sent or did not land, or out of
//! its reverted pair's backoff) or the node changes. Likewise a job that no node of the
//! scan may take is *set aside* (it still counts for turns): no later walk could place it
//! until a node meeting its requirements enters the scan (enters the supply, changes
//! capabilities in it, or wakes), its reverted pair's backoff ends, or it changes.
//! Within a walk the view stands still, so every job of a class (the same requirements
//! but priority and runtime) ranks the nodes alike: from the class's second job on, the
//! walk ranks the scan once for it and takes the first node not filled since, rather than
//! going through the scan for each job (a market of a few job templates and thousands of
//! free nodes).
//! `tests::incremental_equals_full_on_random_histories` holds it to the full plan.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, HashSet};

use alloy::primitives::{Address, B256};

use gantry_protocol::eligibility::capability_violations;

use crate::decide::{Planner, Reservations, Strategy, Weights, node_violations, violations};
use crate::view::{Capabilities, Changes, JobView, NodeStatus, Requirements, View};

/// (posted block, log index, job id): a job's place in its submitter's list.
type JobKey = (u64, u64, u64);
/// (255 - priority, submitter): one list of the queue.
type ListKey = (u8, Address);
/// Most VRAM per GPU first, then by id: the order the planner scans nodes in.
type NodeKey = (Reverse<u32>, u64);

/// The planner that keeps its indexes between rounds.
#[derive(Debug)]
pub struct IncrementalPlanner {
    planner: Planner,
    /// Whether the indexes hold a view (false: rebuild from the next one).
    built: bool,
    /// The view's time at the last round: a job that did not fit then never fits later,
    /// unless a reorganisation moved time back (then everything is rebuilt).
    now: u64,
    queue: Queue,
    supply: Supply,
    /// The assignments in flight at the last round, by job.
    in_flight: HashMap<u64, u64>,
    /// The assignments the last round made.
    planned: Vec<(u64, u64)>,
    /// The pairs left out at the last round.
    excluded: HashSet<(u64, u64)>,
    /// Rounds planned, and jobs looked at over them (for the benchmark and tests).
    pub stats: Stats,
}

/// What the rounds cost.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    pub rounds: u64,
    pub rebuilds: u64,
    /// Jobs the walks went past (decided, or skipped as in flight or unrunnable).
    pub jobs_walked: u64,
}

impl IncrementalPlanner {
    pub fn new(strategy: Strategy, weights: Weights) -> Self {
        Self {
            planner: Planner::new(strategy, weights),
            built: false,
            now: 0,
            queue: Queue::default(),
            supply: Supply::default(),
            in_flight: HashMap::new(),
            planned: Vec::new(),
            excluded: HashSet::new(),
            stats: Stats::default(),
        }
    }

    /// The assignments of one round, in queue order: those [`Planner::plan_with`] makes
    /// for the same view and reservations, given every change to the view since the
    /// previous round (every other open job, and every job in flight, is unplaceable now).
    pub fn plan(
        &mut self,
        view: &View,
        changes: &Changes,
        reservations: &Reservations,
    ) -> Vec<(u64, u64)> {
        self.stats.rounds += 1;
        if !self.built || changes.all || view.now < self.now {
            self.rebuild(view, reservations);
        } else {
            self.update(view, changes, reservations);
        }
        self.unblock_for_entered();
        self.now = view.now;
        self.in_flight.clone_from(&reservations.in_flight);
        self.excluded.clone_from(&reservations.excluded);
        self.planned = self.walk(view, reservations);
        self.planned.clone()
    }

    fn rebuild(&mut self, view: &View, reservations: &Reservations) {
        self.stats.rebuilds += 1;
        self.built = true;
        self.queue = Queue::default();
        self.supply = Supply::default();
        let holding = holding(&reservations.in_flight);
        for id in view.nodes.keys() {
            self.supply.update(view, *id, holding.get(id).copied());
        }
        for job in view.open_jobs() {
            self.queue.insert(job, view.now);
        }
    }

    /// Brings the indexes up to the view, and wakes the exhausted nodes a job may take
    /// again.
    fn update(&mut self, view: &View, changes: &Changes, reservations: &Reservations) {
        let mut nodes: HashSet<u64> = changes.nodes.clone();
        // Jobs that may be open and free to place again, though the view did not change
        // them: the last round's assignments not in flight now, and jobs whose assignment
        // in flight ended.
        let mut back: HashSet<u64> = changes.jobs.clone();
        for (job, node) in &self.in_flight {
            if reservations.in_flight.get(job) != Some(node) {
                nodes.insert(*node);
                back.insert(*job);
            }
        }
        for (job, node) in &reservations.in_flight {
            if self.in_flight.get(job) != Some(node) {
                nodes.insert(*node);
            }
        }
        back.extend(
            self.planned
                .iter()
                .map(|(job, _)| *job)
                .filter(|job| !reservations.in_flight.contains_key(job)),
        );
        // A pair out of its backoff may be tried again.
        for (job, node) in self.excluded.difference(&reservations.excluded) {
            self.supply.wake(*node);
            self.queue.unblock(*job);
        }
        let holding = holding(&reservations.in_flight);
        for node in nodes {
            self.supply.update(view, node, holding.get(&node).copied());
        }
        for &job in &changes.jobs {
            self.queue.remove(job);
            if let Some(open) = view.open_job(job) {
                self.queue.insert(open, view.now);
            }
        }
        if self.supply.exhausted.is_empty() {
            return;
        }
        // Each exhausted node once, against the jobs until one may take it: thousands of
        // exhausted nodes (more slots than open jobs) each met by most of a block's jobs
        // made a list of every (job, node) pair that fits, millions a round.
        let back: Vec<&JobView> = back.iter().filter_map(|job| view.open_job(*job)).collect();
        if back.is_empty() {
            return;
        }
        let woken: Vec<u64> = self
            .supply
            .exhausted
            .iter()
            .copied()
            .filter(|node| {
                view.nodes
                    .get(node)
                    .is_some_and(|n| back.iter().any(|job| violations(n, job).is_empty()))
            })
            .collect();
        for node in woken {
            self.supply.wake(node);
        }
    }

    /// Brings back the jobs set aside that a node entering the scan may fit.
    fn unblock_for_entered(&mut self) {
        for node in self.supply.take_entered() {
            if let Some(capabilities) = self.supply.held.get(&node) {
                self.queue.unblock_fitting(capabilities);
            }
        }
    }

    /// Walks the queue in order, deciding each job against what is left of the supply,
    /// until every node of it that is not exhausted is full.
    fn walk(&mut self, view: &View, reservations: &Reservations) -> Vec<(u64, u64)> {
        let mut assignments = Vec::new();
        let mut waiting: u64 = self
            .supply
            .free
            .iter()
            .filter(|(node, _)| !self.supply.exhausted.contains(node))
            .map(|(_, free)| u64::from(*free))
            .sum();
        if waiting == 0 {
            return assignments;
        }
        let mut heap: BinaryHeap<Reverse<(Order, ListKey)>> = self
            .queue
            .active
            .iter()
            .filter_map(|(list, active)| {
                let first = active.first()?;
                Some(Reverse((self.queue.order(*list, *first), *list)))
            })
            .collect();
        // Jobs no node of the scan (as the walk found it) may take: set aside.
        let mut blocked: Vec<u64> = Vec::new();
        // The nodes a class of jobs may take, ranked, for the classes the walk met twice
        // (`None`: met once). Round-robin's pick follows its cursor: never ranked.
        let mut ranked: HashMap<Class, Option<Ranked>> = HashMap::new();
        let mut taken: HashMap<u64, u32> = HashMap::new();
        // Nodes whose slots this walk gave out, out of the scan until it ends.
        let mut filled: Vec<u64> = Vec::new();
        let mut expired: Vec<u64> = Vec::new();
        let mut through = true;
        while let Some(Reverse((order, list))) = heap.pop() {
            let key = order.job;
            if let Some(next) = self.queue.active[&list]
                .range((std::ops::Bound::Excluded(key), std::ops::Bound::Unbounded))
                .next()
            {
                heap.push(Reverse((self.queue.order(list, *next), list)));
            }
            self.stats.jobs_walked += 1;
            let id = key.2;
            if reservations.in_flight.contains_key(&id) {
                continue;
            }
            let Some(job) = view.open_job(id) else {
                debug_assert!(false, "job {id} indexed but not open");
                continue;
            };
            if !job.terms.fits(view.now) {
                expired.push(id);
                continue;
            }
            let requirements = job.requirements();
            let class = Class::of(requirements);
            let is_filled = |node: &u64| {
                taken.get(node).copied().unwrap_or(0)
                    == self.supply.free.get(node).copied().unwrap_or(0)
            };
            let picked = match ranked.get_mut(&class) {
                Some(Some(ranked)) => ranked.first(job, &reservations.excluded, is_filled),
                Some(slot) => {
                    // Met a second time: ranked once for the rest of the walk.
                    let ranked =
                        slot.insert(Ranked::new(&self.planner, &self.supply, view, requirements));
                    ranked.first(job, &reservations.excluded, is_filled)
                }
                None => {
                    if self.planner.strategy != Strategy::RoundRobin {
                        ranked.insert(class, None);
                    }
                    let candidates = self
                        .supply
                        .candidates(requirements.gpu_model)
                        .filter_map(|id| view.nodes.get(&id))
                        .take_while(|node| node.capabilities.vram_mib >= requirements.min_vram_mib);
                    self.planner.pick(job, candidates, &reservations.excluded)
                }
            };
            let Some(node) = picked else {
                // None of the nodes the walk started with may take it: it waits apart
                // until one that fits it enters the scan, its pair's backoff ends, or it
                // changes. `pick` went through those still scanned (the ones it left out
                // by VRAM fail it too); those the walk filled are left to look at.
                let none = !filled.iter().any(|&node| {
                    view.nodes.get(&node).is_some_and(|n| {
                        violations(n, job).is_empty()
                            && !reservations.excluded.contains(&(id, node))
                    })
                });
                if none {
                    blocked.push(id);
                }
                continue;
            };
            assignments.push((id, node));
            let taken = taken.entry(node).or_default();
            *taken += 1;
            if *taken == self.supply.free[&node] {
                self.supply.unscan(node);
                filled.push(node);
            }
            waiting -= 1;
            if waiting == 0 {
                through = false;
                break;
            }
        }
        for node in filled {
            self.supply.scan(node);
        }
        // Went through the whole queue: what is still free, no open job may take.
        if through {
            let left: Vec<u64> = self
                .supply
                .free
                .iter()
                .filter(|(node, free)| taken.get(node).copied().unwrap_or(0) < **free)
                .map(|(node, _)| *node)
                .collect();
            for node in left {
                self.supply.exhaust(node);
            }
        }
        // A job that no longer fits before its deadline never will (time only moves on):
        // it is skipped from now on, and stays in the queue, where it still counts for turns.
        for id in expired {
            self.queue.expire(id);
        }
        for id in blocked {
            if let Some(job) = view.open_job(id) {
                self.queue.block(id, *job.requirements());
            }
        }
        assignments
    }
}

/// Jobs whose requirements differ in nothing a node is chosen by (their priority and
/// runtime left out): every node ranks the same for each of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Class(Requirements);

impl Class {
    fn of(requirements: &Requirements) -> Self {
        Self(Requirements {
            priority: 0,
            max_runtime: 0,
            ..*requirements
        })
    }
}

/// The nodes of the scan that a class of jobs may take as the walk found them, best first
/// by the strategy's value, ties to the lower id: [`Planner::pick`]'s order. The view does
/// not change during a walk and no node enters the scan, so a later job of the class takes
/// the first node not filled since, unless the job bars it or its pair is excluded.
#[derive(Debug)]
struct Ranked {
    nodes: Vec<u64>,
    /// Nodes before it are filled.
    next: usize,
}

impl Ranked {
    fn new(planner: &Planner, supply: &Supply, view: &View, requirements: &Requirements) -> Self {
        let mut ranked: Vec<(f64, u64)> = supply
            .candidates(requirements.gpu_model)
            .filter_map(|id| view.nodes.get(&id))
            .filter(|node| node_violations(node, requirements).is_empty())
            .filter_map(|node| Some((planner.value(node, requirements)?, node.id)))
            .collect();
        // Compared as `pick` compares (-0.0 equals 0.0); values are never NaN (the
        // weights are finite, checked at start).
        ranked.sort_by(|a, b| {
            b.0.partial_cmp(&a.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.1.cmp(&b.1))
        });
        Self {
            nodes: ranked.into_iter().map(|(_, id)| id).collect(),
            next: 0,
        }
    }

    /// The best node `job` may take: not filled, not barred by it, its pair not excluded.
    fn first(
        &mut self,
        job: &JobView,
        excluded: &HashSet<(u64, u64)>,
        filled: impl Fn(&u64) -> bool,
    ) -> Option<u64> {
        while self.nodes.get(self.next).is_some_and(&filled) {
            self.next += 1;
        }
        self.nodes[self.next..].iter().copied().find(|node| {
            !filled(node) && !job.barred.contains(node) && !excluded.contains(&(job.id, *node))
        })
    }
}

/// Slots each node's assignments in flight hold.
fn holding(in_flight: &HashMap<u64, u64>) -> HashMap<u64, u32> {
    let mut holding = HashMap::new();
    for node in in_flight.values() {
        *holding.entry(*node).or_default() += 1;
    }
    holding
}

/// A job's place in the queue: higher priority first, then its turn among its submitter's
/// jobs, then the submitter's oldest job (unique to the job together); the job itself is
/// carried along.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Order {
    priority: u8,
    turn: usize,
    front: JobKey,
    job: JobKey,
}

/// Every open job, in its submitter's list at its priority, oldest first (its turn is its
/// place there); and, per list, those the walk decides (`active`): not a spec no worker
/// runs, not a job that no longer fits, not a job set aside (`blocked`).
#[derive(Debug, Default)]
struct Queue {
    lists: HashMap<ListKey, Vec<JobKey>>,
    active: HashMap<ListKey, BTreeSet<JobKey>>,
    jobs: HashMap<u64, (ListKey, JobKey)>,
    blocked: Blocked,
}

impl Queue {
    fn insert(&mut self, job: &JobView, now: u64) {
        let list = (255 - job.requirements().priority, job.submitter());
        let key = (job.posted_at.0, job.posted_at.1, job.id);
        let jobs = self.lists.entry(list).or_default();
        let at = jobs.partition_point(|k| *k < key);
        jobs.insert(at, key);
        self.jobs.insert(job.id, (list, key));
        if job.spec_error.is_none() && job.terms.fits(now) {
            self.active.entry(list).or_default().insert(key);
        }
    }

    fn remove(&mut self, id: u64) {
        let Some((list, key)) = self.jobs.remove(&id) else {
            return;
        };
        self.blocked.remove(id);
        self.deactivate(list, key);
        if let Some(jobs) = self.lists.get_mut(&list) {
            if let Ok(at) = jobs.binary_search(&key) {
                jobs.remove(at);
            }
            if jobs.is_empty() {
                self.lists.remove(&list);
            }
        }
    }

    fn deactivate(&mut self, list: ListKey, key: JobKey) {
        if let Some(active) = self.active.get_mut(&list) {
            active.remove(&key);
            if active.is_empty() {
                self.active.remove(&list);
            }
        }
    }

    /// A job that no longer fits: never decided again (it stays for turns).
    fn expire(&mut self, id: u64) {
        if let Some(&(list, key)) = self.jobs.get(&id) {
            self.deactivate(list, key);
        }
    }

    /// A job no node of the scan may take: set aside by its requirements.
    fn block(&mut self, id: u64, requirements: Requirements) {
        if let Some(&(list, key)) = self.jobs.get(&id) {
            self.deactivate(list, key);
            self.blocked.insert(id, requirements);
        }
    }

    /// A job set aside, decided again.
    fn unblock(&mut self, id: u64) {
        if self.blocked.remove(id)
            && let Some(&(list, key)) = self.jobs.get(&id)
        {
            self.active.entry(list).or_default().insert(key);
        }
    }

    /// The jobs set aside whose requirements `capabilities` meet, decided again.
    fn unblock_fitting(&mut self, capabilities: &Capabilities) {
        for id in self.blocked.fitting(capabilities) {
            if let Some(&(list, key)) = self.jobs.get(&id) {
                self.active.entry(list).or_default().insert(key);
            }
        }
    }

    fn order(&self, list: ListKey, key: JobKey) -> Order {
        let jobs = &self.lists[&list];
        Order {
            priority: list.0,
            turn: jobs.partition_point(|k| *k < key),
            front: jobs[0],
            job: key,
        }
    }
}

/// Jobs set aside, by requirements; the requirements by GPU model, then minimum VRAM per
/// GPU, so that a node entering the scan is tried only against those it could meet.
#[derive(Debug, Default)]
struct Blocked {
    ids: HashMap<Requirements, usize>,
    classes: HashMap<usize, (Requirements, HashSet<u64>)>,
    by_model: HashMap<B256, BTreeSet<(u32, usize)>>,
    of_job: HashMap<u64, usize>,
    next: usize,
}

impl Blocked {
    fn insert(&mut self, job: u64, requirements: Requirements) {
        let id = *self.ids.entry(requirements).or_insert_with(|| {
            let id = self.next;
            self.next += 1;
            self.by_model
                .entry(requirements.gpu_model)
                .or_default()
                .insert((requirements.min_vram_mib, id));
            id
        });
        self.classes
            .entry(id)
            .or_insert_with(|| (requirements, HashSet::new()))
            .1
            .insert(job);
        self.of_job.insert(job, id);
    }

    /// Whether the job was set aside.
    fn remove(&mut self, job: u64) -> bool {
        let Some(id) = self.of_job.remove(&job) else {
            return false;
        };
        if let Some((_, jobs)) = self.classes.get_mut(&id) {
            jobs.remove(&job);
            if jobs.is_empty() {
                self.drop_class(id);
            }
        }
        true
    }

    fn drop_class(&mut self, id: usize) -> HashSet<u64> {
        let Some((requirements, jobs)) = self.classes.remove(&id) else {
            return HashSet::new();
        };
        self.ids.remove(&requirements);
        if let Some(classes) = self.by_model.get_mut(&requirements.gpu_model) {
            classes.remove(&(requirements.min_vram_mib, id));
            if classes.is_empty() {
                self.by_model.remove(&requirements.gpu_model);
            }
        }
        for job in &jobs {
            self.of_job.remove(job);
        }
        jobs
    }

    /// Takes out the jobs whose requirements `capabilities` meet.
    fn fitting(&mut self, capabilities: &Capabilities) -> Vec<u64> {
        let mut met = Vec::new();
        let models = if capabilities.gpu_model == B256::ZERO {
            vec![B256::ZERO]
        } else {
            vec![capabilities.gpu_model, B256::ZERO]
        };
        for model in models {
            if let Some(classes) = self.by_model.get(&model) {
                met.extend(
                    classes
                        .range(..=(capabilities.vram_mib, usize::MAX))
                        .map(|(_, id)| *id)
                        .filter(|id| {
                            capability_violations(&self.classes[id].0, capabilities).is_empty()
                        }),
                );
            }
        }
        met.into_iter().flat_map(|id| self.drop_class(id)).collect()
    }
}

/// Active nodes with a slot free after the assignments in flight (the supply), and the
/// scan: those of them a job may take, indexed as the planner scans them. An exhausted
/// node is out of the scan (no open job may take it); so is, during a walk, a node whose
/// slots the walk has given out.
#[derive(Debug, Default)]
struct Supply {
    /// Free slots of each node in the supply.
    free: HashMap<u64, u32>,
    /// Capabilities of each node in the supply.
    held: HashMap<u64, Capabilities>,
    /// Nodes of the supply that no open job may take.
    exhausted: HashSet<u64>,
    /// Nodes that entered the scan since last asked (entered the supply, changed
    /// capabilities in it, or woke).
    entered: Vec<u64>,
    all: BTreeSet<NodeKey>,
    by_model: HashMap<B256, BTreeSet<NodeKey>>,
}

impl Supply {
    /// Takes the node as the view has it now, `holding` slots held by assignments in
    /// flight. A node whose capabilities changed, or that entered the supply, is in the
    /// scan; one that stays with the same capabilities stays exhausted if it was (what a
    /// job may take of a node is its capabilities, while it is active with a slot free).
    fn update(&mut self, view: &View, id: u64, holding: Option<u32>) {
        let now = view.nodes.get(&id).and_then(|node| {
            let free = node.free_slots().saturating_sub(holding.unwrap_or(0));
            (node.status == NodeStatus::Active && free > 0).then_some((free, node.capabilities))
        });
        match now {
            Some((free, capabilities)) if self.held.get(&id) == Some(&capabilities) => {
                self.free.insert(id, free);
            }
            Some((free, capabilities)) => {
                self.leave(id);
                self.free.insert(id, free);
                self.held.insert(id, capabilities);
                self.scan(id);
                self.entered.push(id);
            }
            None => self.leave(id),
        }
    }

    fn leave(&mut self, id: u64) {
        self.unscan(id);
        self.free.remove(&id);
        self.held.remove(&id);
        self.exhausted.remove(&id);
    }

    fn exhaust(&mut self, id: u64) {
        if self.held.contains_key(&id) && self.exhausted.insert(id) {
            self.unscan(id);
        }
    }

    fn wake(&mut self, id: u64) {
        if self.exhausted.remove(&id) {
            self.scan(id);
            self.entered.push(id);
        }
    }

    fn take_entered(&mut self) -> Vec<u64> {
        std::mem::take(&mut self.entered)
    }

    fn key(&self, id: u64) -> Option<(B256, NodeKey)> {
        self.held
            .get(&id)
            .map(|c| (c.gpu_model, (Reverse(c.vram_mib), id)))
    }

    fn scan(&mut self, id: u64) {
        if let Some((model, key)) = self.key(id) {
            self.all.insert(key);
            self.by_model.entry(model).or_default().insert(key);
        }
    }

    fn unscan(&mut self, id: u64) {
        let Some((model, key)) = self.key(id) else {
            return;
        };
        self.all.remove(&key);
        if let Some(keys) = self.by_model.get_mut(&model) {
            keys.remove(&key);
            if keys.is_empty() {
                self.by_model.remove(&model);
            }
        }
    }

    /// The nodes of the scan a job naming `model` may take (zero: any), most VRAM first.
    fn candidates(&self, model: B256) -> impl Iterator<Item = u64> + '_ {
        if model == B256::ZERO {
            Some(self.all.iter())
        } else {
            self.by_model.get(&model).map(BTreeSet::iter)
        }
        .into_iter()
        .flatten()
        .map(|(_, id)| *id)
    }
}

#[cfg(test)]
mod tests;
