//! A network built to a test's order (as reth's `e2e-test-utils` setup builder): a fresh
//! chain with the market deployed, and beside it what the test asks for, each on a free
//! port, all stopped when the [`TestNet`] drops.
//!
//! ```text
//!   TestNet::builder()
//!     .deploy_params(f)    anvil + the market, deployed with f(DeployParams::dev)  (always)
//!     .nats()              nats-server with JetStream
//!     .handshake(ttl)      …instead, from deploy/nats/ with the users of nats_auth and
//!                          gantry_auth answering the callout: workers join by handshake
//!     .indexer()           gantry_indexer::run in this process (and nats)
//!     .matcher(account)    gantry_matcher::run_matcher in this process (role granted)
//!     .keeper(account)     gantry_matcher::run_liveness in this process
//!     .image(tag)          a private dockerd with the busybox job image as `tag`
//!     .postgres()          a private PostgreSQL cluster
//!     .start().await ──▶ TestNet: devnet, nats(), dockerd(), docker(), postgres(),
//!                        the chain helpers, wait_until   ── Drop stops everything
//! ```
//!
//! A crate's own processes (the services as binaries, killed and restarted by its tests)
//! stay in its harness, on top of a `TestNet`.

use gantry_runtime::args::ChainArgs;
use std::fmt;
use std::future::Future;
use std::path::Path;
use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use alloy::providers::DynProvider;
use alloy::signers::local::PrivateKeySigner;
use anyhow::Context;
use async_nats::jetstream;
use gantry_matcher::config::{Common, LivenessConfig, MatcherConfig, Secret};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::market::Job;
use gantry_protocol::names;
use gantry_protocol::status::JobStatus;
use tokio_util::sync::CancellationToken;

use crate::accounts::{ADMIN, OTHER, SUBMITTER};
use crate::nats_cluster::{ConfiguredNats, NatsConfig};
use crate::{
    DeployParams, Deployment, Devnet, Dockerd, GUSD, JobPost, NatsServer, PATIENCE, Postgres,
    confirm_receipt, import_busybox, wait, worker_config,
};

type Configure<T> = Box<dyn FnOnce(T) -> T + Send>;

/// What a [`TestNet`] starts; from [`TestNet::builder`].
pub struct TestNetBuilder {
    deploy_params: Configure<DeployParams>,
    nats: bool,
    /// With the production config and the auth service: credentials' time to live, s.
    handshake: Option<u64>,
    indexer: Option<IndexerStart>,
    indexer_config: Configure<gantry_indexer::Config>,
    matcher: Option<usize>,
    matcher_config: Configure<MatcherConfig>,
    keeper: Option<usize>,
    matcher_roles: Vec<usize>,
    docker: bool,
    images: Vec<String>,
    postgres: bool,
    patience: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IndexerStart {
    Now,
    Later,
}

impl fmt::Debug for TestNetBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestNetBuilder")
            .field("nats", &self.nats)
            .field("indexer", &self.indexer)
            .field("matcher", &self.matcher)
            .field("keeper", &self.keeper)
            .field("matcher_roles", &self.matcher_roles)
            .field("docker", &self.docker)
            .field("images", &self.images)
            .field("postgres", &self.postgres)
            .field("patience", &self.patience)
            .finish_non_exhaustive()
    }
}

impl TestNetBuilder {
    /// Deploys with the dev parameters as changed by `configure` (shorter windows, …).
    pub fn deploy_params(
        mut self,
        configure: impl FnOnce(DeployParams) -> DeployParams + Send + 'static,
    ) -> Self {
        self.deploy_params = Box::new(configure);
        self
    }

    /// A nats-server with JetStream.
    pub fn nats(mut self) -> Self {
        self.nats = true;
        self
    }

    /// NATS as in production: the server run from `deploy/nats/nats-server.conf` with the
    /// users `gantry_protocol::nats_auth` renders (no worker among them), each service
    /// connecting as its own user, and `gantry_auth` answering the callout with
    /// credentials that last `ttl_secs`: workers join by the handshake alone.
    pub fn handshake(mut self, ttl_secs: u64) -> Self {
        self.handshake = Some(ttl_secs);
        self.nats()
    }

    /// The indexer, running in this process from the start (NATS too).
    pub fn indexer(mut self) -> Self {
        self.indexer = Some(IndexerStart::Now);
        self.nats()
    }

    /// The indexer, configured but started only by [`TestNet::start_indexer`] (NATS too).
    pub fn indexer_later(mut self) -> Self {
        self.indexer = Some(IndexerStart::Later);
        self.nats()
    }

    /// Changes the indexer's config ([`gantry_indexer::Config::local`] by default).
    pub fn indexer_config(
        mut self,
        configure: impl FnOnce(gantry_indexer::Config) -> gantry_indexer::Config + Send + 'static,
    ) -> Self {
        self.indexer_config = Box::new(configure);
        self
    }

    /// The matcher, running in this process and signing as `account`, which is granted
    /// the matcher role unless it is the admin (NATS too).
    pub fn matcher(mut self, account: usize) -> Self {
        self.matcher = Some(account);
        self.matcher_role(account).nats()
    }

    /// Changes the matcher's config ([`MatcherConfig::local`], receipts polled every
    /// 20 ms, by default).
    pub fn matcher_config(
        mut self,
        configure: impl FnOnce(MatcherConfig) -> MatcherConfig + Send + 'static,
    ) -> Self {
        self.matcher_config = Box::new(configure);
        self
    }

    /// The liveness keeper, running in this process and paying from `account`, with a
    /// 1 s lease (NATS too).
    pub fn keeper(mut self, account: usize) -> Self {
        self.keeper = Some(account);
        self.nats()
    }

    /// Grants `account` the market's matcher role (the admin holds it already).
    pub fn matcher_role(mut self, account: usize) -> Self {
        if account != ADMIN && !self.matcher_roles.contains(&account) {
            self.matcher_roles.push(account);
        }
        self
    }

    /// A private Docker engine ([`Dockerd`]).
    pub fn docker(mut self) -> Self {
        self.docker = true;
        self
    }

    /// The busybox job image imported as `tag` ([`import_busybox`]) into a private Docker
    /// engine.
    pub fn image(mut self, tag: &str) -> Self {
        self.images.push(tag.to_owned());
        self.docker()
    }

    /// A private PostgreSQL cluster ([`Postgres`]).
    pub fn postgres(mut self) -> Self {
        self.postgres = true;
        self
    }

    /// How long [`TestNet::wait_until`] waits ([`PATIENCE`] by default).
    pub fn patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Starts everything asked for; what has started stops again if a later part fails.
    pub async fn start(self) -> anyhow::Result<TestNet> {
        let devnet = Devnet::start_with(self.deploy_params)
            .await
            .context("starting anvil and deploying the market")?;
        let (nats, secured) = match (self.nats, self.handshake) {
            (false, _) => (None, None),
            (true, None) => (
                Some(NatsServer::start().context("starting nats-server")?),
                None,
            ),
            (true, Some(ttl)) => {
                let config =
                    NatsConfig::render("nats-server.conf", devnet.deployment.chain_id, &[])
                        .context("rendering the NATS config")?;
                let server = ConfiguredNats::start(&config).context("starting nats-server")?;
                (
                    None,
                    Some(Secured {
                        config,
                        server,
                        ttl,
                    }),
                )
            }
        };
        let (dockerd, docker) = if self.docker {
            let (dockerd, docker) = start_docker(&self.images).await?;
            (Some(dockerd), Some(docker))
        } else {
            (None, None)
        };
        let postgres = if self.postgres {
            let started = tokio::task::spawn_blocking(Postgres::start).await?;
            Some(started.context("starting PostgreSQL")?)
        } else {
            None
        };
        for account in &self.matcher_roles {
            devnet
                .grant_matcher_role(devnet.address(*account))
                .await
                .with_context(|| format!("granting account {account} the matcher role"))?;
        }
        let indexer_url = match (&nats, &secured) {
            (Some(nats), _) => Some(nats.url()),
            (None, Some(secured)) => Some(secured.url_as("indexer")),
            (None, None) => None,
        };
        let indexer_config =
            indexer_url.map(|url| (self.indexer_config)(devnet.indexer_config(url)));
        let net = TestNet {
            devnet,
            nats,
            secured,
            dockerd,
            docker,
            postgres,
            indexer_config,
            services: CancellationToken::new(),
            patience: self.patience,
            dir: tempfile::tempdir().context("creating a scratch folder")?,
        };
        if let Some(secured) = &net.secured {
            let auth = gantry_auth::bind(net.auth_config(secured))
                .await
                .context("starting the auth service")?;
            tokio::spawn(auth.serve(net.shutdown()));
        }
        if self.indexer == Some(IndexerStart::Now) {
            net.start_indexer();
        }
        if let Some(account) = self.matcher {
            let config = (self.matcher_config)(net.matcher_config(account));
            tokio::spawn(gantry_matcher::run_matcher(config, net.shutdown()));
        }
        if let Some(account) = self.keeper {
            let config = net.keeper_config(account);
            tokio::spawn(gantry_matcher::run_liveness(config, net.shutdown()));
        }
        Ok(net)
    }
}

/// A private dockerd with the busybox image imported as each of `images`.
async fn start_docker(images: &[String]) -> anyhow::Result<(Dockerd, bollard::Docker)> {
    let dockerd = tokio::task::spawn_blocking(Dockerd::start)
        .await?
        .context("starting dockerd")?;
    let docker = dockerd.client().await.context("connecting to dockerd")?;
    for tag in images {
        import_busybox(&docker, tag)
            .await
            .with_context(|| format!("importing the busybox image as {tag}"))?;
    }
    Ok((dockerd, docker))
}

/// A running test network (see the [module docs](self)); everything in it stops on drop.
/// Its helpers panic with a sentence when the chain or NATS refuses: they are for tests.
#[derive(Debug)]
pub struct TestNet {
    /// The chain with the market deployed.
    pub devnet: Devnet,
    nats: Option<NatsServer>,
    /// NATS as in production, when built with [`TestNetBuilder::handshake`].
    secured: Option<Secured>,
    dockerd: Option<Dockerd>,
    docker: Option<bollard::Docker>,
    postgres: Option<Postgres>,
    /// With NATS: the indexer's config, whether it runs or not.
    indexer_config: Option<gantry_indexer::Config>,
    /// Stops the services running in this process.
    services: CancellationToken,
    patience: Duration,
    dir: tempfile::TempDir,
}

impl Drop for TestNet {
    fn drop(&mut self) {
        self.services.cancel();
    }
}

impl TestNet {
    /// A builder that starts the chain and nothing else until asked.
    pub fn builder() -> TestNetBuilder {
        TestNetBuilder {
            deploy_params: Box::new(|params| params),
            nats: false,
            handshake: None,
            indexer: None,
            indexer_config: Box::new(|config| config),
            matcher: None,
            matcher_config: Box::new(|config| config),
            keeper: None,
            matcher_roles: Vec::new(),
            docker: false,
            images: Vec::new(),
            postgres: false,
            patience: PATIENCE,
        }
    }

    /// The NATS server; panics if the net was built without [`TestNetBuilder::nats`] (or
    /// with [`TestNetBuilder::handshake`]: [`Self::nats_url_as`]).
    pub fn nats(&self) -> &NatsServer {
        self.nats
            .as_ref()
            .expect("the test net was started without .nats(), or with .handshake()")
    }

    /// NATS's URL as `user` (`indexer`, `matcher`, `admin`, …): with its password when
    /// the net runs the production config, the plain URL otherwise.
    pub fn nats_url_as(&self, user: &str) -> String {
        match &self.secured {
            Some(secured) => secured.url_as(user),
            None => self.nats().url(),
        }
    }

    /// NATS's URL without credentials: what a worker joining by the handshake is given.
    pub fn nats_url(&self) -> String {
        match &self.secured {
            Some(secured) => secured.server.url(),
            None => self.nats().url(),
        }
    }

    /// The production NATS config and its server, when built with
    /// [`TestNetBuilder::handshake`].
    pub fn secured_nats(&self) -> Option<(&NatsConfig, &ConfiguredNats)> {
        self.secured.as_ref().map(|s| (&s.config, &s.server))
    }

    /// The auth service's config for this chain and the production NATS: what
    /// [`TestNetBuilder::handshake`] starts.
    fn auth_config(&self, secured: &Secured) -> gantry_auth::Config {
        gantry_auth::Config {
            chain: self.devnet.chain_args(),
            nats: gantry_runtime::args::NatsArgs::local(secured.url_as("auth")),
            callout_url: secured.url_as(gantry_protocol::nats_auth::CALLOUT_USER),
            issuer_seed: Some(Secret::new(secured.config.issuer_seed())),
            issuer_seed_file: None,
            ttl_secs: secured.ttl,
            concurrency: 16,
            instance: Default::default(),
        }
    }

    pub fn nats_mut(&mut self) -> &mut NatsServer {
        self.nats
            .as_mut()
            .expect("the test net was started without .nats()")
    }

    /// The private Docker engine; panics if the net was built without Docker.
    pub fn dockerd(&self) -> &Dockerd {
        self.dockerd
            .as_ref()
            .expect("the test net was started without .docker()")
    }

    pub fn dockerd_mut(&mut self) -> &mut Dockerd {
        self.dockerd
            .as_mut()
            .expect("the test net was started without .docker()")
    }

    /// A client of the private Docker engine.
    pub fn docker(&self) -> &bollard::Docker {
        self.docker
            .as_ref()
            .expect("the test net was started without .docker()")
    }

    /// The PostgreSQL cluster; panics if the net was built without it.
    pub fn postgres(&self) -> &Postgres {
        self.postgres
            .as_ref()
            .expect("the test net was started without .postgres()")
    }

    /// A scratch folder, removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn chain_id(&self) -> u64 {
        self.devnet.deployment.chain_id
    }

    pub fn deployment(&self) -> Deployment {
        self.devnet.deployment
    }

    /// The address of anvil's account `account`.
    pub fn address(&self, account: usize) -> Address {
        self.devnet.address(account)
    }

    /// A provider signing as anvil's account `account`.
    pub fn provider(&self, account: usize) -> DynProvider {
        self.devnet.provider(account)
    }

    /// The market, signing as `account`.
    pub fn market(&self, account: usize) -> JobMarket::JobMarketInstance<DynProvider> {
        self.devnet.market(account)
    }

    /// The registry, signing as `account`.
    pub fn registry(&self, account: usize) -> NodeRegistry::NodeRegistryInstance<DynProvider> {
        self.devnet.registry(account)
    }

    /// A token cancelled when the net drops, for services a harness runs in this process.
    pub fn shutdown(&self) -> CancellationToken {
        self.services.child_token()
    }

    /// The indexer's config: [`gantry_indexer::Config::local`] for this chain and NATS,
    /// as the builder's `indexer_config` changed it.
    pub fn indexer_config(&self) -> gantry_indexer::Config {
        self.indexer_config
            .clone()
            .expect("the test net was started without .nats()")
    }

    /// Starts the indexer in this process (it stops when the net drops).
    pub fn start_indexer(&self) {
        tokio::spawn(gantry_indexer::run(self.indexer_config(), self.shutdown()));
    }

    /// A JetStream context on a fresh connection.
    pub async fn jetstream(&self) -> jetstream::Context {
        jetstream::new(
            gantry_runtime::nats::connect(&self.nats_url_as("admin"), false)
                .await
                .expect("nats connects"),
        )
    }

    /// Creates the workers' jobs stream, as a worker does.
    pub async fn create_jobs_stream(&self) {
        let chain_id = self.chain_id();
        self.jetstream()
            .await
            .create_stream(jetstream::stream::Config {
                name: names::jobs_stream_name(chain_id),
                subjects: vec![names::jobs_stream_subjects(chain_id)],
                ..Default::default()
            })
            .await
            .expect("the jobs stream is created");
    }

    /// Publishes `payload` to a stream's `subject`; returns its stream sequence.
    pub async fn publish(&self, subject: String, payload: Vec<u8>) -> u64 {
        self.jetstream()
            .await
            .publish(subject, payload.into())
            .await
            .expect("published")
            .await
            .expect("acknowledged")
            .sequence
    }

    /// The top of a worker's config file for a worker rooted at `root`, on this chain, NATS
    /// and Docker engine (see [`worker_config`]). Without Docker (a net for WASM workers)
    /// the socket names nothing: a worker serving only WASM never connects to it.
    pub fn worker_config(&self, root: &Path) -> String {
        let socket = match &self.dockerd {
            Some(dockerd) => dockerd.socket().to_path_buf(),
            None => root.join("no-docker.sock"),
        };
        worker_config(&self.devnet, &self.nats_url(), &socket, root)
    }

    /// Mints `amount` (base units) to `account` and lets `spender` take all of its tokens.
    pub async fn fund(&self, account: usize, spender: Address, amount: u64) {
        self.devnet
            .fund(account, spender, U256::from(amount))
            .await
            .unwrap_or_else(|e| panic!("funding account {account}: {e}"));
    }

    /// Funds the [`SUBMITTER`] with 1,000,000 gUSD for the market.
    pub async fn fund_submitter(&self) {
        self.fund(SUBMITTER, self.devnet.deployment.market, 1_000_000 * GUSD)
            .await;
    }

    /// Registers a node of `operator` served by `agent` (an anvil account, which signs
    /// its consent) with `stake` (base units, minted to the operator first); returns its id.
    pub async fn register_node(
        &self,
        operator: usize,
        agent: Address,
        capabilities: NodeRegistry::NodeCapabilities,
        stake: u64,
    ) -> u64 {
        let agent = self
            .devnet
            .signer_of(agent)
            .unwrap_or_else(|| panic!("agent {agent} is not an anvil account"));
        self.register_node_with(operator, &agent, capabilities, stake)
            .await
    }

    /// As [`register_node`](Self::register_node), with any agent key.
    pub async fn register_node_with(
        &self,
        operator: usize,
        agent: &PrivateKeySigner,
        capabilities: NodeRegistry::NodeCapabilities,
        stake: u64,
    ) -> u64 {
        self.fund(operator, self.devnet.deployment.registry, stake)
            .await;
        self.devnet
            .register(operator, agent, capabilities, stake)
            .await
            .unwrap_or_else(|e| panic!("registering a node of account {operator}: {e}"))
    }

    /// Registers a node that `account` operates and serves itself, with 500 gUSD stake;
    /// returns its id.
    pub async fn register_own_node(
        &self,
        account: usize,
        capabilities: NodeRegistry::NodeCapabilities,
    ) -> u64 {
        self.register_node(account, self.address(account), capabilities, 500 * GUSD)
            .await
    }

    /// Three WASM nodes, one of each of `NODES[1..]`'s operators (each its own agent),
    /// synced into the verification pool (its whole membership): their ids, in the order
    /// of the accounts.
    pub async fn wasm_pool(&self) -> Vec<u64> {
        let wasm = NodeRegistry::NodeCapabilities {
            cpuCores: 4,
            ramMiB: 8_192,
            maxConcurrentJobs: 1,
            engines: gantry_protocol::eligibility::Engines::WASM.0,
            ..Default::default()
        };
        let mut nodes = Vec::new();
        for account in &crate::accounts::NODES[1..] {
            nodes.push(self.register_own_node(*account, wasm.clone()).await);
        }
        confirm_receipt(
            "syncPool",
            self.registry(OTHER).syncPool(nodes.clone()).send().await,
        )
        .await
        .unwrap_or_else(|e| panic!("syncing the pool: {e}"));
        nodes
    }

    /// A replicated 3/2 job posted by the submitter (as [`post_verified`](Self::post_verified)).
    pub async fn post_replicated(&self) -> u64 {
        self.post_verified(gantry_protocol::market::Verification::REPLICATED, 3, 2)
            .await
    }

    /// A verified job of `tier` (n or r = `size`, k = `quorum`) posted by the submitter
    /// (funded: 5 gUSD a seat, 600 s to run, an hour to its deadline, a 60 s reveal
    /// window, any node price): its id.
    pub async fn post_verified(&self, tier: u8, size: u8, quorum: u8) -> u64 {
        self.post_verified_spec(tier, size, quorum, br#"{"v":2,"engine":"wasm"}"#.to_vec())
            .await
    }

    /// [`post_verified`](Self::post_verified) with the spec `spec` (posted as given), for
    /// the engine it names (WASM when it cannot be read).
    pub async fn post_verified_spec(&self, tier: u8, size: u8, quorum: u8, spec: Vec<u8>) -> u64 {
        use alloy::primitives::aliases::{U40, U96};
        use gantry_protocol::bindings::Verification;
        use gantry_protocol::spec::{Engine, JobSpec};

        self.fund_submitter().await;
        let engine = JobSpec::from_slice(&spec).map_or(Engine::Wasm, |s| s.engine);
        let requirements = Verification::JobRequirements {
            minCpuCores: 1,
            minRamMiB: 64,
            maxRuntime: 600,
            priority: 5,
            engine: engine.code(),
            maxPricePerGpuHour: U96::MAX,
            ..Default::default()
        };
        let policy = Verification::VerifyPolicy {
            tier,
            size,
            quorum,
            revealWindow: 60,
        };
        let receipt = confirm_receipt(
            "postVerifiedJob",
            Verification::new(self.devnet.deployment.market, self.provider(SUBMITTER))
                .postVerifiedJob(
                    requirements,
                    policy,
                    U96::from(5 * GUSD),
                    U40::from(self.now().await + 3_600),
                    spec.into(),
                )
                .send()
                .await,
        )
        .await
        .unwrap_or_else(|e| panic!("posting a verified job: {e}"));
        receipt
            .decoded_log::<JobMarket::JobPosted>()
            .expect("JobPosted")
            .jobId
    }

    /// A refereed 3-job of the submitter's, placed by the matcher on a WASM node of
    /// `NODES[1]`'s and answered with the seal of `digest` (salt: keccak256("salt")):
    /// (node, job). Its challenge window is open.
    pub async fn answered_refereed(&self, digest: B256) -> (u64, u64) {
        self.answered_refereed_at(digest, |_| "gantry://results/r".into())
            .await
    }

    /// [`answered_refereed`](Self::answered_refereed) with the result URI `uri(node)`.
    pub async fn answered_refereed_at(
        &self,
        digest: B256,
        uri: impl Fn(u64) -> String,
    ) -> (u64, u64) {
        use gantry_protocol::bindings::Referees;
        use gantry_protocol::market::{PROVIDER_SEAT, Verification, seal};

        let wasm = NodeRegistry::NodeCapabilities {
            cpuCores: 4,
            ramMiB: 8_192,
            maxConcurrentJobs: 1,
            engines: gantry_protocol::eligibility::Engines::WASM.0,
            ..Default::default()
        };
        let provider_account = crate::accounts::NODES[1];
        let node = self.register_own_node(provider_account, wasm).await;
        let id = self.post_verified(Verification::REFEREED, 3, 0).await;
        let market = self.devnet.deployment.market;
        let job = self.job(id).await;
        let state =
            |job: &Job| Referees::VerifiedState::from(job.state.pack_verified().expect("verified"));
        confirm_receipt(
            "assignRefereed",
            Referees::new(market, self.provider(crate::accounts::MATCHER))
                .assignRefereed(id, node, job.terms.pack().into(), state(&job))
                .send()
                .await,
        )
        .await
        .unwrap_or_else(|e| panic!("placing job {id}: {e}"));
        let job = self.job(id).await;
        let sealed = seal(
            self.chain_id(),
            market,
            id,
            PROVIDER_SEAT,
            node,
            digest,
            alloy::primitives::keccak256("salt"),
        );
        confirm_receipt(
            "submitRefereedResult",
            Referees::new(market, self.provider(provider_account))
                .submitRefereedResult(id, job.terms.pack().into(), state(&job), sealed, uri(node))
                .send()
                .await,
        )
        .await
        .unwrap_or_else(|e| panic!("answering job {id}: {e}"));
        (node, id)
    }

    /// Runs replicated job `id` on the pool's nodes `nodes` (`wasm_pool`'s) to its
    /// decision, as their workers and a keeper would: the round drawn, each seat's agent
    /// committing and revealing `digest(node)`, the reveals opened and the job decided.
    pub async fn decide_replicated(&self, id: u64, nodes: &[u64], digest: impl Fn(u64) -> B256) {
        self.draw(id).await;
        self.commit_seats(id, nodes, &digest).await;
        self.open_reveals(id).await;
        self.reveal_seats(id, nodes, &digest).await;
        self.decide(id).await;
    }

    /// Draws verified job `id`'s armed round as anyone may (two blocks mined first, so
    /// that its draw block is there).
    pub async fn draw(&self, id: u64) {
        use alloy::providers::Provider;

        self.provider(OTHER)
            .raw_request::<_, ()>("anvil_mine".into(), (U256::from(2),))
            .await
            .expect("anvil mines");
        let job = self.job(id).await;
        confirm_receipt(
            "draw",
            self.anyone_verification()
                .draw(
                    id,
                    job.terms.pack().into(),
                    job.state.pack_verified().expect("verified"),
                )
                .gas(1_000_000)
                .send()
                .await,
        )
        .await
        .unwrap_or_else(|e| panic!("drawing job {id}: {e}"));
    }

    /// Opens replicated job `id`'s reveals as anyone may (its seats as they stand).
    pub async fn open_reveals(&self, id: u64) {
        let job = self.job(id).await;
        confirm_receipt(
            "openReveals",
            self.anyone_verification()
                .openReveals(
                    id,
                    job.terms.pack().into(),
                    job.state.pack_verified().expect("verified"),
                    self.seats(id).await.list(3),
                )
                .send()
                .await,
        )
        .await
        .unwrap_or_else(|e| panic!("opening job {id}'s reveals: {e}"));
    }

    /// Decides replicated job `id` as anyone may (its seats as they stand).
    pub async fn decide(&self, id: u64) {
        let job = self.job(id).await;
        confirm_receipt(
            "decide",
            self.anyone_verification()
                .decide(
                    id,
                    job.terms.pack().into(),
                    job.state.pack_verified().expect("verified"),
                    self.seats(id).await.list(3),
                )
                .send()
                .await,
        )
        .await
        .unwrap_or_else(|e| panic!("deciding job {id}: {e}"));
    }

    /// The `Verification` extension as anyone (`OTHER`) calls it: its calls are
    /// permissionless.
    fn anyone_verification(
        &self,
    ) -> gantry_protocol::bindings::Verification::VerificationInstance<DynProvider> {
        gantry_protocol::bindings::Verification::new(
            self.devnet.deployment.market,
            self.provider(OTHER),
        )
    }

    /// The account serving pool node `node` (`wasm_pool`'s `nodes`: `NODES[1..]` in order).
    fn pool_agent(nodes: &[u64], node: u64) -> usize {
        crate::accounts::NODES[1 + nodes.iter().position(|n| *n == node).expect("a pool node")]
    }

    /// The salt seat `seat` seals its digest with in these helpers.
    fn seat_salt(seat: u8) -> B256 {
        alloy::primitives::keccak256(format!("salt {seat}"))
    }

    /// Each of job `id`'s three seats commits, as its node's agent (`wasm_pool`'s `nodes`),
    /// the seal of `digest(node)`.
    pub async fn commit_seats(&self, id: u64, nodes: &[u64], digest: impl Fn(u64) -> B256) {
        use gantry_protocol::bindings::Verification;
        let market = self.devnet.deployment.market;
        for (i, seat) in (0u8..).zip(self.seats(id).await.0.iter().take(3)) {
            let sealed = gantry_protocol::market::seal(
                self.chain_id(),
                market,
                id,
                i,
                seat.node_id,
                digest(seat.node_id),
                Self::seat_salt(i),
            );
            confirm_receipt(
                "commitSeat",
                Verification::new(market, self.provider(Self::pool_agent(nodes, seat.node_id)))
                    .commitSeat(id, i, seat.pack(), sealed)
                    .send()
                    .await,
            )
            .await
            .unwrap_or_else(|e| panic!("committing seat {i}: {e}"));
        }
    }

    /// Each of job `id`'s three seats (committed by [`commit_seats`](Self::commit_seats))
    /// opens its seal of `digest(node)`, in the reveal phase.
    pub async fn reveal_seats(&self, id: u64, nodes: &[u64], digest: impl Fn(u64) -> B256) {
        use gantry_protocol::bindings::Verification;
        let market = self.devnet.deployment.market;
        let job = self.job(id).await;
        for (i, seat) in (0u8..).zip(self.seats(id).await.0.iter().take(3)) {
            confirm_receipt(
                "revealSeat",
                Verification::new(market, self.provider(Self::pool_agent(nodes, seat.node_id)))
                    .revealSeat(
                        id,
                        job.terms.pack().into(),
                        job.state.pack_verified().expect("verified"),
                        i,
                        seat.pack(),
                        digest(seat.node_id),
                        Self::seat_salt(i),
                    )
                    .send()
                    .await,
            )
            .await
            .unwrap_or_else(|e| panic!("revealing seat {i}: {e}"));
        }
    }

    /// Posts `job` as `account`, funded for it; returns the job id.
    pub async fn post_job(&self, account: usize, job: JobPost) -> u64 {
        self.devnet
            .post_job(account, job)
            .await
            .unwrap_or_else(|e| panic!("posting a job as account {account}: {e}"))
    }

    /// Job `id`'s terms and state as the market holds them (folded from its logs and
    /// checked against the stored hash).
    pub async fn job(&self, id: u64) -> Job {
        self.devnet
            .job(id)
            .await
            .unwrap_or_else(|e| panic!("reading job {id}: {e}"))
    }

    /// Verified job `id`'s seats, folded (`market::Seats`) from its logs as the market
    /// wrote their words.
    pub async fn seats(&self, id: u64) -> gantry_protocol::market::Seats {
        use alloy::providers::Provider;
        use alloy::sol_types::SolEventInterface;
        let terms = self.job(id).await.terms;
        let logs = self
            .provider(ADMIN)
            .get_logs(
                &alloy::rpc::types::Filter::new()
                    .address(self.devnet.deployment.market)
                    .topic1(B256::from(U256::from(id)))
                    .from_block(self.devnet.deployment.start_block),
            )
            .await
            .unwrap_or_else(|e| panic!("reading job {id}'s logs: {e}"));
        let mut seats = gantry_protocol::market::Seats::default();
        for log in &logs {
            if let Ok(event) = JobMarket::JobMarketEvents::decode_log(&log.inner) {
                seats.apply(&terms, &event.data);
            }
        }
        seats
    }

    /// Assigns job `id` to `node`, sending as account `matcher` (which holds the matcher
    /// role) with the job's current terms and state.
    pub async fn assign(&self, matcher: usize, id: u64, node: u64) {
        let job = self.job(id).await;
        let assign = self.market(matcher);
        let call = assign.assign(id, node, job.terms.pack(), job.state.pack());
        confirm_receipt("assign", call.send().await)
            .await
            .unwrap_or_else(|e| panic!("assigning job {id} to node {node}: {e}"));
    }

    /// Submits `hash` at `uri` as job `id`'s result, sending as account `agent` (its node's
    /// agent) with the job's current state.
    pub async fn submit_result(&self, agent: usize, id: u64, hash: B256, uri: &str) {
        let state = self.job(id).await.state.pack();
        let market = self.market(agent);
        let call = market.submitResult(id, state, hash, uri.into());
        confirm_receipt("submitResult", call.send().await)
            .await
            .unwrap_or_else(|e| panic!("submitting job {id}'s result: {e}"));
    }

    /// Node `id` as the registry holds it.
    pub async fn node(&self, id: u64) -> NodeRegistry::NodeInfo {
        NodeRegistry::new(self.devnet.deployment.registry, self.devnet.admin.clone())
            .getNode(id)
            .call()
            .await
            .unwrap_or_else(|e| panic!("reading node {id}: {e}"))
    }

    /// Chain time of the newest block, seconds.
    pub async fn now(&self) -> u64 {
        self.devnet.now().await.expect("the chain has a head block")
    }

    /// Moves chain time forward by `seconds` and mines a block there.
    pub async fn advance(&self, seconds: u64) {
        self.devnet
            .advance(seconds)
            .await
            .unwrap_or_else(|e| panic!("advancing the chain {seconds} s: {e}"));
    }

    /// Waits until `condition` holds, checking it again whenever any message flows on NATS
    /// (chain events, reports, KV and object updates); panics naming `what` after the net's
    /// patience.
    pub async fn wait_until<F, Fut>(&self, what: &str, condition: F)
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = bool>,
    {
        let client = gantry_runtime::nats::connect(&self.nats_url_as("admin"), false)
            .await
            .expect("nats connects");
        let messages = client.subscribe(">").await.expect("nats subscribes");
        wait::wait_until(what, self.patience, messages, condition).await;
    }

    /// Waits until job `job` has `status`.
    pub async fn wait_for_status(&self, job: u64, status: JobStatus) {
        self.wait_until(
            &format!("job {job} is {}", status.as_str()),
            || async move { self.job(job).await.state.status == status },
        )
        .await;
    }

    /// The config of a matcher on this chain and NATS signing as `account`:
    /// [`MatcherConfig::local`] with receipts polled every 20 ms (what
    /// [`TestNetBuilder::matcher`] starts, before its `matcher_config` changes).
    pub fn matcher_config(&self, account: usize) -> MatcherConfig {
        MatcherConfig::local(self.service_config(account, "matcher"))
    }

    /// The config of a liveness keeper on this chain and NATS paying from `account`:
    /// [`LivenessConfig::local`] with a 1 s lease and receipts polled every 20 ms (what
    /// [`TestNetBuilder::keeper`] starts).
    pub fn keeper_config(&self, account: usize) -> LivenessConfig {
        LivenessConfig {
            lease_ttl: std::time::Duration::from_secs(1),
            ..LivenessConfig::local(self.service_config(account, "liveness"))
        }
    }

    /// What the matcher and the keeper share: this chain, NATS as `user` and the key of
    /// `account`, receipts polled every 20 ms.
    fn service_config(&self, account: usize, user: &str) -> Common {
        Common {
            receipt_poll: std::time::Duration::from_millis(20),
            ..Common::local(
                self.devnet.chain_args(),
                self.nats_url_as(user),
                Secret::new(self.devnet.private_key(account)),
            )
        }
    }
}

/// NATS as in production (see [`TestNetBuilder::handshake`]).
#[derive(Debug)]
struct Secured {
    config: NatsConfig,
    server: ConfiguredNats,
    /// The auth service's credentials' time to live, seconds.
    ttl: u64,
}

impl Secured {
    fn url_as(&self, user: &str) -> String {
        self.config.url_of(&self.server, user)
    }
}

impl Devnet {
    /// [`gantry_indexer::Config::local`] for this chain, publishing to NATS at `nats_url`.
    pub fn indexer_config(&self, nats_url: String) -> gantry_indexer::Config {
        gantry_indexer::Config::local(self.chain_args(), self.deployment.start_block, nats_url)
    }

    /// The services' flags for this chain and its contracts.
    pub fn chain_args(&self) -> ChainArgs {
        let d = self.deployment;
        ChainArgs {
            rpc_url: self.anvil.endpoint_url(),
            chain_id: d.chain_id,
            market: d.market,
            registry: d.registry,
        }
    }
}
