//! The command line: global connection flags (each with its environment variable) and the
//! commands. Values are parsed into domain types here or, where they need the chain (token
//! decimals, chain time), by the command.

use std::path::PathBuf;

use alloy::primitives::{Address, Bytes};
use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use gantry_runtime::args::{KeyArgs, Secret};
use url::Url;

#[derive(Debug, Parser)]
#[command(
    name = "gantry",
    version,
    about = "Gantry's command line: post GPU jobs and follow them, fetch verified results, run a node's stake",
    long_about = "Gantry's command line. Reads go through gantry-api (--api-url), writes are \
                  transactions to the contracts (--rpc-url), signed with GANTRY_PRIVATE_KEY or \
                  --key-file. Amounts are in whole tokens as people write them (12.5); with \
                  --json, output is JSON and amounts are base-unit strings as in the API.",
    after_help = "Exit codes: 0 ok, 1 error (a service did not answer, IO), 2 usage, 3 not found, \
                  4 refused (the contract reverted or would: balance, status, window), \
                  5 the watched job did not complete, 6 the result failed verification."
)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Where the network is and who signs.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Network, key and output (any command)")]
pub struct Global {
    /// The chain's JSON-RPC endpoint (transactions, balances, on-chain checks).
    #[arg(
        long,
        env = "GANTRY_RPC_URL",
        default_value = "http://127.0.0.1:8545",
        global = true
    )]
    pub rpc_url: Url,
    /// gantry-api (jobs, nodes, logs, live events).
    #[arg(
        long,
        env = "GANTRY_API_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub api_url: Url,
    /// NATS, for results stored as `nats://<bucket>/<key>`.
    #[arg(
        long,
        env = "GANTRY_NATS_URL",
        default_value = "nats://127.0.0.1:4222",
        global = true
    )]
    pub nats_url: String,
    /// The deployment file `make dev` writes (chain id and contract addresses); the
    /// flags below override what it says.
    #[arg(
        long,
        env = "GANTRY_DEPLOYMENT",
        default_value = ".devnet/deployment.json",
        global = true
    )]
    pub deployment: PathBuf,
    /// The chain id the RPC endpoint must report.
    #[arg(long, env = "GANTRY_CHAIN_ID", global = true)]
    pub chain_id: Option<u64>,
    /// JobMarket's address (the registry and token are read from it when not given).
    #[arg(long, env = "GANTRY_MARKET", global = true)]
    pub market: Option<Address>,
    /// NodeRegistry's address.
    #[arg(long, env = "GANTRY_REGISTRY", global = true)]
    pub registry: Option<Address>,
    /// The payment and stake token's address.
    #[arg(long, env = "GANTRY_TOKEN", global = true)]
    pub token: Option<Address>,
    /// The signing key (needed only by commands that send transactions).
    #[command(flatten)]
    pub key: KeyArgs,
    /// Your age identity file (`gantry keys new`): it decrypts your encrypted jobs'
    /// results and releases their job keys to the nodes that run them. Without it the
    /// identity is derived from the signing key's signature (EIP-191) of a fixed message
    /// naming the chain and the market: anyone who obtains that signature can read your
    /// encrypted results, so sign that message only in the gantry CLI or the Gantry web
    /// app, never for another site.
    #[arg(long, env = "GANTRY_IDENTITY", global = true, value_name = "FILE")]
    pub identity: Option<PathBuf>,
    /// Print JSON for scripts (errors too, on stderr).
    #[arg(long, global = true)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Post, follow and settle jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Register a node, look at it, exit and withdraw its stake (as its operator).
    #[command(subcommand)]
    Node(NodeCommand),
    /// Your token balance and your credits in the market (refunds, returned bonds).
    Balance(BalanceArgs),
    /// Move tokens into your market credits: jobs are then posted from them.
    Deposit(DepositArgs),
    /// Pay out your market credits to your wallet.
    Withdraw,
    /// Your encryption identity (age X25519): its recipient, a new one, and the release of
    /// your encrypted jobs' keys to the nodes that run them.
    #[command(subcommand)]
    Keys(KeysCommand),
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Your recipient (age1…), from which `job submit --encrypt` derives each job's result
    /// key and job key, and where your identity comes from (--identity, or derived from the
    /// signing key).
    Show,
    /// Write a new random identity to FILE (mode 0600; an existing file is never
    /// overwritten), to pass as --identity. Keep a copy: results encrypted to it cannot be
    /// read without it.
    New(KeysNewArgs),
    /// Release the job keys of all the signing key's encrypted jobs to the nodes assigned
    /// them, as they ask, until Ctrl-C or SIGTERM: a line per key released or request
    /// refused (another account's requests are skipped silently). `job watch` does the
    /// same for the one job it follows.
    Serve,
}

#[derive(Debug, Args)]
pub struct KeysNewArgs {
    /// Where to write the identity.
    pub file: PathBuf,
}

#[derive(Debug, Args)]
pub struct DepositArgs {
    /// How much, whole tokens (e.g. 100 or 2.5).
    pub amount: String,
}

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Post a job: a spec file, or a spec built from flags; escrows the bounty.
    Submit(Box<SubmitArgs>),
    /// A job's state, requirements, progress, result and timeline.
    Status(JobId),
    /// Follow a job live (status, epoch, loss, ETA) until it settles.
    Watch(WatchArgs),
    /// A job's log lines; --follow streams new ones until the job settles.
    Logs(LogsArgs),
    /// Download a job's result, check it against the on-chain hash, unpack it.
    Result(ResultArgs),
    /// Cancel an open job (the bounty is credited back: `gantry withdraw`).
    Cancel(JobId),
    /// Accept a submitted result now: pays the provider without waiting for the window.
    Accept(JobId),
    /// Dispute a submitted result inside the challenge window (posts the dispute bond).
    Dispute(JobId),
    /// As the arbiter: decide a disputed job for the provider or for the submitter.
    Resolve(ResolveArgs),
    /// Settle a dispute the arbiter let lapse: the result stands, the bond goes back to
    /// the submitter (anyone may; the keeper does it too).
    Settle(JobId),
    /// Jobs, newest first.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct JobId {
    /// The job id.
    pub id: u64,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("decision").required(true).args(["provider_wins", "submitter_wins"])))]
pub struct ResolveArgs {
    /// The job id.
    pub id: u64,
    /// The result stands: the node is paid the bounty (less the fee) and wins the bond.
    #[arg(long)]
    pub provider_wins: bool,
    /// The result is wrong: the bounty and the bond are credited back to the submitter,
    /// the node's held stake is slashed to the treasury.
    #[arg(long)]
    pub submitter_wins: bool,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// A job-spec JSON file (`-` reads stdin). Without it the spec is built from --image
    /// (or --wasm), --env, --input and the command after `--`.
    pub spec: Option<PathBuf>,
    /// The bounty, in whole tokens (e.g. 12.5), escrowed until the job settles.
    #[arg(long)]
    pub bounty: String,
    /// Blocks that must hold the posting (its own included) before the job id is printed,
    /// re-read then from the receipt: 1 is as soon as it is mined. Default 2, or 1 on
    /// anvil's dev chain (31337), which mines a block only per transaction.
    #[arg(long, env = "GANTRY_CONFIRMATIONS")]
    pub confirmations: Option<u64>,
    /// When a result is due: a duration from now (chain time) or an RFC 3339 time.
    #[arg(long, default_value = "24h")]
    pub deadline: String,
    /// A GPU model by name (A100, H100, "RTX 4090"), resolved through the API to the one
    /// model id registered nodes offer; `any` for any model.
    #[arg(long, conflicts_with = "gpu_model")]
    pub gpu: Option<String>,
    /// A GPU model id taken as is (spaces become dashes, as the worker writes NVML names):
    /// e.g. NVIDIA-A100-SXM4-80GB. No lookup.
    #[arg(long)]
    pub gpu_model: Option<String>,
    /// GPUs needed (default 1 when a model is named, else 0).
    #[arg(long)]
    pub gpus: Option<u16>,
    /// Memory per GPU, e.g. 40GiB (binary units; GB/MB are decimal).
    #[arg(long)]
    pub vram: Option<String>,
    /// CPU cores needed.
    #[arg(long, default_value_t = 0)]
    pub cpus: u16,
    /// Host memory needed, e.g. 64GiB.
    #[arg(long)]
    pub ram: Option<String>,
    /// The most a node may charge per GPU-hour, in whole tokens (default: any price).
    #[arg(long)]
    pub max_price: Option<String>,
    /// How long the job may run, e.g. 4h: a built spec's timeoutSecs (default 1h). The
    /// attempt's on-chain maxRuntime adds 2 min for the node to fetch the inputs, start
    /// and answer. With a spec file: the attempt's maxRuntime, at least the spec's
    /// timeoutSecs plus those 2 min (the default).
    #[arg(long)]
    pub duration: Option<String>,
    /// Scheduling priority, 1 (lowest) to 10.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u8).range(1..=10))]
    pub priority: u8,
    /// Container image (built spec).
    #[arg(long, conflicts_with = "spec")]
    pub image: Option<String>,
    /// A WASM job's module instead of an image (built spec): a local `.wasm` or `.wat`
    /// file, uploaded to the chain's inputs bucket through --nats-url under its SHA-256,
    /// or URI#sha256=HEX where the network can fetch it. The command after `--` is the
    /// module's arguments.
    #[arg(long, value_name = "FILE|URI#sha256=HEX", conflicts_with_all = ["spec", "image"])]
    pub wasm: Option<String>,
    /// The WASM module's entry point (default `_start`).
    #[arg(long, requires = "wasm")]
    pub entry: Option<String>,
    /// The WASM module's memory limit, e.g. 256MiB (default: --ram, else the node's).
    #[arg(long, requires = "wasm")]
    pub memory: Option<String>,
    /// Run the WASM module deterministically: the same result on every node (needs
    /// --memory; no wall clock, seeded randomness, fuel instead of time).
    #[arg(long, requires = "memory")]
    pub deterministic: bool,
    /// How the result is verified: `none` (the challenge window), `replicated:N/K` (N
    /// nodes of N operators run the job, K equal results decide; N bounties escrowed) or
    /// `refereed:R` (one node runs it; a dispute is settled by R referees re-running it).
    /// Verified jobs run deterministic WASM (--wasm, --memory, --deterministic) or, replicated
    /// only, a CPU Docker job with its image pinned by digest (run in the nodes'
    /// deterministic sandbox; a seat apart from the quorum is unpaid, not slashed).
    #[arg(long, default_value = "none")]
    pub verify: String,
    /// A verified job's reveal window, e.g. 1h (default: the market's minimum).
    #[arg(long)]
    pub reveal_window: Option<String>,
    /// Training or inference (built spec).
    #[arg(long, value_enum, default_value_t = Kind::Training, conflicts_with = "spec")]
    pub kind: Kind,
    /// An environment variable NAME=VALUE (built spec; repeatable).
    #[arg(long = "env", value_name = "NAME=VALUE", conflicts_with = "spec")]
    pub envs: Vec<String>,
    /// An input PATH=URI[#sha256=HEX] (built spec; repeatable); PATH is below /inputs
    /// (a relative one is put there).
    #[arg(long = "input", value_name = "PATH=URI", conflicts_with = "spec")]
    pub inputs: Vec<String>,
    /// The directory collected as the result (built spec).
    #[arg(long, default_value = "/outputs", conflicts_with = "spec")]
    pub output_path: String,
    /// Encrypt the job's result (and failure report) to a result key of the job's own,
    /// derived from your identity (--identity, else derived from the signing key; see
    /// `gantry keys show`) and never given to a node, whose secret opens that result only
    /// (what you may show an arbiter); and give the job a key of its own, derived from your
    /// identity too, for its --secret-input files and checkpoints:
    /// it is released to each node assigned the job by `gantry job watch <id>` or `gantry
    /// keys serve`. Not with --verify (replicas and referees compare what they see).
    #[arg(long)]
    pub encrypt: bool,
    /// Encrypt the result to this age recipient (age1…) instead of your own (implies
    /// --encrypt; the job key is still derived from your identity).
    #[arg(long, value_name = "AGE1…")]
    pub recipient: Option<String>,
    /// A local FILE for PATH (below /inputs; a relative one is put there), encrypted to
    /// the job key and uploaded to the chain's inputs bucket through --nats-url under its
    /// ciphertext's SHA-256 (repeatable; implies --encrypt). The node decrypts it once the
    /// key is released to it; the job needs a maxRuntime of at least 5 min so that a node
    /// whose key never comes gives it back for free.
    #[arg(long = "secret-input", value_name = "PATH=FILE")]
    pub secret_inputs: Vec<String>,
    /// Print what would be posted (requirements, spec, deadline) and send nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// The command and its arguments (built spec), after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Kind {
    Training,
    Inference,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The job id.
    pub id: u64,
    /// Stop (exit 0) once a result is submitted instead of waiting for settlement.
    #[arg(long)]
    pub submitted: bool,
}

#[derive(Debug, Args)]
pub struct LogsArgs {
    /// The job id.
    pub id: u64,
    /// Lines from the end, 1 to 10000.
    #[arg(long, default_value_t = 200, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub tail: u32,
    /// Keep streaming new lines until the job settles.
    #[arg(long, short)]
    pub follow: bool,
}

#[derive(Debug, Args)]
pub struct ResultArgs {
    /// The job id.
    pub id: u64,
    /// Where to unpack the result (created when missing).
    #[arg(long, short = 'o')]
    pub output: PathBuf,
    /// Fetch from this URI instead of the one the job's ResultSubmitted names.
    #[arg(long)]
    pub uri: Option<String>,
    /// Refuse downloads larger than this.
    #[arg(long, default_value = "10GiB")]
    pub max_size: String,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// open, assigned (or running), submitted, disputed, completed, failed, cancelled, expired.
    #[arg(long)]
    pub status: Option<String>,
    /// Only jobs posted by this address.
    #[arg(long, conflicts_with = "mine")]
    pub submitter: Option<Address>,
    /// Only jobs posted by the signing key's address.
    #[arg(long)]
    pub mine: bool,
    /// Only jobs assigned to this node.
    #[arg(long)]
    pub node: Option<u64>,
    /// Page size, 1 to 200.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=200))]
    pub limit: u32,
    /// The next page: `nextCursor` of the previous one.
    #[arg(long)]
    pub cursor: Option<String>,
}

#[derive(Debug, Args)]
pub struct BalanceArgs {
    /// Whose balance (default: the signing key's address).
    #[arg(long)]
    pub address: Option<Address>,
}

#[derive(Debug, Subcommand)]
pub enum NodeCommand {
    /// Register a node operated by the signing key, staking tokens.
    Register(Box<RegisterArgs>),
    /// A node's state, capabilities, stake, earnings and running jobs.
    Status(NodeId),
    /// Add to a node's stake from the signing key's tokens (operator only): room for
    /// slashes, or a node slashed below the minimum back to taking work.
    Topup(TopupArgs),
    /// Begin the exit: no new jobs; the stake unbonds.
    Exit(NodeId),
    /// After unbonding, with no jobs left, take the stake back.
    Withdraw(NodeId),
    /// Pay the node's earnings out to its operator (and its owed fees to the treasury).
    #[command(visible_alias = "withdraw-earnings")]
    Earnings(NodeId),
    /// As the agent (the worker's key): consent to serve a node of `--operator`; prints the
    /// signature and deadline `node register --consent` takes.
    Consent(ConsentArgs),
    /// Re-point a node to another agent (a new worker key), with that agent's consent.
    SetAgent(SetAgentArgs),
}

#[derive(Debug, Args)]
pub struct ConsentArgs {
    /// The operator who will register (or re-point) the node.
    #[arg(long)]
    pub operator: Address,
    /// How long the consent stays valid, e.g. 1h or 30m.
    #[arg(long, default_value = "1h")]
    pub valid_for: String,
}

#[derive(Debug, Args)]
pub struct TopupArgs {
    /// The node id.
    pub id: u64,
    /// How much to add, whole tokens (e.g. 100 or 2.5).
    pub amount: String,
}

#[derive(Debug, Args)]
pub struct NodeId {
    /// The node id.
    pub id: u64,
}

/// The node's agent (the worker's hot key) and its consent to serve the operator: the
/// agent's key here to sign it (`--agent-key-file`, `GANTRY_AGENT_KEY`), or the signature
/// the agent made with `gantry node consent` (`--agent`, `--consent`, `--consent-deadline`).
#[derive(Debug, Args)]
#[command(next_help_heading = "Agent and its consent")]
pub struct AgentArgs {
    /// The agent's address (default: the address of --agent-key or --agent-key-file; for
    /// `register`, else the operator's own).
    #[arg(long)]
    pub agent: Option<Address>,
    /// The agent's consent signature, as `gantry node consent` (run with the agent's key)
    /// printed it.
    #[arg(long, visible_alias = "consent-signature", requires_all = ["consent_deadline", "agent"])]
    pub consent: Option<Bytes>,
    /// The consent's deadline (unix seconds), as `gantry node consent` printed it.
    #[arg(long, requires = "consent")]
    pub consent_deadline: Option<u64>,
    /// The agent's private key, hex, to sign its consent here (it is neither sent nor
    /// printed; prefer the environment variable or --agent-key-file: a flag's value shows
    /// in the process list).
    #[arg(
        long,
        env = "GANTRY_AGENT_KEY",
        hide_env_values = true,
        value_name = "HEX"
    )]
    pub agent_key: Option<Secret>,
    /// A file holding the agent's private key (hex), to sign its consent here.
    #[arg(long, env = "GANTRY_AGENT_KEY_FILE")]
    pub agent_key_file: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct SetAgentArgs {
    /// The node id.
    pub id: u64,
    #[command(flatten)]
    pub agent: AgentArgs,
}

#[derive(Debug, Args)]
pub struct RegisterArgs {
    #[command(flatten)]
    pub agent: AgentArgs,
    /// The GPU model id as the worker reports it (NVML's name, spaces as dashes, e.g.
    /// "NVIDIA H100 80GB HBM3"); none for a CPU-only node.
    #[arg(long)]
    pub gpu: Option<String>,
    /// GPUs (default 1 with --gpu).
    #[arg(long)]
    pub gpus: Option<u16>,
    /// Memory per GPU, e.g. 80GiB (required with --gpu).
    #[arg(long)]
    pub vram: Option<String>,
    /// CPU cores.
    #[arg(long)]
    pub cpus: u16,
    /// Host memory, e.g. 512GiB.
    #[arg(long)]
    pub ram: String,
    /// Price per GPU-hour, whole tokens.
    #[arg(long, default_value = "0")]
    pub price: String,
    /// Jobs at once (maxConcurrentJobs).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..))]
    pub slots: u8,
    /// The engines the node runs, comma-separated (the worker's `jobs.engines`): docker,
    /// wasm, or both.
    #[arg(long, value_delimiter = ',', default_value = "docker,wasm")]
    pub engines: Vec<gantry_protocol::spec::Engine>,
    /// Stake, whole tokens (default: twice the registry's minimum, room for slashes).
    #[arg(long)]
    pub stake: Option<String>,
    /// Where the node describes itself.
    #[arg(long, default_value = "")]
    pub metadata_uri: String,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_anywhere_and_the_key_is_never_shown() {
        let cli = Cli::try_parse_from([
            "gantry",
            "job",
            "status",
            "7",
            "--json",
            "--private-key",
            "0xabc",
        ])
        .unwrap();
        assert!(cli.global.json);
        assert!(!format!("{cli:?}").contains("0xabc"));
    }

    #[test]
    fn resolve_says_who_wins_and_only_one() {
        let parse = |args: &[&str]| {
            Cli::try_parse_from(["gantry", "job", "resolve", "4"].iter().chain(args))
        };
        assert!(parse(&[]).is_err(), "a decision is required");
        assert!(parse(&["--provider-wins", "--submitter-wins"]).is_err());
        let Command::Job(JobCommand::Resolve(args)) = parse(&["--submitter-wins"]).unwrap().command
        else {
            panic!("resolve")
        };
        assert!(args.submitter_wins && !args.provider_wins);
    }

    #[test]
    fn a_consent_names_its_agent_and_deadline_and_the_agent_key_is_never_shown() {
        let register = |args: &[&str]| {
            Cli::try_parse_from(
                ["gantry", "node", "register", "--cpus", "1", "--ram", "1GiB"]
                    .iter()
                    .chain(args),
            )
        };
        let agent = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC";
        assert!(register(&["--consent", "0x01", "--consent-deadline", "9"]).is_err());
        assert!(register(&["--agent", agent, "--consent", "0x01"]).is_err());
        let cli = register(&[
            "--agent",
            agent,
            "--consent-signature",
            "0x01",
            "--consent-deadline",
            "9",
        ])
        .unwrap();
        let Command::Node(NodeCommand::Register(args)) = cli.command else {
            panic!("register")
        };
        assert_eq!(args.agent.consent_deadline, Some(9));
        let cli = register(&["--agent-key", "0xfeedbeef"]).unwrap();
        assert!(!format!("{cli:?}").contains("feedbeef"));
    }

    #[test]
    fn encrypted_submit_flags_and_the_identity_parse() {
        let cli = Cli::try_parse_from([
            "gantry",
            "job",
            "submit",
            "--bounty",
            "1",
            "--image",
            "busybox",
            "--secret-input",
            "data.tar=./data.tar",
            "--secret-input",
            "/inputs/key=key.pem",
            "--recipient",
            "age1someone",
            "--identity",
            "me.age",
        ])
        .unwrap();
        assert_eq!(cli.global.identity.as_deref(), Some("me.age".as_ref()));
        let Command::Job(JobCommand::Submit(args)) = cli.command else {
            panic!("submit")
        };
        assert!(!args.encrypt, "implied by the command, not set by clap");
        assert_eq!(
            args.secret_inputs,
            ["data.tar=./data.tar", "/inputs/key=key.pem"]
        );
        assert_eq!(args.recipient.as_deref(), Some("age1someone"));
        // A spec file takes --encrypt and secret inputs too.
        let cli = Cli::try_parse_from([
            "gantry",
            "job",
            "submit",
            "spec.json",
            "--bounty",
            "1",
            "--encrypt",
        ])
        .unwrap();
        let Command::Job(JobCommand::Submit(args)) = cli.command else {
            panic!("submit")
        };
        assert!(args.encrypt);
        // The keys commands.
        let cli = Cli::try_parse_from(["gantry", "keys", "new", "me.age"]).unwrap();
        let Command::Keys(KeysCommand::New(args)) = cli.command else {
            panic!("keys new")
        };
        assert_eq!(args.file, PathBuf::from("me.age"));
        assert!(Cli::try_parse_from(["gantry", "keys", "new"]).is_err());
        let cli = Cli::try_parse_from(["gantry", "keys", "show", "--identity", "x"]).unwrap();
        assert!(matches!(cli.command, Command::Keys(KeysCommand::Show)));
        assert!(matches!(
            Cli::try_parse_from(["gantry", "keys", "serve"])
                .unwrap()
                .command,
            Command::Keys(KeysCommand::Serve)
        ));
    }

    #[test]
    fn encrypted_identity_help_says_whom_to_sign_for() {
        let help = Cli::command().render_long_help().to_string();
        assert!(help.contains("--identity"), "{help}");
        assert!(help.contains("anyone who obtains that signature"), "{help}");
    }

    #[test]
    fn a_spec_file_excludes_the_spec_flags() {
        let parsed = Cli::try_parse_from([
            "gantry",
            "job",
            "submit",
            "spec.json",
            "--bounty",
            "1",
            "--image",
            "x",
        ]);
        assert!(parsed.is_err());
        let cli = Cli::try_parse_from([
            "gantry", "job", "submit", "--bounty", "1", "--image", "busybox", "--", "sh", "-c",
            "echo hi",
        ])
        .unwrap();
        let Command::Job(JobCommand::Submit(args)) = cli.command else {
            panic!("submit")
        };
        assert_eq!(args.command, ["sh", "-c", "echo hi"]);
    }
}
