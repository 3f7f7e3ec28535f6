//! Decoding contract logs into named events: what the indexer publishes and every
//! consumer reads back. Pure: a log in, a [`DecodedEvent`] out.

use alloy::primitives::{Address, Log};
use alloy::sol_types::SolEventInterface;
use serde::{Deserialize, Serialize};

use crate::bindings::{job_market::JobMarket, node_registry::NodeRegistry};

/// Which Gantry contract emitted an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContractKind {
    Market,
    Registry,
}

/// The addresses of a deployment, to tell which contract a log came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contracts {
    pub market: Address,
    pub registry: Address,
}

impl Contracts {
    pub fn kind_of(&self, address: Address) -> Option<ContractKind> {
        if address == self.market {
            Some(ContractKind::Market)
        } else if address == self.registry {
            Some(ContractKind::Registry)
        } else {
            None
        }
    }
}

/// One decoded contract event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecodedEvent {
    pub contract: ContractKind,
    /// The Solidity event name, e.g. `JobPosted`.
    pub name: String,
    /// The subject key: the job id, the node id (for node events and `JobAssigned`),
    /// the account (for `Withdrawn`), or the contract (`market`, `registry`).
    pub key: String,
    /// The event's fields by their Solidity names: uint8/16/32/64 as JSON numbers, other
    /// integers (uint40, uint96, uint256) as 0x-hex strings, addresses, hashes and bytes as
    /// 0x-hex, structs as objects. The protocol's event types deserialize from it.
    pub data: serde_json::Value,
}

/// Why a log could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("log is from {0}, not a Gantry contract")]
    UnknownContract(Address),
    #[error("log of the {contract:?} contract does not match its ABI: {reason}")]
    Abi {
        contract: ContractKind,
        reason: String,
    },
}

/// Decodes a log of one of `contracts`.
pub fn decode(contracts: &Contracts, log: &Log) -> Result<DecodedEvent, DecodeError> {
    let contract = contracts
        .kind_of(log.address)
        .ok_or(DecodeError::UnknownContract(log.address))?;
    let abi = |reason: alloy::sol_types::Error| DecodeError::Abi {
        contract,
        reason: reason.to_string(),
    };
    // The generated event enums serialize as `{"EventName": {fields}}`.
    let tagged = match contract {
        ContractKind::Market => serde_json::to_value(
            JobMarket::JobMarketEvents::decode_log(log)
                .map_err(abi)?
                .data,
        ),
        ContractKind::Registry => serde_json::to_value(
            NodeRegistry::NodeRegistryEvents::decode_log(log)
                .map_err(abi)?
                .data,
        ),
    }
    .expect("decoded events serialize");
    let (name, data) = match tagged {
        serde_json::Value::Object(map) if map.len() == 1 => {
            map.into_iter().next().expect("one entry")
        }
        other => unreachable!("event enums serialize externally tagged, got {other}"),
    };
    let key = subject_key(contract, &name, &data);
    Ok(DecodedEvent {
        contract,
        name,
        key,
        data,
    })
}

fn subject_key(contract: ContractKind, name: &str, data: &serde_json::Value) -> String {
    let field = if name == "JobAssigned" {
        "nodeId"
    } else if data.get("jobId").is_some() {
        "jobId"
    } else if data.get("nodeId").is_some() {
        "nodeId"
    } else {
        "account"
    };
    match data.get(field) {
        Some(serde_json::Value::Number(n)) => n.to_string(),
        Some(serde_json::Value::String(s)) => s.to_lowercase(),
        _ => match contract {
            ContractKind::Market => "market".into(),
            ContractKind::Registry => "registry".into(),
        },
    }
}
