//! The messages on a chain's stream. Every payload is JSON with a version `v`; the
//! identity of an event message (chain, block, tx, log index) is repeated in NATS headers
//! so consumers can route without parsing.

use alloy::primitives::B256;
use serde::{Deserialize, Serialize};

use crate::events::DecodedEvent;

/// Version of the envelope format this crate writes and reads.
pub const ENVELOPE_VERSION: u16 = 1;

/// The largest event message the indexer publishes, bytes: a quarter of the servers'
/// `max_payload` (1 MiB, `deploy/nats/*.conf`). The largest event the market allows (a
/// `JobPosted` with a 16 KiB spec, hex in JSON) is about 35 KiB; a larger log (from
/// another contract version, or a bug) is published as an `Unreadable` marker instead.
pub const MAX_EVENT_BYTES: usize = 256 * 1024;

/// Header names carrying an event message's identity.
pub mod headers {
    pub const CHAIN_ID: &str = "Gantry-Chain-Id";
    pub const BLOCK_NUMBER: &str = "Gantry-Block-Number";
    pub const BLOCK_HASH: &str = "Gantry-Block-Hash";
    pub const TX_HASH: &str = "Gantry-Tx-Hash";
    pub const LOG_INDEX: &str = "Gantry-Log-Index";
}

/// One contract event, where it happened and what it said.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventEnvelope {
    pub v: u16,
    pub chain_id: u64,
    pub block_number: u64,
    pub block_hash: B256,
    /// Chain time of the block, seconds.
    pub block_timestamp: u64,
    pub tx_hash: B256,
    pub log_index: u64,
    #[serde(flatten)]
    pub event: DecodedEvent,
}

/// Published after the last event of a block: a consumer applies the block's events
/// only once it has seen this, with `event_count` of them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockCommit {
    pub v: u16,
    pub chain_id: u64,
    pub block_number: u64,
    pub block_hash: B256,
    pub parent_hash: B256,
    pub block_timestamp: u64,
    pub event_count: u32,
}

/// Published before the blocks of a new canonical branch: the blocks listed (newest
/// first) are no longer canonical and their events must be undone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retraction {
    pub v: u16,
    pub chain_id: u64,
    /// The last block both branches share.
    pub common_ancestor: u64,
    pub orphaned: Vec<OrphanedBlock>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OrphanedBlock {
    pub number: u64,
    pub hash: B256,
}

/// Blocks up to `block_number` can no longer be reorganised.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FinalityWatermark {
    pub v: u16,
    pub chain_id: u64,
    pub block_number: u64,
    pub block_hash: B256,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::ContractKind;

    #[test]
    fn event_envelope_is_flat_json_with_a_version() {
        let envelope = EventEnvelope {
            v: ENVELOPE_VERSION,
            chain_id: 31337,
            block_number: 7,
            block_hash: B256::repeat_byte(0xaa),
            block_timestamp: 1_750_000_000,
            tx_hash: B256::repeat_byte(0xbb),
            log_index: 2,
            event: DecodedEvent {
                contract: ContractKind::Market,
                name: "JobCancelled".into(),
                key: "4".into(),
                data: serde_json::json!({"jobId": 4, "refund": "0x2faf080"}),
            },
        };
        let json = serde_json::to_value(&envelope).unwrap();
        assert_eq!(json["v"], 1);
        assert_eq!(json["name"], "JobCancelled");
        assert_eq!(json["contract"], "market");
        assert_eq!(json["data"]["jobId"], 4);
        let back: EventEnvelope = serde_json::from_value(json).unwrap();
        assert_eq!(back, envelope);
    }
}
