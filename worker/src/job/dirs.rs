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
        let space = spaces.take().await?;
        let dirs = Self {
            root: root.to_owned(),
            inputs: root.join("inputs"),
            outputs: space.path().join("outputs"),
            checkpoints: space.path().join("checkpoints"),
            tmp: space.path().join("tmp"),
            space,
        };
        // Every step on one blocking thread: a job's start waits for them (each through
        // tokio::fs would be a thread hop of its own).
        let paths = [
            &dirs.root,
            &dirs.inputs,
            &dirs.outputs,
            &dirs.checkpoints,
            &dirs.tmp,
        ]
        .map(|p| p.to_owned());
        tokio::task::spawn_blocking(move || lay_out(paths))
            .await
            .map_err(|e| Failure::node(format!("work dir: {e}")))?
            .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        Ok(dirs)
    }
}

/// The job's directory, emptied of what an earlier run left (its space unmounted first),
/// with `inputs` (the worker's), and `outputs`, `checkpoints` (anyone writes) and `tmp`
/// (anyone writes, only the owner removes, as everywhere) in the space.
fn lay_out([root, inputs, outputs, checkpoints, tmp]: [PathBuf; 5]) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    space::unmount_in(&root);
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&inputs)?;
    for (dir, mode) in [(outputs, 0o777), (checkpoints, 0o777), (tmp, 0o1777)] {
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))?;
    }
    Ok(())
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
