//! The worker's one config file (TOML), with environment overrides. Unknown keys are an
//! error naming the key; values are parsed into domain types (addresses, URLs, durations)
//! at start-up. The agent key comes from `GANTRY_AGENT_KEY` or `agent_key_file`, never from
//! the file itself, and is never logged.
//!
//! ```toml
//! rpc_url = "http://127.0.0.1:8545"
//! chain_id = 31337
//! nats_url = "nats://127.0.0.1:4222"
//! nats_replicas = 1               # of the jobs stream and buckets it creates; 3 on a cluster
//! market = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
//! registry = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
//! token = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
//! start_block = 0                 # the market's deployment block: its logs are read from it
//! agent_key_file = "/etc/gantry/agent.key"
//! docker_socket = "/var/run/docker.sock"
//! cache_dir = "/var/lib/gantry/cache"
//! work_dir = "/var/lib/gantry/work"
//! ipfs_gateway = "https://ipfs.io"
//! # local_inputs_root = "/srv/datasets"   # file:// inputs are refused without it
//! # allow_input_hosts = ["10.0.0.5", "data.lan"]  # else private addresses are refused
//! metrics_addr = "127.0.0.1:9104"
//!
//! [node]
//! # node_id = 7                  # found from the chain (or registered) when absent
//! stake = "200000000000000000000"  # token base units staked at registration (default: twice the minimum)
//! price_per_gpu_hour = "2000000000000000000"
//! metadata_uri = ""
//!
//! [s3]                            # only for s3:// inputs
//! endpoint = "http://127.0.0.1:9000"
//! region = "us-east-1"
//! access_key_id = "…"
//! secret_access_key = "…"
//!
//! [jobs]
//! max_concurrent = 1
//! auto_accept = false
//! auto_accept_min_payment = "0"
//! accept_training = true
//! accept_inference = true
//! default_gpu_memory_percent = 90
//! default_cpu_threads = 4
//! checkpoint_interval = "5m"
//! heartbeat_interval = "30s"
//! progress_report_interval = "5s"
//! default_memory_mib = 2048       # when the job's minRamMiB is 0
//! pids_limit = 1024
//! max_input_bytes = 10737418240   # per input, unless the spec sets maxBytes
//! max_output_bytes = 1073741824   # per result, unless the spec sets maxBytes
//! scratch_bytes = 1073741824      # a job's disk beyond its output and checkpoint limits
//! max_log_bytes = 536870912       # stdout and stderr a job may print before it is stopped
//! shutdown_grace = "30s"          # running jobs may finish this long on shutdown
//! answer_margin = "60s"           # a job stops this long before its attempt ends on chain
//! finality_depth = 3              # blocks over a submitted result before the job is done
//! verified_docker = false         # take seats of replicated CPU Docker jobs (design 18, §1)
//! ```
//!
//! Every key can be overridden by `GANTRY_WORKER_<KEY>`, and `[jobs]` keys by
//! `GANTRY_WORKER_JOBS__<KEY>` (e.g. `GANTRY_WORKER_JOBS__MAX_CONCURRENT=2`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use figment::Figment;
use figment::providers::{Env, Format, Toml};
use gantry_protocol::spec::Engine;
use gantry_runtime::args::{KeyError, KeySources, Secret, load_signer};
use serde::Deserialize;
use url::Url;

/// Everything the worker is configured with.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// JSON-RPC endpoint of the chain.
    pub rpc_url: Url,
    /// Chain id the endpoint must report.
    pub chain_id: u64,
    /// NATS server URL.
    #[serde(default = "default_nats_url")]
    pub nats_url: String,
    /// Replicas of the jobs stream and the results and checkpoints object stores when this
    /// worker creates them: 1 on a single server, 3 on a three-node cluster.
    #[serde(default = "default_nats_replicas")]
    pub nats_replicas: usize,
    /// JobMarket, NodeRegistry and token contract addresses (the node calls are served at
    /// the market's address: `registry` is the market, as the deployment file says).
    pub market: Address,
    pub registry: Address,
    pub token: Address,
    /// The block the market was deployed in (the deployment file's `start_block`): the
    /// market's logs (a job's history, the node's capabilities) are read from there.
    #[serde(default)]
    pub start_block: u64,
    /// File holding the agent's hex private key (else `GANTRY_AGENT_KEY`).
    #[serde(default)]
    pub agent_key_file: Option<PathBuf>,
    /// The Docker engine's socket.
    #[serde(default = "default_docker_socket")]
    pub docker_socket: PathBuf,
    /// Content-addressed input cache.
    pub cache_dir: PathBuf,
    /// Per-job working directories (inputs, outputs, checkpoints).
    pub work_dir: PathBuf,
    /// HTTP gateway through which `ipfs://` inputs are fetched.
    #[serde(default = "default_ipfs_gateway")]
    pub ipfs_gateway: Url,
    /// The only directory `file://` inputs may be read from; without it they are refused.
    #[serde(default)]
    pub local_inputs_root: Option<PathBuf>,
    /// Hosts (names or IP literals, matched as written in an input's URL) that http(s)
    /// inputs may reach although they are loopback, private or link-local addresses;
    /// every other such address is refused, as the job's fault. None by default: a job
    /// reaches nothing of the provider's network (the ipfs gateway excepted).
    #[serde(default)]
    pub allow_input_hosts: Vec<String>,
    /// Prometheus exporter address; none when absent.
    #[serde(default)]
    pub metrics_addr: Option<SocketAddr>,
    #[serde(default)]
    pub node: Node,
    /// S3-compatible store for `s3://` inputs.
    #[serde(default)]
    pub s3: Option<S3>,
    #[serde(default)]
    pub jobs: Jobs,
    /// Test hooks (`[test]`): accepted by debug builds only, refused by a release build.
    #[serde(default)]
    pub test: TestHooks,
}

/// The `[test]` section: behaviours the end-to-end tests need of a worker that a
/// provider's never has. A release build refuses the section.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TestHooks {
    /// Seal a digest other than the seat's outcome (a lying replica).
    pub corrupt_digest: bool,
}

/// The `[node]` section: how the node appears on-chain.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Node {
    /// The node this agent serves; found on-chain (or registered) when absent.
    pub node_id: Option<u64>,
    /// Stake posted at registration, token base units; twice the registry's minimum when
    /// absent (`node::default_stake`: room for slashes).
    #[serde(deserialize_with = "decimal_u256_opt")]
    pub stake: Option<U256>,
    /// Price per GPU-hour, token base units.
    #[serde(deserialize_with = "decimal_u256")]
    pub price_per_gpu_hour: U256,
    pub metadata_uri: String,
}

impl Default for Node {
    fn default() -> Self {
        Self {
            node_id: None,
            stake: None,
            price_per_gpu_hour: U256::ZERO,
            metadata_uri: String::new(),
        }
    }
}

/// The `[s3]` section.
#[derive(Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct S3 {
    pub endpoint: Option<Url>,
    #[serde(default = "default_region")]
    pub region: String,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
}

impl std::fmt::Debug for S3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &"<redacted>")
            .finish()
    }
}

/// The `[jobs]` section: what the node takes and how it reports.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Jobs {
    /// What this node runs jobs on: `docker` (containers; GPUs through the NVIDIA
    /// runtime) and `wasm` (the embedded WebAssembly runtime, CPU only). A machine without
    /// Docker serves `["wasm"]` and starts without a Docker engine.
    pub engines: Vec<Engine>,
    /// Jobs run at once; the node's on-chain `maxConcurrentJobs` when this worker registers
    /// it or updates its capabilities. Assignments beyond the smaller of this and the
    /// node's on-chain limit are rejected at once (free: within the market's reject grace).
    pub max_concurrent: u8,
    /// Claim mode: also claim open jobs the node fits, not only wait for the matcher.
    pub auto_accept: bool,
    /// Take seats of replicated CPU Docker jobs, deterministic by their submitters' word,
    /// in the deterministic sandbox (design 18, §1): registered as the node's
    /// `DETERMINISTIC_DOCKER` bit, needs `docker` among the engines. A seat that reveals
    /// another result than the quorum's is not paid (not slashed either): a job that is
    /// not deterministic after all costs the node its run.
    pub verified_docker: bool,
    /// Smallest bounty claimed in claim mode, in token base units (a decimal string).
    #[serde(deserialize_with = "decimal_u256")]
    pub auto_accept_min_payment: U256,
    pub accept_training: bool,
    pub accept_inference: bool,
    /// Share of each GPU's memory a job may use unless its spec says otherwise, 1–100.
    pub default_gpu_memory_percent: u8,
    /// CPU threads a job gets unless its spec says otherwise.
    pub default_cpu_threads: u16,
    #[serde(with = "humantime_serde")]
    pub checkpoint_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub heartbeat_interval: Duration,
    #[serde(with = "humantime_serde")]
    pub progress_report_interval: Duration,
    /// Memory limit of a job whose requirements say 0 MiB.
    pub default_memory_mib: u32,
    /// Processes a job's container may have.
    pub pids_limit: i64,
    /// Largest input, bytes, unless the spec sets `maxBytes`.
    pub max_input_bytes: u64,
    /// Largest result, bytes, unless the spec sets `maxBytes`; also the largest
    /// checkpoint.
    pub max_output_bytes: u64,
    /// A job's disk room beyond its output and checkpoint limits (for `/tmp` and what it
    /// writes on the way), bytes. Its writable space (`/outputs`, `/checkpoints`, `/tmp`)
    /// is one file system of the output limit, the checkpoint limit and this
    /// ([`Jobs::space_room`]): the kernel stops its writes there. Each job slot's space is
    /// reserved on the work directory's disk for as long as the worker runs.
    pub scratch_bytes: u64,
    /// Output (stdout and stderr) a job may print, bytes; past it the job is stopped, its
    /// own fault.
    pub max_log_bytes: u64,
    /// How long running jobs may go on finishing after a shutdown signal before they are
    /// checkpointed and given back.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// The time kept between a job's stop and the end of its attempt on chain (`until`):
    /// enough to pack and upload the result and get `submitResult` mined. A job is stopped
    /// at its own `timeoutSecs` from the assignment, or this long before `until`, whichever
    /// comes first (`market::State::stop_by`).
    #[serde(with = "humantime_serde")]
    pub answer_margin: Duration,
    /// Blocks a submitted result must be buried under before the worker is done with the
    /// job: a reorganisation that un-mines it before then gets it submitted again. 0: done
    /// once mined.
    pub finality_depth: u64,
}

impl Default for Jobs {
    fn default() -> Self {
        Self {
            engines: vec![Engine::Docker, Engine::Wasm],
            max_concurrent: 1,
            auto_accept: false,
            verified_docker: false,
            auto_accept_min_payment: U256::ZERO,
            accept_training: true,
            accept_inference: true,
            default_gpu_memory_percent: 90,
            default_cpu_threads: 4,
            checkpoint_interval: Duration::from_secs(300),
            heartbeat_interval: Duration::from_secs(30),
            progress_report_interval: Duration::from_secs(5),
            default_memory_mib: 2048,
            pids_limit: 1024,
            max_input_bytes: 10 << 30,
            max_output_bytes: 1 << 30,
            scratch_bytes: 1 << 30,
            max_log_bytes: 512 << 20,
            shutdown_grace: Duration::from_secs(30),
            answer_margin: Duration::from_secs(60),
            finality_depth: 3,
        }
    }
}

/// Why the configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// Includes the offending key: "unknown field `foo`", "invalid type ... for key `jobs.max_concurrent`".
    #[error("{0}")]
    Invalid(String),
    #[error("{key}: {reason}")]
    Value { key: &'static str, reason: String },
    #[error("the agent key")]
    Key(#[from] KeyError),
}

impl Jobs {
    /// A job's writable space, bytes: a full result, a full checkpoint (both at the node's
    /// output limit; a spec's lower `maxBytes` is checked when the result is uploaded)
    /// and the scratch room.
    pub fn space_room(&self) -> u64 {
        self.max_output_bytes
            .saturating_mul(2)
            .saturating_add(self.scratch_bytes)
    }
}

impl Config {
    /// Reads `path` and applies `GANTRY_WORKER_*` environment overrides.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::from_figment(Figment::new().merge(Toml::file_exact(path)))
    }

    /// Parses TOML text (and applies the environment overrides).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        Self::from_figment(Figment::new().merge(Toml::string(text)))
    }

    fn from_figment(figment: Figment) -> Result<Self, ConfigError> {
        let config: Self = figment
            // `GANTRY_WORKER_CONFIG` names the file (the `--config` flag), not a key.
            .merge(
                Env::prefixed("GANTRY_WORKER_")
                    .ignore(&["config"])
                    .split("__")
                    .lowercase(true),
            )
            .extract()
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.test != TestHooks::default() && !cfg!(debug_assertions) {
            return Err(value("test", "test hooks exist in debug builds only"));
        }
        for host in &self.allow_input_hosts {
            crate::fetch::check_allowed_host(host)
                .map_err(|why| value("allow_input_hosts", &format!("{host:?}: {why}")))?;
        }
        gantry_protocol::storage::check_replicas(self.nats_replicas)
            .map_err(|e| value("nats_replicas", &e))?;
        let jobs = &self.jobs;
        if jobs.engines.is_empty() {
            return Err(value("jobs.engines", "name at least one of docker, wasm"));
        }
        if jobs.verified_docker && !jobs.engines.contains(&Engine::Docker) {
            return Err(value(
                "jobs.verified_docker",
                "verified Docker seats run on Docker: add docker to jobs.engines",
            ));
        }
        if jobs.max_concurrent == 0 {
            return Err(value("jobs.max_concurrent", "must be at least 1"));
        }
        if !(1..=100).contains(&jobs.default_gpu_memory_percent) {
            return Err(value("jobs.default_gpu_memory_percent", "must be 1 to 100"));
        }
        if jobs.default_memory_mib < 16 {
            return Err(value("jobs.default_memory_mib", "must be at least 16"));
        }
        if jobs.pids_limit < 8 {
            return Err(value("jobs.pids_limit", "must be at least 8"));
        }
        if jobs.max_input_bytes == 0 || jobs.max_output_bytes == 0 {
            return Err(value(
                "jobs.max_input_bytes",
                "and max_output_bytes must be positive",
            ));
        }
        if jobs.max_log_bytes == 0 {
            return Err(value("jobs.max_log_bytes", "must be positive"));
        }
        if jobs.default_cpu_threads == 0 {
            return Err(value("jobs.default_cpu_threads", "must be at least 1"));
        }
        if !jobs.accept_training && !jobs.accept_inference {
            return Err(value(
                "jobs.accept_training",
                "and jobs.accept_inference are both false: the node would take no job",
            ));
        }
        if jobs.answer_margin < Duration::from_secs(1) {
            return Err(value("jobs.answer_margin", "must be at least 1s"));
        }
        for (key, interval) in [
            ("jobs.checkpoint_interval", jobs.checkpoint_interval),
            ("jobs.heartbeat_interval", jobs.heartbeat_interval),
            (
                "jobs.progress_report_interval",
                jobs.progress_report_interval,
            ),
        ] {
            if interval < Duration::from_millis(100) {
                return Err(value(key, "must be at least 100ms"));
            }
        }
        Ok(())
    }

    /// The agent's key: `GANTRY_AGENT_KEY` (from `env`) or `agent_key_file`, exactly one.
    pub fn agent_signer(&self, env: Option<&str>) -> Result<PrivateKeySigner, ConfigError> {
        let value = env.map(Secret::new);
        let signer = load_signer(value.as_ref(), self.agent_key_file.as_deref(), AGENT_KEY)?;
        Ok(signer.ok_or(KeyError::Missing(AGENT_KEY))?)
    }
}

/// Where the agent key comes from, as the provider sets it.
const AGENT_KEY: KeySources = KeySources {
    value: "GANTRY_AGENT_KEY",
    file: "agent_key_file",
};

fn value(key: &'static str, reason: &str) -> ConfigError {
    ConfigError::Value {
        key,
        reason: reason.to_owned(),
    }
}

fn default_nats_replicas() -> usize {
    1
}

fn default_nats_url() -> String {
    "nats://127.0.0.1:4222".into()
}

fn default_ipfs_gateway() -> Url {
    Url::parse("https://ipfs.io").expect("a valid URL")
}

fn default_region() -> String {
    "us-east-1".into()
}

fn decimal_u256_opt<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<U256>, D::Error> {
    decimal_u256(deserializer).map(Some)
}

fn default_docker_socket() -> PathBuf {
    PathBuf::from("/var/run/docker.sock")
}

fn decimal_u256<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<U256, D::Error> {
    let text = String::deserialize(deserializer)?;
    U256::from_str_radix(&text, 10)
        .map_err(|_| serde::de::Error::custom(format!("{text:?} is not a decimal amount")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINIMAL: &str = r#"
        rpc_url = "http://127.0.0.1:8545"
        chain_id = 31337
        market = "0x9fE46736679d2D9a65F0992F2272dE9f3c7fa6e0"
        registry = "0xe7f1725E7734CE288F8367e1Bb143E90bb3F0512"
        token = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
        cache_dir = "/tmp/cache"
        work_dir = "/tmp/work"
    "#;

    fn check_error(extra: &str, expected: &str) {
        let error = Config::from_toml(&format!("{MINIMAL}\n{extra}")).unwrap_err();
        assert!(
            error.to_string().contains(expected),
            "{extra:?}: {error} does not mention {expected:?}"
        );
    }

    #[test]
    fn a_minimal_file_gets_the_documented_defaults() {
        let config = Config::from_toml(MINIMAL).unwrap();
        assert_eq!(config.jobs, Jobs::default());
        assert_eq!(config.nats_url, "nats://127.0.0.1:4222");
        assert_eq!(config.nats_replicas, 1);
        assert_eq!(config.docker_socket, PathBuf::from("/var/run/docker.sock"));
        assert_eq!(
            config.start_block, 0,
            "the market's logs are read from genesis"
        );
        assert_eq!(config.jobs.answer_margin, Duration::from_secs(60));
        assert!(
            config.allow_input_hosts.is_empty(),
            "no private address allowed"
        );
    }

    #[test]
    fn allowed_input_hosts_are_bare_hosts() {
        let config = Config::from_toml(&format!(
            "allow_input_hosts = [\"10.0.0.5\", \"data.lan\", \"::1\"]\n{MINIMAL}"
        ))
        .unwrap();
        assert_eq!(config.allow_input_hosts, ["10.0.0.5", "data.lan", "::1"]);
        for bad in ["http://data.lan", "data.lan:8080", ""] {
            let error = Config::from_toml(&format!("allow_input_hosts = [{bad:?}]\n{MINIMAL}"))
                .unwrap_err();
            assert!(error.to_string().contains("allow_input_hosts"), "{error}");
        }
    }

    #[test]
    fn the_jobs_section_parses_durations_and_amounts() {
        let config = Config::from_toml(&format!(
            "{MINIMAL}\n[jobs]\nmax_concurrent = 2\nauto_accept = true\n\
             auto_accept_min_payment = \"5000000\"\ncheckpoint_interval = \"90s\"\n\
             heartbeat_interval = \"1m\"\nprogress_report_interval = \"500ms\""
        ))
        .unwrap();
        assert_eq!(config.jobs.max_concurrent, 2);
        assert!(config.jobs.auto_accept);
        assert_eq!(
            config.jobs.auto_accept_min_payment,
            U256::from(5_000_000u64)
        );
        assert_eq!(config.jobs.checkpoint_interval, Duration::from_secs(90));
        assert_eq!(config.jobs.heartbeat_interval, Duration::from_secs(60));
        assert_eq!(
            config.jobs.progress_report_interval,
            Duration::from_millis(500)
        );
    }

    #[test]
    fn node_s3_and_limits_parse_and_secrets_stay_hidden() {
        let config = Config::from_toml(&format!(
            "{MINIMAL}\nipfs_gateway = \"https://gw.example.org\"\nmetrics_addr = \"127.0.0.1:9104\"\n\
             [node]\nnode_id = 7\nstake = \"250000000\"\nprice_per_gpu_hour = \"2000000\"\n\
             [s3]\nendpoint = \"http://127.0.0.1:9000\"\naccess_key_id = \"AK\"\nsecret_access_key = \"hunter2\"\n\
             [jobs]\npids_limit = 256\nmax_output_bytes = 1000\nshutdown_grace = \"5s\"\n\
             answer_margin = \"2m\""
        ))
        .unwrap();
        assert_eq!(config.jobs.answer_margin, Duration::from_secs(120));
        assert_eq!(config.node.node_id, Some(7));
        assert_eq!(config.node.stake, Some(U256::from(250_000_000u64)));
        assert_eq!(config.node.price_per_gpu_hour, U256::from(2_000_000u64));
        assert_eq!(config.ipfs_gateway.as_str(), "https://gw.example.org/");
        assert_eq!(config.metrics_addr, Some("127.0.0.1:9104".parse().unwrap()));
        assert_eq!(config.jobs.pids_limit, 256);
        assert_eq!(config.jobs.max_output_bytes, 1000);
        assert_eq!(config.jobs.shutdown_grace, Duration::from_secs(5));
        assert!(!format!("{config:?}").contains("hunter2"));
        check_error("[node]\nstake = \"-1\"", "stake");
        check_error("[s3]\nbucket = \"x\"", "bucket");
        check_error("[jobs]\npids_limit = 2", "jobs.pids_limit");
        check_error("[jobs]\nanswer_margin = \"500ms\"", "jobs.answer_margin");
    }

    #[test]
    fn bad_input_is_refused_naming_the_key() {
        check_error("gpu_count = 8", "gpu_count");
        check_error("[jobs]\nmax_concurrnt = 2", "max_concurrnt");
        check_error("[jobs]\nmax_concurrent = 0", "jobs.max_concurrent");
        check_error(
            "[jobs]\ndefault_gpu_memory_percent = 120",
            "default_gpu_memory_percent",
        );
        check_error(
            "[jobs]\nheartbeat_interval = \"soon\"",
            "heartbeat_interval",
        );
        check_error(
            "[jobs]\nauto_accept_min_payment = \"1.5\"",
            "auto_accept_min_payment",
        );
        check_error(
            "[jobs]\naccept_training = false\naccept_inference = false",
            "accept_inference",
        );
        for replicas in ["0", "6"] {
            let error =
                Config::from_toml(&format!("nats_replicas = {replicas}\n{MINIMAL}")).unwrap_err();
            assert!(error.to_string().contains("nats_replicas"), "{error}");
        }
        let three = Config::from_toml(&format!("nats_replicas = 3\n{MINIMAL}")).unwrap();
        assert_eq!(three.nats_replicas, 3);
        let error = Config::from_toml(&MINIMAL.replace("chain_id = 31337\n", "")).unwrap_err();
        assert!(error.to_string().contains("chain_id"), "{error}");
    }

    #[test]
    fn the_agent_key_comes_from_one_place_and_is_never_echoed() {
        let dir = tempfile::tempdir().unwrap();
        let key = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";
        let path = dir.path().join("agent.key");
        std::fs::write(&path, format!("{key}\n")).unwrap();
        let mut config = Config::from_toml(MINIMAL).unwrap();
        assert!(config.agent_signer(None).is_err());
        let from_env = config.agent_signer(Some(key)).unwrap();
        config.agent_key_file = Some(path);
        assert_eq!(
            config.agent_signer(None).unwrap().address(),
            from_env.address()
        );
        assert!(config.agent_signer(Some(key)).is_err(), "both set");
        config.agent_key_file = Some(dir.path().join("bad.key"));
        std::fs::write(dir.path().join("bad.key"), "not-a-key-but-a-secret").unwrap();
        let error = config.agent_signer(None).unwrap_err().to_string();
        assert!(!error.contains("not-a-key-but-a-secret"), "{error}");
    }
}
