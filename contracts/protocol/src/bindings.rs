//! Contract bindings, generated at compile time from the committed artifacts in
//! `contracts/protocol/artifacts/` (ABI plus bytecode), so building needs no Solidity
//! compiler. `make artifacts` regenerates them; a test fails when they are stale.

#![allow(missing_docs, clippy::too_many_arguments, unreachable_pub)]

pub mod job_market {
    alloy::sol!(
        #[sol(rpc, all_derives, extra_derives(serde::Serialize, serde::Deserialize))]
        JobMarket,
        "artifacts/JobMarket.json"
    );
}

pub mod node_registry {
    alloy::sol!(
        #[sol(rpc, all_derives, extra_derives(serde::Serialize, serde::Deserialize))]
        NodeRegistry,
        "artifacts/NodeRegistry.json"
    );
}

pub mod verification {
    alloy::sol!(
        #[sol(rpc, all_derives, extra_derives(serde::Serialize, serde::Deserialize))]
        Verification,
        "artifacts/Verification.json"
    );
}

pub mod referees {
    alloy::sol!(
        #[sol(rpc, all_derives, extra_derives(serde::Serialize, serde::Deserialize))]
        Referees,
        "artifacts/Referees.json"
    );
}

alloy::sol!(
    #[sol(rpc, all_derives)]
    GantryTestToken,
    "artifacts/GantryTestToken.json"
);

alloy::sol!(
    #[sol(rpc, all_derives)]
    EventBatcher,
    "artifacts/EventBatcher.json"
);

alloy::sol! {
    /// EIP-2612's permit, as the token hashes it (`postJobWithPermit` takes its signature).
    #[derive(Debug, PartialEq, Eq)]
    struct Permit {
        address owner;
        address spender;
        uint256 value;
        uint256 nonce;
        uint256 deadline;
    }
}

pub use job_market::JobMarket;
pub use node_registry::NodeRegistry;
pub use referees::Referees;
pub use verification::Verification;
