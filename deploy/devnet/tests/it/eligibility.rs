//! `gantry_protocol::eligibility` against the deployed contract: for every pair of a
//! random set of nodes and jobs, the Rust check and `JobMarket.assign` (simulated with
//! `eth_call`) agree on whether the node can take the job, and on the first check that
//! fails (the revert the contract raises).

use alloy::primitives::{B256, U256, aliases::U40, aliases::U96};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::{Capabilities, Constraint, Requirements, capability_violations};
use gantry_testkit::accounts::{ADMIN, AGENT, OPERATOR, SUBMITTER};
use gantry_testkit::{Devnet, confirm_receipt};

const NODES: u64 = 12;
const JOBS: u64 = 12;

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
/// VRAM), at least one core and one slot.
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
    }
}

/// Requirements `postJob` accepts: a model only with at least one GPU.
fn job(rng: &mut Rng) -> JobMarket::JobRequirements {
    let gpus = rng.below(3) as u16;
    JobMarket::JobRequirements {
        gpuModel: if gpus == 0 {
            B256::ZERO
        } else {
            model(rng.below(3))
        },
        minGpuCount: gpus,
        minVramMiB: 1_024 * rng.below(3) as u32,
        minCpuCores: rng.below(4) as u16,
        minRamMiB: 1_024 * rng.below(4) as u32,
        maxPricePerGpuHour: U96::from(rng.below(4)),
        maxRuntime: 60,
        priority: 5,
    }
}

fn constraint_of(error: &JobMarket::JobMarketErrors) -> Option<Constraint> {
    use JobMarket::JobMarketErrors as E;
    match error {
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
async fn the_rust_eligibility_check_agrees_with_the_contract_on_every_pair() {
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

    let mut nodes = Vec::new();
    for _ in 0..NODES {
        let caps = node(&mut rng);
        let id = devnet
            .register(OPERATOR, &devnet.signer(AGENT), caps.clone(), 100_000_000)
            .await
            .unwrap();
        nodes.push((id, caps));
    }
    let market = JobMarket::new(d.market, submitter);
    let deadline = U40::from(devnet.now().await.unwrap() + 86_400);
    let mut jobs = Vec::new();
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
        jobs.push((id, devnet.job(id).await.unwrap(), needs));
    }

    let as_matcher = JobMarket::new(d.market, devnet.admin.clone());
    let (mut eligible, mut refused) = (0, 0);
    for (job_id, open, needs) in &jobs {
        for (node_id, offered) in &nodes {
            let (job_id, node_id) = (*job_id, *node_id);
            let rust =
                capability_violations(&Requirements::from(needs), &Capabilities::from(offered));
            let chain = as_matcher
                .assign(job_id, node_id, open.terms.pack(), open.state.pack())
                .from(admin)
                .call()
                .await;
            match chain {
                Ok(_) => {
                    assert!(
                        rust.is_empty(),
                        "job {job_id} on node {node_id}: the chain accepts, Rust says {:?}",
                        rust.iter().collect::<Vec<_>>()
                    );
                    eligible += 1;
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
                    refused += 1;
                }
            }
        }
    }
    // The random sets exercise both outcomes.
    assert!(
        eligible > 0 && refused > 0,
        "{eligible} eligible, {refused} refused"
    );
}
