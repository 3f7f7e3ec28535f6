//! The user's age identity (design 19, §3; `gantry_protocol::encryption`): the key an
//! encrypted job's result is encrypted to and its job key is derived from.
//!
//! ```text
//!   --identity FILE ─────────────────────────────▶ identity(text)  ─┐
//!   signing key ──EIP-191 sign wallet_message(chain, market)──▶     ├─▶ UserIdentity
//!                 recovered to the account? ──▶ wallet_identity(sig) ┘   (recipient age1…)
//! ```
//!
//! Files are read, written and encrypted here; the keys and the cipher are age's, used
//! through the protocol crate.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use alloy::primitives::{Address, B256};
use alloy::signers::SignerSync as _;
use alloy::signers::local::PrivateKeySigner;
use gantry_protocol::encryption::{self, AgeIdentity, AgeRecipient};

use crate::error::{CliError, Result};

/// Why the wallet's key message is signed here only.
pub const WALLET_CAVEAT: &str = "anyone who obtains that signature can read your encrypted \
    results: sign the gantry key message only in the gantry CLI or the Gantry web app, never \
    for another site (or use --identity with a file from `gantry keys new`)";

/// The user's identity and where it came from.
pub struct UserIdentity {
    pub identity: AgeIdentity,
    pub source: Source,
}

impl std::fmt::Debug for UserIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of every debug print.
        f.debug_struct("UserIdentity")
            .field("recipient", &self.recipient().to_string())
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// Where an identity came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// An identity file (`--identity`, `GANTRY_IDENTITY`).
    File(PathBuf),
    /// Derived from `account`'s signature of the wallet message of `chain_id`'s `market`.
    Wallet {
        account: Address,
        chain_id: u64,
        market: Address,
    },
}

impl UserIdentity {
    pub fn recipient(&self) -> AgeRecipient {
        self.identity.to_public()
    }

    /// Where it came from, in words.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::File(path) => format!("the identity file {}", path.display()),
            Source::Wallet {
                account,
                chain_id,
                market,
            } => format!(
                "derived from {account}'s signature of the gantry key message (chain \
                 {chain_id}, market {market})"
            ),
        }
    }

    /// What the user must know of where it came from: a derived identity is only as
    /// private as the signature it came from.
    pub fn caveat(&self) -> Option<&'static str> {
        match self.source {
            Source::File(_) => None,
            Source::Wallet { .. } => Some(WALLET_CAVEAT),
        }
    }

    pub fn to_json(&self) -> serde_json::Value {
        match &self.source {
            Source::File(path) => serde_json::json!({
                "recipient": self.recipient().to_string(),
                "source": "file",
                "file": path,
            }),
            Source::Wallet {
                account,
                chain_id,
                market,
            } => serde_json::json!({
                "recipient": self.recipient().to_string(),
                "source": "wallet",
                "account": account,
                "chainId": chain_id,
                "market": market,
            }),
        }
    }
}

/// The identity in the file `path` (`--identity`).
pub fn read_file(path: &Path) -> Result<UserIdentity> {
    let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => CliError::usage(format!(
            "--identity {}: no such file (`gantry keys new {}` makes one)",
            path.display(),
            path.display()
        )),
        _ => CliError::io(path.display(), e),
    })?;
    let identity = encryption::identity(&text).map_err(|_| {
        CliError::usage(format!(
            "--identity {}: not an age X25519 identity file (a line AGE-SECRET-KEY-1…)",
            path.display()
        ))
    })?;
    Ok(UserIdentity {
        identity,
        source: Source::File(path.to_owned()),
    })
}

/// The identity of `wallet` for `chain_id`'s `market`: from its EIP-191 signature of the
/// wallet message, checked to recover to the wallet's own address (a signer that answered
/// with another key's signature would give an identity its owner cannot make again).
pub fn from_wallet(
    wallet: &PrivateKeySigner,
    chain_id: u64,
    market: Address,
) -> Result<UserIdentity> {
    let message = encryption::wallet_message(chain_id, market);
    let signature = wallet
        .sign_message_sync(message.as_bytes())
        .map_err(|e| CliError::Other(format!("signing the gantry key message: {e}")))?;
    let account = wallet.address();
    if signature.recover_address_from_msg(message.as_bytes()).ok() != Some(account) {
        return Err(CliError::Other(format!(
            "the signature of the gantry key message does not recover to {account}: no \
             identity derived from it"
        )));
    }
    Ok(UserIdentity {
        identity: encryption::wallet_identity(&signature),
        source: Source::Wallet {
            account,
            chain_id,
            market,
        },
    })
}

/// A new random identity written to `path`, readable by its owner only (0600); an
/// existing file is refused, never overwritten: results encrypted to the identity it
/// holds could not be read again.
pub fn new_file(path: &Path) -> Result<AgeIdentity> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let identity = AgeIdentity::generate();
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => CliError::usage(format!(
                "{} exists: refusing to overwrite an identity (results encrypted to it \
                 could not be read again)",
                path.display()
            )),
            _ => CliError::io(path.display(), e),
        })?;
    file.write_all(encryption::identity_file(&identity).as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(|e| CliError::io(path.display(), e))?;
    Ok(identity)
}

/// A file encrypted: the ciphertext in a temporary file, its SHA-256 and size.
#[derive(Debug)]
pub struct Sealed {
    pub file: tempfile::NamedTempFile,
    pub sha256: B256,
    pub bytes: u64,
}

/// Encrypts the file `path` to `to` into a temporary file, hashing the ciphertext as it is
/// written. Blocking (`spawn_blocking` it).
pub fn seal_file(path: &Path, to: &AgeRecipient) -> Result<Sealed> {
    let plain = std::fs::File::open(path).map_err(|e| CliError::io(path.display(), e))?;
    let file = tempfile::Builder::new()
        .prefix(".gantry-input-")
        .suffix(encryption::AGE_SUFFIX)
        .tempfile()
        .map_err(|e| CliError::io("a temporary file", e))?;
    let written = encryption::encrypt(
        std::slice::from_ref(to),
        std::io::BufReader::new(plain),
        std::io::BufWriter::new(file.as_file()),
    )
    .map_err(|e| CliError::Other(format!("encrypting {}: {e}", path.display())))?;
    Ok(Sealed {
        sha256: written.sha256,
        bytes: written.bytes,
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKET: Address = Address::repeat_byte(0x5f);

    fn wallet() -> PrivateKeySigner {
        "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
            .parse()
            .unwrap()
    }

    #[test]
    fn encrypted_identity_from_the_wallet_is_the_same_each_time_and_per_chain() {
        let first = from_wallet(&wallet(), 31337, MARKET).unwrap();
        let again = from_wallet(&wallet(), 31337, MARKET).unwrap();
        assert_eq!(first.recipient(), again.recipient());
        let elsewhere = from_wallet(&wallet(), 1, MARKET).unwrap();
        assert_ne!(first.recipient(), elsewhere.recipient());
        assert!(first.caveat().unwrap().contains("only in the gantry CLI"));
        assert!(!format!("{first:?}").contains("AGE-SECRET-KEY"));
    }

    #[test]
    fn encrypted_identity_file_is_new_private_and_never_overwritten() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("me.age");
        let made = new_file(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let read = read_file(&path).unwrap();
        assert_eq!(read.recipient(), made.to_public());
        assert_eq!(read.source, Source::File(path.clone()));
        let Err(error) = new_file(&path) else {
            panic!("an existing file is overwritten")
        };
        assert_eq!(error.exit_code(), crate::error::exit::USAGE);
        assert!(
            error.to_string().contains("refusing to overwrite"),
            "{error}"
        );
        assert_eq!(read_file(&path).unwrap().recipient(), made.to_public());
        let error = read_file(&dir.path().join("none")).unwrap_err();
        assert!(error.to_string().contains("gantry keys new"), "{error}");
        std::fs::write(dir.path().join("bad"), "# nothing\n").unwrap();
        assert_eq!(
            read_file(&dir.path().join("bad")).unwrap_err().exit_code(),
            crate::error::exit::USAGE
        );
    }

    #[test]
    fn encrypted_file_is_sealed_to_its_recipient_and_hashed_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plain.bin");
        let plain = vec![9u8; 100_000];
        std::fs::write(&path, &plain).unwrap();
        let key = AgeIdentity::generate();
        let sealed = seal_file(&path, &key.to_public()).unwrap();
        let ciphertext = std::fs::read(sealed.file.path()).unwrap();
        assert_eq!(sealed.bytes, ciphertext.len() as u64);
        assert_eq!(sealed.sha256, encryption::sha256(&ciphertext));
        assert_ne!(ciphertext, plain);
        let mut opened = Vec::new();
        encryption::decrypt(&key, &ciphertext[..], &mut opened).unwrap();
        assert_eq!(opened, plain);
    }
}
