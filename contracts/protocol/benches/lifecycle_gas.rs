//! `cargo bench -p gantry-protocol --bench lifecycle_gas` (part of `make bench`): the gas
//! of one job's whole life, as real transactions on anvil — the sum of the receipts'
//! `gasUsed` (intrinsic gas and calldata included, refunds taken off) of `postJob` with a
//! ~400-byte spec, `assign`, `submitResult` and `finalize`. The submitter posts from
//! credits it deposited before (one `deposit` for many jobs: the job's path then makes no
//! token call); the figure with the bounty pulled from its tokens by `postJob` itself is
//! printed too (`in_use_posting_by_pull`):
//!
//! - `new_market`: the first job of a freshly deployed market with one registered node;
//! - `in_use`: a job after 20 others went through the same market and node;
//! - `batched_per_job`: ten jobs on ten nodes, assigned with one `assignBatch` and paid
//!   with one `finalizeBatch`; the total over ten.
//!
//! Every call passes the terms and state folded from the receipts' logs by
//! `gantry_protocol::market` (a wrong fold would revert `StaleState`), so the bench also
//! checks the Rust fold against the contract. Gas does not depend on the machine (no
//! baseline ratio is needed; between runs it moves by a few dozen gas, as the timestamps in
//! the calls' arguments have more or fewer zero bytes); the figures are compared with the
//! targets (200,000 / 200,000 / 150,000).

use std::path::PathBuf;

use alloy::network::EthereumWallet;
use alloy::node_bindings::{Anvil, AnvilInstance};
use alloy::primitives::aliases::{U40, U96};
use alloy::primitives::{Address, B256, Bytes, U256, keccak256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolEventInterface;
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry, Referees, Verification};
use gantry_protocol::market::{Job, Policies, Policy, Seat, Seats};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

const SPEC: &str = concat!(
    r#"{"v":1,"image":"ghcr.io/acme/train@sha256:4f1c2e8a9b7d6c5e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e","#,
    r#""command":["python","train.py","--epochs","3","--batch-size","64"],"env":{"WANDB_MODE":"offline","#,
    r#""SEED":"42"},"inputs":[{"uri":"https://data.example.org/cifar10.tar","sha256":"#,
    r#""9f2b5c1d3e4a6b8c0d2e4f6a8b0c2d4e6f8a0b2c4d6e8f0a2b4c6d8e0f2a4b6c","path":"data/cifar10.tar"}],"#,
    r#""outputPath":"/outputs","timeoutSecs":3000}"#
);
const CHALLENGE_WINDOW: u32 = 30;

struct Chain {
    anvil: AnvilInstance,
    market: Address,
    token: Address,
    policies: Policies,
    jobs: std::collections::HashMap<u64, Job>,
    /// Verified jobs' seats, folded from their events.
    seats: std::collections::HashMap<u64, Seats>,
}

impl Chain {
    fn provider(&self, index: usize) -> DynProvider {
        provider_with(
            &self.anvil,
            PrivateKeySigner::from(self.anvil.keys()[index].clone()),
        )
    }

    fn signer(&self, index: usize) -> PrivateKeySigner {
        PrivateKeySigner::from(self.anvil.keys()[index].clone())
    }

    fn market(&self, index: usize) -> JobMarket::JobMarketInstance<DynProvider> {
        JobMarket::new(self.market, self.provider(index))
    }

    /// Folds a receipt's market logs into the jobs.
    fn fold(&mut self, receipt: &TransactionReceipt) -> Result<()> {
        for log in receipt.logs() {
            if log.address() != self.market {
                continue;
            }
            let Ok(event) = JobMarket::JobMarketEvents::decode_log(&log.inner) else {
                continue;
            };
            let event = event.data;
            if let JobMarket::JobMarketEvents::MarketParamsUpdated(e) = &event {
                self.policies
                    .insert(e.policyVersion, Policy::from(&e.params));
            }
            if let JobMarket::JobMarketEvents::JobPosted(e) = &event {
                self.jobs
                    .insert(e.jobId, Job::posted(&e.terms, &self.policies)?);
            }
            if let JobMarket::JobMarketEvents::JobPosted(_) = &event {
                continue;
            }
            let job_id = gantry_protocol::events::market_job_id(&event);
            if let Some(job) = job_id.and_then(|id| self.jobs.get_mut(&id)) {
                job.state.apply(&event);
                self.seats
                    .entry(job_id.unwrap_or_default())
                    .or_default()
                    .apply(&job.terms, &event);
            }
        }
        Ok(())
    }

    async fn send(
        &mut self,
        call: &'static str,
        sent: std::result::Result<
            alloy::providers::PendingTransactionBuilder<alloy::network::Ethereum>,
            alloy::contract::Error,
        >,
    ) -> Result<u64> {
        let receipt = sent?.get_receipt().await?;
        if !receipt.status() {
            return Err(format!("{call} reverted").into());
        }
        self.fold(&receipt)?;
        Ok(receipt.gas_used)
    }

    async fn advance(&self, seconds: u64) -> Result<()> {
        let p = self.provider(0);
        let _: serde_json::Value = p.raw_request("evm_increaseTime".into(), (seconds,)).await?;
        let _: serde_json::Value = p.raw_request("evm_mine".into(), ()).await?;
        Ok(())
    }

    async fn now(&self) -> Result<u64> {
        let block = self
            .provider(0)
            .get_block(alloy::eips::BlockId::latest())
            .await?
            .ok_or("no block")?;
        Ok(block.header.timestamp)
    }

    /// Registers a node of `operator` served by `agent` (who signs its consent).
    async fn register(
        &mut self,
        operator: &PrivateKeySigner,
        agent: &PrivateKeySigner,
    ) -> Result<u64> {
        let me = self.provider_of(operator);
        let token = GantryTestToken::new(self.token, self.provider(0));
        self.send(
            "mint",
            token
                .mint(operator.address(), U256::from(1_000_000_000u64))
                .send()
                .await,
        )
        .await?;
        let as_operator = GantryTestToken::new(self.token, me.clone());
        self.send(
            "approve",
            as_operator.approve(self.market, U256::MAX).send().await,
        )
        .await?;
        let nodes = NodeRegistry::new(self.market, me);
        let deadline = U256::from(self.now().await? + 3_600);
        let nonce = nodes.agentNonce(agent.address()).call().await?;
        let digest = nodes
            .consentDigest(operator.address(), agent.address(), nonce, deadline)
            .call()
            .await?;
        let signature = agent.sign_hash_sync(&digest)?;
        let id = nodes.nodeCount().call().await? + 1;
        self.send(
            "register",
            nodes
                .register(
                    capabilities(),
                    "ipfs://node".into(),
                    U96::from(500_000_000u64),
                    agent.address(),
                    deadline,
                    Bytes::from(signature.as_bytes().to_vec()),
                )
                .send()
                .await,
        )
        .await?;
        Ok(id)
    }

    fn provider_of(&self, signer: &PrivateKeySigner) -> DynProvider {
        provider_with(&self.anvil, signer.clone())
    }

    async fn post(&mut self) -> Result<(u64, u64)> {
        let market = self.market(3);
        let id = market.jobCount().call().await? + 1;
        let deadline = U40::from(self.now().await? + 86_400);
        let gas = self
            .send(
                "postJob",
                market
                    .postJob(
                        requirements(),
                        U96::from(50_000_000u64),
                        deadline,
                        SPEC.as_bytes().to_vec().into(),
                    )
                    .send()
                    .await,
            )
            .await?;
        Ok((id, gas))
    }

    async fn assign(&mut self, job: u64, node: u64) -> Result<u64> {
        let j = self.jobs[&job];
        let market = self.market(0);
        let sent = market
            .assign(job, node, j.terms.pack(), j.state.pack())
            .send()
            .await;
        self.send("assign", sent).await
    }

    async fn submit(&mut self, job: u64, agent: &PrivateKeySigner) -> Result<u64> {
        let j = self.jobs[&job];
        let market = JobMarket::new(self.market, self.provider_of(agent));
        let sent = market
            .submitResult(
                job,
                j.state.pack(),
                keccak256(job.to_be_bytes()),
                "gantry://results/1".into(),
            )
            .send()
            .await;
        self.send("submitResult", sent).await
    }

    async fn finalize(&mut self, job: u64) -> Result<u64> {
        let j = self.jobs[&job];
        let market = self.market(7);
        let sent = market.finalize(job, j.state.pack()).send().await;
        self.send("finalize", sent).await
    }

    /// One job from post to paid on `node`: the four receipts' gas.
    async fn lifecycle(&mut self, node: u64, agent: &PrivateKeySigner) -> Result<[u64; 4]> {
        let (job, post) = self.post().await?;
        let assign = self.assign(job, node).await?;
        let submit = self.submit(job, agent).await?;
        self.advance(u64::from(CHALLENGE_WINDOW)).await?;
        let finalize = self.finalize(job).await?;
        Ok([post, assign, submit, finalize])
    }
}

fn provider_with(anvil: &AnvilInstance, signer: PrivateKeySigner) -> DynProvider {
    ProviderBuilder::new()
        .wallet(EthereumWallet::from(signer))
        .connect_http(anvil.endpoint_url())
        .erased()
}

fn capabilities() -> NodeRegistry::NodeCapabilities {
    NodeRegistry::NodeCapabilities {
        gpuModel: model(),
        gpuCount: 8,
        vramMiB: 81_920,
        cpuCores: 64,
        ramMiB: 512_000,
        pricePerGpuHour: U96::from(2_000_000u64),
        maxConcurrentJobs: 4,
        engines: gantry_protocol::eligibility::Engines::ALL.0,
    }
}

fn requirements() -> JobMarket::JobRequirements {
    JobMarket::JobRequirements {
        gpuModel: model(),
        minGpuCount: 1,
        minVramMiB: 40_000,
        minCpuCores: 8,
        minRamMiB: 64_000,
        maxPricePerGpuHour: U96::from(3_000_000u64),
        maxRuntime: 3_600,
        priority: 5,
        engine: gantry_protocol::spec::Engine::Docker.code(),
    }
}

fn model() -> B256 {
    let mut model = [0u8; 32];
    model[..16].copy_from_slice(b"NVIDIA-H100-80GB");
    B256::from(model)
}

/// A fresh anvil with the token and the market deployed; account 0 is admin and matcher,
/// account 3 the submitter (funded and approved).
async fn deploy() -> Result<Chain> {
    let anvil_bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools/bin/anvil");
    let anvil = Anvil::at(anvil_bin).try_spawn()?;
    let admin_signer = PrivateKeySigner::from(anvil.keys()[0].clone());
    let admin = provider_with(&anvil, admin_signer.clone());
    let token = GantryTestToken::deploy(admin.clone()).await?;
    let registry = NodeRegistry::deploy(admin.clone(), *token.address()).await?;
    let verification = Verification::deploy(admin.clone(), *token.address()).await?;
    let referees = Referees::deploy(admin.clone(), *token.address()).await?;
    let params = JobMarket::MarketParams {
        challengeWindow: CHALLENGE_WINDOW,
        ..gantry_protocol::market::dev_params(admin_signer.address())
    };
    let market = JobMarket::deploy(
        admin.clone(),
        *token.address(),
        admin_signer.address(),
        params.clone(),
        *registry.address(),
        *verification.address(),
        *referees.address(),
    )
    .await?;
    let mut chain = Chain {
        market: *market.address(),
        token: *token.address(),
        policies: Policies::default(),
        jobs: Default::default(),
        seats: Default::default(),
        anvil,
    };
    chain.policies.insert(1, Policy::from(&params));
    let role = market.MATCHER_ROLE().call().await?;
    chain
        .send(
            "grantRole",
            market.grantRole(role, admin_signer.address()).send().await,
        )
        .await?;
    let submitter = chain.anvil.addresses()[3];
    chain
        .send(
            "mint",
            token
                .mint(submitter, U256::from(1_000_000_000_000u64))
                .send()
                .await,
        )
        .await?;
    let as_submitter = GantryTestToken::new(chain.token, chain.provider(3));
    chain
        .send(
            "approve",
            as_submitter.approve(chain.market, U256::MAX).send().await,
        )
        .await?;
    Ok(chain)
}

impl Chain {
    /// The submitter moves `amount` of its tokens into its market credits.
    async fn deposit(&mut self, amount: u64) -> Result<()> {
        let market = self.market(3);
        let sent = market.deposit(U256::from(amount)).send().await;
        self.send("deposit", sent).await?;
        Ok(())
    }
}

impl Chain {
    fn verification(&self, index: usize) -> Verification::VerificationInstance<DynProvider> {
        Verification::new(self.market, self.provider(index))
    }

    /// One replicated 3/2 job from post to decision on the pool `nodes` (served by
    /// `agents`), every seat revealing one digest: each receipt's gas, by call.
    async fn replicated(
        &mut self,
        nodes: &[u64],
        agents: &[PrivateKeySigner],
    ) -> Result<Vec<(&'static str, u64)>> {
        let mut gas = Vec::new();
        let deadline = U40::from(self.now().await? + 86_400);
        let job = self.market(3).jobCount().call().await? + 1;
        let policy = Verification::VerifyPolicy {
            tier: gantry_protocol::market::Verification::REPLICATED,
            size: 3,
            quorum: 2,
            revealWindow: 60,
        };
        let wasm = wasm_requirements();
        let sent = self
            .verification(3)
            .postVerifiedJob(
                wasm,
                policy,
                U96::from(5_000_000u64),
                deadline,
                SPEC.as_bytes().to_vec().into(),
            )
            .send()
            .await;
        gas.push(("postVerifiedJob", self.send("postVerifiedJob", sent).await?));
        let _: serde_json::Value = self
            .provider(0)
            .raw_request("anvil_mine".into(), (U256::from(2),))
            .await?;
        let j = self.jobs[&job];
        // A draw's gas depends on its block's seed: sent with a bound, not an estimate.
        let sent = self
            .verification(7)
            .draw(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("not verified")?,
            )
            .gas(1_000_000)
            .send()
            .await;
        gas.push(("draw", self.send("draw", sent).await?));
        let digest = keccak256("the module's output");
        gas.extend(self.commit_all(job, digest, nodes, agents).await?);
        let j = self.jobs[&job];
        let sent = self
            .verification(7)
            .openReveals(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?,
                self.seats[&job].list(3),
            )
            .send()
            .await;
        gas.push(("openReveals", self.send("openReveals", sent).await?));
        gas.extend(self.reveal_all(job, digest, nodes, agents).await?);
        let j = self.jobs[&job];
        let sent = self
            .verification(7)
            .decide(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?,
                self.seats[&job].list(3),
            )
            .send()
            .await;
        gas.push(("decide", self.send("decide", sent).await?));
        if self.jobs[&job].state.status != gantry_protocol::status::JobStatus::Completed {
            return Err("the replicated job was not verified".into());
        }
        Ok(gas)
    }
}

impl Chain {
    /// Each of job `job`'s three seats, filled from the pool `nodes` (served by `agents`),
    /// commits the seal of `digest`: each receipt's gas.
    async fn commit_all(
        &mut self,
        job: u64,
        digest: B256,
        nodes: &[u64],
        agents: &[PrivateKeySigner],
    ) -> Result<Vec<(&'static str, u64)>> {
        let chain_id = self.provider(0).get_chain_id().await?;
        let mut gas = Vec::new();
        for i in 0..3u8 {
            let seat = self.seats[&job].0[usize::from(i)];
            if seat.phase != Seat::SEATED {
                return Err(format!("seat {i} not filled").into());
            }
            let sealed = gantry_protocol::market::seal(
                chain_id,
                self.market,
                job,
                i,
                seat.node_id,
                digest,
                keccak256([i]),
            );
            let agent = pool_agent(nodes, agents, seat.node_id);
            let sent = Verification::new(self.market, self.provider_of(agent))
                .commitSeat(job, i, seat.pack(), sealed)
                .send()
                .await;
            gas.push(("commitSeat", self.send("commitSeat", sent).await?));
        }
        Ok(gas)
    }

    /// Each of job `job`'s three seats opens its seal of `digest` ([`commit_all`]'s).
    async fn reveal_all(
        &mut self,
        job: u64,
        digest: B256,
        nodes: &[u64],
        agents: &[PrivateKeySigner],
    ) -> Result<Vec<(&'static str, u64)>> {
        let mut gas = Vec::new();
        for i in 0..3u8 {
            let j = self.jobs[&job];
            let seat = self.seats[&job].0[usize::from(i)];
            let agent = pool_agent(nodes, agents, seat.node_id);
            let sent = Verification::new(self.market, self.provider_of(agent))
                .revealSeat(
                    job,
                    j.terms.pack().into(),
                    j.state.pack_verified().ok_or("state")?,
                    i,
                    seat.pack(),
                    digest,
                    keccak256([i]),
                )
                .send()
                .await;
            gas.push(("revealSeat", self.send("revealSeat", sent).await?));
        }
        Ok(gas)
    }

    fn referees(&self, index: usize) -> Referees::RefereesInstance<DynProvider> {
        Referees::new(self.market, self.provider(index))
    }

    /// A refereed 3-job posted and placed on `provider` (its agent `agent`), answered with
    /// the seal of `digest`: its id, and the gas of each call.
    async fn refereed_answered(
        &mut self,
        provider: u64,
        agent: &PrivateKeySigner,
        digest: B256,
    ) -> Result<(u64, Vec<(&'static str, u64)>)> {
        let mut gas = Vec::new();
        let deadline = U40::from(self.now().await? + 86_400);
        let job = self.market(3).jobCount().call().await? + 1;
        let policy = Verification::VerifyPolicy {
            tier: gantry_protocol::market::Verification::REFEREED,
            size: 3,
            quorum: 0,
            revealWindow: 60,
        };
        let sent = self
            .verification(3)
            .postVerifiedJob(
                wasm_requirements(),
                policy,
                U96::from(5_000_000u64),
                deadline,
                SPEC.as_bytes().to_vec().into(),
            )
            .send()
            .await;
        gas.push(("postVerifiedJob", self.send("postVerifiedJob", sent).await?));
        let j = self.jobs[&job];
        let sent = self
            .referees(0)
            .assignRefereed(
                job,
                provider,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?.into(),
            )
            .send()
            .await;
        gas.push(("assignRefereed", self.send("assignRefereed", sent).await?));
        let j = self.jobs[&job];
        let chain_id = self.provider(0).get_chain_id().await?;
        let sealed = gantry_protocol::market::seal(
            chain_id,
            self.market,
            job,
            gantry_protocol::market::PROVIDER_SEAT,
            provider,
            digest,
            keccak256("provider salt"),
        );
        let sent = Referees::new(self.market, self.provider_of(agent))
            .submitRefereedResult(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?.into(),
                sealed,
                "nats://r".into(),
            )
            .send()
            .await;
        gas.push((
            "submitRefereedResult",
            self.send("submitRefereedResult", sent).await?,
        ));
        Ok((job, gas))
    }

    /// A refereed job's undisputed life: posted, placed, answered, finalized after the
    /// challenge window.
    async fn refereed(
        &mut self,
        provider: u64,
        agent: &PrivateKeySigner,
    ) -> Result<Vec<(&'static str, u64)>> {
        let (job, mut gas) = self
            .refereed_answered(provider, agent, keccak256("output"))
            .await?;
        self.advance(u64::from(CHALLENGE_WINDOW)).await?;
        let j = self.jobs[&job];
        let sent = self
            .referees(7)
            .finalizeVerified(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?.into(),
            )
            .send()
            .await;
        gas.push((
            "finalizeVerified",
            self.send("finalizeVerified", sent).await?,
        ));
        Ok(gas)
    }

    /// A refereed job disputed and upheld: the three pool nodes referee it, each reveals the
    /// provider's digest. The dispute's calls' gas (after the answer).
    async fn refereed_dispute(
        &mut self,
        provider: u64,
        agent: &PrivateKeySigner,
        nodes: &[u64],
        agents: &[PrivateKeySigner],
    ) -> Result<Vec<(&'static str, u64)>> {
        let digest = keccak256("the module's output");
        let (job, _) = self.refereed_answered(provider, agent, digest).await?;
        let mut gas = Vec::new();
        let j = self.jobs[&job];
        let sent = self
            .referees(3)
            .requestReferees(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?.into(),
            )
            .send()
            .await;
        gas.push(("requestReferees", self.send("requestReferees", sent).await?));
        let _: serde_json::Value = self
            .provider(0)
            .raw_request("anvil_mine".into(), (U256::from(2),))
            .await?;
        let j = self.jobs[&job];
        let sent = self
            .verification(7)
            .draw(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?,
            )
            .gas(1_000_000)
            .send()
            .await;
        gas.push(("draw", self.send("draw", sent).await?));
        gas.extend(self.commit_all(job, digest, nodes, agents).await?);
        let j = self.jobs[&job];
        let sent = self
            .verification(7)
            .openReveals(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?,
                self.seats[&job].list(3),
            )
            .send()
            .await;
        gas.push(("openReveals", self.send("openReveals", sent).await?));
        let j = self.jobs[&job];
        let sent = Referees::new(self.market, self.provider_of(agent))
            .revealRefereed(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?.into(),
                digest,
                keccak256("provider salt"),
            )
            .send()
            .await;
        gas.push(("revealRefereed", self.send("revealRefereed", sent).await?));
        gas.extend(self.reveal_all(job, digest, nodes, agents).await?);
        let j = self.jobs[&job];
        let list: Vec<Referees::Seat> = self.seats[&job]
            .list(3)
            .into_iter()
            .map(Referees::Seat::from)
            .collect();
        let sent = self
            .referees(7)
            .decideReferees(
                job,
                j.terms.pack().into(),
                j.state.pack_verified().ok_or("state")?.into(),
                list,
            )
            .send()
            .await;
        gas.push(("decideReferees", self.send("decideReferees", sent).await?));
        if self.jobs[&job].state.status != gantry_protocol::status::JobStatus::Completed {
            return Err("the dispute was not upheld".into());
        }
        Ok(gas)
    }
}

/// The agent serving pool node `node` (`nodes[i]` is served by `agents[i]`).
fn pool_agent<'a>(
    nodes: &[u64],
    agents: &'a [PrivateKeySigner],
    node: u64,
) -> &'a PrivateKeySigner {
    &agents[nodes.iter().position(|n| *n == node).unwrap_or(0)]
}

/// The WASM requirements a verified job posts with.
fn wasm_requirements() -> Verification::JobRequirements {
    let r = requirements();
    Verification::JobRequirements {
        gpuModel: B256::ZERO,
        minGpuCount: 0,
        minVramMiB: 0,
        minCpuCores: r.minCpuCores,
        minRamMiB: r.minRamMiB,
        maxPricePerGpuHour: r.maxPricePerGpuHour,
        maxRuntime: r.maxRuntime,
        priority: r.priority,
        engine: gantry_protocol::spec::Engine::Wasm.code(),
    }
}

fn sum_of(gas: &[(&'static str, u64)]) -> u64 {
    gas.iter().map(|(_, g)| g).sum()
}

fn listed(gas: &[(&'static str, u64)]) -> String {
    gas.iter()
        .map(|(call, gas)| format!("{call} {gas}"))
        .collect::<Vec<_>>()
        .join(" + ")
}

fn show(what: &str, gas: [u64; 4]) -> u64 {
    let total = gas.iter().sum();
    println!(
        "{what:>12}: postJob {} + assign {} + submitResult {} + finalize {} = {total}",
        gas[0], gas[1], gas[2], gas[3]
    );
    total
}

#[tokio::main]
async fn main() -> Result<()> {
    println!(
        "lifecycle gas: real transactions on anvil, spec of {} bytes",
        SPEC.len()
    );
    let mut chain = deploy().await?;
    let (operator, agent) = (chain.signer(1), chain.signer(2));
    let node = chain.register(&operator, &agent).await?;
    chain.deposit(100_000_000_000).await?;
    let new_market = show("new market", chain.lifecycle(node, &agent).await?);
    for _ in 0..20 {
        chain.lifecycle(node, &agent).await?;
    }
    let in_use = show("in use", chain.lifecycle(node, &agent).await?);
    // The same job with the bounty pulled by postJob itself (no credits left to spend).
    let credits = chain
        .market(3)
        .creditOf(chain.anvil.addresses()[3])
        .call()
        .await?;
    let sent = chain.market(3).withdraw().send().await;
    chain.send("withdraw", sent).await?;
    let by_pull = show("by pull", chain.lifecycle(node, &agent).await?);
    chain.deposit(credits.to::<u64>()).await?;

    // Ten jobs on ten nodes, assigned and paid in one transaction each.
    let mut batch = Vec::new();
    for i in 0..10u8 {
        let operator = PrivateKeySigner::from_bytes(&B256::from([0x40 + i; 32]))?;
        let agent = PrivateKeySigner::from_bytes(&B256::from([0x80 + i; 32]))?;
        for account in [operator.address(), agent.address()] {
            let _: serde_json::Value = chain
                .provider(0)
                .raw_request(
                    "anvil_setBalance".into(),
                    (account, U256::from(10u128.pow(20))),
                )
                .await?;
        }
        let node = chain.register(&operator, &agent).await?;
        batch.push((node, agent));
    }
    let mut total = 0;
    let mut assignments = Vec::new();
    for (node, _) in &batch {
        let (job, gas) = chain.post().await?;
        total += gas;
        let j = chain.jobs[&job];
        assignments.push(JobMarket::Assignment {
            jobId: job,
            nodeId: *node,
            terms: j.terms.pack(),
            state: j.state.pack(),
        });
    }
    let ids: Vec<u64> = assignments.iter().map(|a| a.jobId).collect();
    let matcher = chain.market(0);
    let sent = matcher.assignBatch(assignments).send().await;
    let assign = chain.send("assignBatch", sent).await?;
    let mut submits = 0;
    for (job, (_, agent)) in ids.iter().zip(&batch) {
        submits += chain.submit(*job, agent).await?;
    }
    chain.advance(u64::from(CHALLENGE_WINDOW)).await?;
    let states: Vec<_> = ids.iter().map(|id| chain.jobs[id].state.pack()).collect();
    let keeper = chain.market(7);
    let sent = keeper.finalizeBatch(ids.clone(), states).send().await;
    let finalize = chain.send("finalizeBatch", sent).await?;
    total += assign + submits + finalize;
    let batched_per_job = total / 10;
    println!(
        "     batched: 10 × postJob + assignBatch {assign} + 10 × submitResult + finalizeBatch {finalize} = {total}, {batched_per_job} per job"
    );

    // A replicated 3/2 job (design 18): the pool is three nodes of three operators, all
    // seated; every seat commits, reveals one digest and is paid.
    let admin = chain.verification(0);
    let sent = admin
        .setVerifyParams(gantry_protocol::market::dev_verify_params())
        .send()
        .await;
    chain.send("setVerifyParams", sent).await?;
    let (mut pool, mut agents) = (Vec::new(), Vec::new());
    for i in 0..3u8 {
        let operator = PrivateKeySigner::from_bytes(&B256::from([0x20 + i; 32]))?;
        let agent = PrivateKeySigner::from_bytes(&B256::from([0x30 + i; 32]))?;
        for account in [operator.address(), agent.address()] {
            let _: serde_json::Value = chain
                .provider(0)
                .raw_request(
                    "anvil_setBalance".into(),
                    (account, U256::from(10u128.pow(20))),
                )
                .await?;
        }
        pool.push(chain.register(&operator, &agent).await?);
        agents.push(agent);
    }
    let sent = NodeRegistry::new(chain.market, chain.provider(7))
        .syncPool(pool.clone())
        .send()
        .await;
    chain.send("syncPool", sent).await?;
    let replicated = chain.replicated(&pool, &agents).await?;
    let replicated_total: u64 = replicated.iter().map(|(_, gas)| gas).sum();
    println!(
        "  replicated: {} = {replicated_total} ({} per execution)",
        replicated
            .iter()
            .map(|(call, gas)| format!("{call} {gas}"))
            .collect::<Vec<_>>()
            .join(" + "),
        replicated_total / 3
    );
    // A refereed job (design 18, §2.6) on a fourth node of a fourth operator: undisputed
    // (the provider's hold locked and released), then disputed and upheld by the pool's
    // three nodes as referees.
    let operator = PrivateKeySigner::from_bytes(&B256::from([0x23; 32]))?;
    let provider_agent = PrivateKeySigner::from_bytes(&B256::from([0x33; 32]))?;
    for account in [operator.address(), provider_agent.address()] {
        let _: serde_json::Value = chain
            .provider(0)
            .raw_request(
                "anvil_setBalance".into(),
                (account, U256::from(10u128.pow(20))),
            )
            .await?;
    }
    let provider = chain.register(&operator, &provider_agent).await?;
    let undisputed = chain.refereed(provider, &provider_agent).await?;
    println!(
        "  refereed, undisputed: {} = {}",
        listed(&undisputed),
        sum_of(&undisputed)
    );
    let dispute = chain
        .refereed_dispute(provider, &provider_agent, &pool, &agents)
        .await?;
    println!(
        "  refereed dispute (upheld), beside the above: {} = {}",
        listed(&dispute),
        sum_of(&dispute)
    );
    println!(
        "{}",
        serde_json::json!({
            "bench": "lifecycle_gas",
            "new_market": new_market,
            "in_use": in_use,
            "batched_per_job": batched_per_job,
            "in_use_posting_by_pull": by_pull,
            "replicated_3_2": replicated_total,
            "refereed_undisputed": sum_of(&undisputed),
            "refereed_dispute_upheld": sum_of(&dispute),
        })
    );
    Ok(())
}
