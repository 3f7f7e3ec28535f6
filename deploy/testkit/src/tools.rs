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

/// A free TCP port on loopback (free when asked; the caller binds it right after).
pub fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
