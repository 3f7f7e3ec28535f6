//! Results and checkpoints as files: directories packed as deterministic tars (sorted
//! entries, zero times and owners) hashed with SHA-256 while they are written, and
//! unpacked again. No network; blocking file IO, so callers run it in `spawn_blocking`.
//! The result hash submitted on-chain is the SHA-256 of the result tar, so anyone can
//! download `nats://<bucket>/<key>` and check it ([`crate::objects`] moves the bytes).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::fault::Failure;

/// A packed directory on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    pub path: PathBuf,
    pub sha256: [u8; 32],
    pub size: u64,
}

/// Counts and hashes what passes through; refuses to grow past `limit`.
struct Sink<W> {
    inner: W,
    hasher: Sha256,
    written: u64,
    limit: u64,
}

impl<W: Write> Write for Sink<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.written + buf.len() as u64 > self.limit {
            return Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                "over the limit",
            ));
        }
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Why a file could not be encrypted or decrypted.
#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("{0}")]
    Crypto(#[from] gantry_protocol::encryption::CryptoError),
}

/// `from` encrypted (age) to `to` into `into`: the ciphertext's size and SHA-256.
pub fn seal(
    to: &[gantry_protocol::encryption::AgeRecipient],
    from: &Path,
    into: &Path,
) -> Result<Packed, SealError> {
    let written = gantry_protocol::encryption::encrypt(
        to,
        io::BufReader::new(File::open(from)?),
        BufWriter::new(File::create(into)?),
    )?;
    Ok(Packed {
        path: into.to_owned(),
        sha256: written.sha256.0,
        size: written.bytes,
    })
}

/// `from` decrypted with `key` into `into` (a new private file, removed again when the
/// ciphertext does not open: nothing half-decrypted is left).
pub fn open_sealed(
    key: &gantry_protocol::encryption::AgeIdentity,
    from: &Path,
    into: &Path,
) -> Result<(), SealError> {
    let opened = (|| {
        let mut out = BufWriter::new(File::create(into)?);
        gantry_protocol::encryption::decrypt(key, File::open(from)?, &mut out)?;
        out.flush()?;
        Ok::<_, SealError>(())
    })();
    if opened.is_err() {
        let _ = std::fs::remove_file(into);
    }
    opened
}

/// What a tar holds: a directory's entries at its root, or parts — files or directories
/// on disk, each under the name given, in that order (give them sorted by name).
#[derive(Debug, Clone)]
pub enum Contents {
    Dir(PathBuf),
    Parts(Vec<(&'static str, PathBuf)>),
    /// A directory's entries at the root, but the entry named `name` taken from `own`
    /// (whatever the directory holds under that name is left out): a verified outcome,
    /// whose `.gantry` is the worker's and never written into what the job controls.
    Overlaid {
        dir: PathBuf,
        name: &'static str,
        own: PathBuf,
    },
}

impl From<PathBuf> for Contents {
    fn from(dir: PathBuf) -> Self {
        Self::Dir(dir)
    }
}

impl From<&Path> for Contents {
    fn from(dir: &Path) -> Self {
        Self::Dir(dir.to_owned())
    }
}

impl From<&PathBuf> for Contents {
    fn from(dir: &PathBuf) -> Self {
        Self::Dir(dir.clone())
    }
}

impl From<Vec<(&'static str, PathBuf)>> for Contents {
    fn from(parts: Vec<(&'static str, PathBuf)>) -> Self {
        Self::Parts(parts)
    }
}

/// Packs `what` into the tar file `into`, at most `limit` bytes: the same files always
/// give the same bytes. Symlinks are stored as links, never followed. Blocking.
pub fn pack(what: impl Into<Contents>, into: &Path, limit: u64) -> Result<Packed, Failure> {
    let what = what.into();
    let file = File::create(into).map_err(|e| local(into, e))?;
    let sink = Sink {
        inner: BufWriter::new(file),
        hasher: Sha256::new(),
        written: 0,
        limit,
    };
    let mut builder = tar::Builder::new(sink);
    builder.follow_symlinks(false);
    builder.mode(tar::HeaderMode::Deterministic);
    let appended = match &what {
        Contents::Dir(dir) => append_sorted(&mut builder, dir, Path::new("")),
        Contents::Parts(parts) => parts
            .iter()
            .try_for_each(|(name, path)| append(&mut builder, path, Path::new(name))),
        Contents::Overlaid { dir, name, own } => append_overlaid(&mut builder, dir, name, own),
    };
    let result = appended.and_then(|()| builder.finish()).and_then(|()| {
        let sink = builder.into_inner()?;
        let file = sink.inner.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok((sink.hasher.finalize().into(), sink.written))
    });
    match result {
        Ok((sha256, size)) => Ok(Packed {
            path: into.to_owned(),
            sha256,
            size,
        }),
        Err(e) => {
            let _ = std::fs::remove_file(into);
            if e.kind() == io::ErrorKind::FileTooLarge {
                Err(Failure::job(format!(
                    "output too large: more than {limit} bytes"
                )))
            } else {
                Err(local(into, e))
            }
        }
    }
}

/// `dir`'s entries, sorted by name, with `own` in place of the entry `name`.
fn append_overlaid<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    name: &str,
    own: &Path,
) -> io::Result<()> {
    let mut entries: Vec<(std::ffi::OsString, PathBuf)> = std::fs::read_dir(dir)?
        .map(|entry| entry.map(|e| (e.file_name(), e.path())))
        .filter(|entry| entry.as_ref().map_or(true, |(n, _)| n != name))
        .collect::<Result<_, _>>()?;
    entries.push((name.into(), own.to_owned()));
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    for (entry_name, path) in entries {
        append(builder, &path, Path::new(&entry_name))?;
    }
    Ok(())
}

fn append_sorted<W: Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
) -> io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for entry in entries {
        append(builder, &entry.path(), &prefix.join(entry.file_name()))?;
    }
    Ok(())
}

/// Appends the file or directory tree at `path` under `name`.
fn append<W: Write>(builder: &mut tar::Builder<W>, path: &Path, name: &Path) -> io::Result<()> {
    let kind = std::fs::symlink_metadata(path)?.file_type();
    if kind.is_dir() {
        builder.append_dir(name, path)?;
        append_sorted(builder, path, name)?;
    } else if kind.is_file() || kind.is_symlink() {
        builder.append_path_with_name(path, name)?;
    }
    // Sockets, fifos and devices are not results.
    Ok(())
}

/// Unpacks a tar into `dir`; entries that would land outside it are refused. Blocking.
pub fn unpack(tar_path: &Path, dir: &Path) -> Result<(), Failure> {
    let file = File::open(tar_path).map_err(|e| local(tar_path, e))?;
    let mut archive = tar::Archive::new(file);
    archive.set_preserve_permissions(false);
    archive.set_overwrite(true);
    for entry in archive
        .entries()
        .map_err(|e| Failure::job(format!("checkpoint is not a tar: {e}")))?
    {
        let mut entry = entry.map_err(|e| Failure::job(format!("checkpoint is not a tar: {e}")))?;
        // `unpack_in` skips entries with `..` or absolute paths outside `dir`.
        entry
            .unpack_in(dir)
            .map_err(|e| Failure::node(format!("restoring a checkpoint: {e}")))?;
    }
    Ok(())
}

pub(crate) fn local(path: &Path, error: io::Error) -> Failure {
    Failure::node(format!("{}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path) {
        std::fs::create_dir_all(root.join("model/layers")).unwrap();
        std::fs::write(root.join("model/layers/0.bin"), vec![7u8; 5000]).unwrap();
        std::fs::write(root.join("metrics.json"), br#"{"loss":0.1}"#).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
    }

    #[test]
    fn packing_is_deterministic_and_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        tree(&a);
        tree(&b);
        // Different times and creation order must not change the bytes.
        std::fs::write(b.join("metrics.json"), br#"{"loss":0.1}"#).unwrap();
        let pa = pack(&a, &dir.path().join("a.tar"), 1 << 20).unwrap();
        let pb = pack(&b, &dir.path().join("b.tar"), 1 << 20).unwrap();
        assert_eq!(pa.sha256, pb.sha256);
        assert_eq!(pa.size, std::fs::metadata(&pa.path).unwrap().len());
        let bytes = std::fs::read(&pa.path).unwrap();
        assert_eq!(pa.sha256, <[u8; 32]>::from(Sha256::digest(&bytes)));

        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        unpack(&pa.path, &out).unwrap();
        assert_eq!(
            std::fs::read(out.join("model/layers/0.bin")).unwrap(),
            vec![7u8; 5000]
        );
        assert_eq!(
            std::fs::read_link(out.join("link")).unwrap(),
            Path::new("/etc/passwd"),
            "links are kept as links"
        );
    }

    #[test]
    fn a_result_over_the_limit_is_the_job_s_fault_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        tree(&src);
        let into = dir.path().join("r.tar");
        let failure = pack(&src, &into, 4096).unwrap_err();
        assert_eq!(failure.class, crate::fault::FaultClass::Job);
        assert!(failure.reason.starts_with("output too large"), "{failure}");
        assert!(!into.exists());
    }

    #[test]
    fn unpacking_never_escapes_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        let tar_path = dir.path().join("evil.tar");
        {
            let mut builder = tar::Builder::new(File::create(&tar_path).unwrap());
            let mut header = tar::Header::new_gnu();
            let data = b"pwned";
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            // Written raw: the tar crate's own setters refuse `..`.
            let name = b"../escaped";
            header.as_old_mut().name[..name.len()].copy_from_slice(name);
            header.set_cksum();
            builder.append(&header, &data[..]).unwrap();
            builder.finish().unwrap();
        }
        let out = dir.path().join("out");
        std::fs::create_dir(&out).unwrap();
        unpack(&tar_path, &out).unwrap();
        assert!(!dir.path().join("escaped").exists());
    }

    /// The overlaid entry replaces the directory's own of that name, whatever it is (a
    /// file, a fifo, a link out of the tree), and the bytes are those of the directory
    /// holding the overlay itself.
    #[test]
    fn an_overlaid_entry_replaces_the_directorys_own() {
        let dir = tempfile::tempdir().unwrap();
        let (job, own, plain) = (
            dir.path().join("job"),
            dir.path().join("own"),
            dir.path().join("plain"),
        );
        for root in [&job, &plain] {
            std::fs::create_dir_all(root).unwrap();
            std::fs::write(root.join("a.txt"), b"a").unwrap();
            std::fs::write(root.join("z.txt"), b"z").unwrap();
        }
        std::fs::create_dir_all(own.join(".gantry")).unwrap();
        std::fs::write(own.join(".gantry/outcome"), b"v1 exit 0\n").unwrap();
        std::fs::create_dir_all(plain.join(".gantry")).unwrap();
        std::fs::write(plain.join(".gantry/outcome"), b"v1 exit 0\n").unwrap();
        // What the job left under the reserved name: a link to a host file.
        std::os::unix::fs::symlink("/etc/passwd", job.join(".gantry")).unwrap();
        let overlaid = pack(
            Contents::Overlaid {
                dir: job.clone(),
                name: ".gantry",
                own: own.join(".gantry"),
            },
            &dir.path().join("o.tar"),
            1 << 20,
        )
        .unwrap();
        let expected = pack(&plain, &dir.path().join("p.tar"), 1 << 20).unwrap();
        assert_eq!(overlaid.sha256, expected.sha256);
        assert_eq!(
            std::fs::read_link(job.join(".gantry")).unwrap(),
            Path::new("/etc/passwd")
        );
    }
}
