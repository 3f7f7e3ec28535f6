//! The deployment file (`.devnet/deployment.json` on the dev network): where the contracts
//! of a deployment live. Written by whoever deploys (`gantry-devnet`, the Foundry script's
//! operator), read by the CLI and the services' set-up.

use alloy::primitives::Address;
use serde::{Deserialize, Serialize};

/// Where the contracts of a deployment live.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Deployment {
    pub chain_id: u64,
    pub token: Address,
    pub registry: Address,
    pub market: Address,
    /// Block of the first deployment transaction: where an indexer starts (0 when a
    /// hand-written file leaves it out).
    #[serde(default)]
    pub start_block: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_is_camel_case_json() {
        let deployment = Deployment {
            chain_id: 31337,
            token: Address::repeat_byte(1),
            registry: Address::repeat_byte(2),
            market: Address::repeat_byte(3),
            start_block: 4,
        };
        let json = serde_json::to_value(deployment).unwrap();
        assert_eq!(json["chainId"], 31337);
        assert_eq!(json["startBlock"], 4);
        assert_eq!(
            serde_json::from_value::<Deployment>(json).unwrap(),
            deployment
        );
    }
}
