//! The writer lease: one indexer per chain publishes at a time. The lease is a key in a
//! JetStream KV bucket whose entries expire after the lease's time to live; the holder
//! renews it with a compare-and-set on its revision. A standby takes the key once it has
//! expired. The stream's expected-sequence check fences a holder that lost the lease and
//! does not know it yet.

use gantry_protocol::names;
use std::time::Duration;

use async_nats::jetstream::Context;
use async_nats::jetstream::kv::{self, CreateErrorKind};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use gantry_protocol::storage;

use crate::error::StreamError;

/// A held lease.
#[derive(Debug)]
pub struct Lease {
    store: kv::Store,
    key: String,
    owner: String,
    revision: u64,
    ttl: Duration,
}

impl Lease {
    /// Waits until this instance holds the lease of `chain_id`, or `cancel` fires.
    pub async fn acquire(
        js: &Context,
        chain_id: u64,
        owner: &str,
        ttl: Duration,
        replicas: usize,
        cancel: &CancellationToken,
    ) -> Result<Option<Self>, StreamError> {
        let store = js
            .create_key_value(storage::lease_bucket(
                names::INDEXER_LEASE_BUCKET,
                ttl,
                replicas,
            ))
            .await
            .map_err(|e| StreamError::Nats(format!("lease bucket: {e}")))?;
        let key = format!("chain-{chain_id}");
        loop {
            match store.create(&key, Bytes::from(owner.to_owned())).await {
                Ok(revision) => {
                    tracing::info!(chain_id, owner, "writer lease acquired");
                    return Ok(Some(Self {
                        store,
                        key,
                        owner: owner.to_owned(),
                        revision,
                        ttl,
                    }));
                }
                Err(e) if e.kind() == CreateErrorKind::AlreadyExists => {}
                Err(e) => return Err(StreamError::Nats(format!("lease: {e}"))),
            }
            tokio::select! {
                () = cancel.cancelled() => return Ok(None),
                () = tokio::time::sleep(ttl / 4) => {}
            }
        }
    }

    /// How often the holder must renew.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// Renews the lease; fails when someone else holds it now.
    pub async fn renew(&mut self) -> Result<(), StreamError> {
        self.revision = self
            .store
            .update(&self.key, Bytes::from(self.owner.clone()), self.revision)
            .await
            .map_err(|e| StreamError::Conflict(format!("lease renewal: {e}")))?;
        Ok(())
    }

    /// Gives the lease up at once so a standby need not wait for it to expire.
    pub async fn release(self) {
        if let Err(e) = self
            .store
            .delete_expect_revision(&self.key, Some(self.revision))
            .await
        {
            tracing::warn!(error = %e, "releasing the writer lease");
        }
    }
}
