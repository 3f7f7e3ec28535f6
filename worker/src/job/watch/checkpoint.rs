//! Checkpoint uploads: every `checkpoint_interval` the job's `/checkpoints` is packed and
//! uploaded to the checkpoints bucket as this node's object `<job>` (design 19, §2: under
//! the node's id, signed by its agent over the job, the attempt and the tar's SHA-256),
//! when it changed, so that the next node to run the job resumes from it.

use gantry_protocol::encryption::AgeRecipient;
use tokio_util::sync::CancellationToken;

use super::super::dirs::JobDirs;
use super::super::{Ctx, Held};
use super::ticker;
use crate::archive::local;
use crate::fault::Failure;
use crate::{archive, metrics};

/// Uploads a running job's checkpoints on a timer.
pub(super) struct CheckpointTicker<'a> {
    ctx: &'a Ctx,
    held: &'a Held,
    dirs: &'a JobDirs,
    seal: &'a [AgeRecipient],
    /// The hash of the last checkpoint uploaded.
    last: Option<[u8; 32]>,
}

impl<'a> CheckpointTicker<'a> {
    pub(super) fn new(
        ctx: &'a Ctx,
        held: &'a Held,
        dirs: &'a JobDirs,
        seal: &'a [AgeRecipient],
    ) -> Self {
        Self {
            ctx,
            held,
            dirs,
            seal,
            last: None,
        }
    }

    /// Uploads every interval until `done` fires.
    pub(super) async fn run(mut self, done: &CancellationToken) {
        let mut tick = ticker(self.ctx.settings.checkpoint_interval);
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let uploaded = self.ctx.upload_checkpoint(self.held, self.dirs, self.seal, &mut self.last).await;
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
    /// Packs `/checkpoints` and uploads it, signed, when it changed since `last`; an
    /// encrypted job's encrypted to `seal` first (the signature is over what is uploaded).
    pub(in crate::job) async fn upload_checkpoint(
        &self,
        held: &Held,
        dirs: &JobDirs,
        seal: &[AgeRecipient],
        last: &mut Option<[u8; 32]>,
    ) -> Result<(), Failure> {
        let job_id = held.job_id();
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
            let plain_sha256 = packed.sha256;
            let upload = if seal.is_empty() {
                packed.clone()
            } else {
                let into = dirs.root.join("checkpoint.tar.age");
                let sealed = crate::job::stages::seal(seal.to_vec(), &packed, into).await;
                sealed?
            };
            let digest = gantry_protocol::checkpoint::digest(
                self.chain_id,
                self.chain.market_address(),
                job_id,
                held.attempt,
                upload.sha256.into(),
            );
            let signature = self
                .chain
                .sign(&digest)
                .map_err(|e| Failure::node(e.to_string()))?;
            let file = tokio::fs::File::open(&upload.path)
                .await
                .map_err(|e| local(&upload.path, e))?;
            gantry_runtime::objects::put(
                &self.jobs_js,
                &self.checkpoints,
                self.node_id,
                &job_id.to_string(),
                gantry_protocol::checkpoint::metadata(held.attempt, &signature),
                file,
            )
            .await
            .map_err(|e| Failure::transient(format!("upload the checkpoint: {e}")))?;
            metrics::object_bytes("out", upload.size);
            *last = Some(plain_sha256);
            metrics::checkpoint_uploaded();
            tracing::debug!(bytes = upload.size, "checkpoint uploaded");
            if upload.path != packed.path {
                let _ = tokio::fs::remove_file(&upload.path).await;
            }
        }
        let _ = tokio::fs::remove_file(&packed.path).await;
        Ok(())
    }
}
