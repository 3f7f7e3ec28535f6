//! End-to-end encrypted payloads (design 19, §3): age, X25519 recipients.
//!
//! ```text
//!  submitter                         chain / NATS                          node (attempt n)
//!  identity S (file, or derived  ──▶ spec: encryption { recipient = S.pub,
//!   from a wallet signature)              jobKey = J.pub, keySalt }
//!  J = job_identity(S, keySalt)      inputs marked `encrypted`: age to J
//!                                    ◀── KV keys: request.<node>.<job>.<n>  ◀── fresh E, E.pub signed
//!  checks: the agent of the node         {recipient E.pub, agent's EIP-712}     by the node's agent
//!  holding attempt n signed it
//!  wraps J's secret to E.pub     ──▶ KV keys: release.<node>.<job>.<n>     ──▶ checks: the job's
//!   and signs (EIP-712)              {wrapped, submitter's EIP-712}             submitter signed it;
//!                                                                               J = unwrap with E
//!  result: decrypt with S, check ◀── result tar age to S.pub; resultHash =  ◀── decrypts inputs into
//!   sha256(ciphertext) = the URI's    sha256(plaintext); the URI carries        the job's directory;
//!   and sha256(plaintext) = chain's   `#ciphertext-sha256=<hex>`                checkpoints age to
//!                                                                               S.pub and J.pub
//! ```
//!
//! The node's identity E is made for one attempt and never leaves its memory; J and the
//! plaintext are deleted with the job's directory when the job ends. A checkpoint is
//! encrypted to the submitter and to J, so the next attempt's node reads it once J is
//! released to it ("re-wrapped for the next node").
//!
//! What this protects: the payloads in storage (the object store, its backups), in
//! transit, from other providers and from the public. What it cannot without a TEE: the
//! executing node sees the plaintext while it runs the job.

use std::io::{Read, Write};
use std::str::FromStr;

use age::secrecy::ExposeSecret as _;
use age::x25519::{Identity, Recipient};
use alloy::primitives::{Address, B256, Signature};
use alloy::sol;
use alloy::sol_types::SolStruct;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};
use sha2::Digest as _;

use crate::consent::domain;

pub use age;
pub use age::x25519::{Identity as AgeIdentity, Recipient as AgeRecipient};

/// The version of the key-exchange messages.
pub const VERSION: u16 = 1;
/// The largest key request or release read, bytes (a wrapped identity is ~330).
pub const MAX_MESSAGE_BYTES: usize = 4096;
/// How long after its assignment a node waits for the job key of a job with encrypted
/// inputs, seconds: within the market's reject grace (30 s), with room for the reject to
/// be mined in it.
pub const KEY_WAIT_SECS: u64 = 15;
/// The least `maxRuntime` of a job with encrypted inputs, seconds: its reject grace is the
/// whole 30 s (a tenth of the runtime, at most 30), so a node whose key never comes gives
/// the job back free.
pub const MIN_ENCRYPTED_RUNTIME_SECS: u64 = 300;
/// The fragment of a result URI that carries the ciphertext's SHA-256.
pub const CIPHERTEXT_FRAGMENT: &str = "#ciphertext-sha256=";
/// The suffix of an encrypted object's key.
pub const AGE_SUFFIX: &str = ".age";

sol! {
    /// What a node's agent signs to ask for the job key of an attempt it holds: the
    /// attempt's own recipient.
    struct KeyRequest {
        uint64 job;
        uint8 attempt;
        uint64 node;
        string recipient;
    }

    /// What a submitter signs to release the job key to an attempt's node: the SHA-256 of
    /// the wrapped key.
    struct KeyRelease {
        uint64 job;
        uint8 attempt;
        uint64 node;
        bytes32 wrapped;
    }
}

/// Why a key, a message or a payload was refused.
#[derive(Debug, thiserror::Error)]
pub enum CryptoError {
    #[error("not an age X25519 recipient (age1…): {0}")]
    BadRecipient(String),
    #[error("not an age X25519 identity (AGE-SECRET-KEY-1…)")]
    BadIdentity,
    #[error("malformed key message: {0}")]
    Malformed(String),
    #[error("the key message is for job {job} attempt {attempt} on node {node}, not this one")]
    Elsewhere { job: u64, attempt: u8, node: u64 },
    #[error("the key message is not signed by {expected}")]
    NotSigned { expected: Address },
    #[error("cannot decrypt: {0}")]
    Decrypt(#[from] age::DecryptError),
    #[error("cannot encrypt: {0}")]
    Encrypt(#[from] age::EncryptError),
    /// Writing the plaintext failed (the reader's disk, not the ciphertext).
    #[error("writing the plaintext: {0}")]
    Write(std::io::Error),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// An age recipient from its text (`age1…`); a low-order key (one every shared secret
/// with is zero, such as all zeros) is refused: age panics encrypting to one, so a spec
/// or a request naming one would crash whoever encrypts.
pub fn recipient(text: &str) -> Result<Recipient, CryptoError> {
    let text = text.trim();
    let parsed = Recipient::from_str(text).map_err(|e| CryptoError::BadRecipient(e.to_string()))?;
    let (_, key) = bech32::decode(text).map_err(|e| CryptoError::BadRecipient(e.to_string()))?;
    let key: [u8; 32] = key
        .try_into()
        .map_err(|_| CryptoError::BadRecipient("not 32 bytes".into()))?;
    if x25519_dalek::x25519([0x42; 32], key) == [0; 32] {
        return Err(CryptoError::BadRecipient("a low-order key".into()));
    }
    Ok(parsed)
}

/// An age identity from its text (`AGE-SECRET-KEY-1…`), as in an identity file: the first
/// line that is not a comment.
pub fn identity(text: &str) -> Result<Identity, CryptoError> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .ok_or(CryptoError::BadIdentity)?;
    Identity::from_str(line).map_err(|_| CryptoError::BadIdentity)
}

/// The identity file's text for `identity` (with its recipient as a comment).
pub fn identity_file(identity: &Identity) -> String {
    format!(
        "# recipient: {}\n{}\n",
        identity.to_public(),
        identity.to_string().expose_secret()
    )
}

/// The identity whose secret is HKDF-SHA256(`ikm`, `salt`, `info`): 32 bytes as age
/// writes them (bech32, `AGE-SECRET-KEY-`).
pub fn derive_identity(ikm: &[u8], salt: &[u8], info: &[u8]) -> Identity {
    let mut secret = [0u8; 32];
    hkdf::Hkdf::<sha2::Sha256>::new(Some(salt), ikm)
        .expand(info, &mut secret)
        .expect("32 bytes is a valid HKDF-SHA256 length");
    let hrp = bech32::Hrp::parse("AGE-SECRET-KEY-").expect("a valid prefix");
    // Every copy of the secret is zeroed when dropped.
    let text = age::secrecy::SecretString::from(
        bech32::encode::<bech32::Bech32>(hrp, &secret).expect("32 bytes encode"),
    );
    secret.fill(0);
    let upper = age::secrecy::SecretString::from(text.expose_secret().to_uppercase());
    Identity::from_str(upper.expose_secret()).expect("age reads what it writes")
}

/// Job key `salt`'s identity of the submitter whose identity is `submitter`: what the
/// submitter's tools recompute from the spec's `keySalt` to release it.
pub fn job_identity(submitter: &Identity, salt: &[u8]) -> Identity {
    derive_identity(
        submitter.to_string().expose_secret().as_bytes(),
        salt,
        b"gantry job key v1",
    )
}

/// The identity results of a job are encrypted to (the spec's `recipient`, as the CLI
/// writes it): derived from the submitter's identity and the job's salt as the job key is,
/// with another label, and never released to a node. Its secret opens that job's result
/// and nothing else: what a submitter may show an arbiter in a dispute.
pub fn result_identity(submitter: &Identity, salt: &[u8]) -> Identity {
    derive_identity(
        submitter.to_string().expose_secret().as_bytes(),
        salt,
        b"gantry result key v1",
    )
}

/// The message a wallet signs (EIP-191) to derive its owner's identity: it names the
/// purpose, the chain and the market so that a wallet shows what is asked. **Anyone who
/// gets this signature can read the account's results**: sign it only in the gantry CLI
/// or the market's own web app, never on another site.
pub fn wallet_message(chain_id: u64, market: Address) -> String {
    format!(
        "Gantry encryption key v1\n\nSign only in the gantry CLI or the Gantry web app: this \
         signature is the key that decrypts your job results. A site that asks for it can \
         read them.\n\nChain ID: {chain_id}\nMarket: {market}"
    )
}

/// The identity derived from a wallet's signature of [`wallet_message`]: from `r‖s` with
/// `s` low (the same whichever half a wallet returns; `v` is left out). Deterministic for
/// wallets that sign deterministically (RFC 6979), which the caller checks by recording
/// the recipient.
pub fn wallet_identity(signature: &Signature) -> Identity {
    let signature = signature.normalized_s();
    let mut rs = [0u8; 64];
    rs[..32].copy_from_slice(&signature.r().to_be_bytes::<32>());
    rs[32..].copy_from_slice(&signature.s().to_be_bytes::<32>());
    let identity = derive_identity(&rs, b"gantry wallet identity", b"age x25519 v1");
    rs.fill(0);
    identity
}

/// Encrypts `from` to `recipients` into `to`; the bytes written.
pub fn encrypt(
    recipients: &[Recipient],
    mut from: impl Read,
    to: impl Write,
) -> Result<Ciphertext, CryptoError> {
    let encryptor =
        age::Encryptor::with_recipients(recipients.iter().map(|r| r as &dyn age::Recipient))?;
    let mut counted = Counted {
        inner: to,
        hasher: sha2::Sha256::new(),
        bytes: 0,
    };
    let mut writer = encryptor.wrap_output(&mut counted)?;
    std::io::copy(&mut from, &mut writer)?;
    writer.finish()?.flush()?;
    Ok(Ciphertext {
        sha256: B256::from(<[u8; 32]>::from(counted.hasher.finalize())),
        bytes: counted.bytes,
    })
}

/// What [`encrypt`] wrote: the SHA-256 and the length of the ciphertext (what a spec's
/// `sha256` or a result URI names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ciphertext {
    pub sha256: B256,
    pub bytes: u64,
}

/// A writer that hashes and counts what passes.
struct Counted<W> {
    inner: W,
    hasher: sha2::Sha256,
    bytes: u64,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// The most an age header may take here, bytes: ~100 per recipient stanza. age reads a
/// header line without a bound (a file without a newline is read whole into memory) and
/// parses it again per line: a header must end (`\n--- `) within this.
pub const MAX_HEADER_BYTES: usize = 16 << 10;

/// Decrypts `from` with `identity` into `to`; the plaintext's length. A header that does
/// not end within [`MAX_HEADER_BYTES`] is refused before age reads it; an error writing
/// `to` is [`CryptoError::Write`] (the reader's, not the ciphertext's).
pub fn decrypt(
    identity: &Identity,
    mut from: impl Read,
    mut to: impl Write,
) -> Result<u64, CryptoError> {
    let mut head = Vec::with_capacity(MAX_HEADER_BYTES);
    (&mut from)
        .take(MAX_HEADER_BYTES as u64)
        .read_to_end(&mut head)?;
    if !head.starts_with(b"age-encryption.org/v1\n") || !head.windows(5).any(|w| w == b"\n--- ") {
        return Err(CryptoError::Malformed(format!(
            "not an age file with a header within {MAX_HEADER_BYTES} bytes"
        )));
    }
    let whole = std::io::BufReader::new(std::io::Cursor::new(head).chain(from));
    let decryptor = age::Decryptor::new_buffered(whole)?;
    let mut reader = decryptor.decrypt(std::iter::once(identity as &dyn age::Identity))?;
    let mut buf = vec![0u8; 64 << 10];
    let mut written = 0u64;
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            return Ok(written);
        }
        to.write_all(&buf[..n]).map_err(CryptoError::Write)?;
        written += n as u64;
    }
}

/// An encrypted result's URI: `uri` with the ciphertext's SHA-256 in its fragment (the
/// node commits to both hashes in its `submitResult`).
pub fn with_ciphertext(uri: &str, ciphertext: B256) -> String {
    format!(
        "{uri}{CIPHERTEXT_FRAGMENT}{}",
        alloy::hex::encode(ciphertext)
    )
}

/// A result URI without its ciphertext fragment, and the hash that fragment carries
/// (`None`: no fragment; `Err`: a fragment that is not a hash).
pub fn split_ciphertext(uri: &str) -> Result<(&str, Option<B256>), CryptoError> {
    match uri.split_once(CIPHERTEXT_FRAGMENT) {
        None => Ok((uri, None)),
        Some((base, hex)) => {
            let hash = (hex.len() == 64)
                .then(|| B256::from_str(hex).ok())
                .flatten()
                .ok_or_else(|| CryptoError::Malformed(format!("ciphertext hash {hex:?}")))?;
            Ok((base, Some(hash)))
        }
    }
}

/// A node's request for the job key of an attempt it holds, in the keys bucket under
/// [`crate::names::key_request`]: JSON, fields in camelCase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Request {
    pub v: u16,
    pub job: u64,
    pub attempt: u8,
    pub node: u64,
    /// The attempt's own recipient (`age1…`), made for it.
    pub recipient: String,
    /// The node's agent's EIP-712 signature of [`KeyRequest`] (65 bytes, hex).
    pub signature: String,
}

impl Request {
    pub fn unsigned(job: u64, attempt: u8, node: u64, recipient: &Recipient) -> Self {
        Self {
            v: VERSION,
            job,
            attempt,
            node,
            recipient: recipient.to_string(),
            signature: String::new(),
        }
    }

    /// The digest the node's agent signs, in the market's domain.
    pub fn digest(&self, chain_id: u64, market: Address) -> B256 {
        KeyRequest {
            job: self.job,
            attempt: self.attempt,
            node: self.node,
            recipient: self.recipient.clone(),
        }
        .eip712_signing_hash(&domain(chain_id, market))
    }

    pub fn signed(mut self, signature: &Signature) -> Self {
        self.signature = alloy::hex::encode_prefixed(signature.as_bytes());
        self
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CryptoError> {
        decode(bytes)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a key request serializes")
    }

    /// The recipient to wrap the job key to, if this is a request for `attempt` of `job`
    /// on `node` signed by `agent` (the node's agent now, from the chain).
    pub fn verify(
        &self,
        chain_id: u64,
        market: Address,
        (job, attempt, node): (u64, u8, u64),
        agent: Address,
    ) -> Result<Recipient, CryptoError> {
        same(
            self.v,
            (self.job, self.attempt, self.node),
            (job, attempt, node),
        )?;
        signed_by(&self.signature, self.digest(chain_id, market), agent)?;
        recipient(&self.recipient)
    }
}

/// A submitter's release of the job key to an attempt's node, in the keys bucket under
/// [`crate::names::key_release`]: JSON, fields in camelCase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Release {
    pub v: u16,
    pub job: u64,
    pub attempt: u8,
    pub node: u64,
    /// The job key's identity, age-encrypted to the request's recipient (base64).
    pub wrapped: String,
    /// The submitter's EIP-712 signature of [`KeyRelease`] (65 bytes, hex).
    pub signature: String,
}

impl Release {
    /// `job_key` wrapped to the recipient of `request` (checked by the caller), unsigned.
    pub fn wrap(
        request: &Request,
        to: &Recipient,
        job_key: &Identity,
    ) -> Result<Self, CryptoError> {
        let mut wrapped = Vec::new();
        encrypt(
            std::slice::from_ref(to),
            job_key.to_string().expose_secret().as_bytes(),
            &mut wrapped,
        )?;
        Ok(Self {
            v: VERSION,
            job: request.job,
            attempt: request.attempt,
            node: request.node,
            wrapped: BASE64.encode(wrapped),
            signature: String::new(),
        })
    }

    /// The digest the submitter signs, in the market's domain.
    pub fn digest(&self, chain_id: u64, market: Address) -> B256 {
        let wrapped = BASE64.decode(&self.wrapped).unwrap_or_default();
        KeyRelease {
            job: self.job,
            attempt: self.attempt,
            node: self.node,
            wrapped: sha256(&wrapped),
        }
        .eip712_signing_hash(&domain(chain_id, market))
    }

    pub fn signed(mut self, signature: &Signature) -> Self {
        self.signature = alloy::hex::encode_prefixed(signature.as_bytes());
        self
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CryptoError> {
        decode(bytes)
    }

    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a key release serializes")
    }

    /// The job key, if this is a release for `attempt` of `job` on `node` signed by
    /// `submitter` (the job's, from the chain), unwrapped with the attempt's `identity`.
    pub fn open(
        &self,
        chain_id: u64,
        market: Address,
        (job, attempt, node): (u64, u8, u64),
        submitter: Address,
        identity: &Identity,
    ) -> Result<Identity, CryptoError> {
        same(
            self.v,
            (self.job, self.attempt, self.node),
            (job, attempt, node),
        )?;
        signed_by(&self.signature, self.digest(chain_id, market), submitter)?;
        let wrapped = BASE64
            .decode(&self.wrapped)
            .map_err(|e| CryptoError::Malformed(format!("wrapped: {e}")))?;
        let mut secret = Vec::new();
        decrypt(identity, &wrapped[..], &mut secret)?;
        let text = String::from_utf8(secret).map_err(|_| CryptoError::BadIdentity)?;
        let key = age::secrecy::SecretString::from(text);
        identity_text(key.expose_secret())
    }
}

fn identity_text(text: &str) -> Result<Identity, CryptoError> {
    Identity::from_str(text).map_err(|_| CryptoError::BadIdentity)
}

fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, CryptoError> {
    if bytes.len() > MAX_MESSAGE_BYTES {
        return Err(CryptoError::Malformed(format!("{} bytes", bytes.len())));
    }
    serde_json::from_slice(bytes).map_err(|e| CryptoError::Malformed(e.to_string()))
}

fn same(v: u16, got: (u64, u8, u64), want: (u64, u8, u64)) -> Result<(), CryptoError> {
    if v != VERSION {
        return Err(CryptoError::Malformed(format!("version {v}")));
    }
    if got != want {
        return Err(CryptoError::Elsewhere {
            job: got.0,
            attempt: got.1,
            node: got.2,
        });
    }
    Ok(())
}

fn signed_by(signature: &str, digest: B256, expected: Address) -> Result<(), CryptoError> {
    let signer = alloy::hex::decode(signature)
        .ok()
        .and_then(|bytes| Signature::from_raw(&bytes).ok())
        .and_then(|s| s.recover_address_from_prehash(&digest).ok());
    if signer != Some(expected) {
        return Err(CryptoError::NotSigned { expected });
    }
    Ok(())
}

/// SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> B256 {
    B256::from(<[u8; 32]>::from(sha2::Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::SignerSync as _;
    use alloy::signers::local::PrivateKeySigner;

    const MARKET: Address = Address::repeat_byte(0x5f);

    fn key(hex: &str) -> PrivateKeySigner {
        hex.parse().unwrap()
    }

    fn agent() -> PrivateKeySigner {
        key("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
    }

    fn submitter() -> PrivateKeySigner {
        key("ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
    }

    #[test]
    fn a_derived_identity_is_the_same_from_the_same_secret_and_salt_only() {
        let submitter = derive_identity(b"seed", b"salt", b"info");
        let again = derive_identity(b"seed", b"salt", b"info");
        assert_eq!(submitter.to_public(), again.to_public());
        let job = job_identity(&submitter, &[1; 16]);
        assert_eq!(job.to_public(), job_identity(&again, &[1; 16]).to_public());
        assert_ne!(
            job.to_public(),
            job_identity(&submitter, &[2; 16]).to_public()
        );
        assert_ne!(job.to_public(), submitter.to_public());
        // An identity file reads back.
        let read = identity(&identity_file(&job)).unwrap();
        assert_eq!(read.to_public(), job.to_public());
        assert!(identity("# nothing\n").is_err());
        assert!(recipient("age1notakey").is_err());
        let result = result_identity(&submitter, &[1; 16]);
        assert_ne!(result.to_public(), job.to_public());
        assert_eq!(
            result.to_public(),
            result_identity(&again, &[1; 16]).to_public()
        );
    }

    #[test]
    fn a_low_order_recipient_is_refused_before_anyone_encrypts_to_it() {
        let hrp = bech32::Hrp::parse("age").unwrap();
        // All zeros, and the order-8 point whose u-coordinate is 1.
        let mut one = [0u8; 32];
        one[0] = 1;
        for key in [[0u8; 32], one] {
            let text = bech32::encode::<bech32::Bech32>(hrp, &key).unwrap();
            assert!(
                Recipient::from_str(&text).is_ok(),
                "age itself takes {text}"
            );
            assert!(
                matches!(recipient(&text), Err(CryptoError::BadRecipient(_))),
                "{text}"
            );
        }
        let fine = Identity::generate().to_public().to_string();
        assert!(recipient(&fine).is_ok());
    }

    #[test]
    fn a_wallet_identity_is_the_same_for_either_half_of_s() {
        let wallet = submitter();
        let signature = wallet
            .sign_message_sync(wallet_message(31337, MARKET).as_bytes())
            .unwrap();
        let identity = wallet_identity(&signature);
        let flipped = Signature::new(
            signature.r(),
            alloy::primitives::U256::from_be_bytes(alloy::primitives::hex!(
                "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
            )) - signature.s(),
            !signature.v(),
        );
        assert_eq!(wallet_identity(&flipped).to_public(), identity.to_public());
        // A deterministic signer signs the same again.
        let again = wallet
            .sign_message_sync(wallet_message(31337, MARKET).as_bytes())
            .unwrap();
        assert_eq!(wallet_identity(&again).to_public(), identity.to_public());
        let other_chain = wallet
            .sign_message_sync(wallet_message(1, MARKET).as_bytes())
            .unwrap();
        assert_ne!(
            wallet_identity(&other_chain).to_public(),
            identity.to_public()
        );
    }

    #[test]
    fn a_payload_reads_back_with_either_recipients_identity_only() {
        let submitter = Identity::generate();
        let job = Identity::generate();
        let stranger = Identity::generate();
        let plain = vec![7u8; 200_000];
        let mut sealed = Vec::new();
        let written = encrypt(
            &[submitter.to_public(), job.to_public()],
            &plain[..],
            &mut sealed,
        )
        .unwrap();
        assert_eq!(
            written,
            Ciphertext {
                sha256: sha256(&sealed),
                bytes: sealed.len() as u64
            }
        );
        assert!(!sealed.windows(64).any(|w| w == &plain[..64]));
        for identity in [&submitter, &job] {
            let mut out = Vec::new();
            assert_eq!(decrypt(identity, &sealed[..], &mut out).unwrap(), 200_000);
            assert_eq!(out, plain);
        }
        assert!(decrypt(&stranger, &sealed[..], &mut Vec::new()).is_err());
        // A header that never ends is refused before age reads it whole.
        let endless = [b"age-encryption.org/v1\n".as_slice(), &[b'a'; 1 << 20]].concat();
        assert!(matches!(
            decrypt(&submitter, &endless[..], &mut Vec::new()),
            Err(CryptoError::Malformed(_))
        ));
        // A write that fails is the writer's, not the ciphertext's.
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("no space left"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        assert!(matches!(
            decrypt(&submitter, &sealed[..], Full),
            Err(CryptoError::Write(_))
        ));
        // A flipped byte anywhere is refused.
        let mut tampered = sealed.clone();
        let middle = tampered.len() / 2;
        tampered[middle] ^= 1;
        assert!(decrypt(&submitter, &tampered[..], &mut Vec::new()).is_err());
    }

    #[test]
    fn the_job_key_goes_only_to_the_node_that_asked_and_only_from_the_submitter() {
        let (agent, submitter) = (agent(), submitter());
        let attempt_key = Identity::generate();
        let job_key = Identity::generate();
        let at = (7, 2, 4);
        let request = Request::unsigned(7, 2, 4, &attempt_key.to_public());
        let request = request.clone().signed(
            &agent
                .sign_hash_sync(&request.digest(31337, MARKET))
                .unwrap(),
        );
        let request = Request::decode(&request.encode()).unwrap();
        let to = request.verify(31337, MARKET, at, agent.address()).unwrap();
        // Another node's agent, or another attempt, is refused.
        assert!(matches!(
            request.verify(31337, MARKET, at, submitter.address()),
            Err(CryptoError::NotSigned { .. })
        ));
        assert!(matches!(
            request.verify(31337, MARKET, (7, 3, 4), agent.address()),
            Err(CryptoError::Elsewhere { .. })
        ));
        let release = Release::wrap(&request, &to, &job_key).unwrap();
        let release = release.clone().signed(
            &submitter
                .sign_hash_sync(&release.digest(31337, MARKET))
                .unwrap(),
        );
        let release = Release::decode(&release.encode()).unwrap();
        let opened = release
            .open(31337, MARKET, at, submitter.address(), &attempt_key)
            .unwrap();
        assert_eq!(opened.to_public(), job_key.to_public());
        // Signed by anyone else (the node's own agent included), it is not the key.
        let forged = release.clone().signed(
            &agent
                .sign_hash_sync(&release.digest(31337, MARKET))
                .unwrap(),
        );
        assert!(matches!(
            forged.open(31337, MARKET, at, submitter.address(), &attempt_key),
            Err(CryptoError::NotSigned { .. })
        ));
        // Another wrapped key under the submitter's signature is not signed by it.
        let mut swapped = release.clone();
        swapped.wrapped = Release::wrap(&request, &to, &Identity::generate())
            .unwrap()
            .wrapped;
        assert!(
            swapped
                .open(31337, MARKET, at, submitter.address(), &attempt_key)
                .is_err()
        );
        // Only the attempt's identity unwraps it.
        assert!(matches!(
            release.open(
                31337,
                MARKET,
                at,
                submitter.address(),
                &Identity::generate()
            ),
            Err(CryptoError::Decrypt(_))
        ));
        assert!(Release::decode(&vec![b' '; MAX_MESSAGE_BYTES + 1]).is_err());
    }

    #[test]
    fn a_result_uri_carries_the_ciphertext_hash() {
        let hash = B256::repeat_byte(0xab);
        let uri = with_ciphertext("nats://gantry_1_results/4/7-1.age", hash);
        assert_eq!(
            split_ciphertext(&uri).unwrap(),
            ("nats://gantry_1_results/4/7-1.age", Some(hash))
        );
        assert_eq!(
            split_ciphertext("nats://b/4/7-1").unwrap(),
            ("nats://b/4/7-1", None)
        );
        assert!(split_ciphertext("nats://b/4/7-1#ciphertext-sha256=zz").is_err());
        assert!(uri.len() < 256, "fits the market's texts");
    }
}
