//! What the CLI's tests share: the kit's `TestNet` (a fresh chain; for reads also NATS,
//! the indexer and the API in-process, as `gantry-api` runs them) with its deployment
//! file, and the `gantry` binary run as a process against it.

use std::ops::Deref;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use gantry_api::project::Progress;
use gantry_testkit::{GUSD, TestNet};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdout};

/// How long any one wait in these tests may take before it fails.
pub(crate) const WAIT: Duration = Duration::from_secs(60);

/// A test net with the market, and its deployment file.
pub(crate) struct Net {
    net: TestNet,
    deployment: PathBuf,
    api_url: Option<String>,
}

impl Deref for Net {
    type Target = TestNet;

    fn deref(&self) -> &TestNet {
        &self.net
    }
}

impl Net {
    /// A fresh chain and nothing else.
    pub(crate) async fn start() -> Self {
        Self::on(
            TestNet::builder()
                .start()
                .await
                .expect("the test net starts"),
        )
    }

    /// A fresh chain with NATS, the indexer and the API, which `gantry` reads through.
    pub(crate) async fn start_with_api() -> (Self, ApiStack) {
        let net = TestNet::builder().indexer().start().await;
        let mut net = Self::on(net.expect("the test net starts"));
        let api = ApiStack::start(&net).await;
        net.api_url = Some(api.base.clone());
        (net, api)
    }

    fn on(net: TestNet) -> Self {
        let deployment = net.dir().join("deployment.json");
        std::fs::write(
            &deployment,
            serde_json::to_vec(&net.devnet.deployment).unwrap(),
        )
        .unwrap();
        Self {
            net,
            deployment,
            api_url: None,
        }
    }

    /// Mints whole gUSD to `account` (no approval).
    pub(crate) async fn mint(&self, account: usize, gusd: u64) {
        self.devnet
            .mint(self.address(account), U256::from(gusd * GUSD))
            .await
            .unwrap();
    }

    pub(crate) async fn balance(&self, account: usize) -> U256 {
        let token = gantry_protocol::bindings::GantryTestToken::new(
            self.devnet.deployment.token,
            self.devnet.admin.clone(),
        );
        token.balanceOf(self.address(account)).call().await.unwrap()
    }

    /// What `spender` may still take of `account`'s tokens.
    pub(crate) async fn allowance(&self, account: usize, spender: Address) -> U256 {
        let token = gantry_protocol::bindings::GantryTestToken::new(
            self.devnet.deployment.token,
            self.devnet.admin.clone(),
        );
        token
            .allowance(self.address(account), spender)
            .call()
            .await
            .unwrap()
    }

    pub(crate) async fn nonce(&self, account: usize) -> u64 {
        self.devnet
            .admin
            .get_transaction_count(self.address(account))
            .await
            .unwrap()
    }

    /// `gantry` signing as anvil's `account` (its key in `GANTRY_PRIVATE_KEY`).
    pub(crate) fn gantry(&self, account: usize) -> Gantry {
        let mut gantry = self.gantry_without_key();
        let key = alloy::hex::encode_prefixed(self.devnet.signer(account).to_bytes());
        gantry.envs.push(("GANTRY_PRIVATE_KEY".into(), key));
        gantry
    }

    pub(crate) fn gantry_without_key(&self) -> Gantry {
        let mut args = vec![
            "--rpc-url".to_string(),
            self.devnet.anvil.endpoint(),
            "--deployment".into(),
            self.deployment.display().to_string(),
        ];
        if let Some(api) = &self.api_url {
            args.extend(["--api-url".into(), api.clone()]);
            args.extend(["--nats-url".into(), self.nats().url()]);
        }
        Gantry {
            args,
            envs: Vec::new(),
        }
    }
}

/// The `gantry` binary with the connection flags.
pub(crate) struct Gantry {
    args: Vec<String>,
    envs: Vec<(String, String)>,
}

/// A finished run.
#[derive(Debug)]
pub(crate) struct Output {
    pub(crate) code: i32,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Output {
    /// Fails the test unless the run succeeded.
    #[track_caller]
    pub(crate) fn ok(self) -> Self {
        assert_eq!(self.code, 0, "gantry failed: {self:#?}");
        self
    }

    /// Fails the test unless the run exited `code` with `message` in its stderr.
    #[track_caller]
    pub(crate) fn failed(self, code: i32, message: &str) -> Self {
        assert_eq!(self.code, code, "exit code: {self:#?}");
        assert!(
            self.stderr.contains(message),
            "stderr lacks {message:?}: {self:#?}"
        );
        self
    }

    #[track_caller]
    pub(crate) fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }
}

impl Gantry {
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_gantry"));
        for name in [
            "GANTRY_PRIVATE_KEY",
            "GANTRY_KEY_FILE",
            "GANTRY_AGENT_KEY",
            "GANTRY_AGENT_KEY_FILE",
            "GANTRY_RPC_URL",
            "GANTRY_API_URL",
            "GANTRY_NATS_URL",
            "GANTRY_DEPLOYMENT",
            "GANTRY_MARKET",
            "GANTRY_REGISTRY",
            "GANTRY_TOKEN",
            "GANTRY_CHAIN_ID",
            "GANTRY_IDENTITY",
        ] {
            command.env_remove(name);
        }
        command
            .args(&self.args)
            .args(args)
            .envs(self.envs.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    pub(crate) async fn run(&self, args: &[&str]) -> Output {
        let output = tokio::time::timeout(WAIT, self.command(args).output())
            .await
            .unwrap_or_else(|_| panic!("gantry {args:?} did not finish"))
            .unwrap();
        Output {
            code: output.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(output.stdout).unwrap(),
            stderr: String::from_utf8(output.stderr).unwrap(),
        }
    }

    /// Starts a long-running command (watch, logs --follow) whose stdout is read by line.
    pub(crate) fn spawn(&self, args: &[&str]) -> Running {
        let mut child = self
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let errors = BufReader::new(child.stderr.take().unwrap()).lines();
        Running {
            child,
            lines,
            errors,
        }
    }
}

/// A running `gantry` process.
pub(crate) struct Running {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    errors: Lines<BufReader<ChildStderr>>,
}

impl Running {
    /// The next line of stdout.
    pub(crate) async fn line(&mut self) -> String {
        tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("a line within the wait")
            .unwrap()
            .expect("the process goes on")
    }

    /// Reads stderr until a line contains `text`; returns that line.
    pub(crate) async fn stderr_until(&mut self, text: &str) -> String {
        tokio::time::timeout(WAIT, async {
            loop {
                let line = self
                    .errors
                    .next_line()
                    .await
                    .unwrap()
                    .unwrap_or_else(|| panic!("stderr ended before {text:?}"));
                if line.contains(text) {
                    return line;
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("no stderr line with {text:?} within the wait"))
    }

    /// Reads JSON lines until one satisfies `matches`.
    pub(crate) async fn until(
        &mut self,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        loop {
            let line = self.line().await;
            let value: serde_json::Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
            if matches(&value) {
                return value;
            }
        }
    }

    /// Sends the process SIGTERM (as a service manager stops it).
    pub(crate) async fn terminate(&self) {
        let pid = self.child.id().expect("the process runs").to_string();
        let status = tokio::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .await
            .unwrap();
        assert!(status.success(), "kill -TERM {pid}");
    }

    /// The rest of stdout and the exit code.
    pub(crate) async fn finished(mut self) -> (i32, Vec<String>) {
        let mut rest = Vec::new();
        tokio::time::timeout(WAIT, async {
            while let Some(line) = self.lines.next_line().await.unwrap() {
                rest.push(line);
            }
        })
        .await
        .expect("the process ends");
        let status = tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("the process exits")
            .unwrap();
        (status.code().expect("exited, not killed"), rest)
    }
}

/// The API as `gantry-api` runs it, fed by the indexer of `net`'s chain.
pub(crate) struct ApiStack {
    base: String,
    progress: tokio::sync::watch::Receiver<Progress>,
    reports: tokio::sync::watch::Receiver<u64>,
}

impl ApiStack {
    /// Creates the workers' stream (as a worker does) and starts the API on `net`; it stops
    /// with the net.
    async fn start(net: &TestNet) -> Self {
        net.create_jobs_stream().await;
        let config = gantry_api::Config::local(
            net.chain_id(),
            &net.nats().url(),
            &format!("sqlite://{}", net.dir().join("api.db").display()),
        );
        let api = gantry_api::start(config, net.shutdown())
            .await
            .expect("the API starts");
        let (base, progress, reports) = (api.base_url(), api.progress.clone(), api.reports.clone());
        tokio::spawn(async move { api.wait().await.expect("the API runs") });
        Self {
            base,
            progress,
            reports,
        }
    }

    /// Waits until the API has projected the chain's head and the worker reports up to
    /// stream sequence `reported`.
    pub(crate) async fn caught_up(&self, net: &Net, reported: u64) {
        let head = net.devnet.admin.get_block_number().await.unwrap();
        let (mut progress, mut reports) = (self.progress.clone(), self.reports.clone());
        tokio::time::timeout(WAIT, async {
            progress.wait_for(|p| p.block >= head).await.unwrap();
            reports.wait_for(|seq| *seq >= reported).await.unwrap();
        })
        .await
        .expect("the API projects the chain and the worker reports");
    }
}
