//! A real nats-server with JetStream for tests, on a free loopback port, stopped on drop.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::{DevnetError, Tools};

/// A JetStream server with its store in a temporary folder.
#[derive(Debug)]
pub struct NatsServer {
    child: Child,
    port: u16,
    store: tempfile::TempDir,
}

impl NatsServer {
    /// Starts nats-server on a port the OS picks.
    pub fn start() -> Result<Self, DevnetError> {
        let store = tempfile::tempdir()?;
        let (child, port) = spawn(store.path(), None)?;
        Ok(Self { child, port, store })
    }

    /// Starts nats-server on `port` (the dev network's 4222), with a fresh store.
    pub fn start_on(port: u16) -> Result<Self, DevnetError> {
        let store = tempfile::tempdir()?;
        let (child, port) = spawn(store.path(), Some(port))?;
        Ok(Self { child, port, store })
    }

    /// `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's process id (for CPU accounting in benchmarks).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server (SIGKILL, no clean shutdown).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Starts it again on the same port with the same store.
    pub fn restart(&mut self) -> Result<(), DevnetError> {
        self.kill();
        let (child, _) = spawn(self.store.path(), Some(self.port))?;
        self.child = child;
        Ok(())
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn spawn(store: &Path, port: Option<u16>) -> Result<(Child, u16), DevnetError> {
    let port_arg = port.map_or_else(|| "-1".to_string(), |p| p.to_string());
    let mut child = Command::new(Tools::locate().nats_server()?)
        .args(["-js", "-a", "127.0.0.1", "-p", &port_arg, "-sd"])
        .arg(store)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let (ready_tx, ready_rx) = mpsc::channel();
    // Reads the log until the server is ready, then keeps draining it so the pipe never fills.
    std::thread::spawn(move || {
        let mut port = None;
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("Listening for client connections on ").nth(1) {
                port = rest
                    .rsplit(':')
                    .next()
                    .and_then(|p| p.trim().parse::<u16>().ok());
            }
            if line.contains("Server is ready") {
                let _ = ready_tx.send(port);
            }
        }
    });
    match ready_rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Some(port)) => Ok((child, port)),
        Ok(None) | Err(_) => {
            let _ = child.kill();
            Err(DevnetError::Nats(
                "nats-server did not report ready with a client port".into(),
            ))
        }
    }
}
