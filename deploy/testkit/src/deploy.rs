//! Deploying the market to a chain, and a fresh chain with the market deployed for tests.

use alloy::network::EthereumWallet;
use alloy::node_bindings::{Anvil, AnvilInstance};
use alloy::primitives::{Address, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::signers::local::PrivateKeySigner;
use gantry_protocol::bindings::{
    GantryTestToken, job_market::JobMarket, node_registry::NodeRegistry, referees::Referees,
    verification::Verification,
};
use gantry_protocol::deployment::Deployment;

use crate::{DevnetError, Tools};

/// What a deployment is configured with.
#[derive(Debug, Clone)]
pub struct DeployParams {
    pub market: JobMarket::MarketParams,
    /// The verification rules set at deployment (`setVerifyParams`).
    pub verify: Verification::VerifyParams,
    /// Accounts granted MATCHER, ARBITER and PAUSER (the deployer is admin).
    pub matcher: Address,
    pub arbiter: Address,
    pub pauser: Address,
}

impl DeployParams {
    /// The dev network's parameters (`market::dev_params`): tests that exit a node move
    /// the chain's clock past the unbonding period.
    pub fn dev(admin: Address) -> Self {
        Self {
            market: gantry_protocol::market::dev_params(admin),
            verify: gantry_protocol::market::dev_verify_params(),
            matcher: admin,
            arbiter: admin,
            pauser: admin,
        }
    }
}

/// Deploys the test token and the market (with its node extension, whose calls the market
/// serves at its own address: the deployment's `registry` is the market), and grants the
/// roles. `provider` must sign as `admin`.
pub async fn deploy(
    provider: &DynProvider,
    admin: Address,
    params: DeployParams,
) -> Result<Deployment, DevnetError> {
    let contract = DevnetError::contract;
    let chain_id = provider
        .get_chain_id()
        .await
        .map_err(|e| DevnetError::Anvil(e.to_string()))?;
    let start_block = provider
        .get_block_number()
        .await
        .map_err(|e| DevnetError::Anvil(e.to_string()))?
        + 1;

    let token = GantryTestToken::deploy(provider.clone())
        .await
        .map_err(contract("deploy GantryTestToken"))?;
    let registry = NodeRegistry::deploy(provider.clone(), *token.address())
        .await
        .map_err(contract("deploy NodeRegistry"))?;
    let verification = Verification::deploy(provider.clone(), *token.address())
        .await
        .map_err(contract("deploy Verification"))?;
    let referees = Referees::deploy(provider.clone(), *token.address())
        .await
        .map_err(contract("deploy Referees"))?;
    let market = JobMarket::deploy(
        provider.clone(),
        *token.address(),
        admin,
        params.market,
        *registry.address(),
        *verification.address(),
        *referees.address(),
    )
    .await
    .map_err(contract("deploy JobMarket"))?;
    // Verified jobs are served at the market's address.
    let verify = Verification::new(*market.address(), provider.clone());
    confirm_receipt(
        "setVerifyParams",
        verify.setVerifyParams(params.verify).send().await,
    )
    .await?;

    let roles = || contract("reading the roles");
    let grants = [
        (
            "grant MATCHER_ROLE",
            market.MATCHER_ROLE().call().await.map_err(roles())?,
            params.matcher,
        ),
        (
            "grant ARBITER_ROLE",
            market.ARBITER_ROLE().call().await.map_err(roles())?,
            params.arbiter,
        ),
        (
            "grant PAUSER_ROLE",
            market.PAUSER_ROLE().call().await.map_err(roles())?,
            params.pauser,
        ),
    ];
    for (name, role, account) in grants {
        confirm_receipt(name, market.grantRole(role, account).send().await).await?;
    }

    Ok(Deployment {
        chain_id,
        token: *token.address(),
        registry: *market.address(),
        market: *market.address(),
        start_block,
    })
}

/// Waits for a sent transaction and checks that it succeeded.
pub async fn confirm_receipt<N: alloy::network::Network>(
    call: &'static str,
    sent: Result<alloy::providers::PendingTransactionBuilder<N>, alloy::contract::Error>,
) -> Result<N::ReceiptResponse, DevnetError> {
    use alloy::network::ReceiptResponse;
    let pending = sent.map_err(DevnetError::contract(call))?;
    let receipt = pending
        .get_receipt()
        .await
        .map_err(|source| DevnetError::Pending {
            call,
            source: Box::new(source),
        })?;
    if !receipt.status() {
        return Err(DevnetError::Reverted { call });
    }
    Ok(receipt)
}

/// Sends `builder` with the gas limit the worker and the CLI give their calls
/// ([`gas_limit`](gantry_protocol::market::gas_limit): the estimate can fall short once
/// mined in a later second, as a reject's time charge does) and confirms its receipt.
pub async fn send_as_worker<C: alloy::sol_types::SolCall>(
    call: &'static str,
    builder: alloy::contract::CallBuilder<&DynProvider, std::marker::PhantomData<C>>,
) -> Result<alloy::rpc::types::TransactionReceipt, DevnetError> {
    let gas = builder
        .estimate_gas()
        .await
        .map_err(DevnetError::contract(call))?;
    let limit = gantry_protocol::market::gas_limit(gas);
    confirm_receipt(call, builder.gas(limit).send().await).await
}

/// A fresh anvil on a free port with the market deployed; anvil stops on drop.
#[derive(Debug)]
pub struct Devnet {
    pub anvil: AnvilInstance,
    pub deployment: Deployment,
    /// Signs as anvil's first account, the admin (also matcher, arbiter and pauser).
    pub admin: DynProvider,
}

impl Devnet {
    /// Starts anvil (instant mining) and deploys with [`DeployParams::dev`].
    pub async fn start() -> Result<Self, DevnetError> {
        Self::start_with(|params| params).await
    }

    /// Starts anvil and deploys with the dev parameters as changed by `configure`.
    pub async fn start_with(
        configure: impl FnOnce(DeployParams) -> DeployParams,
    ) -> Result<Self, DevnetError> {
        let anvil = Anvil::at(Tools::locate().anvil()?)
            .try_spawn()
            .map_err(|e| DevnetError::Anvil(e.to_string()))?;
        Self::deploy_on(anvil, configure).await
    }

    /// Deploys to an anvil already running (say on a fixed port), with the dev parameters
    /// as changed by `configure`; account 0 is admin.
    pub async fn deploy_on(
        anvil: AnvilInstance,
        configure: impl FnOnce(DeployParams) -> DeployParams,
    ) -> Result<Self, DevnetError> {
        let admin = Self::provider_for(&anvil, 0);
        let admin_address = anvil.addresses()[0];
        let params = configure(DeployParams::dev(admin_address));
        let deployment = deploy(&admin, admin_address, params).await?;
        Ok(Self {
            anvil,
            deployment,
            admin,
        })
    }

    /// A provider that signs as anvil's account `index` (0 to 9).
    pub fn provider(&self, index: usize) -> DynProvider {
        Self::provider_for(&self.anvil, index)
    }

    /// The signing key of anvil's account `index`.
    pub fn signer(&self, index: usize) -> PrivateKeySigner {
        PrivateKeySigner::from(self.anvil.keys()[index].clone())
    }

    /// The address of anvil's account `index`.
    pub fn address(&self, index: usize) -> Address {
        self.anvil.addresses()[index]
    }

    /// The private key of anvil's account `index`, `0x`-prefixed hex, as the services take
    /// it (`GANTRY_PRIVATE_KEY`, `GANTRY_AGENT_KEY`).
    pub fn private_key(&self, index: usize) -> String {
        alloy::primitives::B256::from_slice(&self.anvil.keys()[index].to_bytes()).to_string()
    }

    /// Mints test tokens to `to`.
    pub async fn mint(&self, to: Address, amount: U256) -> Result<(), DevnetError> {
        let token = GantryTestToken::new(self.deployment.token, self.admin.clone());
        confirm_receipt("mint", token.mint(to, amount).send().await).await?;
        Ok(())
    }

    /// Mints `amount` to account `account` and lets `spender` take all of its tokens.
    pub async fn fund(
        &self,
        account: usize,
        spender: Address,
        amount: U256,
    ) -> Result<(), DevnetError> {
        self.mint(self.anvil.addresses()[account], amount).await?;
        let token = GantryTestToken::new(self.deployment.token, self.provider(account));
        confirm_receipt("approve", token.approve(spender, U256::MAX).send().await).await?;
        Ok(())
    }

    /// Chain time of the newest block, seconds.
    pub async fn now(&self) -> Result<u64, DevnetError> {
        let block = self
            .admin
            .get_block(alloy::eips::BlockId::latest())
            .await
            .map_err(|e| DevnetError::Anvil(e.to_string()))?
            .ok_or_else(|| DevnetError::Anvil("no latest block".into()))?;
        Ok(block.header.timestamp)
    }

    /// Every event `E` of the market about job `job` (its first indexed topic), oldest
    /// first, with its log.
    pub async fn job_events<E: alloy::sol_types::SolEvent>(
        &self,
        job: u64,
    ) -> Result<Vec<(E, alloy::rpc::types::Log)>, DevnetError> {
        let filter = alloy::rpc::types::Filter::new()
            .address(self.deployment.market)
            .event_signature(E::SIGNATURE_HASH)
            .topic1(U256::from(job))
            .from_block(0);
        let logs = self
            .admin
            .get_logs(&filter)
            .await
            .map_err(|e| DevnetError::Anvil(e.to_string()))?;
        logs.into_iter()
            .map(|log| {
                let event = E::decode_log(&log.inner)
                    .map_err(|e| DevnetError::Anvil(format!("{}: {e}", E::SIGNATURE)))?;
                Ok((event.data, log))
            })
            .collect()
    }

    /// Replaces every block from `block` on with empty ones (`anvil_reorg`): the
    /// transactions mined there are gone from the chain and the pool. `anvil_reorg` counts
    /// its depth back from the head it finds, so a block mined between reading the head and
    /// the call (a service's transaction) would leave `block` itself in place: the reorg is
    /// done again, deeper, until `block`'s hash has changed.
    pub async fn reorg_from(&self, block: u64) -> Result<(), DevnetError> {
        let anvil = |e: alloy::transports::TransportError| DevnetError::Anvil(e.to_string());
        let hash_of = |number: u64| async move {
            self.admin
                .get_block_by_number(number.into())
                .await
                .map_err(anvil)?
                .map(|b| b.header.hash)
                .ok_or_else(|| DevnetError::Anvil(format!("no block {number}")))
        };
        let before = hash_of(block).await?;
        loop {
            let head = self.admin.get_block_number().await.map_err(anvil)?;
            let _: serde_json::Value = self
                .admin
                .raw_request(
                    "anvil_reorg".into(),
                    (head + 1 - block, Vec::<serde_json::Value>::new()),
                )
                .await
                .map_err(anvil)?;
            if hash_of(block).await? != before {
                return Ok(());
            }
        }
    }

    /// Moves chain time forward by `seconds` and mines a block there.
    pub async fn advance(&self, seconds: u64) -> Result<(), DevnetError> {
        let anvil = |e: alloy::transports::TransportError| DevnetError::Anvil(e.to_string());
        let _: serde_json::Value = self
            .admin
            .raw_request("evm_increaseTime".into(), (seconds,))
            .await
            .map_err(anvil)?;
        let _: serde_json::Value = self
            .admin
            .raw_request("evm_mine".into(), ())
            .await
            .map_err(anvil)?;
        Ok(())
    }

    fn provider_for(anvil: &AnvilInstance, index: usize) -> DynProvider {
        let signer = PrivateKeySigner::from(anvil.keys()[index].clone());
        ProviderBuilder::new()
            .wallet(EthereumWallet::from(signer))
            .connect_http(anvil.endpoint_url())
            .erased()
    }
}
