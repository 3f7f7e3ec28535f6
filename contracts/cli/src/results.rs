//! Results: download (NATS object store for `nats://<bucket>/<key>`, or HTTP(S)), hashed
//! while written, checked against the on-chain `resultHash`, and only then unpacked; an
//! entry that would land outside the directory refuses the whole result before anything
//! is written.
//!
//! An encrypted result (design 19, §3) is checked twice: the ciphertext against the hash
//! its URI carries (`#ciphertext-sha256=`, which the node committed to with it), then,
//! decrypted with the user's identity, the plaintext against the on-chain `resultHash`.

use std::io::Write;
use std::path::{Component, Path, PathBuf};

use alloy::primitives::B256;
use futures::StreamExt;
use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use gantry_protocol::encryption::{self, AgeIdentity};

use crate::error::{CliError, Result};

/// A downloaded file and what it hashed to.
#[derive(Debug)]
pub struct Downloaded {
    pub file: tempfile::NamedTempFile,
    pub sha256: B256,
    pub bytes: u64,
}

/// Where a result lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Nats {
        bucket: String,
        key: String,
    },
    /// Node `node`'s object `key` in a node-scoped bucket (`nats://<bucket>/<node>/<key>`:
    /// the bucket of sealed results).
    Scoped {
        bucket: String,
        node: u64,
        key: String,
    },
    Http(String),
}

impl Source {
    pub fn parse(uri: &str) -> Result<Self> {
        if let Some(rest) = uri.strip_prefix("nats://") {
            let (bucket, key) = rest
                .split_once('/')
                .filter(|(b, k)| !b.is_empty() && !k.is_empty())
                .ok_or_else(|| {
                    CliError::usage(format!("{uri}: a NATS result URI is nats://<bucket>/<key>"))
                })?;
            if gantry_protocol::names::is_node_scoped(bucket) {
                let (node, key) = key
                    .split_once('/')
                    .and_then(|(node, key)| Some((node.parse().ok()?, key)))
                    .filter(|(_, key)| !key.is_empty())
                    .ok_or_else(|| {
                        CliError::usage(format!(
                            "{uri}: an object of {bucket} is nats://{bucket}/<node>/<key>"
                        ))
                    })?;
                return Ok(Self::Scoped {
                    bucket: bucket.into(),
                    node,
                    key: key.into(),
                });
            }
            return Ok(Self::Nats {
                bucket: bucket.into(),
                key: key.into(),
            });
        }
        if uri.starts_with("https://") || uri.starts_with("http://") {
            return Ok(Self::Http(uri.into()));
        }
        Err(CliError::usage(format!(
            "{uri}: this CLI downloads nats://, https:// and http:// results; fetch it yourself \
             and compare its SHA-256 with the job's resultHash"
        )))
    }
}

/// Hashes and writes what passes, refusing to grow past `limit`.
struct Sink {
    file: tempfile::NamedTempFile,
    hasher: Sha256,
    bytes: u64,
    limit: u64,
}

impl Sink {
    fn new(dir: &Path, limit: u64) -> Result<Self> {
        let file = tempfile::Builder::new()
            .prefix(".gantry-result-")
            .suffix(".tar")
            .tempfile_in(dir)
            .map_err(|e| CliError::io(dir.display(), e))?;
        Ok(Self {
            file,
            hasher: Sha256::new(),
            bytes: 0,
            limit,
        })
    }

    fn write(&mut self, chunk: &[u8]) -> Result<()> {
        self.bytes += chunk.len() as u64;
        if self.bytes > self.limit {
            return Err(CliError::Refused(format!(
                "the result is larger than --max-size ({} bytes)",
                self.limit
            )));
        }
        self.hasher.update(chunk);
        self.file
            .write_all(chunk)
            .map_err(|e| CliError::io(self.file.path().display(), e))
    }

    fn finish(mut self) -> Result<Downloaded> {
        self.file
            .flush()
            .map_err(|e| CliError::io(self.file.path().display(), e))?;
        Ok(Downloaded {
            sha256: B256::from(<[u8; 32]>::from(self.hasher.finalize())),
            bytes: self.bytes,
            file: self.file,
        })
    }
}

/// JetStream on the NATS servers of `nats_url` (`--nats-url`).
pub async fn jetstream(nats_url: &str) -> Result<async_nats::jetstream::Context> {
    let client = gantry_runtime::nats::connect(nats_url, false)
        .await
        .map_err(|e| {
            CliError::Unavailable(format!(
                "NATS at {} did not answer (--nats-url, GANTRY_NATS_URL): {}",
                e.servers, e.source
            ))
        })?;
    Ok(async_nats::jetstream::new(client))
}

/// Downloads `source` into a temporary file in `dir`, at most `limit` bytes.
pub async fn download(
    source: &Source,
    nats_url: &str,
    dir: &Path,
    limit: u64,
) -> Result<Downloaded> {
    let mut sink = Sink::new(dir, limit)?;
    match source {
        Source::Nats { bucket, key } => {
            let js = jetstream(nats_url).await?;
            let store = js.get_object_store(bucket).await.map_err(|e| {
                CliError::NotFound(format!("the object store {bucket} is not there: {e}"))
            })?;
            let mut object = store.get(key).await.map_err(|e| {
                use async_nats::jetstream::object_store::GetErrorKind;
                match e.kind() {
                    GetErrorKind::NotFound => {
                        CliError::NotFound(format!("no object {key} in the object store {bucket}"))
                    }
                    _ => CliError::Unavailable(format!("downloading {bucket}/{key}: {e}")),
                }
            })?;
            let mut buffer = vec![0u8; 64 * 1024];
            loop {
                let n = object.read(&mut buffer).await.map_err(|e| {
                    CliError::Unavailable(format!("downloading {bucket}/{key}: {e}"))
                })?;
                if n == 0 {
                    break;
                }
                sink.write(&buffer[..n])?;
            }
        }
        Source::Scoped { bucket, node, key } => {
            let js = jetstream(nats_url).await?;
            let object = gantry_runtime::objects::get(&js, bucket, *node, key)
                .await
                .map_err(|e| {
                    CliError::Unavailable(format!("downloading {bucket}/{node}/{key}: {e}"))
                })?
                .ok_or_else(|| {
                    CliError::NotFound(format!(
                        "no object {node}/{key} in the object store {bucket}"
                    ))
                })?;
            let mut bytes = std::pin::pin!(object.bytes(u64::MAX));
            while let Some(chunk) = bytes.next().await {
                let chunk = chunk.map_err(|e| {
                    CliError::Unavailable(format!("downloading {bucket}/{node}/{key}: {e}"))
                })?;
                sink.write(&chunk)?;
            }
        }
        Source::Http(url) => {
            let response = reqwest::get(url)
                .await
                .map_err(|e| CliError::Unavailable(format!("downloading {url}: {e}")))?;
            match response.status() {
                reqwest::StatusCode::OK => {}
                reqwest::StatusCode::NOT_FOUND => {
                    return Err(CliError::NotFound(format!("{url}: 404 not found")));
                }
                status => {
                    return Err(CliError::Unavailable(format!(
                        "downloading {url}: {status}"
                    )));
                }
            }
            let mut body = response.bytes_stream();
            while let Some(chunk) = body.next().await {
                let chunk =
                    chunk.map_err(|e| CliError::Unavailable(format!("downloading {url}: {e}")))?;
                sink.write(&chunk)?;
            }
        }
    }
    sink.finish()
}

/// Fails unless the download hashes to `expected` (the on-chain resultHash).
pub fn verify(downloaded: &Downloaded, expected: B256) -> Result<()> {
    if downloaded.sha256 != expected {
        return Err(CliError::Unverified(format!(
            "the download's SHA-256 is {}, the on-chain resultHash is {expected}: refusing it",
            downloaded.sha256
        )));
    }
    Ok(())
}

/// Fails unless the downloaded ciphertext hashes to `expected` (its URI's fragment).
pub fn verify_ciphertext(downloaded: &Downloaded, expected: B256) -> Result<()> {
    if downloaded.sha256 != expected {
        return Err(CliError::Unverified(format!(
            "the download's SHA-256 is {}, the result URI's ciphertext-sha256 is {expected}: \
             refusing it",
            downloaded.sha256
        )));
    }
    Ok(())
}

/// Fails unless the decrypted result hashes to `expected` (the on-chain resultHash).
pub fn verify_plaintext(decrypted: &Downloaded, expected: B256) -> Result<()> {
    if decrypted.sha256 != expected {
        return Err(CliError::Unverified(format!(
            "the decrypted result's SHA-256 is {}, the on-chain resultHash is {expected}: \
             refusing it",
            decrypted.sha256
        )));
    }
    Ok(())
}

/// Decrypts the downloaded `sealed` with `identity` into a temporary file in `dir`, hashed
/// while written. A ciphertext that is not for `identity`, or not whole, is refused.
/// Blocking.
pub fn decrypt(sealed: &Downloaded, identity: &AgeIdentity, dir: &Path) -> Result<Downloaded> {
    let file = std::fs::File::open(sealed.file.path())
        .map_err(|e| CliError::io(sealed.file.path().display(), e))?;
    // The plaintext is shorter than its ciphertext: the download's limit holds it.
    let mut sink = Sink::new(dir, sealed.bytes)?;
    let mut writer = SinkWriter {
        sink: &mut sink,
        failed: None,
    };
    let decrypted = encryption::decrypt(identity, file, &mut writer);
    if let Some(failed) = writer.failed {
        return Err(failed);
    }
    decrypted.map_err(|e| {
        CliError::Unverified(format!(
            "the result does not decrypt with your identity ({}): {e}: refusing it",
            identity.to_public()
        ))
    })?;
    sink.finish()
}

/// A [`Sink`] as a writer, keeping its own error (the limit, the disk) apart from the
/// cipher's.
struct SinkWriter<'a> {
    sink: &'a mut Sink,
    failed: Option<CliError>,
}

impl std::io::Write for SinkWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self.sink.write(buf) {
            Ok(()) => Ok(buf.len()),
            Err(error) => {
                let message = error.to_string();
                self.failed = Some(error);
                Err(std::io::Error::other(message))
            }
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What an unpack wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unpacked {
    pub files: u64,
    pub dirs: u64,
}

/// Unpacks the tar at `tar_path` into `dir`, after checking that no entry's path is
/// absolute or climbs out with `..` (the whole result is refused then, nothing written).
/// Links are kept as links; the tar crate refuses to write through one that leaves `dir`.
/// Blocking.
pub fn unpack(tar_path: &Path, dir: &Path) -> Result<Unpacked> {
    let open = || {
        std::fs::File::open(tar_path)
            .map(tar::Archive::new)
            .map_err(|e| CliError::io(tar_path.display(), e))
    };
    let not_a_tar =
        |e: std::io::Error| CliError::Unverified(format!("the result is not a tar: {e}"));
    let mut archive = open()?;
    for entry in archive.entries().map_err(not_a_tar)? {
        let entry = entry.map_err(not_a_tar)?;
        let path = entry.path().map_err(not_a_tar)?.into_owned();
        if escapes(&path) {
            return Err(CliError::Unverified(format!(
                "the result holds {}, outside the output directory: refusing it",
                path.display()
            )));
        }
    }
    let mut archive = open()?;
    archive.set_preserve_permissions(false);
    archive.set_overwrite(true);
    let mut unpacked = Unpacked { files: 0, dirs: 0 };
    for entry in archive.entries().map_err(not_a_tar)? {
        let mut entry = entry.map_err(not_a_tar)?;
        let is_dir = entry.header().entry_type().is_dir();
        let path: PathBuf = entry.path().map_err(not_a_tar)?.into_owned();
        let written = entry
            .unpack_in(dir)
            .map_err(|e| CliError::Unverified(format!("unpacking {}: {e}", path.display())))?;
        if !written {
            return Err(CliError::Unverified(format!(
                "the result's {} would land outside the output directory",
                path.display()
            )));
        }
        if is_dir {
            unpacked.dirs += 1;
        } else {
            unpacked.files += 1;
        }
    }
    Ok(unpacked)
}

fn escapes(path: &Path) -> bool {
    path.components().any(|c| {
        matches!(
            c,
            Component::ParentDir | Component::RootDir | Component::Prefix(_)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_uris() {
        assert_eq!(
            Source::parse("nats://gantry_31337_results/3/7-1").unwrap(),
            Source::Scoped {
                bucket: "gantry_31337_results".into(),
                node: 3,
                key: "7-1".into()
            }
        );
        assert_eq!(
            Source::parse("nats://gantry_31337_inputs/sets/a.bin").unwrap(),
            Source::Nats {
                bucket: "gantry_31337_inputs".into(),
                key: "sets/a.bin".into()
            }
        );
        assert!(matches!(
            Source::parse("https://x/y.tar"),
            Ok(Source::Http(_))
        ));
        for bad in [
            "nats://bucket",
            "nats:///key",
            "ipfs://cid",
            "s3://b/k",
            "nats://gantry_31337_results/7-1",
            "nats://gantry_31337_sealed/x/7-p",
        ] {
            assert_eq!(Source::parse(bad).unwrap_err().exit_code(), 2, "{bad}");
        }
    }

    fn raw_tar(path: &Path, name: &[u8]) {
        let mut builder = tar::Builder::new(std::fs::File::create(path).unwrap());
        let ok = b"fine";
        let mut header = tar::Header::new_gnu();
        header.set_size(ok.len() as u64);
        header.set_mode(0o644);
        header.set_path("ok.txt").unwrap();
        header.set_cksum();
        builder.append(&header, &ok[..]).unwrap();
        let mut header = tar::Header::new_gnu();
        let data = b"pwned";
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        // Written raw: the tar crate's own setters refuse such names.
        header.as_old_mut().name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        builder.append(&header, &data[..]).unwrap();
        builder.finish().unwrap();
    }

    /// `bytes` as if downloaded into `dir`.
    fn downloaded(dir: &Path, bytes: &[u8]) -> Downloaded {
        let mut sink = Sink::new(dir, u64::MAX).unwrap();
        sink.write(bytes).unwrap();
        sink.finish().unwrap()
    }

    #[test]
    fn encrypted_result_is_checked_as_ciphertext_then_decrypted_then_as_plaintext() {
        let dir = tempfile::tempdir().unwrap();
        let me = AgeIdentity::generate();
        let plain = vec![5u8; 70_000];
        let mut sealed = Vec::new();
        encryption::encrypt(&[me.to_public()], &plain[..], &mut sealed).unwrap();
        let download = downloaded(dir.path(), &sealed);
        verify_ciphertext(&download, encryption::sha256(&sealed)).unwrap();
        let error = verify_ciphertext(&download, encryption::sha256(&plain)).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit::UNVERIFIED);
        assert!(error.to_string().contains("ciphertext-sha256"), "{error}");

        let decrypted = decrypt(&download, &me, dir.path()).unwrap();
        assert_eq!(decrypted.bytes, plain.len() as u64);
        assert_eq!(std::fs::read(decrypted.file.path()).unwrap(), plain);
        verify_plaintext(&decrypted, encryption::sha256(&plain)).unwrap();
        let error = verify_plaintext(&decrypted, encryption::sha256(&sealed)).unwrap_err();
        assert!(
            error.to_string().contains("the decrypted result's SHA-256"),
            "{error}"
        );

        // Another identity's, or a flipped byte: refused.
        let error = decrypt(&download, &AgeIdentity::generate(), dir.path()).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit::UNVERIFIED);
        assert!(error.to_string().contains("does not decrypt"), "{error}");
        let mut tampered = sealed.clone();
        let last = tampered.len() - 10;
        tampered[last] ^= 1;
        let error = decrypt(&downloaded(dir.path(), &tampered), &me, dir.path()).unwrap_err();
        assert_eq!(error.exit_code(), crate::error::exit::UNVERIFIED);
    }

    #[test]
    fn escaping_entries_refuse_the_whole_result() {
        for name in [&b"../escaped"[..], b"/tmp/absolute", b"a/../../escaped"] {
            let dir = tempfile::tempdir().unwrap();
            let tar_path = dir.path().join("evil.tar");
            raw_tar(&tar_path, name);
            let out = dir.path().join("out");
            std::fs::create_dir(&out).unwrap();
            let error = unpack(&tar_path, &out).unwrap_err();
            assert_eq!(error.exit_code(), crate::error::exit::UNVERIFIED);
            assert!(
                error.to_string().contains("outside the output directory"),
                "{error}"
            );
            assert!(!out.join("ok.txt").exists(), "nothing is written");
            assert!(!dir.path().join("escaped").exists());
        }
    }

    #[test]
    fn a_plain_tar_unpacks() {
        let dir = tempfile::tempdir().unwrap();
        let tar_path = dir.path().join("ok.tar");
        {
            let mut builder = tar::Builder::new(std::fs::File::create(&tar_path).unwrap());
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(tar::EntryType::Directory);
            header.set_path("model").unwrap();
            header.set_mode(0o755);
            header.set_size(0);
            header.set_cksum();
            builder.append(&header, &[][..]).unwrap();
            let mut header = tar::Header::new_gnu();
            header.set_path("model/weights.bin").unwrap();
            header.set_size(3);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, &[1u8, 2, 3][..]).unwrap();
            builder.finish().unwrap();
        }
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        assert_eq!(
            unpack(&tar_path, &out).unwrap(),
            Unpacked { files: 1, dirs: 1 }
        );
        assert_eq!(
            std::fs::read(out.join("model/weights.bin")).unwrap(),
            [1, 2, 3]
        );
    }
}
