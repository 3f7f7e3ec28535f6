//! Scripted market activity on a dev network, for tests of the services that consume it.

use alloy::primitives::{Address, B256, U256, aliases::U96};
use alloy::providers::DynProvider;
use gantry_protocol::bindings::{EventBatcher, GantryTestToken, JobMarket, NodeRegistry};
use gantry_protocol::eligibility::Requirements;
use gantry_protocol::market::Terms;

use crate::accounts::{AGENT, OPERATOR, SUBMITTER};
use crate::{Devnet, DevnetError, GUSD, JobPost, confirm_receipt, send_as_worker};

/// The ~400-byte job spec the contract tests use.
pub fn example_spec() -> Vec<u8> {
    br#"{"version":1,"image":"ghcr.io/acme/train@sha256:9f2c4e1b7a0d3c5e8f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e","command":["python","train.py","--epochs","3","--batch-size","64"],"env":{"WANDB_MODE":"offline","SEED":"42"},"inputs":[{"uri":"https://data.example.org/cifar10.tar","sha256":"3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a","path":"/inputs/cifar10.tar"}],"outputs":{"path":"/outputs"},"timeoutSecs":7200}"#.to_vec()
}

/// Requirements an H100 node of [`h100_node`] meets.
pub fn h100_requirements() -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        gpuModel: B256::right_padding_from(b"NVIDIA-H100-80GB"),
        minGpuCount: 1,
        minVramMiB: 40_960,
        minCpuCores: 8,
        minRamMiB: 65_536,
        maxPricePerGpuHour: U96::from(3 * GUSD),
        maxRuntime: 7_200,
        priority: 5,
        engine: gantry_protocol::spec::Engine::Docker.code(),
    }
}

/// An 8×H100 node at 2 gUSD per GPU-hour.
pub fn h100_node() -> NodeRegistry::NodeCapabilities {
    NodeRegistry::NodeCapabilities {
        gpuModel: B256::right_padding_from(b"NVIDIA-H100-80GB"),
        gpuCount: 8,
        vramMiB: 81_920,
        cpuCores: 64,
        ramMiB: 524_288,
        pricePerGpuHour: U96::from(2 * GUSD),
        maxConcurrentJobs: 2,
        engines: gantry_protocol::eligibility::Engines::ALL.0,
    }
}

/// Drives the market through most of its events: a node registers and heartbeats; one job
/// is posted, assigned, submitted, accepted and paid out; another is posted and
/// cancelled; a third is claimed and rejected; the node's operator withdraws and exits.
/// Accounts: [`OPERATOR`], [`AGENT`] and [`SUBMITTER`] (the admin matches).
pub async fn lifecycle(devnet: &Devnet) -> Result<(), DevnetError> {
    let d = devnet.deployment;
    let (operator, agent, submitter) = (
        devnet.provider(OPERATOR),
        devnet.provider(AGENT),
        devnet.provider(SUBMITTER),
    );
    devnet
        .mint(devnet.address(OPERATOR), U256::from(1_000 * GUSD))
        .await?;
    devnet
        .mint(devnet.address(SUBMITTER), U256::from(1_000 * GUSD))
        .await?;

    let token = GantryTestToken::new(d.token, operator.clone());
    confirm_receipt("approve", token.approve(d.registry, U256::MAX).send().await).await?;
    let token = GantryTestToken::new(d.token, submitter.clone());
    confirm_receipt("approve", token.approve(d.market, U256::MAX).send().await).await?;

    let node_id = devnet
        .register(OPERATOR, &devnet.signer(AGENT), h100_node(), 500 * GUSD)
        .await?;
    let registry_as_agent = NodeRegistry::new(d.registry, agent.clone());
    // As the worker sends them (`gas_limit`): estimated within the registration's second,
    // the heartbeat rewrites the slot with the value it holds and costs less than it does
    // once mined in a later second.
    send_as_worker("heartbeat", registry_as_agent.heartbeat(node_id)).await?;

    // Far ahead (the default post): these jobs must not expire while a test runs.
    let mut job_ids = Vec::new();
    for _ in 0..3 {
        job_ids.push(devnet.post_job(SUBMITTER, JobPost::default()).await?);
    }
    // A fresh provider: the posts went through another for the same account.
    let market = devnet.market(SUBMITTER);
    let (paid, cancelled, rejected) = (job_ids[0], job_ids[1], job_ids[2]);

    let as_matcher = JobMarket::new(d.market, devnet.admin.clone());
    let as_agent = JobMarket::new(d.market, agent.clone());
    let (terms, state) = packed(devnet, paid).await?;
    let assign = as_matcher.assign(paid, node_id, terms, state);
    confirm_receipt("assign", assign.send().await).await?;
    let (_, state) = packed(devnet, paid).await?;
    let result = as_agent.submitResult(paid, state, B256::repeat_byte(7), "ipfs://out".into());
    confirm_receipt("submitResult", result.send().await).await?;
    let (terms, state) = packed(devnet, paid).await?;
    confirm_receipt("accept", market.accept(paid, terms, state).send().await).await?;
    let (terms, state) = packed(devnet, cancelled).await?;
    confirm_receipt(
        "cancel",
        market.cancel(cancelled, terms, state).send().await,
    )
    .await?;
    let (terms, state) = packed(devnet, rejected).await?;
    let claim = as_agent.claim(rejected, node_id, terms, state);
    confirm_receipt("claim", claim.send().await).await?;
    let (terms, state) = packed(devnet, rejected).await?;
    // Estimated in the claim's second the reject charges nothing; mined in a later one it
    // writes the slash (it once ran out of gas sent at the bare estimate).
    let reject = as_agent.reject(rejected, terms, state, "image not found".into());
    send_as_worker("reject", reject).await?;

    // A fresh provider: `register` above sent from the operator's account through another.
    let registry = devnet.registry(OPERATOR);
    confirm_receipt(
        "withdrawEarnings",
        registry.withdrawEarnings(node_id).send().await,
    )
    .await?;
    confirm_receipt("beginExit", registry.beginExit(node_id).send().await).await?;
    Ok(())
}

/// Job `id`'s terms and state as the market's calls take them.
async fn packed(
    devnet: &Devnet,
    id: u64,
) -> Result<(JobMarket::JobTerms, JobMarket::JobState), DevnetError> {
    let job = devnet.job(id).await?;
    Ok((job.terms.pack(), job.state.pack()))
}

/// Emits `transactions` transactions of `per_transaction` JobPosted events each from the
/// EventBatcher at `batcher` (about 10k gas an event), signing with `provider`.
pub async fn post_batches(
    provider: &DynProvider,
    batcher: Address,
    transactions: usize,
    per_transaction: usize,
) -> Result<(), DevnetError> {
    let batcher = EventBatcher::new(batcher, provider.clone());
    let terms = batcher_terms();
    let gas = 25_000 + 28_000 * per_transaction as u64;
    for _ in 0..transactions {
        let call = batcher.post(
            U256::from(per_transaction),
            terms.clone(),
            example_spec().into(),
        );
        confirm_receipt("post", call.gas(gas.min(29_000_000)).send().await).await?;
    }
    Ok(())
}

/// The terms of an H100 job ([`h100_requirements`], the example spec, 50 gUSD,
/// [`FAR_DEADLINE`](crate::FAR_DEADLINE), policy 1) as the EventBatcher emits them.
pub fn batcher_terms() -> EventBatcher::JobTerms {
    let terms = Terms {
        submitter: Address::repeat_byte(0x5b),
        bounty: u128::from(50 * GUSD),
        spec_hash: alloy::primitives::keccak256(example_spec()),
        requirements: Requirements::from(&h100_requirements()),
        deadline: crate::FAR_DEADLINE,
        policy: 1,
        verification: gantry_protocol::market::Verification::NONE,
    }
    .pack();
    EventBatcher::JobTerms {
        party: terms.party,
        specHash: terms.specHash,
        gpuModel: terms.gpuModel,
        limits: terms.limits,
        maxPricePerGpuHour: terms.maxPricePerGpuHour,
    }
}
