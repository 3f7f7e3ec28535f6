//! How an event is stored (`events`, migration 0010): its envelope's fields in columns and
//! its `data` as the stream carried it, once. A `JobPosted`'s spec (the largest field, hex
//! in the JSON) is kept as its bytes in `spec`, an empty string holding its place in
//! `data`; a read puts the hex back where it was, so the event reads as it was published.
//!
//! ```text
//!   EventEnvelope ──EventValues::of──▶ columns + data (spec: "") + spec bytes ──▶ events
//!   events row ──stored_event──▶ EventEnvelope (spec's hex put back)
//! ```

use alloy::primitives::B256;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::envelope::{ENVELOPE_VERSION, EventEnvelope};
use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
use serde::ser::SerializeMap;
use serde_json::{Map, Value};
use sqlx::Row;
use sqlx::any::AnyRow;

use super::StoreError;
use super::rows::{Columns, bigint};
use crate::model::Touches;

/// The columns [`stored_event`] reads, in its order.
macro_rules! event_columns {
    () => {
        "block_number, log_index, block_hash, block_timestamp, tx_hash, name, event_key, \
         contract, chain_id, data, spec"
    };
}
pub(super) use event_columns;

/// The field of a `JobPosted` kept as bytes beside the event's JSON.
const SPEC: &str = "spec";

/// One event's values as `events` stores them, in insert order.
pub(super) struct EventValues {
    pub(super) block_number: i64,
    pub(super) log_index: i64,
    pub(super) block_hash: String,
    pub(super) block_timestamp: i64,
    pub(super) tx_hash: String,
    pub(super) name: String,
    pub(super) key: String,
    pub(super) job: Option<i64>,
    pub(super) node: Option<i64>,
    pub(super) account: Option<String>,
    pub(super) contract: &'static str,
    pub(super) chain_id: i64,
    /// The event's fields as JSON (a `JobPosted`'s spec left empty when in `spec`).
    pub(super) data: String,
    pub(super) spec: Option<Vec<u8>>,
}

/// Columns an insert of [`EventValues`] binds, each row.
pub(super) const EVENT_VALUES: usize = 14;

/// `INSERT INTO events (…) VALUES ` before the rows' parameters.
pub(super) const INSERT_EVENTS: &str = "INSERT INTO events (block_number, log_index, \
     block_hash, block_timestamp, tx_hash, name, event_key, job_id, node_id, account, \
     contract, chain_id, data, spec) VALUES ";

impl EventValues {
    /// `event`'s values, with the rows it touched. `block_hash` is the block's, formatted
    /// once for its events.
    pub(super) fn of(
        event: &EventEnvelope,
        block_hash: &str,
        touched: &Touches,
    ) -> Result<Self, StoreError> {
        let (data, spec) = match spec_bytes(&event.event) {
            Some((fields, spec)) => (serde_json::to_string(&SpecLeftOut(fields))?, Some(spec)),
            None => (serde_json::to_string(&event.event.data)?, None),
        };
        Ok(Self {
            block_number: bigint(event.block_number)?,
            log_index: bigint(event.log_index)?,
            block_hash: block_hash.to_owned(),
            block_timestamp: bigint(event.block_timestamp)?,
            tx_hash: format!("{:#x}", event.tx_hash),
            name: event.event.name.clone(),
            key: event.event.key.clone(),
            job: touched.job.map(bigint).transpose()?,
            node: touched.node.map(bigint).transpose()?,
            account: touched.account.clone(),
            contract: contract_name(event.event.contract),
            chain_id: bigint(event.chain_id)?,
            data,
            spec,
        })
    }
}

/// A `JobPosted`'s fields and its spec's bytes, when its spec is 0x-hex that the bytes
/// give back exactly (else the event is stored as it is).
fn spec_bytes(event: &DecodedEvent) -> Option<(&Map<String, Value>, Vec<u8>)> {
    if event.name != event_name::<JobMarket::JobPosted>() {
        return None;
    }
    let fields = event.data.as_object()?;
    let hex = fields.get(SPEC)?.as_str()?;
    let bytes = alloy::hex::decode(hex.strip_prefix("0x")?).ok()?;
    (spec_hex(&bytes) == hex).then_some((fields, bytes))
}

fn spec_hex(bytes: &[u8]) -> String {
    format!("0x{}", alloy::hex::encode(bytes))
}

/// An event's fields with the spec's value an empty string, each other field as it is, in
/// the same order.
struct SpecLeftOut<'a>(&'a Map<String, Value>);

impl serde::Serialize for SpecLeftOut<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (key, value) in self.0 {
            if key == SPEC {
                map.serialize_entry(key, "")?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The event a row of [`event_columns`] holds, as it was published.
pub(super) fn stored_event(row: &AnyRow) -> Result<EventEnvelope, StoreError> {
    let hash = |column: usize| -> Result<B256, StoreError> {
        let text: String = row.try_get(column)?;
        text.parse()
            .map_err(|_| StoreError::Corrupt(format!("stored hash {text} is not a hash")))
    };
    let contract: String = row.try_get(7)?;
    let mut data: Value = row.json(9)?;
    if let Some(spec) = row.try_get::<Option<Vec<u8>>, _>(10)? {
        let Some(fields) = data.as_object_mut() else {
            return Err(StoreError::Corrupt(
                "a stored event with a spec has no fields".into(),
            ));
        };
        fields.insert(SPEC.into(), Value::String(spec_hex(&spec)));
    }
    Ok(EventEnvelope {
        // The stream's messages are read at this version (older ones are refused there).
        v: ENVELOPE_VERSION,
        chain_id: row.unsigned(8)?,
        block_number: row.unsigned(0)?,
        block_hash: hash(2)?,
        block_timestamp: row.unsigned(3)?,
        tx_hash: hash(4)?,
        log_index: row.unsigned(1)?,
        event: DecodedEvent {
            contract: contract_kind(&contract)?,
            name: row.try_get(5)?,
            key: row.try_get(6)?,
            data,
        },
    })
}

fn contract_name(contract: ContractKind) -> &'static str {
    match contract {
        ContractKind::Market => "market",
        ContractKind::Registry => "registry",
    }
}

fn contract_kind(name: &str) -> Result<ContractKind, StoreError> {
    match name {
        "market" => Ok(ContractKind::Market),
        "registry" => Ok(ContractKind::Registry),
        other => Err(StoreError::Corrupt(format!(
            "stored event of an unknown contract {other:?}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn posted(spec: &str) -> DecodedEvent {
        DecodedEvent {
            contract: ContractKind::Market,
            name: "JobPosted".into(),
            key: "1".into(),
            data: serde_json::json!({"jobId": 1, "spec": spec, "submitter": "0xab"}),
        }
    }

    #[test]
    fn a_posted_spec_is_kept_as_bytes_in_its_place() {
        let event = posted("0x7b7d");
        let (fields, spec) = spec_bytes(&event).expect("a spec kept as bytes");
        assert_eq!(spec, b"{}");
        assert_eq!(
            serde_json::to_string(&SpecLeftOut(fields)).unwrap(),
            r#"{"jobId":1,"spec":"","submitter":"0xab"}"#
        );
    }

    #[test]
    fn a_spec_whose_bytes_do_not_give_it_back_stays_in_the_fields() {
        for spec in ["0x7B7D", "7b7d", "0x7b7", "0xzz"] {
            assert!(spec_bytes(&posted(spec)).is_none(), "{spec}");
        }
        let mut other = posted("0x7b7d");
        other.name = "JobCancelled".into();
        assert!(spec_bytes(&other).is_none());
    }
}
