//! The worker's handshake with NATS (design 19, §1): a worker proves it holds its node's
//! agent key, and the auth service (`gantry-auth`, answering nats-server's auth callout)
//! checks it against the registry and answers with credentials scoped to that node.
//!
//! ```text
//!   worker                                 nats-server              gantry-auth
//!     │ CONNECT {auth_token: Token JSON} ──▶ │ ── $SYS.REQ.USER.AUTH ──▶ │ Token::verify (pure)
//!     │                                      │                           │ replay KV, registry
//!     │ ◀── connected, as node N's user ──── │ ◀── user JWT (node N's ── │ admit (pure)
//!     │     (expires: reconnect = sign again)│     permissions, exp)     │ manifest → KV
//! ```
//!
//! The token is the EIP-712 message [`NodeHandshake`] (the market's domain, so it is valid
//! on one chain and one market only) signed by the agent key, with the capability
//! [`Manifest`] whose hash it signs. A token is good for [`CLOCK_WINDOW_SECS`] either side
//! of its `issuedAt`, and once: the service records the digest of each token it admits
//! (not the signature's bytes, which could be re-encoded into as many keys: another `v`,
//! the high-s twin; and only the canonical encoding is taken anyway).
//!
//! Who is admitted ([`admit`]): the node's registered agent, while the node is accountable
//! for what it does with the access: registered and not exited, its stake at least the
//! market's minimum. An Inactive node (it missed heartbeats) is admitted so that it can
//! come back; an Exiting one so that it can finish the jobs it holds while its stake
//! unbonds; a node slashed below the minimum, or one that has withdrawn its stake, is not.

use alloy::primitives::{Address, B128, B256, Signature, U256, keccak256};
use alloy::sol;
use alloy::sol_types::SolStruct;
use serde::{Deserialize, Serialize};

use crate::consent::domain;
use crate::status::NodeStatus;

sol! {
    /// What the agent signs: the node it speaks for, when, a fresh nonce (two tokens of
    /// one second differ), and the manifest's hash.
    struct NodeHandshake {
        uint64 node;
        address agent;
        uint64 issuedAt;
        bytes16 nonce;
        bytes32 manifest;
    }
}

/// The token format's version; a token of another version is refused.
pub const VERSION: u8 = 1;
/// A token longer than this is refused unread (a NATS CONNECT line holds 4,096 bytes).
pub const MAX_TOKEN_BYTES: usize = 3_000;
/// A token is good this long either side of its `issued_at` (clocks differ).
pub const CLOCK_WINDOW_SECS: u64 = 60;
/// Inputs a manifest lists at most (the newest the worker cached).
pub const MAX_CACHED_INPUTS: usize = 12;
/// GPUs a manifest lists at most.
pub const MAX_GPUS: usize = 16;
/// Characters of a GPU model or a worker version at most.
pub const MAX_NAME_CHARS: usize = 64;

/// What the worker says it can do, beyond what the chain holds: the engines it runs now
/// (a subset of its registered ones), its GPUs, the inputs in its cache (sha256), and its
/// version. Kept where the matcher reads it (`names::nodes_bucket`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Manifest {
    /// `eligibility::Engines` bits.
    pub engines: u8,
    pub gpus: Vec<Gpu>,
    pub cached_inputs: Vec<B256>,
    pub worker: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Gpu {
    pub model: String,
    pub vram_mib: u32,
}

impl Manifest {
    /// The manifest cut to what a token carries: the first GPUs and cached inputs, names
    /// shortened.
    pub fn bounded(mut self) -> Self {
        self.gpus.truncate(MAX_GPUS);
        self.cached_inputs.truncate(MAX_CACHED_INPUTS);
        for gpu in &mut self.gpus {
            gpu.model = gpu.model.chars().take(MAX_NAME_CHARS).collect();
        }
        self.worker = self.worker.chars().take(MAX_NAME_CHARS).collect();
        self
    }

    fn check(&self) -> Result<(), Refusal> {
        let long = |text: &str| text.chars().count() > MAX_NAME_CHARS;
        if self.gpus.len() > MAX_GPUS
            || self.cached_inputs.len() > MAX_CACHED_INPUTS
            || long(&self.worker)
            || self.gpus.iter().any(|gpu| long(&gpu.model))
        {
            return Err(Refusal::Malformed("the manifest is over its bounds"));
        }
        Ok(())
    }
}

/// What a worker sends as its NATS `auth_token` (JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Token {
    pub v: u8,
    pub node: u64,
    pub agent: Address,
    pub issued_at: u64,
    /// Random, chosen by the worker for each token.
    pub nonce: B128,
    /// The manifest's JSON, exactly as hashed and signed.
    pub manifest: String,
    /// The agent's signature of [`Token::digest`], 65 bytes, hex.
    pub signature: String,
}

impl Token {
    /// A token for `node`, its agent `agent`, issued at `issued_at` (unix seconds) with a
    /// random `nonce`, not signed yet: sign [`Self::digest`] and give it to [`Self::signed`].
    pub fn unsigned(
        node: u64,
        agent: Address,
        issued_at: u64,
        nonce: B128,
        manifest: &Manifest,
    ) -> Self {
        Self {
            v: VERSION,
            node,
            agent,
            issued_at,
            nonce,
            manifest: serde_json::to_string(&manifest.clone().bounded())
                .expect("a manifest serializes"),
            signature: String::new(),
        }
    }

    /// The EIP-712 digest the agent signs, in the market's domain.
    pub fn digest(&self, chain_id: u64, market: Address) -> B256 {
        NodeHandshake {
            node: self.node,
            agent: self.agent,
            issuedAt: self.issued_at,
            nonce: self.nonce,
            manifest: keccak256(self.manifest.as_bytes()),
        }
        .eip712_signing_hash(&domain(chain_id, market))
    }

    /// The token with `signature` in its one accepted encoding (`r ‖ s ‖ v`, `v` 27 or
    /// 28, low `s`).
    pub fn signed(mut self, signature: &Signature) -> Self {
        self.signature = alloy::hex::encode_prefixed(signature.normalized_s().as_bytes());
        self
    }

    pub fn encode(&self) -> String {
        serde_json::to_string(self).expect("a token serializes")
    }

    /// Reads a token: bounded in size, every field known.
    pub fn decode(text: &str) -> Result<Self, Refusal> {
        if text.len() > MAX_TOKEN_BYTES {
            return Err(Refusal::Malformed("the token is too long"));
        }
        serde_json::from_str(text).map_err(|_| Refusal::Malformed("the token is not one"))
    }

    /// Checks everything the token says of itself at unix second `now`: its version, its
    /// age, its manifest, and that its agent signed it for this chain and market. The
    /// registry's word is [`admit`]'s.
    pub fn verify(&self, chain_id: u64, market: Address, now: u64) -> Result<Verified, Refusal> {
        if self.v != VERSION {
            return Err(Refusal::Malformed("another token version"));
        }
        if self.issued_at.abs_diff(now) > CLOCK_WINDOW_SECS {
            return Err(Refusal::Stale {
                issued_at: self.issued_at,
                now,
            });
        }
        let manifest: Manifest = serde_json::from_str(&self.manifest)
            .map_err(|_| Refusal::Malformed("the manifest is not one"))?;
        manifest.check()?;
        let bytes = alloy::hex::decode(&self.signature)
            .map_err(|_| Refusal::Malformed("the signature is not hex"))?;
        // One encoding per signature: 65 bytes, `v` 27 or 28, `s` in the lower half.
        if bytes.len() != 65 || !matches!(bytes[64], 27 | 28) {
            return Err(Refusal::Malformed(
                "the signature is not r ‖ s ‖ v (27 or 28)",
            ));
        }
        let signature = Signature::from_raw(&bytes)
            .map_err(|_| Refusal::Malformed("the signature is not one"))?;
        if signature.normalize_s().is_some() {
            return Err(Refusal::Malformed("the signature's s is in the upper half"));
        }
        let digest = self.digest(chain_id, market);
        let signer = signature
            .recover_address_from_prehash(&digest)
            .map_err(|_| Refusal::BadSignature)?;
        if signer != self.agent {
            return Err(Refusal::BadSignature);
        }
        Ok(Verified {
            node: self.node,
            agent: self.agent,
            manifest,
            once: digest,
        })
    }
}

/// A token whose agent signed it, within its window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub node: u64,
    pub agent: Address,
    pub manifest: Manifest,
    /// What the agent signed (the token's EIP-712 digest): the key the service records
    /// it under, once.
    pub once: B256,
}

/// What the registry says of the node, read when the token arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Registered {
    pub agent: Address,
    pub status: NodeStatus,
    pub stake: U256,
    pub min_stake: U256,
}

/// Whether the registry lets `verified`'s agent in as its node (see the module docs).
pub fn admit(verified: &Verified, node: &Registered) -> Result<(), Refusal> {
    match node.status {
        NodeStatus::None => return Err(Refusal::UnknownNode),
        NodeStatus::Exited => return Err(Refusal::Exited),
        NodeStatus::Active | NodeStatus::Inactive | NodeStatus::Exiting => {}
    }
    if node.agent != verified.agent {
        return Err(Refusal::NotAgent);
    }
    if node.stake < node.min_stake {
        return Err(Refusal::BelowMinimumStake);
    }
    Ok(())
}

/// Why a handshake is refused. [`Refusal::reason`] labels the service's metric and is the
/// error the worker sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("malformed: {0}")]
    Malformed(&'static str),
    #[error("issued at {issued_at}, {now} now: outside the window")]
    Stale { issued_at: u64, now: u64 },
    #[error("the signature is not the token's agent's")]
    BadSignature,
    #[error("this token was used before")]
    Replayed,
    #[error("no such node")]
    UnknownNode,
    #[error("the node has exited")]
    Exited,
    #[error("the key is not the node's agent")]
    NotAgent,
    #[error("the node's stake is below the minimum")]
    BelowMinimumStake,
}

impl Refusal {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Malformed(_) => "malformed",
            Self::Stale { .. } => "stale",
            Self::BadSignature => "bad_signature",
            Self::Replayed => "replayed",
            Self::UnknownNode => "unknown_node",
            Self::Exited => "exited",
            Self::NotAgent => "not_agent",
            Self::BelowMinimumStake => "below_minimum_stake",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::address;

    const MARKET: Address = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");

    /// Anvil's account 0.
    fn sign(digest: B256) -> (Address, Signature) {
        use alloy::signers::SignerSync as _;
        let signer: alloy::signers::local::PrivateKeySigner =
            "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"
                .parse()
                .unwrap();
        (signer.address(), signer.sign_hash_sync(&digest).unwrap())
    }

    fn manifest() -> Manifest {
        Manifest {
            engines: 3,
            gpus: vec![Gpu {
                model: "H200".into(),
                vram_mib: 141_312,
            }],
            cached_inputs: vec![B256::repeat_byte(7)],
            worker: "0.1.0".into(),
        }
    }

    fn token(node: u64, issued_at: u64) -> Token {
        let (agent, _) = sign(B256::ZERO);
        let token = Token::unsigned(node, agent, issued_at, B128::repeat_byte(1), &manifest());
        let (_, signature) = sign(token.digest(31337, MARKET));
        token.signed(&signature)
    }

    fn registered(agent: Address, status: NodeStatus, stake: u64) -> Registered {
        Registered {
            agent,
            status,
            stake: U256::from(stake),
            min_stake: U256::from(100),
        }
    }

    #[test]
    fn a_signed_token_round_trips_and_verifies_within_its_window() {
        let token = token(3, 1_000);
        let text = token.encode();
        assert!(text.len() < MAX_TOKEN_BYTES, "{}", text.len());
        let read = Token::decode(&text).unwrap();
        let verified = read
            .verify(31337, MARKET, 1_000 + CLOCK_WINDOW_SECS)
            .unwrap();
        assert_eq!((verified.node, verified.manifest), (3, manifest()));
        assert_eq!(
            read.verify(31337, MARKET, 1_000 + CLOCK_WINDOW_SECS + 1),
            Err(Refusal::Stale {
                issued_at: 1_000,
                now: 1_061
            })
        );
    }

    #[test]
    fn a_token_for_another_chain_market_node_or_manifest_is_refused() {
        let token = token(3, 1_000);
        assert_eq!(token.verify(1, MARKET, 1_000), Err(Refusal::BadSignature));
        assert_eq!(
            token.verify(31337, Address::ZERO, 1_000),
            Err(Refusal::BadSignature)
        );
        let mut other_nonce = token.clone();
        other_nonce.nonce = B128::repeat_byte(2);
        assert_eq!(
            other_nonce.verify(31337, MARKET, 1_000),
            Err(Refusal::BadSignature)
        );
        let mut other_node = token.clone();
        other_node.node = 4;
        assert_eq!(
            other_node.verify(31337, MARKET, 1_000),
            Err(Refusal::BadSignature)
        );
        let mut other_manifest = token.clone();
        other_manifest.manifest = other_manifest.manifest.replace("H200", "H100");
        assert_eq!(
            other_manifest.verify(31337, MARKET, 1_000),
            Err(Refusal::BadSignature)
        );
        let mut claimed = token.clone();
        claimed.agent = Address::repeat_byte(9);
        assert_eq!(
            claimed.verify(31337, MARKET, 1_000),
            Err(Refusal::BadSignature)
        );
    }

    /// A signature has one accepted encoding: the same token re-encoded (another `v`, the
    /// high-s twin) is refused, so it cannot pass as a new token; and whatever the
    /// encoding, the key it is used once under is the digest.
    #[test]
    fn a_signature_has_one_encoding_and_a_token_one_key() {
        let token = token(3, 1_000);
        let verified = token.verify(31337, MARKET, 1_000).unwrap();
        assert_eq!(verified.once, token.digest(31337, MARKET));
        let bytes = alloy::hex::decode(&token.signature).unwrap();
        let mut other_v = bytes.clone();
        other_v[64] -= 27;
        let signature = Signature::from_raw(&bytes).unwrap();
        let high_s = Signature::new(
            signature.r(),
            U256::from_be_bytes(alloy::primitives::hex!(
                "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
            )) - signature.s(),
            !signature.v(),
        );
        for encoding in [other_v, high_s.as_bytes().to_vec()] {
            let mut forged = token.clone();
            forged.signature = alloy::hex::encode_prefixed(&encoding);
            assert!(
                matches!(
                    forged.verify(31337, MARKET, 1_000),
                    Err(Refusal::Malformed(_))
                ),
                "{}",
                forged.signature
            );
        }
    }

    #[test]
    fn what_is_not_a_token_is_refused_as_malformed() {
        let long = "x".repeat(MAX_TOKEN_BYTES + 1);
        for text in ["", "{}", "not json", long.as_str()] {
            assert!(
                matches!(Token::decode(text), Err(Refusal::Malformed(_))),
                "{text:.20}"
            );
        }
        let mut extra = serde_json::to_value(token(3, 1_000)).unwrap();
        extra["more"] = 1.into();
        assert!(Token::decode(&extra.to_string()).is_err());
        let mut short = token(3, 1_000);
        short.signature = "0x1234".into();
        assert!(matches!(
            short.verify(31337, MARKET, 1_000),
            Err(Refusal::Malformed(_))
        ));
        let mut big = token(3, 1_000);
        let mut manifest = manifest();
        manifest.cached_inputs = vec![B256::ZERO; MAX_CACHED_INPUTS + 1];
        big.manifest = serde_json::to_string(&manifest).unwrap();
        assert!(matches!(
            big.verify(31337, MARKET, 1_000),
            Err(Refusal::Malformed(_))
        ));
    }

    #[test]
    fn a_long_manifest_is_cut_to_what_a_token_carries() {
        let mut manifest = manifest();
        manifest.cached_inputs = vec![B256::repeat_byte(1); 100];
        manifest.gpus = vec![
            Gpu {
                model: "M".repeat(500),
                vram_mib: 1
            };
            100
        ];
        let (agent, _) = sign(B256::ZERO);
        let token = Token::unsigned(1, agent, 1, B128::ZERO, &manifest);
        let (_, signature) = sign(token.digest(31337, MARKET));
        let text = token.signed(&signature).encode();
        assert!(text.len() <= MAX_TOKEN_BYTES, "{}", text.len());
        Token::decode(&text)
            .unwrap()
            .verify(31337, MARKET, 1)
            .unwrap();
    }

    #[test]
    fn the_registry_admits_an_accountable_nodes_agent_only() {
        let verified = token(3, 1_000).verify(31337, MARKET, 1_000).unwrap();
        let agent = verified.agent;
        for status in [
            NodeStatus::Active,
            NodeStatus::Inactive,
            NodeStatus::Exiting,
        ] {
            assert_eq!(admit(&verified, &registered(agent, status, 100)), Ok(()));
        }
        let refused = [
            (registered(agent, NodeStatus::None, 0), Refusal::UnknownNode),
            (registered(agent, NodeStatus::Exited, 0), Refusal::Exited),
            (
                registered(Address::repeat_byte(1), NodeStatus::Active, 500),
                Refusal::NotAgent,
            ),
            (
                registered(agent, NodeStatus::Inactive, 99),
                Refusal::BelowMinimumStake,
            ),
        ];
        for (node, refusal) in refused {
            assert_eq!(admit(&verified, &node), Err(refusal));
        }
    }
}
