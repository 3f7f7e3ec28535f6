//! A job's directories on the host: `inputs` (read-only in the container) on the work
//! directory's disk, and `outputs`, `checkpoints` and `tmp` (writable by the container's
//! user) in the job's [`Space`](crate::space::Space), a file system of a fixed size,
//! taken from the node's pool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::fault::Failure;
use crate::space::{self, PooledSpace, SpacePool};

/// A job's directories on the host; its space is released when dropped.
#[derive(Debug)]
pub(super) struct JobDirs {
    pub(super) root: PathBuf,
    pub(super) inputs: PathBuf,
    pub(super) outputs: PathBuf,
    pub(super) checkpoints: PathBuf,
    pub(super) tmp: PathBuf,
    pub(super) space: PooledSpace,
}

impl JobDirs {
    /// Fresh directories, with a space from `spaces` for the writable ones, which are
    /// open to the container's user, whoever it is (the work directory above them is the
    /// worker's alone).
    pub(super) async fn create(root: &Path, spaces: &Arc<SpacePool>) -> Result<Self, Failure> {
        space::unmount_in(root);
        let _ = tokio::fs::remove_dir_all(root).await;
        let inputs = root.join("inputs");
        tokio::fs::create_dir_all(&inputs)
            .await
            .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        let space = spaces.take().await?;
        let dirs = Self {
            root: root.to_owned(),
            inputs,
            outputs: space.path().join("outputs"),
            checkpoints: space.path().join("checkpoints"),
            tmp: space.path().join("tmp"),
            space,
        };
        for dir in [&dirs.outputs, &dirs.checkpoints, &dirs.tmp] {
            tokio::fs::create_dir(dir)
                .await
                .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        }
        make_writable(&dirs.outputs).await?;
        make_writable(&dirs.checkpoints).await?;
        // /tmp as everywhere: anyone writes, only the owner removes.
        set_mode(&dirs.tmp, 0o1777).await?;
        Ok(dirs)
    }
}

async fn set_mode(path: &Path, mode: u32) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .await
        .map_err(|e| Failure::node(format!("work dir: {e}")))
}

pub(super) async fn make_writable(dir: &Path) -> Result<(), Failure> {
    use std::os::unix::fs::PermissionsExt;
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        tokio::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777))
            .await
            .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        let mut entries = tokio::fs::read_dir(&dir)
            .await
            .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        while let Ok(Some(entry)) = entries.next_entry().await {
            let kind = entry
                .file_type()
                .await
                .map_err(|e| Failure::node(e.to_string()))?;
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                tokio::fs::set_permissions(entry.path(), std::fs::Permissions::from_mode(0o666))
                    .await
                    .map_err(|e| Failure::node(format!("work dir: {e}")))?;
            }
        }
    }
    Ok(())
}
