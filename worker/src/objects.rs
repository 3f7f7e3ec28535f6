//! Results and checkpoints in NATS object stores: the buckets, and packed files
//! ([`Packed`]) uploaded and downloaded by key. The tars themselves are [`crate::archive`]'s.

use std::path::Path;

use async_nats::jetstream::{self, object_store::ObjectStore};
use tokio::io::AsyncWriteExt;

use crate::archive::{Packed, local};
use crate::fault::Failure;
use crate::metrics;

/// The object store named `bucket`, created with `replicas` when missing.
pub async fn bucket(
    js: &jetstream::Context,
    bucket: &str,
    replicas: usize,
) -> Result<ObjectStore, Failure> {
    if let Ok(store) = js.get_object_store(bucket).await {
        return Ok(store);
    }
    js.create_object_store(gantry_protocol::storage::object_store(bucket, replicas))
        .await
        .map_err(|e| Failure::transient(format!("object store {bucket}: {e}")))
}

/// Uploads a packed file as `key`.
pub async fn upload(store: &ObjectStore, key: &str, packed: &Packed) -> Result<(), Failure> {
    let mut file = tokio::fs::File::open(&packed.path)
        .await
        .map_err(|e| local(&packed.path, e))?;
    store
        .put(key, &mut file)
        .await
        .map_err(|e| Failure::transient(format!("upload {key}: {e}")))?;
    metrics::object_bytes("out", packed.size);
    Ok(())
}

/// Downloads `key` into `into`, at most `limit` bytes; `false` when there is no such object.
pub async fn download(
    store: &ObjectStore,
    key: &str,
    into: &Path,
    limit: u64,
) -> Result<bool, Failure> {
    use jetstream::object_store::GetErrorKind;
    let mut object = match store.get(key).await {
        Ok(object) => object,
        Err(e) if e.kind() == GetErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Failure::transient(format!("download {key}: {e}"))),
    };
    if object.info().size as u64 > limit {
        return Err(Failure::job(format!("{key} is larger than {limit} bytes")));
    }
    let mut file = tokio::fs::File::create(into)
        .await
        .map_err(|e| local(into, e))?;
    let copied = tokio::io::copy(&mut object, &mut file)
        .await
        .map_err(|e| Failure::transient(format!("download {key}: {e}")))?;
    file.flush().await.map_err(|e| local(into, e))?;
    metrics::object_bytes("in", copied);
    Ok(true)
}
