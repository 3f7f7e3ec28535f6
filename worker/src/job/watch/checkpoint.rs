//! Checkpoint uploads: every `checkpoint_interval` the job's `/checkpoints` is packed and
//! uploaded to the checkpoints bucket under the job id, when it changed, so that the
//! next node to run the job resumes from it.

use tokio_util::sync::CancellationToken;

use super::super::Ctx;
use super::super::dirs::JobDirs;
use super::ticker;
use crate::fault::Failure;
use crate::{archive, metrics, objects};

/// Uploads a running job's checkpoints on a timer.
pub(super) struct CheckpointTicker<'a> {
    ctx: &'a Ctx,
    job_id: u64,
    dirs: &'a JobDirs,
    /// The hash of the last checkpoint uploaded.
    last: Option<[u8; 32]>,
}

impl<'a> CheckpointTicker<'a> {
    pub(super) fn new(ctx: &'a Ctx, job_id: u64, dirs: &'a JobDirs) -> Self {
        Self {
            ctx,
            job_id,
            dirs,
            last: None,
        }
    }

    /// Uploads every interval until `done` fires.
    pub(super) async fn run(mut self, done: &CancellationToken) {
        let mut tick = ticker(self.ctx.settings.checkpoint_interval);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let uploaded = self.ctx.upload_checkpoint(self.job_id, self.dirs, &mut self.last).await;
                    if let Err(f) = uploaded {
                        tracing::warn!(error = %f, "checkpoint not uploaded");
                    }
                }
                () = done.cancelled() => break,
            }
        }
    }
}

impl Ctx {
    /// Packs `/checkpoints` and uploads it when it changed since `last`.
    pub(in crate::job) async fn upload_checkpoint(
        &self,
        job_id: u64,
        dirs: &JobDirs,
        last: &mut Option<[u8; 32]>,
    ) -> Result<(), Failure> {
        let is_empty = match tokio::fs::read_dir(&dirs.checkpoints).await {
            Ok(mut entries) => matches!(entries.next_entry().await, Ok(None)),
            Err(_) => true,
        };
        if is_empty {
            return Ok(());
        }
        let from = dirs.checkpoints.clone();
        let into = dirs.root.join("checkpoint.tar");
        let limit = self.settings.max_output_bytes;
        let packed = tokio::task::spawn_blocking(move || archive::pack(&from, &into, limit))
            .await
            .map_err(|e| Failure::node(format!("packing the checkpoint: {e}")))??;
        if *last != Some(packed.sha256) {
            objects::upload(&self.checkpoints, &job_id.to_string(), &packed).await?;
            *last = Some(packed.sha256);
            metrics::checkpoint_uploaded();
            tracing::debug!(bytes = packed.size, "checkpoint uploaded");
        }
        let _ = tokio::fs::remove_file(&packed.path).await;
        Ok(())
    }
}
