//! The worker's view of the chain and the transactions it sends: find or register its
//! node, keep the capabilities current, heartbeat, read jobs, and claim, submit, reject or
//! abandon them. One agent account sends everything, one transaction at a time (the
//! worker sends a handful per job), each waited for to its receipt.

use std::time::Duration;

use alloy::network::EthereumWallet;
use alloy::primitives::{Address, B256, U256, aliases::U96};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use gantry_protocol::api::TokenInfo;
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry};
use gantry_protocol::status::NodeStatus;
use tokio::sync::Mutex;
use url::Url;

/// How long a sent transaction may take to be mined before the send counts as failed.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(60);

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
    #[error("the RPC endpoint is chain {actual}, the config says {expected}")]
    WrongChain { expected: u64, actual: u64 },
    #[error("node {node} is not served by this agent ({agent}); its agent is {actual}")]
    NotOurNode {
        node: u64,
        agent: Address,
        actual: Address,
    },
}

impl ChainError {
    fn rpc(source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self::Rpc {
            source: source.into(),
        }
    }

    fn from_call(call: &'static str, error: alloy::contract::Error) -> Self {
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

    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Rpc { .. })
    }
}

/// The agent's connection to the chain.
#[derive(Debug)]
pub struct Chain {
    provider: DynProvider,
    market: JobMarket::JobMarketInstance<DynProvider>,
    registry: NodeRegistry::NodeRegistryInstance<DynProvider>,
    token: Address,
    agent: Address,
    /// One transaction at a time, so nonces stay in order.
    sending: Mutex<()>,
}

impl Chain {
    /// Connects and checks the chain id.
    pub async fn connect(
        rpc_url: Url,
        chain_id: u64,
        market: Address,
        registry: Address,
        token: Address,
        signer: PrivateKeySigner,
    ) -> Result<Self, ChainError> {
        let agent = signer.address();
        let provider = ProviderBuilder::new()
            .wallet(EthereumWallet::from(signer))
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
            sending: Mutex::new(()),
        })
    }

    pub fn agent(&self) -> Address {
        self.agent
    }

    /// The node this agent serves: `configured`, else the newest node registered with
    /// this agent that has not exited, else a new registration staking `stake` (the
    /// registry's minimum when `None`). Capabilities are updated when they differ and the
    /// agent operates the node (else a warning: only the operator may).
    pub async fn ensure_node(
        &self,
        configured: Option<u64>,
        capabilities: NodeRegistry::NodeCapabilities,
        stake: Option<U256>,
        metadata_uri: &str,
    ) -> Result<u64, ChainError> {
        let node_id = match configured {
            Some(id) => Some(id),
            None => self.find_node().await?,
        };
        let Some(node_id) = node_id else {
            return self.register(capabilities, stake, metadata_uri).await;
        };
        let node = self.node(node_id).await?;
        if node.agent != self.agent {
            return Err(ChainError::NotOurNode {
                node: node_id,
                agent: self.agent,
                actual: node.agent,
            });
        }
        if node.capabilities != capabilities && node.operator != self.agent {
            // Only the operator may change them (a node registered with `gantry node
            // register` under another key): say so, and serve as registered.
            tracing::warn!(
                node_id,
                operator = %node.operator,
                registered = ?node.capabilities,
                detected = ?capabilities,
                "this machine differs from the node's registered capabilities; only its \
                 operator can update them"
            );
        } else if node.capabilities != capabilities {
            tracing::info!(node_id, "capabilities changed; updating them on-chain");
            let call =
                self.registry
                    .updateCapabilities(node_id, capabilities, metadata_uri.to_owned());
            self.send("updateCapabilities", call).await?;
        }
        Ok(node_id)
    }

    async fn find_node(&self) -> Result<Option<u64>, ChainError> {
        let logs = self
            .registry
            .NodeRegistered_filter()
            .topic3(self.agent.into_word())
            .from_block(0)
            .query()
            .await
            .map_err(ChainError::rpc)?;
        for (event, _) in logs.into_iter().rev() {
            let node = self.node(event.nodeId).await?;
            // Active, or Inactive (heartbeats revive it); Exiting and Exited are leaving.
            let status = NodeStatus::try_from(node.status as u8);
            if node.agent == self.agent
                && matches!(status, Ok(NodeStatus::Active | NodeStatus::Inactive))
            {
                return Ok(Some(event.nodeId));
            }
        }
        Ok(None)
    }

    async fn register(
        &self,
        capabilities: NodeRegistry::NodeCapabilities,
        stake: Option<U256>,
        metadata_uri: &str,
    ) -> Result<u64, ChainError> {
        let stake = match stake {
            Some(stake) => stake,
            None => U256::from(
                self.registry
                    .params()
                    .call()
                    .await
                    .map_err(ChainError::rpc)?
                    .minStake,
            ),
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
        let receipt = self
            .send(
                "register",
                self.registry
                    .register(self.agent, capabilities, metadata_uri.to_owned(), stake),
            )
            .await?;
        let registered = receipt
            .decoded_log::<NodeRegistry::NodeRegistered>()
            .ok_or_else(|| ChainError::rpc("register: no NodeRegistered log"))?;
        tracing::info!(node_id = registered.nodeId, %stake, "registered the node");
        Ok(registered.nodeId)
    }

    /// The registry's minimum stake: a node below it gets no new jobs.
    pub async fn min_stake(&self) -> Result<U256, ChainError> {
        let params = self
            .registry
            .params()
            .call()
            .await
            .map_err(ChainError::rpc)?;
        Ok(U256::from(params.minStake))
    }

    pub async fn node(&self, node_id: u64) -> Result<NodeRegistry::NodeInfo, ChainError> {
        self.registry
            .getNode(node_id)
            .call()
            .await
            .map_err(ChainError::rpc)
    }

    pub async fn job(&self, job_id: u64) -> Result<JobMarket::JobInfo, ChainError> {
        self.market
            .getJob(job_id)
            .call()
            .await
            .map_err(ChainError::rpc)
    }

    /// Latest block time, seconds.
    pub async fn now(&self) -> Result<u64, ChainError> {
        let block = self
            .provider
            .get_block(alloy::eips::BlockId::latest())
            .await
            .map_err(ChainError::rpc)?
            .ok_or_else(|| ChainError::rpc("no latest block"))?;
        Ok(block.header.timestamp)
    }

    pub async fn heartbeat(&self, node_id: u64) -> Result<(), ChainError> {
        self.send("heartbeat", self.registry.heartbeat(node_id))
            .await
            .map(drop)
    }

    /// Takes the node offline (the agent may, at any time): no new work is assigned to it
    /// until its next heartbeat.
    pub async fn mark_inactive(&self, node_id: u64) -> Result<(), ChainError> {
        self.send("markInactive", self.registry.markInactive(node_id))
            .await
            .map(drop)
    }

    pub async fn claim(&self, job_id: u64, node_id: u64) -> Result<(), ChainError> {
        self.send("claim", self.market.claim(job_id, node_id))
            .await
            .map(drop)
    }

    pub async fn submit_result(
        &self,
        job_id: u64,
        hash: B256,
        uri: String,
    ) -> Result<(), ChainError> {
        self.send("submitResult", self.market.submitResult(job_id, hash, uri))
            .await
            .map(drop)
    }

    pub async fn reject(&self, job_id: u64, reason: String) -> Result<(), ChainError> {
        self.send("reject", self.market.reject(job_id, reason))
            .await
            .map(drop)
    }

    pub async fn abandon(&self, job_id: u64) -> Result<(), ChainError> {
        self.send("abandon", self.market.abandon(job_id))
            .await
            .map(drop)
    }

    async fn send<C: alloy::sol_types::SolCall>(
        &self,
        call: &'static str,
        builder: alloy::contract::CallBuilder<&DynProvider, std::marker::PhantomData<C>>,
    ) -> Result<alloy::rpc::types::TransactionReceipt, ChainError> {
        let _one_at_a_time = self.sending.lock().await;
        // A fifth above the estimate: an estimate taken in the block before can fall short
        // (a heartbeat right after registration writes a slot that was just set).
        let gas = builder
            .estimate_gas()
            .await
            .map_err(|e| ChainError::from_call(call, e))?;
        let pending = builder
            .gas(gas + gas / 5)
            .send()
            .await
            .map_err(|e| ChainError::from_call(call, e))?;
        let receipt = pending
            .with_timeout(Some(RECEIPT_TIMEOUT))
            .get_receipt()
            .await
            .map_err(ChainError::rpc)?;
        if !receipt.status() {
            return Err(ChainError::Reverted {
                call,
                reason: format!("transaction {} failed", receipt.transaction_hash),
            });
        }
        Ok(receipt)
    }
}
