use std::path::{Path, PathBuf};

use crate::DevnetError;

/// The workspace root (where `Cargo.toml`, `contracts/` and `.tools/` live).
pub fn workspace_root() -> PathBuf {
    // deploy/testkit -> deploy -> root
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crate lives two levels below the workspace root")
        .to_path_buf()
}

/// The binaries `deploy/setup.sh` installs into `.tools/bin` (or `$GANTRY_TOOLS_BIN`).
#[derive(Debug, Clone)]
pub struct Tools {
    bin: PathBuf,
}

impl Tools {
    /// Tools from `$GANTRY_TOOLS_BIN`, else the workspace's `.tools/bin`.
    pub fn locate() -> Self {
        let bin = std::env::var_os("GANTRY_TOOLS_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace_root().join(".tools/bin"));
        Self { bin }
    }

    pub fn anvil(&self) -> Result<PathBuf, DevnetError> {
        self.get("anvil")
    }

    pub fn forge(&self) -> Result<PathBuf, DevnetError> {
        self.get("forge")
    }

    pub fn nats_server(&self) -> Result<PathBuf, DevnetError> {
        self.get("nats-server")
    }

    /// The tools folder itself, for `PATH` of child processes (forge finds solc there).
    pub fn bin_dir(&self) -> &Path {
        &self.bin
    }

    fn get(&self, tool: &'static str) -> Result<PathBuf, DevnetError> {
        let path = self.bin.join(tool);
        if path.exists() {
            Ok(path)
        } else {
            Err(DevnetError::ToolMissing { tool, path })
        }
    }
}

/// A free TCP port on loopback (free when asked; the caller binds it right after), below
/// the kernel's ephemeral range (32768 and up by default): a service restarted on a port
/// from that range could find it taken meanwhile as the source port of some outgoing
/// connection (the chaos suite's API once could not listen again). Ports are walked
/// from a start that differs per process, so that two test processes rarely meet.
pub fn free_port() -> std::io::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    const LOW: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let start = std::process::id().wrapping_mul(7_919).wrapping_add(nanos) % SPAN;
    for _ in 0..SPAN {
        let offset = start.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN;
        let port = u16::try_from(LOW + offset).expect("below 32000");
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
