//! An agent's consent to serve an operator's node: the EIP-712 message
//! `AgentConsent(operator, agent, nonce, deadline)` the market checks at `register` and
//! `setAgent` (unless the agent itself calls). Computed here, not asked of a node: an agent
//! signs only a digest it built from what it means to consent to.

use alloy::primitives::{Address, B256, U256};
use alloy::sol;
use alloy::sol_types::{Eip712Domain, SolStruct, eip712_domain};

sol! {
    /// The consent, as the market's `AGENT_CONSENT_TYPEHASH` names it.
    struct AgentConsent {
        address operator;
        address agent;
        uint256 nonce;
        uint256 deadline;
    }
}

/// The market's EIP-712 domain: `Gantry`, version `2`, at the market's address.
pub fn domain(chain_id: u64, market: Address) -> Eip712Domain {
    eip712_domain! {
        name: "Gantry",
        version: "2",
        chain_id: chain_id,
        verifying_contract: market,
    }
}

/// The digest `agent` signs to let `operator` register (or re-point) a node to it; `nonce`
/// is the agent's current `agentNonce`, `deadline` the last chain second it is valid.
pub fn digest(
    chain_id: u64,
    market: Address,
    operator: Address,
    agent: Address,
    nonce: U256,
    deadline: u64,
) -> B256 {
    AgentConsent {
        operator,
        agent,
        nonce,
        deadline: U256::from(deadline),
    }
    .eip712_signing_hash(&domain(chain_id, market))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_type_string_is_the_markets() {
        assert_eq!(
            AgentConsent::eip712_encode_type(),
            "AgentConsent(address operator,address agent,uint256 nonce,uint256 deadline)"
        );
    }
}
