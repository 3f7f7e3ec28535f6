//! The keeper lease: one liveness replica acts at a time (a [`KvLease`]: a standby takes
//! over within TTL + TTL/4 of the holder's death, within two lease periods). A replica
//! whose sender is stuck (its transactions are not mined) gives the lease up and does not
//! take it again until they are: a keeper that cannot act must not hold the role.

use std::time::Duration;

use async_nats::jetstream;
use gantry_protocol::{names, storage};
use gantry_runtime::lease::KvLease;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::error::StreamError;
use crate::metrics;

/// Runs the lease loop until `cancel` fires, publishing whether this replica leads; while
/// `stuck` is true it neither holds nor takes the lease. Releases the lease on the way out
/// so a standby need not wait for it to expire.
#[allow(clippy::too_many_arguments)]
pub async fn hold(
    js: jetstream::Context,
    chain_id: u64,
    owner: String,
    ttl: Duration,
    replicas: usize,
    leading: watch::Sender<bool>,
    mut stuck: watch::Receiver<bool>,
    cancel: CancellationToken,
) -> Result<(), StreamError> {
    let bucket = storage::lease_bucket(names::LIVENESS_LEASE_BUCKET, ttl, replicas);
    let mut lease = KvLease::open(&js, bucket, format!("chain-{chain_id}"), owner.clone())
        .await
        .map_err(|e| StreamError::nats("lease bucket", e))?;
    loop {
        let is_stuck = *stuck.borrow_and_update();
        if is_stuck {
            if lease.held() {
                tracing::warn!(owner, "the sender is stuck: giving up the keeper lease");
                lease.release().await;
            }
        } else if lease.held() {
            if let Err(e) = lease.renew().await {
                tracing::warn!(error = %e, "keeper lease lost; standing by");
            }
        } else {
            match lease.try_acquire().await {
                Ok(true) => tracing::info!(owner, "keeper lease acquired"),
                Ok(false) => {}
                Err(e) => tracing::warn!(error = %e, "acquiring the keeper lease"),
            }
        }
        let is_leader = lease.held();
        leading.send_if_modified(|current| std::mem::replace(current, is_leader) != is_leader);
        metrics::leader(is_leader);
        let pause = if is_leader {
            lease.renew_every()
        } else {
            lease.retry_every()
        };
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
            _ = stuck.changed() => {}
        }
    }
    leading.send_replace(false);
    metrics::leader(false);
    lease.release().await;
    Ok(())
}
