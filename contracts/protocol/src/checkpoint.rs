//! Where a checkpoint comes from (design 19, §2): a node uploads its checkpoints of a job
//! under its own id (`$O.<bucket>.{C,M}.<node>.…`, which only it may write) with the
//! attempt it held and its agent's EIP-712 signature of (job, attempt, SHA-256 of the
//! tar) in the object's metadata. A node resuming the job restores a checkpoint only if
//! the agent of the node whose checkpoint it is signed exactly those bytes for an attempt
//! that node held before the current one; anything else is skipped (the next earlier
//! attempt's, or none: the job starts from scratch, which is never the node's fault).

use std::collections::HashMap;

use alloy::primitives::{Address, B256, Signature};
use alloy::sol;
use alloy::sol_types::SolStruct;

use crate::consent::domain;

sol! {
    /// What a node's agent signs for each checkpoint it uploads.
    struct Checkpoint {
        uint64 job;
        uint8 attempt;
        bytes32 sha256;
    }
}

/// The metadata entry holding the attempt the checkpoint was taken in.
pub const ATTEMPT_KEY: &str = "gantry-attempt";
/// The metadata entry holding the agent's signature (65 bytes, hex).
pub const SIGNATURE_KEY: &str = "gantry-signature";

/// The EIP-712 digest of a checkpoint of `job` taken in `attempt` whose tar's SHA-256 is
/// `sha256`, in the market's domain.
pub fn digest(chain_id: u64, market: Address, job: u64, attempt: u8, sha256: B256) -> B256 {
    Checkpoint {
        job,
        attempt,
        sha256,
    }
    .eip712_signing_hash(&domain(chain_id, market))
}

/// The metadata a checkpoint is uploaded with.
pub fn metadata(attempt: u8, signature: &Signature) -> HashMap<String, String> {
    HashMap::from([
        (ATTEMPT_KEY.to_owned(), attempt.to_string()),
        (
            SIGNATURE_KEY.to_owned(),
            alloy::hex::encode_prefixed(signature.as_bytes()),
        ),
    ])
}

/// Why a checkpoint is not restored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("it carries no attempt or signature")]
    Unsigned,
    #[error("its signature is not its node's agent's over these bytes")]
    NotSigned,
    #[error("its node did not hold attempt {0} before this one")]
    NotHeld(u8),
}

impl Refused {
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Unsigned => "unsigned",
            Self::NotSigned => "not_signed",
            Self::NotHeld(_) => "not_held",
        }
    }
}

/// What a restoring node knows of the checkpoint's node from the chain: its agent now,
/// and the attempts of the job it held before the current one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub agent: Address,
    pub attempts: Vec<u8>,
}

/// Whether a checkpoint of `job` with `metadata`, whose bytes hash to `sha256`, found
/// under a node that is `holder`, may be restored.
pub fn check(
    chain_id: u64,
    market: Address,
    job: u64,
    metadata: &HashMap<String, String>,
    sha256: B256,
    holder: &Holder,
) -> Result<u8, Refused> {
    let attempt: u8 = metadata
        .get(ATTEMPT_KEY)
        .and_then(|a| a.parse().ok())
        .ok_or(Refused::Unsigned)?;
    let signature = metadata
        .get(SIGNATURE_KEY)
        .and_then(|s| alloy::hex::decode(s).ok())
        .and_then(|bytes| Signature::from_raw(&bytes).ok())
        .ok_or(Refused::Unsigned)?;
    let signer = signature
        .recover_address_from_prehash(&digest(chain_id, market, job, attempt, sha256))
        .map_err(|_| Refused::NotSigned)?;
    if signer != holder.agent {
        return Err(Refused::NotSigned);
    }
    if !holder.attempts.contains(&attempt) {
        return Err(Refused::NotHeld(attempt));
    }
    Ok(attempt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::SignerSync as _;
    use alloy::signers::local::PrivateKeySigner;

    const MARKET: Address = Address::repeat_byte(0x5f);

    fn signed(
        signer: &PrivateKeySigner,
        job: u64,
        attempt: u8,
        sha: B256,
    ) -> HashMap<String, String> {
        let signature = signer
            .sign_hash_sync(&digest(31337, MARKET, job, attempt, sha))
            .unwrap();
        metadata(attempt, &signature)
    }

    #[test]
    fn a_checkpoint_is_restored_only_from_its_holders_agent_over_its_bytes() {
        let key = |hex: &str| -> PrivateKeySigner { hex.parse().unwrap() };
        let agent = key("59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d");
        let holder = Holder {
            agent: agent.address(),
            attempts: vec![1, 3],
        };
        let sha = B256::repeat_byte(7);
        let good = signed(&agent, 9, 3, sha);
        assert_eq!(check(31337, MARKET, 9, &good, sha, &holder), Ok(3));
        // Other bytes, another job, another chain: not what was signed.
        assert_eq!(
            check(31337, MARKET, 9, &good, B256::repeat_byte(8), &holder),
            Err(Refused::NotSigned)
        );
        assert_eq!(
            check(31337, MARKET, 10, &good, sha, &holder),
            Err(Refused::NotSigned)
        );
        assert_eq!(
            check(1, MARKET, 9, &good, sha, &holder),
            Err(Refused::NotSigned)
        );
        // Another key, even a node's own agent for an attempt its node never held.
        let stranger = key("5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a");
        assert_eq!(
            check(
                31337,
                MARKET,
                9,
                &signed(&stranger, 9, 3, sha),
                sha,
                &holder
            ),
            Err(Refused::NotSigned)
        );
        assert_eq!(
            check(31337, MARKET, 9, &signed(&agent, 9, 2, sha), sha, &holder),
            Err(Refused::NotHeld(2))
        );
        // The attempt in the metadata changed after signing.
        let mut moved = good.clone();
        moved.insert(ATTEMPT_KEY.into(), "1".into());
        assert_eq!(
            check(31337, MARKET, 9, &moved, sha, &holder),
            Err(Refused::NotSigned)
        );
        assert_eq!(
            check(31337, MARKET, 9, &HashMap::new(), sha, &holder),
            Err(Refused::Unsigned)
        );
    }
}
