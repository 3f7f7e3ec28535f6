//! A chain stream written by hand, without an indexer: whole blocks of synthetic events,
//! and the damage its readers must survive without dying (a commit counting events that
//! never arrived, a message that does not decode).

use alloy::primitives::{Address, B256, aliases::U96};
use alloy::sol_types::SolEvent;
use async_nats::jetstream;
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::envelope::{
    BlockCommit, ENVELOPE_VERSION, EventEnvelope, FinalityWatermark, OrphanedBlock, Retraction,
};
use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
use gantry_protocol::{names, storage};

use crate::TestNet;

/// The chain's stream, written by the test.
#[derive(Debug)]
pub struct HandStream {
    js: jetstream::Context,
    chain_id: u64,
}

impl HandStream {
    /// Creates the chain stream of `net` (as the indexer would; none may run).
    pub async fn create(net: &TestNet) -> Self {
        let js = net.jetstream().await;
        let chain_id = net.chain_id();
        js.create_stream(storage::chain_stream(chain_id, 1))
            .await
            .expect("the chain stream is created");
        Self { js, chain_id }
    }

    /// Publishes block `number`: its events, then its commit counting them (parent: the
    /// hash [`block_hash`] gives the previous number). Returns the commit's sequence.
    pub async fn block(&self, number: u64, events: &[DecodedEvent]) -> u64 {
        self.block_on(number, block_hash(number), block_hash(number - 1), events)
            .await
    }

    /// Publishes block `number` with hash `hash` on parent `parent` (a fork's block when
    /// they are not [`block_hash`]'s). Returns the commit's sequence.
    pub async fn block_on(
        &self,
        number: u64,
        hash: B256,
        parent: B256,
        events: &[DecodedEvent],
    ) -> u64 {
        for (index, event) in events.iter().enumerate() {
            let envelope = EventEnvelope {
                v: ENVELOPE_VERSION,
                chain_id: self.chain_id,
                block_number: number,
                block_hash: hash,
                block_timestamp: timestamp(number),
                tx_hash: B256::repeat_byte(7),
                log_index: index as u64,
                event: event.clone(),
            };
            let subject = names::event(self.chain_id, &event.name, &event.key);
            self.publish(subject, serde_json::to_vec(&envelope).unwrap())
                .await;
        }
        let commit = BlockCommit {
            v: ENVELOPE_VERSION,
            chain_id: self.chain_id,
            block_number: number,
            block_hash: hash,
            parent_hash: parent,
            block_timestamp: timestamp(number),
            event_count: events.len() as u32,
        };
        let subject = names::block_commit(self.chain_id, number);
        self.publish(subject, serde_json::to_vec(&commit).unwrap())
            .await
    }

    /// Publishes a retraction: the blocks after `common_ancestor` up to `tip` (hashes as
    /// [`block_hash`] gives them) are orphaned. Returns its sequence.
    pub async fn retract(&self, common_ancestor: u64, tip: u64) -> u64 {
        let retraction = Retraction {
            v: ENVELOPE_VERSION,
            chain_id: self.chain_id,
            common_ancestor,
            orphaned: (common_ancestor + 1..=tip)
                .map(|number| OrphanedBlock {
                    number,
                    hash: block_hash(number),
                })
                .collect(),
        };
        let subject = names::retraction(self.chain_id);
        self.publish(subject, serde_json::to_vec(&retraction).unwrap())
            .await
    }

    /// Publishes a finality watermark: blocks up to `number` are final. Returns its
    /// sequence.
    pub async fn finality(&self, number: u64) -> u64 {
        let watermark = FinalityWatermark {
            v: ENVELOPE_VERSION,
            chain_id: self.chain_id,
            block_number: number,
            block_hash: block_hash(number),
        };
        let subject = names::finality(self.chain_id);
        self.publish(subject, serde_json::to_vec(&watermark).unwrap())
            .await
    }

    /// The chain's JetStream context.
    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    /// Publishes only the commit of block `number`, counting `event_count` events: alone,
    /// a block whose events were lost. Returns its sequence.
    pub async fn commit(&self, number: u64, event_count: u32) -> u64 {
        let commit = BlockCommit {
            v: ENVELOPE_VERSION,
            chain_id: self.chain_id,
            block_number: number,
            block_hash: block_hash(number),
            parent_hash: block_hash(number - 1),
            block_timestamp: timestamp(number),
            event_count,
        };
        let subject = names::block_commit(self.chain_id, number);
        self.publish(subject, serde_json::to_vec(&commit).unwrap())
            .await
    }

    /// Publishes a payload that is not JSON on `subject` (of this chain's stream).
    /// Returns its sequence.
    pub async fn garbage(&self, subject: String) -> u64 {
        self.publish(subject, b"\x00not json{".to_vec()).await
    }

    /// The chain this stream is of.
    pub fn chain_id(&self) -> u64 {
        self.chain_id
    }

    async fn publish(&self, subject: String, payload: Vec<u8>) -> u64 {
        self.js
            .publish(subject, payload.into())
            .await
            .expect("published")
            .await
            .expect("acknowledged")
            .sequence
    }
}

/// The hash the hand-written stream gives block `number`.
pub fn block_hash(number: u64) -> B256 {
    B256::left_padding_from(&(0xb10c_0000_0000 + number).to_be_bytes())
}

/// The time the hand-written stream gives block `number`.
fn timestamp(number: u64) -> u64 {
    1_700_000_000 + number
}

/// A contract event as the indexer publishes it (`key` as its subject names it).
pub fn decoded<E: SolEvent + serde::Serialize>(
    contract: ContractKind,
    key: String,
    event: &E,
) -> DecodedEvent {
    DecodedEvent {
        contract,
        name: event_name::<E>().into(),
        key,
        data: serde_json::to_value(event).expect("events serialize"),
    }
}

/// `NodeRegistered` of node `node_id`: one H100, staked 500 gUSD, as the registry emits it.
pub fn node_registered(node_id: u64) -> DecodedEvent {
    let event = NodeRegistry::NodeRegistered {
        nodeId: node_id,
        operator: Address::repeat_byte(1),
        agent: Address::repeat_byte(2),
        capabilities: NodeRegistry::NodeCapabilities {
            gpuModel: B256::right_padding_from(b"NVIDIA-H100"),
            gpuCount: 1,
            vramMiB: 81_920,
            cpuCores: 32,
            ramMiB: 262_144,
            pricePerGpuHour: U96::from(crate::GUSD),
            maxConcurrentJobs: 1,
            engines: gantry_protocol::eligibility::Engines::ALL.0,
        },
        metadataURI: String::new(),
        stake: U96::from(500 * crate::GUSD),
        at: timestamp(0) as u32,
    };
    decoded(ContractKind::Registry, node_id.to_string(), &event)
}
