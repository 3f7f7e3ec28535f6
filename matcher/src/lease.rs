//! The keeper lease: one liveness replica acts at a time. The lease is a key in a JetStream
//! KV bucket whose entries expire after the lease's time to live; the holder renews it by
//! compare-and-set on its revision every third of the TTL, and a standby tries to create
//! the key every quarter of the TTL, so it takes over within TTL + TTL/4 of the holder's
//! death (within two lease periods).

use gantry_protocol::names;
use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use gantry_protocol::storage;

use crate::error::StreamError;
use crate::metrics;

/// Runs the lease loop until `cancel` fires, publishing whether this replica leads.
/// Releases the lease on the way out so a standby need not wait for it to expire.
pub async fn hold(
    js: jetstream::Context,
    chain_id: u64,
    owner: String,
    ttl: Duration,
    replicas: usize,
    leading: watch::Sender<bool>,
    cancel: CancellationToken,
) -> Result<(), StreamError> {
    let store = match js.get_key_value(names::LIVENESS_LEASE_BUCKET).await {
        Ok(store) => store,
        Err(_) => js
            .create_key_value(storage::lease_bucket(
                names::LIVENESS_LEASE_BUCKET,
                ttl,
                replicas,
            ))
            .await
            .map_err(|e| StreamError::nats("lease bucket", e))?,
    };
    let key = format!("chain-{chain_id}");
    let mut revision: Option<u64> = None;
    loop {
        revision = match revision {
            None => match store.create(&key, Bytes::from(owner.clone())).await {
                Ok(revision) => {
                    tracing::info!(owner, "keeper lease acquired");
                    Some(revision)
                }
                Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => None,
                Err(e) => {
                    tracing::warn!(error = %e, "acquiring the keeper lease");
                    None
                }
            },
            Some(held) => match store.update(&key, Bytes::from(owner.clone()), held).await {
                Ok(revision) => Some(revision),
                Err(e) => {
                    tracing::warn!(error = %e, "keeper lease lost; standing by");
                    None
                }
            },
        };
        let is_leader = revision.is_some();
        leading.send_if_modified(|current| std::mem::replace(current, is_leader) != is_leader);
        metrics::leader(is_leader);
        let pause = if is_leader { ttl / 3 } else { ttl / 4 };
        tokio::select! {
            () = cancel.cancelled() => break,
            () = tokio::time::sleep(pause) => {}
        }
    }
    leading.send_replace(false);
    metrics::leader(false);
    if let Some(held) = revision
        && let Err(e) = store.delete_expect_revision(&key, Some(held)).await
    {
        tracing::warn!(error = %e, "releasing the keeper lease");
    }
    Ok(())
}
