//! Local container images for tests and the dev network. No registry is reachable, so the
//! job image is built in memory: a rootfs tarball around the host's static busybox (Debian's
//! `busybox-static`, installed by `deploy/setup.sh`), imported like `docker import` does
//! (`POST /images/create?fromSrc=-`).
//!
//! ```text
//!   /bin/busybox ──busybox --list──▶ rootfs tar (in memory) ──create_image(fromSrc=-)──▶ tag
//! ```
//!
//! bollard's `import_image` is `docker load` (`/images/load`), which wants a `docker save`
//! archive with a manifest; `create_image` with `fromSrc = "-"` takes a plain rootfs and
//! `changes` for the image config.

use std::io;
use std::path::Path;

use bollard::Docker;
use bollard::query_parameters::CreateImageOptionsBuilder;
use futures::TryStreamExt;
use sha2::{Digest, Sha256};

use crate::ImageError;

/// Where Debian's `busybox-static` installs its binary.
pub const BUSYBOX_PATH: &str = "/bin/busybox";

/// The image config the import applies: a shell by default, applets on `PATH`.
const IMAGE_CHANGES: [&str; 2] = [r#"CMD ["/bin/sh"]"#, "ENV PATH=/bin"];

const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n";
const GROUP: &str = "root:x:0:\nnogroup:x:65534:\n";

/// Imports a busybox image as `tag` (`repo[:tag]`, `:latest` if none) and returns its image
/// id: `/bin/busybox` with a `/bin` symlink for every applet, `/etc/passwd` and
/// `/etc/group` with root (0) and nobody (65534), an empty `/tmp` (1777) and the mount
/// points `/inputs`, `/outputs`, `/checkpoints`, `/proc`, `/sys`, `/dev`. Its config is
/// `Cmd ["/bin/sh"]`, `Env PATH=/bin`.
///
/// Idempotent and cheap: the tarball is deterministic, so when `tag` already names an
/// image with the same root layer and config nothing is imported.
pub async fn import_busybox(docker: &Docker, tag: &str) -> Result<String, ImageError> {
    let (tar, layer) = tokio::task::spawn_blocking(|| busybox_rootfs(Path::new(BUSYBOX_PATH)))
        .await
        .expect("the rootfs builder does not panic")?;
    if let Some(id) = matching_image(docker, tag, &layer).await? {
        tracing::debug!(tag, id, "busybox image already imported");
        return Ok(id);
    }
    let options = CreateImageOptionsBuilder::new()
        .from_src("-")
        .repo(tag)
        .message("gantry-devnet busybox rootfs")
        .changes(IMAGE_CHANGES.iter().map(|c| (*c).to_owned()).collect())
        .build();
    docker
        .create_image(Some(options), Some(bollard::body_full(tar.into())), None)
        .try_collect::<Vec<_>>()
        .await?;
    let id = docker
        .inspect_image(tag)
        .await?
        .id
        .ok_or_else(|| ImageError::Incomplete(format!("{tag} has no id after import")))?;
    tracing::info!(tag, id, layer, "imported busybox image");
    Ok(id)
}

/// Whether the engine has an image named `tag` (or with that id).
pub async fn image_exists(docker: &Docker, tag: &str) -> Result<bool, ImageError> {
    match docker.inspect_image(tag).await {
        Ok(_) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// The id of the image `tag` if it is exactly what an import of `layer` would make.
async fn matching_image(
    docker: &Docker,
    tag: &str,
    layer: &str,
) -> Result<Option<String>, ImageError> {
    let image = match docker.inspect_image(tag).await {
        Ok(image) => image,
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let same_layer = image
        .root_fs
        .as_ref()
        .and_then(|root_fs| root_fs.layers.as_deref())
        .is_some_and(|layers| layers == [layer]);
    let config = image.config.unwrap_or_default();
    let same_config = config.cmd.as_deref() == Some(&["/bin/sh".to_owned()][..])
        && config.env.as_deref() == Some(&["PATH=/bin".to_owned()][..]);
    Ok((same_layer && same_config).then_some(image.id).flatten())
}

/// The rootfs tarball around `busybox` and its layer digest (`sha256:<hex>`, what the
/// engine reports as the image's `RootFS.Layers`). Blocking: reads and runs `busybox`.
fn busybox_rootfs(busybox: &Path) -> Result<(Vec<u8>, String), ImageError> {
    let read_error = |source| ImageError::Read {
        path: busybox.to_path_buf(),
        source,
    };
    let binary = std::fs::read(busybox).map_err(read_error)?;
    if !is_static_elf(&binary) {
        return Err(ImageError::NotStatic(busybox.to_path_buf()));
    }
    let output = std::process::Command::new(busybox)
        .arg("--list")
        .output()
        .map_err(read_error)?;
    if !output.status.success() {
        return Err(ImageError::Applets(format!(
            "`{} --list` failed ({}): {}",
            busybox.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let listing = String::from_utf8(output.stdout)
        .map_err(|_| ImageError::Applets("`busybox --list` printed non-UTF-8".into()))?;
    let applets = parse_applets(&listing)?;
    let tar = rootfs_tar(&binary, &applets).map_err(ImageError::Tar)?;
    let layer = format!("sha256:{:x}", Sha256::digest(&tar));
    Ok((tar, layer))
}

/// One applet name a line; a name with a `/` or a `..` would escape `/bin`.
fn parse_applets(listing: &str) -> Result<Vec<String>, ImageError> {
    let mut applets = Vec::new();
    for name in listing.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if name.contains('/') || name == "." || name == ".." {
            return Err(ImageError::Applets(format!(
                "unexpected applet name {name:?}"
            )));
        }
        if name != "busybox" {
            applets.push(name.to_owned());
        }
    }
    if !applets.iter().any(|a| a == "sh") {
        return Err(ImageError::Applets("busybox has no `sh` applet".into()));
    }
    applets.sort();
    applets.dedup();
    Ok(applets)
}

/// The rootfs tarball: deterministic (fixed order, owner root, mtime 0) so that the same
/// busybox always gives the same layer digest.
fn rootfs_tar(busybox: &[u8], applets: &[String]) -> io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::with_capacity(busybox.len() + 64 * 1024));
    for (dir, mode) in [
        ("bin", 0o755),
        ("etc", 0o755),
        ("usr", 0o755),
        ("tmp", 0o1777),
        ("inputs", 0o755),
        ("outputs", 0o755),
        ("checkpoints", 0o755),
        ("proc", 0o555),
        ("sys", 0o555),
        ("dev", 0o755),
    ] {
        let mut header = entry_header(tar::EntryType::Directory, mode, 0);
        tar.append_data(&mut header, format!("{dir}/"), io::empty())?;
    }
    let mut header = entry_header(tar::EntryType::Regular, 0o755, busybox.len() as u64);
    tar.append_data(&mut header, "bin/busybox", busybox)?;
    for applet in applets {
        let mut header = entry_header(tar::EntryType::Symlink, 0o777, 0);
        tar.append_link(&mut header, format!("bin/{applet}"), "busybox")?;
    }
    // For `#!/usr/bin/env ...` scripts.
    let mut header = entry_header(tar::EntryType::Symlink, 0o777, 0);
    tar.append_link(&mut header, "usr/bin", "../bin")?;
    for (path, contents) in [("etc/passwd", PASSWD), ("etc/group", GROUP)] {
        let mut header = entry_header(tar::EntryType::Regular, 0o644, contents.len() as u64);
        tar.append_data(&mut header, path, contents.as_bytes())?;
    }
    tar.into_inner()
}

fn entry_header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

/// Whether `binary` is an ELF executable without a program interpreter: a dynamically
/// linked busybox (Debian's `busybox`, not `busybox-static`) would not run in the image.
fn is_static_elf(binary: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if binary.len() < 64 || &binary[..4] != b"\x7fELF" || binary[4] != 2 || binary[5] != 1 {
        return false; // not a 64-bit little-endian ELF
    }
    let u16_at = |at: usize| u16::from_le_bytes([binary[at], binary[at + 1]]) as usize;
    let phoff = u64::from_le_bytes(binary[0x20..0x28].try_into().expect("8 bytes")) as usize;
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    (0..phnum).all(|i| {
        let at = phoff.saturating_add(i.saturating_mul(phentsize));
        binary.get(at..at + 4).is_some_and(|p_type| {
            u32::from_le_bytes(p_type.try_into().expect("4 bytes")) != PT_INTERP
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(tar: &[u8]) -> Vec<(String, tar::EntryType, u32, Option<String>)> {
        tar::Archive::new(tar)
            .entries()
            .unwrap()
            .map(|entry| {
                let entry = entry.unwrap();
                let header = entry.header();
                (
                    entry.path().unwrap().display().to_string(),
                    header.entry_type(),
                    header.mode().unwrap(),
                    entry.link_name().unwrap().map(|l| l.display().to_string()),
                )
            })
            .collect()
    }

    #[test]
    fn the_rootfs_holds_busybox_its_applets_users_and_mount_points() {
        let applets = parse_applets("sh\ncat\nbusybox\n\nsha256sum\n").unwrap();
        assert_eq!(applets, ["cat", "sh", "sha256sum"]);
        let tar = rootfs_tar(b"not really busybox", &applets).unwrap();
        let entries = entries(&tar);
        let find = |path: &str| {
            entries
                .iter()
                .find(|(p, ..)| p.trim_end_matches('/') == path)
                .unwrap_or_else(|| panic!("{path} in the rootfs"))
                .clone()
        };
        assert_eq!(find("bin/busybox").1, tar::EntryType::Regular);
        assert_eq!(find("bin/busybox").2, 0o755);
        for applet in ["sh", "cat", "sha256sum"] {
            let (_, kind, _, target) = find(&format!("bin/{applet}"));
            assert_eq!(kind, tar::EntryType::Symlink);
            assert_eq!(target.as_deref(), Some("busybox"));
        }
        assert_eq!(find("tmp").2, 0o1777);
        for dir in ["inputs", "outputs", "checkpoints", "proc", "sys", "dev"] {
            assert_eq!(find(dir).1, tar::EntryType::Directory, "{dir}");
        }
        let mut archive = tar::Archive::new(&tar[..]);
        let passwd = archive
            .entries()
            .unwrap()
            .map(Result::unwrap)
            .find(|e| e.path().unwrap().to_str() == Some("etc/passwd"))
            .map(|mut e| {
                let mut s = String::new();
                io::Read::read_to_string(&mut e, &mut s).unwrap();
                s
            })
            .unwrap();
        assert!(passwd.contains("root:x:0:0:"));
        assert!(passwd.contains("nobody:x:65534:65534:"));
    }

    #[test]
    fn the_rootfs_is_deterministic() {
        let applets = vec!["sh".to_owned()];
        assert_eq!(
            rootfs_tar(b"bb", &applets).unwrap(),
            rootfs_tar(b"bb", &applets).unwrap()
        );
    }

    #[test]
    fn applet_names_that_escape_bin_are_refused() {
        for listing in ["sh\n../etc/x\n", "sh\n..\n", "cat\n"] {
            assert!(parse_applets(listing).is_err(), "{listing:?}");
        }
    }

    #[test]
    fn a_dynamically_linked_binary_is_not_static() {
        let host = std::env::current_exe().unwrap();
        // The test binary itself links against libc.
        assert!(!is_static_elf(&std::fs::read(host).unwrap()));
        assert!(!is_static_elf(b"#!/bin/sh\n"));
    }
}
