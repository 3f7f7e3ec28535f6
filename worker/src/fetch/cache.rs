//! The content-addressed cache: `<cache_dir>/sha256/<hex>` holds complete files, never
//! written again; `<cache_dir>/tmp` holds partial ones while they stream in.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use futures::stream::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncWriteExt, BufWriter};

use super::transport::Chunks;
use super::{FetchError, Fetched, READ_TIMEOUT};

/// Writes to the cache go through a buffer this large, to keep blocking writes few.
const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// Creates the cache's folders.
pub(super) fn create_dirs(cache_dir: &Path) -> Result<(), FetchError> {
    for dir in [sha256_dir(cache_dir), tmp_dir(cache_dir)] {
        std::fs::create_dir_all(&dir).map_err(|source| FetchError::Cache {
            op: "setup",
            source,
        })?;
    }
    Ok(())
}

/// The cached file for `hex`, if complete files hold it.
pub(super) async fn lookup(cache_dir: &Path, hex: &str) -> Result<Option<Fetched>, FetchError> {
    let path = sha256_dir(cache_dir).join(hex);
    match tokio::fs::metadata(&path).await {
        Ok(meta) if meta.is_file() => Ok(Some(Fetched {
            path,
            sha256: hex.to_owned(),
            size: meta.len(),
            cache_hit: true,
        })),
        Ok(_) => Ok(None),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FetchError::Cache {
            op: "lookup",
            source,
        }),
    }
}

/// Streams `chunks` into a temp file, checks the hash against `expected`, then moves the
/// file into the cache. The temp file is removed on every early return (the `TempPath`
/// guard).
pub(super) async fn insert(
    cache_dir: &Path,
    chunks: Chunks,
    limit: u64,
    expected: Option<&str>,
) -> Result<Fetched, FetchError> {
    // Read-only for everyone: containers may run as any user, and cached content
    // never changes.
    let (file, temp_path) = tempfile::Builder::new()
        .prefix("fetch-")
        .permissions(std::fs::Permissions::from_mode(0o444))
        .tempfile_in(tmp_dir(cache_dir))
        .map_err(|source| FetchError::Cache {
            op: "create",
            source,
        })?
        .into_parts();
    let (size, actual) = copy_limited(chunks, file, limit).await?;
    if let Some(expected) = expected
        && expected != actual
    {
        return Err(FetchError::HashMismatch {
            expected: expected.to_owned(),
            actual,
        });
    }
    let dir = sha256_dir(cache_dir);
    let path = dir.join(&actual);
    if tokio::fs::try_exists(&path).await.unwrap_or(false) {
        // Same hash, same content: another fetch got there first.
        drop(temp_path);
    } else {
        temp_path.persist(&path).map_err(|e| FetchError::Cache {
            op: "rename",
            source: e.error,
        })?;
        // Makes the rename itself durable.
        let sync_error = |source| FetchError::Cache { op: "sync", source };
        let dir = tokio::fs::File::open(&dir).await.map_err(sync_error)?;
        dir.sync_all().await.map_err(sync_error)?;
    }
    Ok(Fetched {
        path,
        sha256: actual,
        size,
        cache_hit: false,
    })
}

/// Writes `chunks` to `file`, hashing and counting; stops as soon as more than `limit`
/// bytes arrived or a chunk takes longer than [`READ_TIMEOUT`]. Returns the size and
/// hex hash once the file is flushed and synced.
async fn copy_limited(
    mut chunks: Chunks,
    file: std::fs::File,
    limit: u64,
) -> Result<(u64, String), FetchError> {
    let write_error = |source| FetchError::Cache {
        op: "write",
        source,
    };
    let mut writer = BufWriter::with_capacity(WRITE_BUFFER_BYTES, tokio::fs::File::from_std(file));
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    loop {
        let next = tokio::time::timeout(READ_TIMEOUT, chunks.next())
            .await
            .map_err(|_| FetchError::Timeout)?;
        let Some(chunk) = next else { break };
        let chunk = chunk?;
        size = size.saturating_add(chunk.len() as u64);
        if size > limit {
            return Err(FetchError::TooLarge { limit });
        }
        hasher.update(&chunk);
        writer.write_all(&chunk).await.map_err(write_error)?;
    }
    writer.flush().await.map_err(write_error)?;
    writer
        .into_inner()
        .sync_all()
        .await
        .map_err(|source| FetchError::Cache { op: "sync", source })?;
    Ok((size, hex::encode(hasher.finalize())))
}

/// The hashes of the `count` newest files in the cache (the handshake's manifest says
/// what this node has at hand); none when the cache cannot be read.
pub(crate) fn newest(cache_dir: &Path, count: usize) -> Vec<alloy::primitives::B256> {
    let Ok(entries) = std::fs::read_dir(sha256_dir(cache_dir)) else {
        return Vec::new();
    };
    let mut files: Vec<(std::time::SystemTime, alloy::primitives::B256)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let hash = entry.file_name().to_str()?.parse().ok()?;
            let modified = entry.metadata().ok()?.modified().ok()?;
            Some((modified, hash))
        })
        .collect();
    files.sort_by_key(|(modified, _)| std::cmp::Reverse(*modified));
    files
        .into_iter()
        .take(count)
        .map(|(_, hash)| hash)
        .collect()
}

fn sha256_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("sha256")
}

fn tmp_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("tmp")
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::fetch::testkit::{
        Reply, TestServer, assert_no_partial_files, assert_too_large, config, entries, input,
        sha256_hex,
    };
    use crate::fetch::{FaultClass, Fetcher};

    #[tokio::test]
    async fn downloads_verifies_and_then_hits_the_cache() {
        let data = b"training data".repeat(1000);
        let server = TestServer::start({
            let data = data.clone();
            move |_, _| Reply::Body(data.clone())
        })
        .await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let hash = sha256_hex(&data);
        let spec = input(&server.url("/data.tar"), Some(&hash.to_uppercase()), None);

        let first = fetcher.fetch(&spec).await.unwrap();
        assert!(!first.cache_hit);
        assert_eq!(first.sha256, hash);
        assert_eq!(first.size, data.len() as u64);
        assert_eq!(first.path, cache.path().join("sha256").join(&hash));
        assert_eq!(std::fs::read(&first.path).unwrap(), data);
        let mode = std::fs::metadata(&first.path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o444);

        let second = fetcher.fetch(&spec).await.unwrap();
        assert_eq!(
            second,
            Fetched {
                cache_hit: true,
                ..first
            }
        );
        assert_eq!(server.hits("/data.tar"), 1);
        assert_no_partial_files(cache.path());

        // A cached file is still held to the input's own limit.
        let mut small = spec.clone();
        small.max_bytes = Some(100);
        assert!(matches!(
            fetcher.fetch(&small).await,
            Err(FetchError::TooLarge { limit: 100 })
        ));
        assert_eq!(server.hits("/data.tar"), 1);
    }

    #[tokio::test]
    async fn without_a_hash_it_downloads_every_time_into_the_cache() {
        let server = TestServer::start(|_, _| Reply::Body(b"abc".to_vec())).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let spec = input(&server.url("/x"), None, None);
        for _ in 0..2 {
            let fetched = fetcher.fetch(&spec).await.unwrap();
            assert!(!fetched.cache_hit);
            assert_eq!(fetched.sha256, sha256_hex(b"abc"));
        }
        assert_eq!(server.hits("/x"), 2);
        assert_eq!(entries(&cache.path().join("sha256")).len(), 1);
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn a_hash_mismatch_is_the_jobs_fault_and_leaves_nothing_behind() {
        let server = TestServer::start(|_, _| Reply::Body(b"not what was promised".to_vec())).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let expected = sha256_hex(b"the promised data");
        let err = fetcher
            .fetch(&input(&server.url("/x"), Some(&expected), None))
            .await
            .unwrap_err();
        assert!(
            matches!(&err, FetchError::HashMismatch { expected: e, actual }
            if *e == expected && *actual == sha256_hex(b"not what was promised"))
        );
        assert_eq!(err.class(), FaultClass::Job);
        assert_eq!(server.hits("/x"), 1);
        assert_eq!(entries(&cache.path().join("sha256")), Vec::<PathBuf>::new());
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn an_unsized_body_is_cut_off_at_the_limit() {
        let server = TestServer::start(|_, _| Reply::Unsized).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let err = fetcher
            .fetch(&input(&server.url("/endless"), None, Some(300_000)))
            .await
            .unwrap_err();
        assert_too_large(&err, 300_000);
        // The connection was dropped: the server's writes fail and it drops the body.
        tokio::time::timeout(Duration::from_secs(10), server.hung_up.notified())
            .await
            .expect("the client hangs up");
        assert_eq!(server.hits("/endless"), 1);
        assert_no_partial_files(cache.path());
    }

    #[tokio::test]
    async fn a_declared_length_over_the_limit_is_refused() {
        let server = TestServer::start(|_, _| Reply::Body(vec![7; 2048])).await;
        let cache = tempfile::tempdir().unwrap();
        let fetcher = Fetcher::new(config(cache.path()), None).unwrap();
        let err = fetcher
            .fetch(&input(&server.url("/big"), None, Some(1024)))
            .await
            .unwrap_err();
        assert_too_large(&err, 1024);
        assert_no_partial_files(cache.path());
    }
}
