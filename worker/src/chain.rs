//! The worker's view of the chain and the transactions it sends: find or register its
//! node, keep the capabilities current, heartbeat, read jobs, and claim, submit or reject
//! them. The market stores one hash per job: a job is read as its terms and state, folded
//! from the market's logs and checked against that hash (`gantry_runtime::market`), and
//! every call on it passes them; each call's own events are folded back into the caller's
//! copy from the receipt, so it stays current. One agent account sends everything, one
//! transaction at a time (the worker sends a handful per job), each waited for to its
//! receipt.
//!
//! ```text
//!  read_job ──▶ market::Job ──claim / submit_result / reject(job)──▶ receipt logs ──apply──▶ job
//!  job_hash ──▶ == job.state.hash()?  (still ours, unchanged)
//! ```

use std::collections::BTreeSet;
use std::time::Duration;

use alloy::network::EthereumWallet;
use alloy::primitives::{Address, B256, Bytes, U256, aliases::U96};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::{Log, TransactionReceipt};
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolEventInterface;
use gantry_protocol::api::TokenInfo;
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry, Referees, Verification};
use gantry_protocol::events::GantryEvent;
use gantry_protocol::market::Job;
use gantry_protocol::status::NodeStatus;
use gantry_runtime::market::ReadJobError;
use gantry_runtime::tx::Unmined;
use tokio::sync::Mutex;
use url::Url;

/// How long a sent transaction may take to be mined before the send counts as failed.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(60);
/// How often a sent transaction's receipt is looked for.
const RECEIPT_POLL: Duration = Duration::from_millis(100);
/// How long a sent transaction may be unknown to the node (neither mined nor pending)
/// before it counts as dropped. Short: the node's liveness rests on it. A heartbeat a
/// reorganisation dropped is sent again only once it counts as dropped, and until then
/// the node's last heartbeat on chain grows old by the reorganised blocks, this grace,
/// the interval and a block; with a grace of 10 s, a 3-block reorg and the dev chaos
/// suite's 15 s timeout, healthy nodes were marked inactive and slashed. The node was
/// sent the transaction by this worker: one it does not know 3 s later is gone (a
/// transaction it still had would be refused as a duplicate when sent again, then
/// mined, and the call's state re-read: nothing is done twice).
const DROP_GRACE: Duration = Duration::from_secs(3);

/// Why a chain call failed.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The node could not be reached or answered garbage: retry later.
    #[error("rpc: {source}")]
    Rpc {
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The contract refused the call (simulation or receipt).
    #[error("{call} reverted: {reason}")]
    Reverted { call: &'static str, reason: String },
    /// The job's state moved on since it was read (`JobMarket_StaleState`): someone else
    /// changed it (a reclaim), or a reorg did; read it again before deciding anything.
    #[error("{call} reverted: job {job} has moved on since it was read")]
    Stale { call: &'static str, job: u64 },
    /// A job's history could not be read or did not match the market's hash.
    #[error("reading a job")]
    ReadJob(#[source] ReadJobError),
    #[error("the RPC endpoint is chain {actual}, the config says {expected}")]
    WrongChain { expected: u64, actual: u64 },
    #[error("node {node} is not served by this agent ({agent}); its agent is {actual}")]
    NotOurNode {
        node: u64,
        agent: Address,
        actual: Address,
    },
    #[error("node {0} has no NodeRegistered event in the market's logs")]
    UnknownNode(u64),
    /// The transaction left the chain and the pool (a reorganisation un-mined it, or the
    /// pool dropped it): not sent; its nonce is free for the next one.
    #[error("{call}: transaction {tx} was dropped")]
    Dropped { call: &'static str, tx: B256 },
    /// Not mined within [`RECEIPT_TIMEOUT`].
    #[error("{call}: transaction {tx} not mined within {RECEIPT_TIMEOUT:?}")]
    NotMined { call: &'static str, tx: B256 },
}

impl ChainError {
    fn rpc(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Rpc {
            source: source.into(),
        }
    }

    fn from_call(call: &'static str, error: alloy::contract::Error) -> Self {
        if let Some(JobMarket::JobMarketErrors::JobMarket_StaleState(stale)) =
            error.as_decoded_interface_error::<JobMarket::JobMarketErrors>()
        {
            return Self::Stale {
                call,
                job: stale.jobId,
            };
        }
        // The same sentences the CLI shows ("job 4 is assigned", "node 2 is inactive, not
        // active"); amounts in base units, as the worker does not look the token up.
        let token = TokenInfo {
            symbol: "base units".into(),
            decimals: 0,
        };
        if let Some(refusal) = gantry_protocol::revert::explain(call, &error, &token) {
            return Self::Reverted {
                call,
                reason: refusal.to_string(),
            };
        }
        match error {
            alloy::contract::Error::TransportError(e) if e.as_error_resp().is_some() => {
                Self::Reverted {
                    call,
                    reason: e.to_string(),
                }
            }
            other => Self::rpc(other),
        }
    }

    /// A broadcast's refusal. One about the nonce (another of the node's transactions holds
    /// it, or the RPC node's count lagged) is the node's own race, tried again with the
    /// chain's count: never the call's refusal, which would blame the job for it.
    fn from_send(call: &'static str, error: alloy::contract::Error) -> Self {
        let message = error.to_string().to_lowercase();
        const NONCE_REFUSALS: [&str; 5] = [
            "nonce too low",
            "nonce too high",
            "already known",
            "already imported",
            "replacement transaction underpriced",
        ];
        if NONCE_REFUSALS
            .iter()
            .any(|refusal| message.contains(refusal))
        {
            return Self::rpc(error);
        }
        Self::from_call(call, error)
    }

    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Rpc { .. } => true,
            // Not refused: the chain never decided on it (a reorganisation un-mined it, or
            // it waits in the pool). Sent again, with a fresh nonce and the job's state
            // read again when stale; classing it as refused blamed the job for a reorg
            // (the result thrown away and the job run again out of time: the chaos suite).
            Self::Dropped { .. } | Self::NotMined { .. } => true,
            // A log missing from one answer of the node, or the node unreachable.
            Self::ReadJob(e) => matches!(
                e,
                ReadJobError::Rpc(_) | ReadJobError::Call(..) | ReadJobError::Mismatch { .. }
            ),
            _ => false,
        }
    }
}

impl From<ReadJobError> for ChainError {
    fn from(error: ReadJobError) -> Self {
        Self::ReadJob(error)
    }
}

/// The node this agent serves, with the capabilities the chain holds for it (what the
/// matcher and the market check jobs against).
#[derive(Debug, Clone)]
pub struct ServedNode {
    pub node_id: u64,
    pub capabilities: NodeRegistry::NodeCapabilities,
}

/// The agent's connection to the chain.
#[derive(Debug)]
pub struct Chain {
    provider: DynProvider,
    market: JobMarket::JobMarketInstance<DynProvider>,
    registry: NodeRegistry::NodeRegistryInstance<DynProvider>,
    token: Address,
    agent: Address,
    /// The agent's key, for what the worker signs off chain (its checkpoints).
    signer: PrivateKeySigner,
    /// The block the market was deployed in: its logs are read from there.
    start_block: u64,
    /// One broadcast at a time: the nonce after the last one broadcast (`None`: the
    /// chain's pending count, after an error or a transaction dropped). Each takes the
    /// larger of this and the chain's pending count, so that an RPC node whose count lags
    /// a broadcast (a pool updated after its answer, a load balancer) never hands out a
    /// nonce twice.
    sending: Mutex<Option<u64>>,
    /// Nonces of the node's transactions broadcast and still waited for: no gap below a
    /// later one (`gantry_runtime::tx::mined_among`).
    in_flight: std::sync::Mutex<BTreeSet<u64>>,
}

impl Chain {
    /// Connects and checks the chain id.
    pub async fn connect(
        rpc_url: Url,
        chain_id: u64,
        market: Address,
        registry: Address,
        token: Address,
        start_block: u64,
        signer: PrivateKeySigner,
    ) -> Result<Self, ChainError> {
        let agent = signer.address();
        // The nonce is the chain's pending count, or past the last one broadcast (see
        // `sending`): a transaction un-mined by a reorganisation leaves its nonce free,
        // taken by the next one (a cached count would go on past it: the gap is filled
        // below a waiting transaction, `gantry_runtime::tx`).
        let provider = ProviderBuilder::new()
            .disable_recommended_fillers()
            .with_gas_estimation()
            .with_simple_nonce_management()
            .fetch_chain_id()
            .wallet(EthereumWallet::from(signer.clone()))
            .connect_http(rpc_url)
            .erased();
        let actual = provider.get_chain_id().await.map_err(ChainError::rpc)?;
        if actual != chain_id {
            return Err(ChainError::WrongChain {
                expected: chain_id,
                actual,
            });
        }
        Ok(Self {
            market: JobMarket::new(market, provider.clone()),
            registry: NodeRegistry::new(registry, provider.clone()),
            provider,
            token,
            agent,
            signer,
            start_block,
            sending: Mutex::new(None),
            in_flight: Default::default(),
        })
    }

    pub fn agent(&self) -> Address {
        self.agent
    }

    /// The node this agent serves: `configured`, else the newest node bound to this agent
    /// that has not exited, else a new registration staking `stake` (the market's minimum
    /// when `None`). Capabilities are updated when they differ and the agent operates the
    /// node (else a warning: only the operator may).
    pub async fn ensure_node(
        &self,
        configured: Option<u64>,
        capabilities: NodeRegistry::NodeCapabilities,
        stake: Option<U256>,
        metadata_uri: &str,
    ) -> Result<ServedNode, ChainError> {
        let node_id = match configured {
            Some(id) => Some(id),
            None => self.find_node().await?,
        };
        let Some(node_id) = node_id else {
            let node_id = self.register(&capabilities, stake, metadata_uri).await?;
            return Ok(ServedNode {
                node_id,
                capabilities,
            });
        };
        let node = self.node(node_id).await?;
        if node.agent != self.agent {
            return Err(ChainError::NotOurNode {
                node: node_id,
                agent: self.agent,
                actual: node.agent,
            });
        }
        let registered = self
            .capabilities(node_id)
            .await?
            .ok_or(ChainError::UnknownNode(node_id))?;
        if registered == capabilities {
            return Ok(ServedNode {
                node_id,
                capabilities,
            });
        }
        if node.operator != self.agent {
            // Only the operator may change them (a node registered with `gantry node
            // register` under another key): say so, and serve as registered.
            tracing::warn!(
                node_id,
                operator = %node.operator,
                ?registered,
                detected = ?capabilities,
                "this machine differs from the node's registered capabilities; only its \
                 operator can update them"
            );
            return Ok(ServedNode {
                node_id,
                capabilities: registered,
            });
        }
        tracing::info!(node_id, "capabilities changed; updating them on-chain");
        let call = self.registry.updateCapabilities(
            node_id,
            capabilities.clone(),
            metadata_uri.to_owned(),
        );
        self.send("updateCapabilities", call).await?;
        Ok(ServedNode {
            node_id,
            capabilities,
        })
    }

    /// The events of `filter` since the block the node's history starts at.
    async fn since_start<E: alloy::sol_types::SolEvent>(
        &self,
        filter: alloy::contract::Event<&DynProvider, E>,
    ) -> Result<Vec<(E, Log)>, ChainError> {
        let filter = filter.from_block(self.start_block);
        filter.query().await.map_err(ChainError::rpc)
    }

    /// The newest node bound to this agent (registered with it, or re-pointed to it) that
    /// is Active or Inactive.
    async fn find_node(&self) -> Result<Option<u64>, ChainError> {
        let agent = self.agent.into_word();
        let registered = self
            .since_start(self.registry.NodeRegistered_filter().topic3(agent))
            .await?;
        let repointed = self
            .since_start(self.registry.NodeAgentChanged_filter().topic2(agent))
            .await?;
        let mut candidates: Vec<(u64, &Log)> = registered
            .iter()
            .map(|(e, log)| (e.nodeId, log))
            .chain(repointed.iter().map(|(e, log)| (e.nodeId, log)))
            .collect();
        candidates.sort_by_key(|(_, log)| log_position(log));
        for (node_id, _) in candidates.into_iter().rev() {
            let node = self.node(node_id).await?;
            // Active, or Inactive (heartbeats revive it); Exiting and Exited are leaving.
            let status = NodeStatus::try_from(node.status as u8);
            if node.agent == self.agent
                && matches!(status, Ok(NodeStatus::Active | NodeStatus::Inactive))
            {
                return Ok(Some(node_id));
            }
        }
        Ok(None)
    }

    /// Registers a node served by this agent itself (no consent signature needed).
    async fn register(
        &self,
        capabilities: &NodeRegistry::NodeCapabilities,
        stake: Option<U256>,
        metadata_uri: &str,
    ) -> Result<u64, ChainError> {
        let stake = match stake {
            Some(stake) => stake,
            None => self.min_stake().await?,
        };
        let stake = U96::checked_from_limbs_slice(stake.as_limbs()).ok_or_else(|| {
            ChainError::Reverted {
                call: "register",
                reason: "stake does not fit in uint96".into(),
            }
        })?;
        let token = GantryTestToken::new(self.token, self.provider.clone());
        let allowance = token
            .allowance(self.agent, *self.registry.address())
            .call()
            .await
            .map_err(ChainError::rpc)?;
        if allowance < U256::from(stake) {
            self.send(
                "approve",
                token.approve(*self.registry.address(), U256::from(stake)),
            )
            .await?;
        }
        // The agent registering itself consents by calling: no deadline, no signature.
        let call = self.registry.register(
            capabilities.clone(),
            metadata_uri.to_owned(),
            stake,
            self.agent,
            U256::ZERO,
            Bytes::new(),
        );
        let receipt = self.send("register", call).await?;
        let registered = receipt
            .decoded_log::<NodeRegistry::NodeRegistered>()
            .ok_or_else(|| ChainError::rpc("register: no NodeRegistered log"))?;
        tracing::info!(node_id = registered.nodeId, %stake, "registered the node");
        Ok(registered.nodeId)
    }

    /// The node's capabilities as the chain last announced them (`NodeRegistered`, then
    /// each `NodeCapabilitiesUpdated`); the market keeps only what `assign` checks, so the
    /// rest (`maxConcurrentJobs`) is read from the logs. `None` for an unknown node.
    pub async fn capabilities(
        &self,
        node_id: u64,
    ) -> Result<Option<NodeRegistry::NodeCapabilities>, ChainError> {
        let topic = B256::from(U256::from(node_id));
        let registered = self
            .since_start(self.registry.NodeRegistered_filter().topic1(topic))
            .await?;
        let updated = self
            .since_start(self.registry.NodeCapabilitiesUpdated_filter().topic1(topic))
            .await?;
        let latest = registered
            .into_iter()
            .map(|(e, log)| (log_position(&log), e.capabilities))
            .chain(
                updated
                    .into_iter()
                    .map(|(e, log)| (log_position(&log), e.capabilities)),
            )
            .max_by_key(|(position, _)| *position);
        Ok(latest.map(|(_, capabilities)| capabilities))
    }

    /// The market's minimum stake: a node below it gets no new jobs.
    pub async fn min_stake(&self) -> Result<U256, ChainError> {
        let params = self.market.params().call().await.map_err(ChainError::rpc)?;
        Ok(U256::from(params.minStake))
    }

    pub async fn node(&self, node_id: u64) -> Result<NodeRegistry::NodeInfo, ChainError> {
        self.registry
            .getNode(node_id)
            .call()
            .await
            .map_err(ChainError::rpc)
    }

    /// Job `job_id`'s terms and current state, folded from the market's logs and checked
    /// against the hash the market stores.
    pub async fn read_job(&self, job_id: u64) -> Result<Job, ChainError> {
        Ok(gantry_runtime::market::read_job(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await?)
    }

    /// Verified job `job_id`'s seats, folded from its logs.
    pub async fn read_seats(
        &self,
        job_id: u64,
        terms: &gantry_protocol::market::Terms,
    ) -> Result<gantry_protocol::market::Seats, ChainError> {
        Ok(gantry_runtime::market::read_seats(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
            terms,
        )
        .await?)
    }

    /// The digest job `job_id`'s quorum agreed on, once decided.
    pub async fn verified_digest(&self, job_id: u64) -> Result<Option<B256>, ChainError> {
        Ok(gantry_runtime::market::read_verified(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await?)
    }

    /// The agent's signature of `digest` (an EIP-712 digest the protocol built).
    pub fn sign(&self, digest: &B256) -> Result<alloy::primitives::Signature, ChainError> {
        use alloy::signers::SignerSync as _;
        self.signer.sign_hash_sync(digest).map_err(ChainError::rpc)
    }

    /// The node of each of job `job_id`'s attempts so far (attempt `i + 1`'s is `[i]`).
    pub async fn assignments(&self, job_id: u64) -> Result<Vec<u64>, ChainError> {
        Ok(gantry_runtime::market::read_assignments(
            &self.provider,
            self.market_address(),
            self.start_block,
            job_id,
        )
        .await?)
    }

    /// The market's address (the extensions' calls are served there).
    pub fn market_address(&self) -> Address {
        *self.market.address()
    }

    /// Commits `seal` for seat `seat` (its word `s`, Seated) of job `job_id`.
    pub async fn commit_seat(
        &self,
        job_id: u64,
        seat: u8,
        s: &gantry_protocol::market::Seat,
        seal: B256,
    ) -> Result<(), ChainError> {
        let verification = Verification::new(self.market_address(), self.provider.clone());
        self.send(
            "commitSeat",
            verification.commitSeat(job_id, seat, s.pack(), seal),
        )
        .await
        .map(drop)
    }

    /// Gives seat `seat` (its word `s`, Seated) of job `job_id` back: free within the
    /// grace.
    pub async fn reject_seat(
        &self,
        job_id: u64,
        seat: u8,
        s: &gantry_protocol::market::Seat,
    ) -> Result<(), ChainError> {
        let verification = Verification::new(self.market_address(), self.provider.clone());
        self.send(
            "rejectSeat",
            verification.rejectSeat(job_id, seat, s.pack()),
        )
        .await
        .map(drop)
    }

    /// Opens seat `seat`'s seal (its word `s`, Committed) of `job`, in its reveal phase.
    pub async fn reveal_seat(
        &self,
        job_id: u64,
        job: &Job,
        seat: u8,
        s: &gantry_protocol::market::Seat,
        digest: B256,
        salt: B256,
    ) -> Result<(), ChainError> {
        let state = verified_state("revealSeat", job_id, job)?;
        let verification = Verification::new(self.market_address(), self.provider.clone());
        let call = verification.revealSeat(
            job_id,
            job.terms.pack().into(),
            state,
            seat,
            s.pack(),
            digest,
            salt,
        );
        self.send("revealSeat", call).await.map(drop)
    }

    /// The hash the market stores for the job (0 once settled): equal to a held state's
    /// hash exactly while nobody (no reclaim, no reorg) has moved the job on.
    pub async fn job_hash(&self, job_id: u64) -> Result<B256, ChainError> {
        self.market
            .jobHash(job_id)
            .call()
            .await
            .map_err(ChainError::rpc)
    }

    /// Whether the node gave the job back or faulted on it before (it may not take it).
    pub async fn is_barred(&self, job_id: u64, node_id: u64) -> Result<bool, ChainError> {
        self.market
            .isBarred(job_id, node_id)
            .call()
            .await
            .map_err(ChainError::rpc)
    }

    /// The number of the newest block the node has.
    pub async fn block_number(&self) -> Result<u64, ChainError> {
        self.provider
            .get_block_number()
            .await
            .map_err(ChainError::rpc)
    }

    /// Timestamp of the newest block, seconds.
    pub async fn now(&self) -> Result<u64, ChainError> {
        let block = self
            .provider
            .get_block(alloy::eips::BlockId::latest())
            .await
            .map_err(ChainError::rpc)?
            .ok_or_else(|| ChainError::rpc("no latest block"))?;
        Ok(block.header.timestamp)
    }

    /// The chain's mean block interval over its last 64 blocks (fewer on a young chain;
    /// never the genesis block, whose time may be anything), seconds, rounded up, at least
    /// 1: what the node's wait for finality takes, not less.
    pub async fn block_interval(&self) -> Result<u64, ChainError> {
        let block = |id: alloy::eips::BlockId| async move {
            self.provider
                .get_block(id)
                .await
                .map_err(ChainError::rpc)?
                .ok_or_else(|| ChainError::rpc("no such block"))
        };
        let newest = block(alloy::eips::BlockId::latest()).await?.header;
        let span = newest.number.saturating_sub(1).min(64);
        if span == 0 {
            return Ok(1);
        }
        let oldest = block(alloy::eips::BlockId::number(newest.number - span))
            .await?
            .header;
        Ok(newest
            .timestamp
            .saturating_sub(oldest.timestamp)
            .div_ceil(span)
            .max(1))
    }

    pub async fn heartbeat(&self, node_id: u64) -> Result<(), ChainError> {
        self.send("heartbeat", self.registry.heartbeat(node_id))
            .await
            .map(drop)
    }

    /// Asks the registry to bring the node into the verification pool (or out of it) by
    /// its rule: anyone may; a node that does not meet the rule stays out.
    pub async fn sync_pool(&self, node_id: u64) -> Result<(), ChainError> {
        self.send("syncPool", self.registry.syncPool(vec![node_id]))
            .await
            .map(drop)
    }

    /// Takes the node offline (the agent may, at any time): no new work is assigned to it
    /// until its next heartbeat. Every job assigned to it before is reclaimable from then
    /// on (and can no longer be rejected): the worker answers the jobs it holds first.
    pub async fn mark_inactive(&self, node_id: u64) -> Result<(), ChainError> {
        self.send("markInactive", self.registry.markInactive(node_id))
            .await
            .map(drop)
    }

    /// Claims the Open `job` for the node; `job` is moved on to its assignment.
    pub async fn claim(&self, job_id: u64, node_id: u64, job: &mut Job) -> Result<(), ChainError> {
        // A refereed job is claimed by the tier's own call (its state is five words, which
        // `claim` refuses); it locks the provider's hold.
        if let Some(state) = job.state.pack_verified() {
            let referees = Referees::new(*self.market.address(), self.provider.clone());
            let call =
                referees.claimRefereed(job_id, node_id, job.terms.pack().into(), state.into());
            return self.send_moving("claimRefereed", call, job_id, job).await;
        }
        let call = self
            .market
            .claim(job_id, node_id, job.terms.pack(), job.state.pack());
        self.send_moving("claim", call, job_id, job).await
    }

    /// Submits the result of the Assigned `job`; `job` is moved on to Submitted.
    pub async fn submit_result(
        &self,
        job_id: u64,
        job: &mut Job,
        hash: B256,
        uri: String,
    ) -> Result<(), ChainError> {
        let call = self
            .market
            .submitResult(job_id, job.state.pack(), hash, uri);
        self.send_moving("submitResult", call, job_id, job).await
    }

    /// Submits the seal of the Assigned refereed `job`'s result (design 18, §2.6) and
    /// where its outcome lies; `job` is moved on to Submitted.
    pub async fn submit_refereed_result(
        &self,
        job_id: u64,
        job: &mut Job,
        seal: B256,
        uri: String,
    ) -> Result<(), ChainError> {
        let state = verified_state("submitRefereedResult", job_id, job)?;
        let referees = Referees::new(*self.market.address(), self.provider.clone());
        let call =
            referees.submitRefereedResult(job_id, job.terms.pack().into(), state.into(), seal, uri);
        self.send_moving("submitRefereedResult", call, job_id, job)
            .await
    }

    /// Opens the provider's seal of the disputed refereed `job` (its reveal phase).
    pub async fn reveal_refereed(
        &self,
        job_id: u64,
        job: &Job,
        digest: B256,
        salt: B256,
    ) -> Result<(), ChainError> {
        let state = verified_state("revealRefereed", job_id, job)?;
        let referees = Referees::new(*self.market.address(), self.provider.clone());
        let call =
            referees.revealRefereed(job_id, job.terms.pack().into(), state.into(), digest, salt);
        self.send("revealRefereed", call).await.map(drop)
    }

    /// The digest the provider of refereed job `job_id` revealed (`ProviderRevealed`), if
    /// it was.
    pub async fn provider_revealed(&self, job_id: u64) -> Result<Option<B256>, ChainError> {
        Ok(gantry_runtime::market::read_provider_revealed(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await?)
    }

    /// Gives the Assigned `job` back with `reason`; `job` is moved on (Open again, or
    /// Failed). The node is barred from the job and charged for the time it held it.
    pub async fn reject(
        &self,
        job_id: u64,
        job: &mut Job,
        reason: String,
    ) -> Result<(), ChainError> {
        // A refereed job placed on this node is given back by the tier's own call (its
        // state is five words, which `reject` refuses).
        if let Some(state) = job.state.pack_verified() {
            let referees = Referees::new(*self.market.address(), self.provider.clone());
            let call =
                referees.rejectRefereed(job_id, job.terms.pack().into(), state.into(), reason);
            return self.send_moving("rejectRefereed", call, job_id, job).await;
        }
        let call = self
            .market
            .reject(job_id, job.terms.pack(), job.state.pack(), reason);
        self.send_moving("reject", call, job_id, job).await
    }

    /// Sends `builder` for job `job_id` and moves `job` on by the receipt's events.
    async fn send_moving<C: alloy::sol_types::SolCall>(
        &self,
        call: &'static str,
        builder: alloy::contract::CallBuilder<&DynProvider, std::marker::PhantomData<C>>,
        job_id: u64,
        job: &mut Job,
    ) -> Result<(), ChainError> {
        let receipt = self.send(call, builder).await?;
        fold_receipt(job_id, job, &receipt);
        Ok(())
    }

    async fn send<C: alloy::sol_types::SolCall>(
        &self,
        call: &'static str,
        builder: alloy::contract::CallBuilder<&DynProvider, std::marker::PhantomData<C>>,
    ) -> Result<TransactionReceipt, ChainError> {
        // Above the estimate: one taken in the block before can fall short (gas_limit).
        let gas = builder
            .estimate_gas()
            .await
            .map_err(|e| ChainError::from_call(call, e))?;
        let builder = builder.gas(gantry_protocol::market::gas_limit(gas));
        // Broadcast one at a time; the receipts are waited for side by side, so that slots
        // finishing together answer in one block, not one answer a block.
        let (tx, waited_for) = {
            let mut next = self.sending.lock().await;
            let pending = self
                .provider
                .get_transaction_count(self.agent)
                .pending()
                .await
                .map_err(ChainError::rpc)?;
            let mut nonce = next.map_or(pending, |next| next.max(pending));
            // Never one of the node's own in flight (an RPC node's count lagging after a
            // reset): a broadcast at its nonce would be refused, or replace it.
            while self.in_flight().contains(&nonce) {
                nonce += 1;
            }
            // In the set before the broadcast: no filler takes this nonce meanwhile.
            let waited_for = InFlight::new(self, nonce);
            match builder.nonce(nonce).send().await {
                Ok(sent) => {
                    *next = Some(nonce + 1);
                    (*sent.tx_hash(), waited_for)
                }
                Err(e) => {
                    // The chain's count next time: the pool may hold what this one assumed
                    // free, or the chain may have taken back what it assumed taken.
                    *next = None;
                    return Err(ChainError::from_send(call, e));
                }
            }
        };
        let mined = self.mined(call, tx).await;
        drop(waited_for);
        if matches!(mined, Err(ChainError::Dropped { .. })) {
            // Its nonce is free again: the next transaction takes it.
            *self.sending.lock().await = None;
        }
        let receipt = mined?;
        if !receipt.status() {
            return Err(ChainError::Reverted {
                call,
                reason: format!("transaction {} failed", receipt.transaction_hash),
            });
        }
        Ok(receipt)
    }

    fn in_flight(&self) -> std::sync::MutexGuard<'_, BTreeSet<u64>> {
        self.in_flight
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A nonce of the node's in the `in_flight` set while its transaction is waited for, and
/// out of it once the wait ends — also when the wait is dropped (a job's task ended, the
/// worker stopping): a nonce left in the set would never be filled if its transaction
/// left the pool, and every later transaction would wait behind it.
struct InFlight<'a> {
    chain: &'a Chain,
    nonce: u64,
}

impl<'a> InFlight<'a> {
    fn new(chain: &'a Chain, nonce: u64) -> Self {
        chain.in_flight().insert(nonce);
        Self { chain, nonce }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.chain.in_flight().remove(&self.nonce);
    }
}

impl Chain {
    /// Waits for transaction `tx`'s receipt (`gantry_runtime::tx::mined_among`, the node's
    /// other transactions in flight no gap below it): one a reorganisation took away is
    /// reported as dropped within [`DROP_GRACE`], not waited for.
    async fn mined(&self, call: &'static str, tx: B256) -> Result<TransactionReceipt, ChainError> {
        let wait = gantry_runtime::tx::Wait {
            timeout: RECEIPT_TIMEOUT,
            drop_grace: DROP_GRACE,
            poll: RECEIPT_POLL,
        };
        let in_flight = |nonce: u64| self.in_flight().contains(&nonce);
        gantry_runtime::tx::mined_among(&self.provider, tx, wait, &in_flight)
            .await
            .map_err(|unmined| match unmined {
                Unmined::Dropped(tx) => ChainError::Dropped { call, tx },
                Unmined::NotMined { tx, .. } => ChainError::NotMined { call, tx },
                Unmined::Rpc { source, .. } => ChainError::rpc(source),
            })
    }
}

/// A verified job's five words, as the extensions' calls take them; `call` names the call
/// refused for a tier-none job.
fn verified_state(
    call: &'static str,
    job_id: u64,
    job: &Job,
) -> Result<Verification::VerifiedState, ChainError> {
    job.state.pack_verified().ok_or(ChainError::Reverted {
        call,
        reason: format!("job {job_id} is not a verified job"),
    })
}

/// Applies the events of `receipt` about job `job_id` to `job`, in log order.
fn fold_receipt(job_id: u64, job: &mut Job, receipt: &TransactionReceipt) {
    for log in receipt.inner.logs() {
        let Ok(event) = JobMarket::JobMarketEvents::decode_log(&log.inner) else {
            continue;
        };
        if let event @ GantryEvent::Market(market) = &GantryEvent::from(event.data)
            && event.job_id() == Some(job_id)
        {
            job.state.apply(market);
        }
    }
}

/// A log's place in the chain, for "the latest".
fn log_position(log: &Log) -> (u64, u64) {
    (
        log.block_number.unwrap_or_default(),
        log.log_index.unwrap_or_default(),
    )
}

#[cfg(test)]
mod tests {
    use super::ChainError;

    /// The RPC node's error answer with `message`, as a call's send returns it.
    fn refused(message: &str) -> alloy::contract::Error {
        let payload = serde_json::json!({"code": -32000, "message": message});
        alloy::contract::Error::TransportError(alloy::transports::TransportError::ErrorResp(
            serde_json::from_value(payload).expect("an error payload"),
        ))
    }

    /// Two of a node's broadcasts racing for a nonce (an RPC node whose count lags) is
    /// the node's own race: tried again, never the job's refusal (which throws the result
    /// away and blames the job).
    #[test]
    fn a_broadcast_refused_for_its_nonce_is_tried_again_a_refused_call_is_not() {
        for message in [
            "nonce too low: next nonce 7, tx nonce 6",
            "replacement transaction underpriced",
            "already known",
        ] {
            let error = ChainError::from_send("submitResult", refused(message));
            assert!(error.is_retryable(), "{message}: {error}");
        }
        let error = ChainError::from_send("submitResult", refused("execution reverted"));
        assert!(!error.is_retryable(), "{error}");
    }
}
