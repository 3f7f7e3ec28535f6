//! The only module that talks to the chain: which contracts (the deployment file or flags),
//! reads (balances, credits, jobs, nodes, parameters), EIP-2612 permits, and transactions
//! sent one at a time to their receipt with reverts decoded into sentences.

use std::marker::PhantomData;
use std::path::Path;
use std::time::Duration;

use alloy::contract::CallBuilder;
use alloy::network::EthereumWallet;
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::{DynProvider, Provider, ProviderBuilder};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::Signer;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{Eip712Domain, SolCall, SolEvent, SolStruct};
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry, Permit, Verification};
use gantry_protocol::market;
use gantry_protocol::status::JobStatus;
use gantry_runtime::args::{KeyError, KeySources, load_signer};
use gantry_runtime::market::{ReadJobError, read_job, read_result};
use tokio::sync::OnceCell;
use url::Url;

use gantry_protocol::deployment::Deployment;

use crate::config::{AgentArgs, Global};
use crate::error::{CliError, Result};
use crate::revert::{self, TokenInfo};

/// How long a sent transaction may take to be mined.
const RECEIPT_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the head is read while waiting for confirmations.
const CONFIRMATION_POLL: Duration = Duration::from_millis(500);
/// anvil's default chain id: a dev chain that mines a block per transaction, where a
/// second confirmation would wait for the next transaction.
pub const DEV_CHAIN_ID: u64 = 31337;

/// The contracts as far as the deployment file and the flags say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contracts {
    pub chain_id: Option<u64>,
    pub market: Address,
    pub registry: Option<Address>,
    pub token: Option<Address>,
    /// Where the market's logs start (the deployment file's `startBlock`; 0 without it).
    pub start_block: u64,
}

impl Contracts {
    /// The deployment file, then the flags over it. Without a file, `--market` is enough.
    pub fn resolve(global: &Global) -> Result<Self> {
        let file = read_deployment(&global.deployment)?;
        let market = global
            .market
            .or(file.as_ref().map(|f| f.market))
            .ok_or_else(|| {
                CliError::usage(format!(
                    "no deployment: {} does not exist; pass --deployment <file> \
                     (GANTRY_DEPLOYMENT) or --market (GANTRY_MARKET)",
                    global.deployment.display()
                ))
            })?;
        Ok(Self {
            chain_id: global.chain_id.or(file.as_ref().map(|f| f.chain_id)),
            market,
            registry: global.registry.or(file.as_ref().map(|f| f.registry)),
            token: global.token.or(file.as_ref().map(|f| f.token)),
            start_block: file.as_ref().map_or(0, |f| f.start_block),
        })
    }
}

fn read_deployment(path: &Path) -> Result<Option<Deployment>> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(CliError::io(path.display(), e)),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        CliError::usage(format!(
            "{} is not a deployment file (chainId, token, registry, market): {e}",
            path.display()
        ))
    })
}

/// The signing key, from `--private-key`/`GANTRY_PRIVATE_KEY` or `--key-file`.
pub fn signer(global: &Global) -> Result<Option<PrivateKeySigner>> {
    global.key.signer().map_err(key_error)
}

/// The agent's key, from `--agent-key`/`GANTRY_AGENT_KEY` or `--agent-key-file`, when one
/// was given: it signs the agent's consent here and is never sent.
pub fn agent_signer(args: &AgentArgs) -> Result<Option<PrivateKeySigner>> {
    let sources = KeySources {
        value: "--agent-key/GANTRY_AGENT_KEY",
        file: "--agent-key-file",
    };
    load_signer(
        args.agent_key.as_ref(),
        args.agent_key_file.as_deref(),
        sources,
    )
    .map_err(key_error)
}

/// A key that could not be read is a local failure; every other key error is usage.
fn key_error(error: KeyError) -> CliError {
    match error {
        KeyError::Read { path, source, .. } => CliError::io(path.display(), source),
        other => CliError::usage(other.to_string()),
    }
}

/// An agent's signed consent to serve an operator's node.
#[derive(Debug, Clone)]
pub struct SignedConsent {
    /// The agent's `agentNonce` it was signed with: good for one `register` or `setAgent`.
    pub nonce: U256,
    /// The last chain second it is valid.
    pub deadline: u64,
    /// 65 bytes, r‖s‖v.
    pub signature: Bytes,
}

/// A connection to the chain, with the contracts and, when a key was given, the signer.
#[derive(Debug)]
pub struct Chain {
    provider: DynProvider,
    signer: Option<PrivateKeySigner>,
    pub chain_id: u64,
    pub market: JobMarket::JobMarketInstance<DynProvider>,
    /// Verified jobs' calls, served at the market's address.
    pub verification: Verification::VerificationInstance<DynProvider>,
    pub registry: NodeRegistry::NodeRegistryInstance<DynProvider>,
    pub token: GantryTestToken::GantryTestTokenInstance<DynProvider>,
    start_block: u64,
    token_info: OnceCell<TokenInfo>,
}

impl Chain {
    /// Connects, checks the chain id and finds the registry and token through the market
    /// when they were not given.
    pub async fn connect(
        rpc_url: &Url,
        contracts: Contracts,
        signer: Option<PrivateKeySigner>,
    ) -> Result<Self> {
        let provider = match &signer {
            Some(signer) => ProviderBuilder::new()
                .wallet(EthereumWallet::from(signer.clone()))
                .connect_http(rpc_url.clone())
                .erased(),
            None => ProviderBuilder::new()
                .connect_http(rpc_url.clone())
                .erased(),
        };
        let unavailable = |e: alloy::transports::TransportError| {
            CliError::Unavailable(format!(
                "the chain at {rpc_url} did not answer (--rpc-url, GANTRY_RPC_URL): {e}"
            ))
        };
        let chain_id = provider.get_chain_id().await.map_err(unavailable)?;
        if let Some(expected) = contracts.chain_id
            && expected != chain_id
        {
            return Err(CliError::usage(format!(
                "the RPC endpoint {rpc_url} is chain {chain_id}, the deployment says {expected}"
            )));
        }
        let market = JobMarket::new(contracts.market, provider.clone());
        // The node calls are served at the market's address.
        let registry = contracts.registry.unwrap_or(contracts.market);
        let token = match contracts.token {
            Some(address) => address,
            None => view("token", market.token()).await?,
        };
        Ok(Self {
            signer,
            chain_id,
            verification: Verification::new(contracts.market, provider.clone()),
            market,
            registry: NodeRegistry::new(registry, provider.clone()),
            token: GantryTestToken::new(token, provider.clone()),
            provider,
            start_block: contracts.start_block,
            token_info: OnceCell::new(),
        })
    }

    /// The signing account, or why a transaction cannot be sent.
    pub fn account(&self) -> Result<Address> {
        self.signer.as_ref().map(Signer::address).ok_or_else(|| {
            CliError::usage(
                "this command sends a transaction: set GANTRY_PRIVATE_KEY, or pass --key-file \
                 or --private-key",
            )
        })
    }

    /// The signing key itself, for what is signed off chain (the identity's message, key
    /// releases), or why there is none.
    pub fn wallet(&self) -> Result<&PrivateKeySigner> {
        self.account()?;
        Ok(self.signer.as_ref().expect("account() found the signer"))
    }

    /// The connection, for the runtime's readers (the job-key exchange).
    pub fn provider(&self) -> &DynProvider {
        &self.provider
    }

    /// Where the market's logs start.
    pub fn start_block(&self) -> u64 {
        self.start_block
    }

    /// The spec job `job_id` was posted with, as posted (its JobPosted event).
    pub async fn posted_spec(&self, job_id: u64) -> Result<Bytes> {
        let posted = gantry_runtime::market::of_job::<JobMarket::JobPosted, _>(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
            |e| e.jobId,
        )
        .await
        .map_err(|e| CliError::Unavailable(format!("reading job {job_id}'s spec: {e}")))?;
        posted
            .into_iter()
            .next()
            .map(|posted| posted.spec)
            .ok_or_else(|| CliError::NotFound(format!("job {job_id} does not exist")))
    }

    /// The account a read is about: `given`, else the signer's.
    pub fn account_or(&self, given: Option<Address>) -> Result<Address> {
        match given {
            Some(address) => Ok(address),
            None => self
                .account()
                .map_err(|_| CliError::usage("whose? pass --address, or set GANTRY_PRIVATE_KEY")),
        }
    }

    /// The token's decimals and symbol (read once).
    pub async fn token_info(&self) -> Result<&TokenInfo> {
        self.token_info
            .get_or_try_init(|| async {
                let decimals = view("decimals", self.token.decimals()).await?;
                let symbol = view("symbol", self.token.symbol()).await?;
                Ok(TokenInfo { decimals, symbol })
            })
            .await
    }

    pub async fn balance(&self, account: Address) -> Result<U256> {
        view("balanceOf", self.token.balanceOf(account)).await
    }

    pub async fn allowance(&self, owner: Address, spender: Address) -> Result<U256> {
        view("allowance", self.token.allowance(owner, spender)).await
    }

    /// The verification rules of the market's current policy (all zero where it offers
    /// no verified jobs).
    pub async fn verify_params(&self) -> Result<Verification::VerifyParams> {
        let version = view("policyVersion", self.market.policyVersion()).await?;
        view("verifyParams", self.verification.verifyParams(version)).await
    }

    pub async fn credit(&self, account: Address) -> Result<U256> {
        view("creditOf", self.market.creditOf(account)).await
    }

    /// The job's terms and state as the market holds them (folded from its logs and
    /// checked against its stored hash), or "not found" for an id never posted.
    pub async fn job(&self, job_id: u64) -> Result<market::Job> {
        read_job(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await
        .map_err(|e| match e {
            ReadJobError::NotPosted(_) => {
                CliError::NotFound(format!("job {job_id} does not exist"))
            }
            other => CliError::Unavailable(format!("reading job {job_id} from the chain: {other}")),
        })
    }

    /// Job `job_id`, refused before anything is sent unless its status is `needed`: the
    /// market would refuse the call (a settled job's state is gone from the chain, so it
    /// could only say "stale"); `only` says what the call needs and does.
    pub async fn job_in(&self, job_id: u64, needed: JobStatus, only: &str) -> Result<market::Job> {
        let job = self.job(job_id).await?;
        let status = job.state.status;
        if status != needed {
            return Err(CliError::Refused(format!(
                "job {job_id} is {}: {only}",
                status.as_str()
            )));
        }
        Ok(job)
    }

    /// The result hash and URI the job's node committed to, if it answered.
    pub async fn result(&self, job_id: u64) -> Result<Option<(B256, String)>> {
        read_result(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await
        .map_err(|e| CliError::Unavailable(format!("reading job {job_id}'s result: {e}")))
    }

    /// The node job `job_id` was last assigned to: a refereed job's provider.
    pub async fn provider_of(&self, job_id: u64) -> Result<Option<u64>> {
        gantry_runtime::market::read_last_assigned(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await
        .map_err(|e| CliError::Unavailable(format!("reading job {job_id}'s provider: {e}")))
    }

    /// A replicated job's verified result, once decided with a quorum: the digest it
    /// agreed on and where each of its paid seats uploaded the outcome (under its own id).
    pub async fn verified_result(&self, job_id: u64) -> Result<Option<(B256, Vec<String>)>> {
        let digest = gantry_runtime::market::read_verified(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await
        .map_err(|e| {
            CliError::Unavailable(format!("reading job {job_id}'s verified result: {e}"))
        })?;
        let Some(digest) = digest else {
            return Ok(None);
        };
        let paid = gantry_runtime::market::read_paid_replicas(
            &self.provider,
            *self.market.address(),
            self.start_block,
            job_id,
        )
        .await
        .map_err(|e| CliError::Unavailable(format!("reading job {job_id}'s paid seats: {e}")))?;
        let uris = paid
            .into_iter()
            .map(|node| gantry_protocol::names::verified_result_uri(self.chain_id, node, job_id))
            .collect();
        Ok(Some((digest, uris)))
    }

    /// The rules of policy `version` (the ones a job posted under keeps).
    pub async fn policy(&self, version: u32) -> Result<market::Policy> {
        let p = view("policy", self.market.policy(version)).await?;
        Ok(market::Policy {
            fee_bps: p.feeBps,
            challenge_window: p.challengeWindow,
            dispute_bond: p.disputeBond.to::<u128>(),
            dispute_period: p.disputePeriod,
            slash_bps: p.slashBps,
            max_attempts: p.maxAttempts,
        })
    }

    pub async fn market_params(&self) -> Result<JobMarket::MarketParams> {
        view("params", self.market.params()).await
    }

    /// Chain time of the newest block, seconds.
    pub async fn now(&self) -> Result<u64> {
        let block = self
            .provider
            .get_block(alloy::eips::BlockId::latest())
            .await
            .map_err(|e| CliError::Unavailable(format!("reading the latest block: {e}")))?
            .ok_or_else(|| CliError::Unavailable("the chain has no latest block".into()))?;
        Ok(block.header.timestamp)
    }

    /// Fails with `what exceeds your token balance …` when `account` holds less than
    /// `amount`, before anything is sent.
    pub async fn ensure_balance(&self, account: Address, amount: U256, what: &str) -> Result<()> {
        let balance = self.balance(account).await?;
        if balance < amount {
            let token = self.token_info().await?;
            return Err(CliError::Refused(format!(
                "{what} {} exceeds your token balance {}",
                token.show(amount),
                token.show(balance)
            )));
        }
        Ok(())
    }

    /// Approves `spender` for exactly `amount` when the allowance is short of it.
    pub async fn approve_if_short(&self, spender: Address, amount: U256) -> Result<Option<B256>> {
        let owner = self.account()?;
        if self.allowance(owner, spender).await? >= amount {
            return Ok(None);
        }
        let receipt = self
            .send("approve", self.token.approve(spender, amount))
            .await?;
        Ok(Some(receipt.transaction_hash))
    }

    /// `agent`'s EIP-712 consent to serve a node of `operator` (the `AgentConsent` the
    /// market checks at `register` and `setAgent`), with the agent's current nonce, valid
    /// for `valid_for` seconds of chain time. The digest is computed here from what the
    /// agent consents to, never asked of anyone.
    pub async fn consent(
        &self,
        agent: &PrivateKeySigner,
        operator: Address,
        valid_for: u64,
    ) -> Result<SignedConsent> {
        let nonce = view("agentNonce", self.registry.agentNonce(agent.address())).await?;
        let deadline = self.now().await? + valid_for;
        let digest = gantry_protocol::consent::digest(
            self.chain_id,
            *self.market.address(),
            operator,
            agent.address(),
            nonce,
            deadline,
        );
        let signature = agent
            .sign_hash(&digest)
            .await
            .map_err(|e| CliError::Other(format!("signing the agent's consent: {e}")))?;
        Ok(SignedConsent {
            nonce,
            deadline,
            signature: signature.as_bytes().to_vec().into(),
        })
    }

    /// Refuses, before anything is sent, a consent the market would refuse: past its
    /// deadline, or not `agent`'s signature of its consent to serve `operator` with its
    /// current nonce (a consent signed for another operator, or already used). An agent
    /// that is a contract (ERC-1271) is left to the market to check.
    pub async fn check_consent(
        &self,
        operator: Address,
        agent: Address,
        deadline: u64,
        signature: &Bytes,
    ) -> Result<()> {
        let now = self.now().await?;
        if deadline < now {
            return Err(CliError::Refused(format!(
                "the agent's consent expired at {}: it signs a new one (`gantry node consent`)",
                crate::units::format_time(deadline)
            )));
        }
        let code = self
            .provider
            .get_code_at(agent)
            .await
            .map_err(|e| CliError::Unavailable(format!("reading the agent's code: {e}")))?;
        if !code.is_empty() {
            return Ok(());
        }
        let nonce = view("agentNonce", self.registry.agentNonce(agent)).await?;
        let digest = gantry_protocol::consent::digest(
            self.chain_id,
            *self.market.address(),
            operator,
            agent,
            nonce,
            deadline,
        );
        let signer = alloy::primitives::Signature::from_raw(signature)
            .and_then(|signature| signature.recover_address_from_prehash(&digest));
        if signer.ok() != Some(agent) {
            return Err(CliError::Refused(format!(
                "{agent} did not consent to serve {operator}: that signature is not its consent \
                 to this operator with its current nonce {nonce} (signed for someone else, or \
                 used already); the agent signs a new one with `gantry node consent --operator \
                 {operator}`"
            )));
        }
        Ok(())
    }

    /// Whether `account` holds the market's arbiter role (decides disputes).
    pub async fn is_arbiter(&self, account: Address) -> Result<bool> {
        let role = view("ARBITER_ROLE", self.market.ARBITER_ROLE()).await?;
        view("hasRole", self.market.hasRole(role, account)).await
    }

    /// An EIP-2612 permit letting `spender` take `value` of the signer's tokens until
    /// `deadline`: `(v, r, s)`.
    /// The permit's signature and the token nonce it was signed for.
    pub async fn permit(
        &self,
        spender: Address,
        value: U256,
        deadline: U256,
    ) -> Result<(u8, B256, B256, U256)> {
        let signer = self
            .signer
            .as_ref()
            .ok_or_else(|| CliError::usage("a permit needs the signing key"))?;
        let owner = signer.address();
        let domain = view(
            "eip712Domain (the token must support EIP-2612 permits)",
            self.token.eip712Domain(),
        )
        .await?;
        let nonce = view("nonces", self.token.nonces(owner)).await?;
        let domain = Eip712Domain::new(
            Some(domain.name.into()),
            Some(domain.version.into()),
            Some(domain.chainId),
            Some(domain.verifyingContract),
            None,
        );
        let permit = Permit {
            owner,
            spender,
            value,
            nonce,
            deadline,
        };
        let signature = signer
            .sign_hash(&permit.eip712_signing_hash(&domain))
            .await
            .map_err(|e| CliError::Other(format!("signing the permit: {e}")))?;
        let v = 27 + u8::from(signature.v());
        Ok((v, signature.r().into(), signature.s().into(), nonce))
    }

    /// The token's permit nonce of the signing account now.
    pub async fn permit_nonce(&self) -> Result<U256> {
        let owner = self.account()?;
        view("nonces", self.token.nonces(owner)).await
    }

    /// Sends `builder` as `call` and waits for its receipt: the gas estimate (a fifth of
    /// margin) is where a revert shows, decoded into a sentence.
    pub async fn send<C: SolCall>(
        &self,
        call: &'static str,
        builder: CallBuilder<&DynProvider, PhantomData<C>>,
    ) -> Result<TransactionReceipt> {
        let gas = self.estimate(call, &builder).await?;
        self.send_estimated(call, builder, gas).await
    }

    /// The gas `builder` takes, from the node's simulation: where a revert shows, decoded
    /// into a sentence. Nothing is sent.
    pub async fn estimate<C: SolCall>(
        &self,
        call: &'static str,
        builder: &CallBuilder<&DynProvider, PhantomData<C>>,
    ) -> Result<u64> {
        self.account()?;
        match builder.estimate_gas().await {
            Ok(gas) => Ok(gas),
            Err(error) => Err(self.refusal(call, error).await),
        }
    }

    /// [`Chain::send`] with the gas estimated already.
    pub async fn send_estimated<C: SolCall>(
        &self,
        call: &'static str,
        builder: CallBuilder<&DynProvider, PhantomData<C>>,
        gas: u64,
    ) -> Result<TransactionReceipt> {
        let pending = match builder
            .gas(gantry_protocol::market::gas_limit(gas))
            .send()
            .await
        {
            Ok(pending) => pending,
            Err(error) => return Err(self.refusal(call, error).await),
        };
        let wait = gantry_runtime::tx::Wait {
            timeout: RECEIPT_TIMEOUT,
            ..Default::default()
        };
        let tx = *pending.tx_hash();
        let receipt = gantry_runtime::tx::mined(&self.provider, tx, wait)
            .await
            .map_err(|unmined| match unmined {
                // Nothing happened on chain: safe to send again.
                gantry_runtime::tx::Unmined::Dropped(_) => CliError::Refused(format!(
                    "{call}: {unmined}: nothing was done; send it again"
                )),
                unmined => CliError::Unavailable(format!(
                    "{call}: waiting for the receipt: {unmined}: check it before sending again"
                )),
            })?;
        if !receipt.status() {
            return Err(CliError::Refused(format!(
                "{call}: transaction {} reverted",
                receipt.transaction_hash
            )));
        }
        Ok(receipt)
    }

    /// Waits until `confirmations` blocks hold the transaction of `receipt` (its own
    /// included; 1 or less returns `receipt` as it is), then reads its receipt again: the
    /// one on the chain as it now stands, which a reorganisation may have moved to another
    /// block (with other events) or dropped, which is refused with what to do.
    pub async fn confirmed(
        &self,
        call: &'static str,
        receipt: TransactionReceipt,
        confirmations: u64,
    ) -> Result<TransactionReceipt> {
        if confirmations <= 1 {
            return Ok(receipt);
        }
        let tx = receipt.transaction_hash;
        let mined_in = receipt.block_number.unwrap_or_default();
        let target = mined_in + confirmations - 1;
        let wait = async {
            loop {
                let head = self.provider.get_block_number().await.map_err(|e| {
                    CliError::Unavailable(format!("{call}: waiting for confirmations: {e}"))
                })?;
                if head >= target {
                    return Ok::<_, CliError>(());
                }
                tokio::time::sleep(CONFIRMATION_POLL).await;
            }
        };
        eprintln!(
            "{call}: transaction {tx} mined in block {mined_in}; waiting for {confirmations} \
             confirmations (block {target})"
        );
        tokio::time::timeout(RECEIPT_TIMEOUT * confirmations as u32, wait)
            .await
            .map_err(|_| {
                CliError::Unavailable(format!(
                    "{call}: transaction {tx} mined in block {mined_in}, but the chain did not \
                     reach block {target} in time: check it before sending again"
                ))
            })??;
        let now = self
            .provider
            .get_transaction_receipt(tx)
            .await
            .map_err(|e| {
                CliError::Unavailable(format!("{call}: reading the receipt again: {e}"))
            })?;
        let Some(now) = now else {
            return Err(CliError::Refused(format!(
                "{call}: transaction {tx} was mined in block {mined_in} but a reorganisation \
                 dropped it: nothing was done; send it again"
            )));
        };
        if !now.status() {
            return Err(CliError::Refused(format!(
                "{call}: transaction {tx} reverted after a reorganisation moved it to block {}",
                now.block_number.unwrap_or_default()
            )));
        }
        Ok(now)
    }

    /// Sends the call `builder` makes of `job`'s terms and state, packed as the market
    /// takes them (see [`Chain::send`]).
    pub async fn send_on<'a, C: SolCall>(
        &'a self,
        call: &'static str,
        job: &market::Job,
        builder: impl FnOnce(
            JobMarket::JobTerms,
            JobMarket::JobState,
        ) -> CallBuilder<&'a DynProvider, PhantomData<C>>,
    ) -> Result<TransactionReceipt> {
        self.send(call, builder(job.terms.pack(), job.state.pack()))
            .await
    }

    async fn refusal(&self, call: &'static str, error: alloy::contract::Error) -> CliError {
        let fallback = TokenInfo {
            decimals: 0,
            symbol: "base units".into(),
        };
        let token = self.token_info().await.cloned().unwrap_or(fallback);
        if let Some(explained) = revert::explain(call, &error, &token) {
            return explained;
        }
        match error {
            alloy::contract::Error::TransportError(e) if e.as_error_resp().is_some() => {
                CliError::Refused(format!("{call} refused: {e}"))
            }
            other => CliError::Unavailable(format!("{call}: {other}")),
        }
    }
}

/// The event `E` that `receipt` must hold.
pub fn logged<E: SolEvent>(receipt: &TransactionReceipt) -> Result<E> {
    let name = gantry_protocol::events::event_name::<E>();
    receipt
        .decoded_log::<E>()
        .map(|log| log.data)
        .ok_or_else(|| CliError::Other(format!("the receipt has no {name} log")))
}

/// Calls the view function `builder` calls; a failure reads as "reading `what` from the
/// chain".
async fn view<C: SolCall>(
    what: &str,
    builder: CallBuilder<&DynProvider, PhantomData<C>>,
) -> Result<C::Return> {
    builder
        .call()
        .await
        .map_err(|error| CliError::Unavailable(format!("reading {what} from the chain: {error}")))
}
