//! A leader lease in a JetStream KV bucket: one key per lease, whose entry expires after
//! the bucket's time to live. The holder renews it by compare-and-set on its revision
//! every third of the TTL; a standby tries to create the key every quarter of the TTL, so
//! it takes over within TTL + TTL/4 of the holder's death. Used by the indexer (one writer
//! per chain) and the liveness keeper (one keeper per chain).

use std::time::Duration;

use async_nats::jetstream::{self, kv};
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use crate::nats::NatsError;

/// One lease, held or not.
#[derive(Debug)]
pub struct KvLease {
    store: kv::Store,
    key: String,
    owner: String,
    ttl: Duration,
    revision: Option<u64>,
}

impl KvLease {
    /// The lease `key` in `bucket` (created with `config` when missing), for `owner`.
    pub async fn open(
        js: &jetstream::Context,
        config: kv::Config,
        key: String,
        owner: String,
    ) -> Result<Self, NatsError> {
        let ttl = config.max_age;
        let store = match js.get_key_value(&config.bucket).await {
            Ok(store) => store,
            Err(_) => js
                .create_key_value(config)
                .await
                .map_err(|e| NatsError::new("lease bucket", e))?,
        };
        Ok(Self {
            store,
            key,
            owner,
            ttl,
            revision: None,
        })
    }

    pub fn held(&self) -> bool {
        self.revision.is_some()
    }

    /// How often the holder renews.
    pub fn renew_every(&self) -> Duration {
        self.ttl / 3
    }

    /// How often a standby tries to take it.
    pub fn retry_every(&self) -> Duration {
        self.ttl / 4
    }

    /// Takes the lease if nobody holds it; whether this owner holds it now.
    pub async fn try_acquire(&mut self) -> Result<bool, NatsError> {
        match self
            .store
            .create(&self.key, Bytes::from(self.owner.clone()))
            .await
        {
            Ok(revision) => {
                self.revision = Some(revision);
                Ok(true)
            }
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(false),
            Err(e) => Err(NatsError::new("lease", e)),
        }
    }

    /// Waits until this owner holds the lease; `false` when `cancel` fired first. Errors
    /// other than "held by another" are returned.
    pub async fn acquire(&mut self, cancel: &CancellationToken) -> Result<bool, NatsError> {
        loop {
            if self.try_acquire().await? {
                return Ok(true);
            }
            tokio::select! {
                () = cancel.cancelled() => return Ok(false),
                () = tokio::time::sleep(self.retry_every()) => {}
            }
        }
    }

    /// Renews a held lease; an error means it is lost (someone else holds it now, or it
    /// could not be renewed in time) and this owner no longer holds it.
    pub async fn renew(&mut self) -> Result<(), NatsError> {
        let Some(revision) = self.revision else {
            return Err(NatsError::lost("lease renewal: not held"));
        };
        match self
            .store
            .update(&self.key, Bytes::from(self.owner.clone()), revision)
            .await
        {
            Ok(revision) => {
                self.revision = Some(revision);
                Ok(())
            }
            Err(e) => {
                self.revision = None;
                Err(NatsError::new("lease renewal", e))
            }
        }
    }

    /// Gives a held lease up at once so a standby need not wait for it to expire.
    pub async fn release(&mut self) {
        if let Some(revision) = self.revision.take()
            && let Err(e) = self
                .store
                .delete_expect_revision(&self.key, Some(revision))
                .await
        {
            tracing::warn!(key = %self.key, error = %e, "releasing the lease");
        }
    }
}
