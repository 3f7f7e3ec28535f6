//! Posting jobs to the market of a [`Devnet`], registering nodes with their agent's
//! consent, and reading a job's terms and state back for the calls that take them.

use alloy::primitives::aliases::{U40, U96};
use alloy::primitives::{Address, B256, U256};
use alloy::providers::DynProvider;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::market::Job;

use crate::{Devnet, DevnetError, GUSD, confirm_receipt, scenario};

/// A deadline no test reaches (in 2096), in chain seconds.
pub const FAR_DEADLINE: u64 = 4_000_000_000;

/// A job to post with [`Devnet::post_job`]. The default is the scenario's: an H100 job
/// ([`scenario::h100_requirements`]) with the example spec, a 50 gUSD bounty and
/// [`FAR_DEADLINE`].
#[derive(Debug, Clone)]
pub struct JobPost {
    pub requirements: JobMarket::JobRequirements,
    /// In the token's base units (see [`GUSD`]).
    pub bounty: u64,
    /// Chain time, seconds.
    pub deadline: u64,
    /// The spec's bytes as posted.
    pub spec: Vec<u8>,
}

impl Default for JobPost {
    fn default() -> Self {
        Self {
            requirements: scenario::h100_requirements(),
            bounty: 50 * GUSD,
            deadline: FAR_DEADLINE,
            spec: scenario::example_spec(),
        }
    }
}

impl Devnet {
    /// Grants `account` the market's matcher role (the admin holds it already).
    pub async fn grant_matcher_role(&self, account: Address) -> Result<(), DevnetError> {
        let market = JobMarket::new(self.deployment.market, self.admin.clone());
        let role = market
            .MATCHER_ROLE()
            .call()
            .await
            .map_err(DevnetError::contract("MATCHER_ROLE"))?;
        confirm_receipt("grantRole", market.grantRole(role, account).send().await).await?;
        Ok(())
    }

    /// The market, signing as anvil's account `account`.
    pub fn market(&self, account: usize) -> JobMarket::JobMarketInstance<DynProvider> {
        JobMarket::new(self.deployment.market, self.provider(account))
    }

    /// The registry, signing as anvil's account `account`.
    pub fn registry(&self, account: usize) -> NodeRegistry::NodeRegistryInstance<DynProvider> {
        NodeRegistry::new(self.deployment.registry, self.provider(account))
    }

    /// Posts `job` as account `account`, which holds the bounty and lets the market take
    /// it (see [`Devnet::fund`]); returns the job id.
    pub async fn post_job(&self, account: usize, job: JobPost) -> Result<u64, DevnetError> {
        let receipt = confirm_receipt(
            "postJob",
            self.market(account)
                .postJob(
                    job.requirements,
                    U96::from(job.bounty),
                    U40::from(job.deadline),
                    job.spec.into(),
                )
                .send()
                .await,
        )
        .await?;
        let posted =
            receipt
                .decoded_log::<JobMarket::JobPosted>()
                .ok_or(DevnetError::MissingEvent {
                    call: "postJob",
                    event: gantry_protocol::events::event_name::<JobMarket::JobPosted>(),
                })?;
        Ok(posted.jobId)
    }

    /// Job `id`'s terms and state, folded from the chain's logs and checked against the
    /// hash the market holds.
    pub async fn job(&self, id: u64) -> Result<Job, DevnetError> {
        Ok(gantry_runtime::market::read_job(
            &self.admin,
            self.deployment.market,
            self.deployment.start_block,
            id,
        )
        .await?)
    }

    /// The result hash and URI job `id`'s node committed to (its latest
    /// `ResultSubmitted`), if it answered.
    pub async fn result(&self, id: u64) -> Result<Option<(B256, String)>, DevnetError> {
        Ok(gantry_runtime::market::read_result(
            &self.admin,
            self.deployment.market,
            self.deployment.start_block,
            id,
        )
        .await?)
    }

    /// `agent`'s consent (signature) to serve a node of `operator`, valid for an hour.
    pub async fn consent(
        &self,
        operator: Address,
        agent: &PrivateKeySigner,
    ) -> Result<(U256, alloy::primitives::Bytes), DevnetError> {
        let nonce = self
            .registry(0)
            .agentNonce(agent.address())
            .call()
            .await
            .map_err(DevnetError::contract("agentNonce"))?;
        let deadline = self.now().await? + 3_600;
        let digest = gantry_protocol::consent::digest(
            self.deployment.chain_id,
            self.deployment.market,
            operator,
            agent.address(),
            nonce,
            deadline,
        );
        let signature = agent
            .sign_hash_sync(&digest)
            .map_err(|e| DevnetError::Anvil(format!("signing a consent: {e}")))?;
        Ok((U256::from(deadline), signature.as_bytes().to_vec().into()))
    }

    /// Registers a node of account `operator` (holding and approving `stake`) served by
    /// `agent`, which consents; returns its id.
    pub async fn register(
        &self,
        operator: usize,
        agent: &PrivateKeySigner,
        capabilities: NodeRegistry::NodeCapabilities,
        stake: u64,
    ) -> Result<u64, DevnetError> {
        let (deadline, signature) = self.consent(self.address(operator), agent).await?;
        let registry = self.registry(operator);
        let register = registry.register(
            capabilities,
            "ipfs://node".into(),
            U96::from(stake),
            agent.address(),
            deadline,
            signature,
        );
        let receipt = confirm_receipt("register", register.send().await).await?;
        let registered = receipt
            .decoded_log::<NodeRegistry::NodeRegistered>()
            .ok_or(DevnetError::MissingEvent {
                call: "register",
                event: gantry_protocol::events::event_name::<NodeRegistry::NodeRegistered>(),
            })?;
        Ok(registered.nodeId)
    }

    /// The signing key of the anvil account at `address`, if it is one.
    pub fn signer_of(&self, address: Address) -> Option<PrivateKeySigner> {
        (0..self.anvil.addresses().len())
            .find(|i| self.address(*i) == address)
            .map(|i| self.signer(i))
    }
}
