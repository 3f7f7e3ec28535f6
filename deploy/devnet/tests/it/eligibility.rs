//! The matcher's eligibility rule against the deployed contract: for every pair of a
//! random set of nodes and jobs, `gantry_matcher::decide::violations` (the job's bars, the
//! node's status, then `gantry_protocol::eligibility`'s mirror of `_checkEligible`) and
//! `JobMarket.assign` (simulated with `eth_call`) agree on whether the node can take the
//! job, and on the first check that fails (the revert the contract raises). Some nodes
//! are exiting or inactive, and some jobs were given back by a node, which is barred from
//! them; the Rust side learns the bars from the chain's `JobRejected` logs, as the matcher
//! does from the stream.

use std::collections::{BTreeMap, BTreeSet};

use alloy::primitives::{B256, U256, aliases::U40, aliases::U96};
use gantry_matcher::decide::violations;
use gantry_matcher::view::{JobView, NodeView};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::{Capabilities, Constraint, Engines, Requirements, capable};
use gantry_protocol::spec::Engine;
use gantry_protocol::status::NodeStatus;
use gantry_testkit::accounts::{ADMIN, AGENT, OPERATOR, SUBMITTER};
use gantry_testkit::{Devnet, confirm_receipt};

const NODES: u64 = 12;
const JOBS: u64 = 12;
/// Twice the dev minimum: a give-back's charge leaves the node above it, and Active.
const STAKE: u64 = 200_000_000;
/// Jobs that one capable node takes and gives back first (it is barred from them).
const GIVEN_BACK: usize = 4;

/// A fixed-seed xorshift: the same pairs on every run, no extra dependency.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn model(index: u64) -> B256 {
    match index {
        0 => B256::ZERO,
        1 => B256::right_padding_from(b"NVIDIA-H100-80GB"),
        _ => B256::right_padding_from(b"NVIDIA-L4"),
    }
}

/// Capabilities the registry accepts: a GPU model exactly when there are GPUs (with
/// VRAM), at least one core and one slot, one engine or both.
fn node(rng: &mut Rng) -> NodeRegistry::NodeCapabilities {
    let gpus = rng.below(3) as u16;
    NodeRegistry::NodeCapabilities {
        gpuModel: if gpus == 0 {
            B256::ZERO
        } else {
            model(1 + rng.below(2))
        },
        gpuCount: gpus,
        vramMiB: if gpus == 0 {
            rng.below(2) as u32 * 1_024
        } else {
            1_024 * (1 + rng.below(3) as u32)
        },
        cpuCores: 1 + rng.below(3) as u16,
        ramMiB: 1_024 * rng.below(4) as u32,
        pricePerGpuHour: U96::from(rng.below(4)),
        maxConcurrentJobs: 1 + rng.below(2) as u8,
        // Most run both engines; some only one.
        engines: [Engines::ALL, Engines::ALL, Engines::DOCKER, Engines::WASM]
            [rng.below(4) as usize]
            .0,
    }
}

/// Requirements `postJob` accepts: a model only with at least one GPU; WASM only
/// without GPUs or VRAM.
fn job(rng: &mut Rng) -> JobMarket::JobRequirements {
    let gpus = rng.below(3) as u16;
    let vram = 1_024 * rng.below(3) as u32;
    let engine = match gpus == 0 && vram == 0 && rng.below(3) == 0 {
        true => Engine::Wasm,
        false => Engine::Docker,
    };
    JobMarket::JobRequirements {
        gpuModel: if gpus == 0 {
            B256::ZERO
        } else {
            model(rng.below(3))
        },
        minGpuCount: gpus,
        minVramMiB: vram,
        minCpuCores: rng.below(4) as u16,
        minRamMiB: 1_024 * rng.below(4) as u32,
        maxPricePerGpuHour: U96::from(rng.below(4)),
        maxRuntime: 60,
        priority: 5,
        engine: engine.code(),
    }
}

fn constraint_of(error: &JobMarket::JobMarketErrors) -> Option<Constraint> {
    use JobMarket::JobMarketErrors as E;
    match error {
        E::JobMarket_Barred(_) => Some(Constraint::Barred),
        E::JobMarket_NodeNotActive(_) => Some(Constraint::NotActive),
        E::JobMarket_EngineNotServed(_) => Some(Constraint::Engine),
        E::JobMarket_GpuModelMismatch(_) => Some(Constraint::GpuModel),
        E::JobMarket_InsufficientGpus(_) => Some(Constraint::GpuCount),
        E::JobMarket_InsufficientVram(_) => Some(Constraint::Vram),
        E::JobMarket_InsufficientCpu(_) => Some(Constraint::Cpu),
        E::JobMarket_InsufficientRam(_) => Some(Constraint::Ram),
        E::JobMarket_PriceTooHigh(_) => Some(Constraint::Price),
        _ => None,
    }
}

#[tokio::test]
async fn the_matchers_eligibility_rule_agrees_with_the_contract_on_every_pair() {
    let devnet = Devnet::start().await.expect("devnet starts");
    let d = devnet.deployment;
    let admin = devnet.address(ADMIN);
    let submitter = devnet.provider(SUBMITTER);
    devnet
        .fund(OPERATOR, d.registry, U256::from(1u64 << 50))
        .await
        .unwrap();
    devnet
        .fund(SUBMITTER, d.market, U256::from(1u64 << 50))
        .await
        .unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);

    let mut offered = BTreeMap::new();
    for _ in 0..NODES {
        let caps = node(&mut rng);
        let id = devnet
            .register(OPERATOR, &devnet.signer(AGENT), caps.clone(), STAKE)
            .await
            .unwrap();
        offered.insert(id, caps);
    }
    let market = JobMarket::new(d.market, submitter);
    let deadline = U40::from(devnet.now().await.unwrap() + 86_400);
    let mut needed = BTreeMap::new();
    for _ in 0..JOBS {
        let needs = job(&mut rng);
        let receipt = confirm_receipt(
            "postJob",
            market
                .postJob(
                    needs.clone(),
                    U96::from(1_000_000u64),
                    deadline,
                    b"{}".to_vec().into(),
                )
                .send()
                .await,
        )
        .await
        .unwrap();
        let id = receipt
            .decoded_log::<JobMarket::JobPosted>()
            .expect("postJob emits JobPosted")
            .jobId;
        needed.insert(id, needs);
    }

    // The first jobs are taken by a capable node and given back: it is barred from them.
    let as_matcher = JobMarket::new(d.market, devnet.admin.clone());
    let as_agent = devnet.market(AGENT);
    let mut givers = Vec::new();
    for (index, (&job_id, needs)) in needed.iter().take(GIVEN_BACK).enumerate() {
        let able: Vec<u64> = offered
            .iter()
            .filter(|(_, caps)| capable(&Requirements::from(needs), &Capabilities::from(*caps)))
            .map(|(&id, _)| id)
            .collect();
        let Some(&node_id) = able.get(index % able.len().max(1)) else {
            continue;
        };
        givers.push(node_id);
        let open = devnet.job(job_id).await.unwrap();
        let assign = as_matcher.assign(job_id, node_id, open.terms.pack(), open.state.pack());
        confirm_receipt("assign", assign.send().await)
            .await
            .unwrap();
        let assigned = devnet.job(job_id).await.unwrap();
        let reject = as_agent.reject(
            job_id,
            assigned.terms.pack(),
            assigned.state.pack(),
            "given back".into(),
        );
        gantry_testkit::send_as_worker("reject", reject)
            .await
            .unwrap();
    }
    // Some nodes stop being Active: some begin their exit, others are marked inactive by
    // their agent.
    let registry = NodeRegistry::new(d.registry, devnet.admin.clone());
    let operator = devnet.registry(OPERATOR);
    let agent = devnet.registry(AGENT);
    // One node that gave a job back leaves too: its bar comes before its status.
    let leaving: BTreeSet<u64> = offered
        .keys()
        .skip(1)
        .step_by(4)
        .copied()
        .chain(givers.first().copied())
        .collect();
    for &node_id in &leaving {
        confirm_receipt("beginExit", operator.beginExit(node_id).send().await)
            .await
            .unwrap();
    }
    for (&node_id, _) in offered.iter().skip(2).step_by(4) {
        let status = registry.getNode(node_id).call().await.unwrap().status;
        if NodeStatus::try_from(status) == Ok(NodeStatus::Active) {
            confirm_receipt("markInactive", agent.markInactive(node_id).send().await)
                .await
                .unwrap();
        }
    }

    // The matcher's view: nodes as the registry holds them, jobs with the bars their
    // JobRejected logs record.
    let mut nodes = Vec::new();
    for (&id, caps) in &offered {
        let info = registry.getNode(id).call().await.unwrap();
        let mut node = NodeView::registered(
            id,
            info.agent,
            Capabilities::from(caps),
            info.stake.to::<u128>(),
            u64::from(info.lastHeartbeat),
        );
        node.status = NodeStatus::try_from(info.status).expect("a node status");
        nodes.push(node);
    }
    let rejected = as_matcher
        .JobRejected_filter()
        .from_block(d.start_block)
        .query()
        .await
        .unwrap();
    let mut jobs = Vec::new();
    for &id in needed.keys() {
        let job = devnet.job(id).await.unwrap();
        let barred: BTreeSet<u64> = rejected
            .iter()
            .filter(|(log, _)| log.jobId == id)
            .map(|(log, _)| log.nodeId)
            .collect();
        assert_eq!(usize::from(job.state.barred), barred.len());
        jobs.push(JobView {
            id,
            terms: job.terms,
            state: job.state,
            barred,
            posted_at: (0, 0),
            spec_error: None,
        });
    }

    let mut seen = BTreeMap::<Option<Constraint>, usize>::new();
    let mut barred_and_not_active = 0;
    for job in &jobs {
        for node in &nodes {
            let (job_id, node_id) = (job.id, node.id);
            let rust = violations(node, job);
            if rust.contains(Constraint::Barred) && rust.contains(Constraint::NotActive) {
                barred_and_not_active += 1;
            }
            let chain = as_matcher
                .assign(job_id, node_id, job.terms.pack(), job.state.pack())
                .from(admin)
                .call()
                .await;
            let first = match chain {
                Ok(_) => {
                    assert!(
                        rust.is_empty(),
                        "job {job_id} on node {node_id}: the chain accepts, Rust says {:?}",
                        rust.iter().collect::<Vec<_>>()
                    );
                    None
                }
                Err(error) => {
                    let decoded = error
                        .as_decoded_interface_error::<JobMarket::JobMarketErrors>()
                        .unwrap_or_else(|| panic!("job {job_id} on node {node_id}: {error}"));
                    assert_eq!(
                        constraint_of(&decoded),
                        rust.first(),
                        "job {job_id} on node {node_id}: the chain says {decoded:?}"
                    );
                    rust.first()
                }
            };
            *seen.entry(first).or_default() += 1;
        }
    }
    // The sets exercise every outcome: eligible, barred, not active, and a capability (the
    // engine among them).
    for outcome in [
        None,
        Some(Constraint::Barred),
        Some(Constraint::NotActive),
        Some(Constraint::Engine),
    ] {
        assert!(
            seen.contains_key(&outcome),
            "no pair gave {outcome:?}: {seen:?}"
        );
    }
    assert!(
        barred_and_not_active > 0,
        "no barred node is inactive: {seen:?}"
    );
    assert!(
        seen.keys().flatten().any(|c| *c > Constraint::NoFreeSlot),
        "no capability refusal: {seen:?}"
    );
}
