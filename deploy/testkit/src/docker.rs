//! A private Docker engine for tests and the dev network: `dockerd` on its own socket,
//! data and exec roots in a temporary folder, with the flags this kind of machine needs
//! (no bridge, no iptables, the vfs storage driver). Stopped on drop.

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::DevnetError;

/// A running dockerd.
#[derive(Debug)]
pub struct Dockerd {
    child: Option<Child>,
    socket: PathBuf,
    root: tempfile::TempDir,
}

impl Dockerd {
    /// Starts `dockerd` (from `PATH`; `deploy/setup.sh` installs Debian's `docker.io`) and
    /// waits until its API listens.
    pub fn start() -> Result<Self, DevnetError> {
        // Short paths: the socket's must stay under the 108-byte limit of a unix address.
        let root = tempfile::Builder::new().prefix("gd").tempdir_in("/tmp")?;
        let socket = root.path().join("docker.sock");
        let child = Self::spawn(root.path(), &socket)?;
        Ok(Self {
            child: Some(child),
            socket,
            root,
        })
    }

    /// Stops the engine (as an outage would); [`Dockerd::restart`] brings it back with
    /// the same socket, images and data.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            terminate(&mut child);
        }
    }

    /// Starts the engine again after [`Dockerd::stop`].
    pub fn restart(&mut self) -> Result<(), DevnetError> {
        self.stop();
        self.child = Some(Self::spawn(self.root.path(), &self.socket)?);
        Ok(())
    }

    fn spawn(root: &Path, socket: &Path) -> Result<Child, DevnetError> {
        let mut child = Command::new("dockerd")
            .args(["--iptables=false", "--ip6tables=false", "--bridge=none"])
            .args(["--storage-driver=vfs"])
            .arg(format!("--host=unix://{}", socket.display()))
            .arg(format!("--data-root={}", root.join("data").display()))
            .arg(format!("--exec-root={}", root.join("exec").display()))
            .arg(format!("--pidfile={}", root.join("dockerd.pid").display()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| DevnetError::Docker(format!("starting dockerd: {e}")))?;
        let stderr = child.stderr.take().expect("stderr is piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        // Reads the log until the API listens, then keeps draining it so the pipe never fills.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("API listen on") {
                    let _ = ready_tx.send(());
                }
            }
        });
        if ready_rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(DevnetError::Docker(
                "dockerd did not report its API listening within 60 s".into(),
            ));
        }
        Ok(child)
    }

    /// The engine's socket path.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `unix://<socket>`, as Docker clients take it.
    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// A bollard client on the engine's socket, at the API version both sides speak.
    pub async fn client(&self) -> Result<bollard::Docker, DevnetError> {
        let socket = self.socket.to_str().ok_or_else(|| {
            DevnetError::Docker(format!(
                "socket path {} is not UTF-8",
                self.socket.display()
            ))
        })?;
        let docker = bollard::Docker::connect_with_unix(socket, 120, bollard::API_DEFAULT_VERSION)
            .map_err(|e| DevnetError::Docker(format!("connecting to {socket}: {e}")))?;
        docker
            .negotiate_version()
            .await
            .map_err(|e| DevnetError::Docker(format!("negotiating the API version: {e}")))
    }

    /// `GET /_ping`: whether the engine answers `OK`.
    pub fn ping(&self) -> Result<bool, DevnetError> {
        let mut stream = UnixStream::connect(&self.socket)?;
        stream.write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")?;
        let mut response = String::new();
        stream.read_to_string(&mut response)?;
        Ok(response.starts_with("HTTP/1.0 200") && response.ends_with("OK"))
    }
}

impl Drop for Dockerd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// SIGTERM lets dockerd stop its containers and containerd and unmount; SIGKILL if it
/// hangs for 10 s.
fn terminate(child: &mut Child) {
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    for _ in 0..100 {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
}
