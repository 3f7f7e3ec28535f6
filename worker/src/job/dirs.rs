//! A job's directories on the host: `inputs` (read-only in the container), `outputs` and
//! `checkpoints` (writable by the container's user).

use std::path::{Path, PathBuf};

use crate::fault::Failure;

/// A job's directories on the host.
#[derive(Debug)]
pub(super) struct JobDirs {
    pub(super) root: PathBuf,
    pub(super) inputs: PathBuf,
    pub(super) outputs: PathBuf,
    pub(super) checkpoints: PathBuf,
}

impl JobDirs {
    /// Fresh directories; the writable ones are open to the container's user, whoever it
    /// is (the work directory above them is the worker's alone).
    pub(super) async fn create(root: &Path) -> Result<Self, Failure> {
        let _ = tokio::fs::remove_dir_all(root).await;
        let dirs = Self {
            root: root.to_owned(),
            inputs: root.join("inputs"),
            outputs: root.join("outputs"),
            checkpoints: root.join("checkpoints"),
        };
        for dir in [&dirs.inputs, &dirs.outputs, &dirs.checkpoints] {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| Failure::node(format!("work dir: {e}")))?;
        }
        make_writable(&dirs.outputs).await?;
        make_writable(&dirs.checkpoints).await?;
        Ok(dirs)
    }
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
