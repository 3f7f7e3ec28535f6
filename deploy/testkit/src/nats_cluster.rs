//! nats-server run from the production configuration in `deploy/nats/`, for tests of that
//! configuration: one server ([`ConfiguredNats::start`]) or a three-node cluster with routes
//! on loopback ([`NatsCluster::start`]), stopped on drop.
//!
//! ```text
//!   deploy/nats/{nats-server,cluster}.conf ──copied──▶ tmp/<file>   (include auth.conf)
//!   gantry_protocol::nats_auth::render     ──writes──▶ tmp/auth.conf
//!   nats-server -c tmp/<file> -a 127.0.0.1 -p … -m … -sd … [--cluster … --routes …]
//! ```
//!
//! The committed files carry production addresses (0.0.0.0:4222, routes to nats-1..3);
//! the command line overrides them with loopback ports, as nats-server lets flags do. The
//! users' passwords go into the server's environment, as in production.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gantry_protocol::nats_auth;

use crate::{DevnetError, Tools, workspace_root};

const READY_TIMEOUT: Duration = Duration::from_secs(20);

/// `deploy/nats/<file>` copied into a temporary folder beside the `auth.conf` that
/// `gantry-devnet nats-auth` writes for a chain and its worker nodes (the protocol's
/// `nats_auth::render`), with a password per user.
#[derive(Debug)]
pub struct NatsConfig {
    /// Holds the files until the config drops.
    _dir: tempfile::TempDir,
    file: PathBuf,
    users: Vec<String>,
    /// The auth callout's issuer: the server accepts the users it signs.
    issuer: nkeys::KeyPair,
}

impl NatsConfig {
    /// Renders `deploy/nats/<file>` (`nats-server.conf` or `cluster.conf`) for `chain_id`
    /// with one worker user per node in `worker_nodes`.
    pub fn render(file: &str, chain_id: u64, worker_nodes: &[u64]) -> Result<Self, DevnetError> {
        let source = workspace_root().join("deploy/nats");
        let dir = tempfile::Builder::new().prefix("gantry-nats").tempdir()?;
        std::fs::copy(source.join(file), dir.path().join(file))?;
        std::fs::write(
            dir.path().join("auth.conf"),
            nats_auth::render(chain_id, worker_nodes),
        )?;
        let mut users: Vec<String> = nats_auth::users(chain_id, worker_nodes)
            .into_iter()
            .map(|user| user.name)
            .collect();
        users.push(nats_auth::CALLOUT_USER.to_owned());
        Ok(Self {
            file: dir.path().join(file),
            _dir: dir,
            users,
            issuer: nkeys::KeyPair::new_account(),
        })
    }

    /// The callout issuer's seed (`SA…`), for the auth service.
    pub fn issuer_seed(&self) -> String {
        self.issuer
            .seed()
            .expect("a generated key pair has its seed")
    }

    /// `nats://<user>:<password>@127.0.0.1:<port>` on `server`.
    pub fn url_of(&self, server: &ConfiguredNats, user: &str) -> String {
        format!(
            "nats://{user}:{}@127.0.0.1:{}",
            self.password(user),
            server.port()
        )
    }

    /// The rendered server config (its `auth.conf` beside it).
    pub fn path(&self) -> &Path {
        &self.file
    }

    /// The password of `user` (`worker-7`, `indexer`, …), as the server's environment has it.
    pub fn password(&self, user: &str) -> String {
        format!("pw-{user}-test")
    }

    /// `GANTRY_NATS_<USER>_PASSWORD` for every user and the callout issuer's public key:
    /// the server's environment.
    fn env(&self) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .users
            .iter()
            .map(|user| (nats_auth::password_env(user), self.password(user)))
            .collect();
        env.push((
            nats_auth::CALLOUT_ISSUER_ENV.to_owned(),
            self.issuer.public_key(),
        ));
        env
    }
}

/// One nats-server started from a [`NatsConfig`], with its store in a temporary folder.
#[derive(Debug)]
pub struct ConfiguredNats {
    child: Option<Child>,
    name: String,
    config: PathBuf,
    env: Vec<(String, String)>,
    port: u16,
    monitor_port: u16,
    cluster: Option<Routes>,
    store: tempfile::TempDir,
}

/// A node's route port and every node's, for `--cluster` and `--routes`.
#[derive(Debug, Clone)]
struct Routes {
    own: u16,
    all: Vec<u16>,
}

impl ConfiguredNats {
    /// Starts one server from `config` (rendered from `nats-server.conf`) on free loopback
    /// ports and waits until it accepts clients.
    pub fn start(config: &NatsConfig) -> Result<Self, DevnetError> {
        Self::spawn("nats-1".into(), config, None)
    }

    fn spawn(
        name: String,
        config: &NatsConfig,
        cluster: Option<Routes>,
    ) -> Result<Self, DevnetError> {
        let mut env = config.env();
        env.push(("NATS_SERVER_NAME".into(), name.clone()));
        let mut server = Self {
            child: None,
            name,
            config: config.path().to_path_buf(),
            env,
            port: 0,
            monitor_port: 0,
            cluster,
            store: tempfile::Builder::new().prefix("gantry-js").tempdir()?,
        };
        server.launch()?;
        Ok(server)
    }

    /// The server's name (`nats-1`, …), as in JetStream's cluster info.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `nats://127.0.0.1:<port>` (credentials go in the connect options).
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether the process runs (false after [`Self::kill`]).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Kills the server (SIGKILL, no clean shutdown); its store stays.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same ports with the same store.
    pub fn restart(&mut self) -> Result<(), DevnetError> {
        self.kill();
        self.launch()
    }

    /// Whether `/healthz` answers 200: the server runs and, in a cluster, JetStream has a
    /// meta leader and this server is current with it.
    pub fn healthy(&self) -> bool {
        self.child.is_some() && http_status(self.monitor_port, "/healthz") == Some(200)
    }

    fn launch(&mut self) -> Result<(), DevnetError> {
        let port_arg = |port: u16| {
            if port == 0 {
                "-1".to_string()
            } else {
                port.to_string()
            }
        };
        let mut command = Command::new(Tools::locate().nats_server()?);
        command
            .arg("-c")
            .arg(&self.config)
            .args(["-a", "127.0.0.1", "-p", &port_arg(self.port)])
            .args(["-m", &port_arg(self.monitor_port), "-sd"])
            .arg(self.store.path())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if let Some(routes) = &self.cluster {
            let all: Vec<String> = routes
                .all
                .iter()
                .map(|port| format!("nats-route://127.0.0.1:{port}"))
                .collect();
            command
                .args(["--cluster", &format!("nats://127.0.0.1:{}", routes.own)])
                .args(["--routes", &all.join(",")]);
        }
        let mut child = command.spawn()?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        // Reads the log until the server is ready, then keeps draining it so the pipe never
        // fills; the lines before readiness explain a failed start.
        std::thread::spawn(move || {
            let (mut port, mut monitor, mut early) = (None, None, Vec::new());
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("Listening for client connections on ").nth(1) {
                    port = last_port(rest);
                }
                if let Some(rest) = line.split("Starting http monitor on ").nth(1) {
                    monitor = last_port(rest);
                }
                if line.contains("Server is ready") {
                    let _ = ready_tx.send(Ok((port, monitor)));
                    early.clear();
                } else if early.len() < 40 {
                    early.push(line);
                }
            }
            let _ = ready_tx.send(Err(early.join("\n")));
        });
        match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(Ok((Some(port), Some(monitor)))) => {
                self.port = port;
                self.monitor_port = monitor;
                self.child = Some(child);
                Ok(())
            }
            outcome => {
                let _ = child.kill();
                let _ = child.wait();
                let log = match outcome {
                    Ok(Err(log)) => log,
                    _ => String::new(),
                };
                Err(DevnetError::Nats(format!(
                    "{} ({}) did not report ready with client and monitor ports: {log}",
                    self.name,
                    self.config.display()
                )))
            }
        }
    }
}

impl Drop for ConfiguredNats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Three nats-servers from one rendered `cluster.conf`, routed to each other on loopback.
#[derive(Debug)]
pub struct NatsCluster {
    nodes: Vec<ConfiguredNats>,
}

impl NatsCluster {
    /// Starts `nats-1`, `nats-2` and `nats-3` from `config` and waits until every one is
    /// healthy (routes up, a JetStream meta leader elected).
    pub fn start(config: &NatsConfig) -> Result<Self, DevnetError> {
        let route_ports = free_ports(3)?;
        let nodes = route_ports
            .iter()
            .enumerate()
            .map(|(i, own)| {
                let routes = Routes {
                    own: *own,
                    all: route_ports.clone(),
                };
                ConfiguredNats::spawn(format!("nats-{}", i + 1), config, Some(routes))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let cluster = Self { nodes };
        cluster.wait_healthy(READY_TIMEOUT)?;
        Ok(cluster)
    }

    pub fn nodes(&self) -> &[ConfiguredNats] {
        &self.nodes
    }

    /// The node named `name` (`nats-2`).
    pub fn node_mut(&mut self, name: &str) -> Option<&mut ConfiguredNats> {
        self.nodes.iter_mut().find(|node| node.name == name)
    }

    /// Waits until every running node answers `/healthz` with 200.
    pub fn wait_healthy(&self, timeout: Duration) -> Result<(), DevnetError> {
        let deadline = Instant::now() + timeout;
        loop {
            let sick: Vec<&str> = self
                .nodes
                .iter()
                .filter(|node| node.is_running() && !node.healthy())
                .map(|node| node.name.as_str())
                .collect();
            if sick.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(DevnetError::Nats(format!(
                    "not healthy after {timeout:?}: {}",
                    sick.join(", ")
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

fn last_port(address: &str) -> Option<u16> {
    address.trim().rsplit(':').next()?.parse().ok()
}

/// Ports free right now (bound and released): another process could take one before the
/// server binds it, which then fails to start and says so.
fn free_ports(count: usize) -> Result<Vec<u16>, DevnetError> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

/// The status code of `GET <path>` on the loopback monitor port; `None` when it does not answer.
fn http_status(port: u16, path: &str) -> Option<u16> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_whitespace().nth(1)?.parse().ok()
}
