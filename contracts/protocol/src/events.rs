//! Decoding contract logs into named events: what the indexer publishes and every
//! consumer reads back. Pure: a log in, a [`DecodedEvent`] out.

use alloy::primitives::{Address, B256, Log};
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

/// Decodes a log of one of `contracts`. The node calls are served at the market's own
/// address (the `NodeRegistry` extension), so a log there is a node event when the
/// registry's ABI knows it (the market's ABI repeats the two node events it emits itself,
/// `NodeSlashed` and `NodeMarkedInactive`: they always come out as registry events), and a
/// market event otherwise.
pub fn decode(contracts: &Contracts, log: &Log) -> Result<DecodedEvent, DecodeError> {
    let (is_market, is_registry) = (
        log.address == contracts.market,
        log.address == contracts.registry,
    );
    if !is_market && !is_registry {
        return Err(DecodeError::UnknownContract(log.address));
    }
    let abi = |contract, reason: alloy::sol_types::Error| DecodeError::Abi {
        contract,
        reason: reason.to_string(),
    };
    if is_registry {
        match NodeRegistry::NodeRegistryEvents::decode_log(log) {
            Ok(event) => return Ok(DecodedEvent::from(&GantryEvent::Registry(event.data))),
            Err(e) if !is_market => return Err(abi(ContractKind::Registry, e)),
            Err(_) => {}
        }
    }
    let event =
        JobMarket::JobMarketEvents::decode_log(log).map_err(|e| abi(ContractKind::Market, e))?;
    Ok(DecodedEvent::from(&GantryEvent::Market(event.data)))
}

impl From<&GantryEvent> for DecodedEvent {
    /// The event as published: its name, subject key and JSON fields.
    fn from(event: &GantryEvent) -> Self {
        // The generated event enums serialize as `{"EventName": {fields}}`.
        let (contract, tagged) = match event {
            GantryEvent::Market(e) => (ContractKind::Market, serde_json::to_value(e)),
            GantryEvent::Registry(e) => (ContractKind::Registry, serde_json::to_value(e)),
            GantryEvent::Unreadable(e) => {
                return DecodedEvent {
                    contract: ContractKind::Market,
                    name: UNREADABLE_EVENT.into(),
                    key: "market".into(),
                    data: serde_json::to_value(e).expect("the marker serializes"),
                };
            }
        };
        let tagged = tagged.expect("decoded events serialize");
        let (name, data) = match tagged {
            serde_json::Value::Object(map) if map.len() == 1 => {
                map.into_iter().next().expect("one entry")
            }
            other => unreachable!("event enums serialize externally tagged, got {other}"),
        };
        let key = event.subject_key();
        DecodedEvent {
            contract,
            name,
            key,
            data,
        }
    }
}

/// The pattern of the market's events about its own rules, treasury and roles, which no
/// job, node or account fold reads (`M` being `JobMarket::JobMarketEvents`). A pattern
/// rather than a wildcard, so that every fold's `match` stays exhaustive: a new event is a
/// compile error until each fold decides on it.
#[macro_export]
macro_rules! market_admin_events {
    () => {
        $crate::bindings::JobMarket::JobMarketEvents::MarketParamsUpdated(_)
            | $crate::bindings::JobMarket::JobMarketEvents::VerifyParamsSet(_)
            | $crate::bindings::JobMarket::JobMarketEvents::PausedSet(_)
            | $crate::bindings::JobMarket::JobMarketEvents::TreasuryWithdrawn(_)
            | $crate::bindings::JobMarket::JobMarketEvents::EIP712DomainChanged(_)
            | $crate::bindings::JobMarket::JobMarketEvents::RoleAdminChanged(_)
            | $crate::bindings::JobMarket::JobMarketEvents::RoleGranted(_)
            | $crate::bindings::JobMarket::JobMarketEvents::RoleRevoked(_)
    };
}

/// A contract event, typed: what every consumer matches on. The variants are the
/// contracts' own generated event enums, so a new event in the ABI is a compile error in
/// every exhaustive `match`, not a silently ignored name.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // built once per event and matched at once
pub enum GantryEvent {
    Market(JobMarket::JobMarketEvents),
    Registry(NodeRegistry::NodeRegistryEvents),
    /// A log the indexer could not publish as an event: it published this marker in its
    /// place, so the block stays whole and every consumer goes on.
    Unreadable(UnreadableLog),
}

/// The name of the marker the indexer publishes for a log it cannot publish as an event.
pub const UNREADABLE_EVENT: &str = "Unreadable";

/// Why a log was published as an [`UnreadableLog`] marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum UnreadableReason {
    /// The log matches no event of the contract's ABI.
    Undecodable,
    /// The event's message would be larger than the stream takes
    /// ([`crate::envelope::MAX_EVENT_BYTES`]).
    TooLarge,
}

/// The marker published in place of a log that cannot be an event message: bounded, and
/// enough to find the log again (its block, transaction and index are in the envelope).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnreadableLog {
    pub reason: UnreadableReason,
    /// The contract that emitted it.
    pub address: Address,
    /// Its first topic (the event signature), if it has one.
    pub topic0: Option<B256>,
    /// Size of its data, bytes.
    pub data_bytes: u64,
    /// keccak256 of its data.
    pub data_hash: B256,
}

impl UnreadableLog {
    pub fn new(log: &Log, reason: UnreadableReason) -> Self {
        Self {
            reason,
            address: log.address,
            topic0: log.topics().first().copied(),
            data_bytes: log.data.data.len() as u64,
            data_hash: alloy::primitives::keccak256(&log.data.data),
        }
    }
}

impl DecodedEvent {
    /// The marker for `log`, published under the name [`UNREADABLE_EVENT`].
    pub fn unreadable(contracts: &Contracts, log: &Log, reason: UnreadableReason) -> Self {
        let contract = contracts
            .kind_of(log.address)
            .unwrap_or(ContractKind::Market);
        DecodedEvent {
            contract,
            name: UNREADABLE_EVENT.into(),
            key: match contract {
                ContractKind::Market => "market".into(),
                ContractKind::Registry => "registry".into(),
            },
            data: serde_json::to_value(UnreadableLog::new(log, reason))
                .expect("the marker serializes"),
        }
    }
}

/// Why a published event does not read back as its contract's event.
#[derive(Debug, thiserror::Error)]
#[error("event {name} does not match the {contract:?} contract's ABI")]
pub struct EventDataError {
    pub name: String,
    pub contract: ContractKind,
    #[source]
    pub source: serde_json::Error,
}

impl DecodedEvent {
    /// The event as its contract's typed event.
    pub fn typed(&self) -> Result<GantryEvent, EventDataError> {
        let error = |source| EventDataError {
            name: self.name.clone(),
            contract: self.contract,
            source,
        };
        if self.name == UNREADABLE_EVENT {
            return UnreadableLog::deserialize(&self.data)
                .map(GantryEvent::Unreadable)
                .map_err(error);
        }
        // The data is the externally tagged form's inner object (see [`decode`]), read
        // where it lies: the name and data as that form's one entry.
        let tagged = || {
            serde::de::value::MapAccessDeserializer::new(serde::de::value::MapDeserializer::new(
                std::iter::once((self.name.as_str(), &self.data)),
            ))
        };
        match self.contract {
            ContractKind::Market => JobMarket::JobMarketEvents::deserialize(tagged())
                .map(GantryEvent::Market)
                .map_err(error),
            ContractKind::Registry => NodeRegistry::NodeRegistryEvents::deserialize(tagged())
                .map(GantryEvent::Registry)
                .map_err(error),
        }
    }
}

impl From<JobMarket::JobMarketEvents> for GantryEvent {
    fn from(event: JobMarket::JobMarketEvents) -> Self {
        GantryEvent::Market(event)
    }
}

impl From<NodeRegistry::NodeRegistryEvents> for GantryEvent {
    fn from(event: NodeRegistry::NodeRegistryEvents) -> Self {
        GantryEvent::Registry(event)
    }
}

impl GantryEvent {
    /// The job this event is about, if any.
    pub fn job_id(&self) -> Option<u64> {
        // (An unreadable log names no job: its data could not be read.)
        match self {
            GantryEvent::Market(event) => market_job_id(event),
            _ => None,
        }
    }

    /// The subject key: `JobAssigned` by its node (a node's assignments are one subject
    /// filter), an event with a job by the job (`NodeSlashed` included), a node event by
    /// the node, an account's event by the account (lower-case hex), the rest by contract.
    pub fn subject_key(&self) -> String {
        use JobMarket::JobMarketEvents as M;
        use NodeRegistry::NodeRegistryEvents as R;
        let id = match self {
            GantryEvent::Market(M::JobAssigned(e)) => Some(e.nodeId),
            // A node's seats are one subject filter too.
            GantryEvent::Market(M::SeatDrawn(e)) => Some(e.nodeId),
            GantryEvent::Market(M::NodeSlashed(e)) => Some(e.jobId),
            GantryEvent::Registry(R::NodeSlashed(e)) => Some(e.jobId),
            _ => self.job_id().or_else(|| self.node_id()),
        };
        if let Some(id) = id {
            return id.to_string();
        }
        let account = match self {
            GantryEvent::Market(M::Deposited(e)) => Some(e.account),
            GantryEvent::Market(M::Withdrawn(e)) => Some(e.account),
            GantryEvent::Market(M::RoleGranted(e)) => Some(e.account),
            GantryEvent::Market(M::RoleRevoked(e)) => Some(e.account),
            GantryEvent::Registry(R::RoleGranted(e)) => Some(e.account),
            GantryEvent::Registry(R::RoleRevoked(e)) => Some(e.account),
            _ => None,
        };
        match (account, self) {
            (Some(account), _) => account.to_string().to_lowercase(),
            (None, GantryEvent::Registry(_)) => "registry".into(),
            (None, _) => "market".into(),
        }
    }

    /// The node this event is about, if any (for a market event: the node running the
    /// job, where the event names it).
    pub fn node_id(&self) -> Option<u64> {
        use JobMarket::JobMarketEvents as M;
        use NodeRegistry::NodeRegistryEvents as R;
        match self {
            GantryEvent::Market(event) => match event {
                M::JobAssigned(e) => Some(e.nodeId),
                M::JobDisputed(e) => Some(e.nodeId),
                M::DisputeResolved(e) => Some(e.nodeId),
                M::JobCompleted(e) => Some(e.nodeId),
                M::JobReclaimed(e) => Some(e.nodeId),
                M::JobRejected(e) => Some(e.nodeId),
                M::NodeSlashed(e) => Some(e.nodeId),
                M::NodeMarkedInactive(e) => Some(e.nodeId),
                M::SeatDrawn(e) => Some(e.nodeId),
                M::SealCommitted(e) => Some(e.nodeId),
                M::SeatFreed(e) => Some(e.nodeId),
                M::SeatVacated(e) => Some(e.nodeId),
                M::HoldLocked(e) => Some(e.nodeId),
                M::HoldForfeited(e) => Some(e.nodeId),
                M::RefereesRequested(e) => Some(e.nodeId),
                M::RefereesDecided(e) => Some(e.nodeId),
                M::HoldReleased(e) => Some(e.nodeId),
                M::ResultRevealed(e) => Some(e.nodeId),
                M::ProviderRevealed(e) => Some(e.nodeId),
                M::SeatReleased(e) => Some(e.nodeId),
                M::ReplicaPaid(e) => Some(e.nodeId),
                M::ReplicaForfeited(e) => Some(e.nodeId),
                M::JobPosted(_)
                | M::ResultSubmitted(_)
                | M::JobExpired(_)
                | M::JobRequeued(_)
                | M::JobFailed(_)
                | M::JobCancelled(_)
                | M::VerifiedJobPosted(_)
                | M::DrawArmed(_)
                | M::Drawn(_)
                | M::RevealsOpened(_)
                | M::JobVerified(_)
                | M::Deposited(_)
                | M::Withdrawn(_)
                | crate::market_admin_events!() => None,
            },
            GantryEvent::Unreadable(_) => None,
            GantryEvent::Registry(event) => match event {
                R::NodeRegistered(e) => Some(e.nodeId),
                R::NodeHeartbeat(e) => Some(e.nodeId),
                R::NodeReactivated(e) => Some(e.nodeId),
                R::NodeMarkedInactive(e) => Some(e.nodeId),
                R::NodeExitBegun(e) => Some(e.nodeId),
                R::NodeStakeWithdrawn(e) => Some(e.nodeId),
                R::NodeCapabilitiesUpdated(e) => Some(e.nodeId),
                R::NodeAgentChanged(e) => Some(e.nodeId),
                R::NodeStakeAdded(e) => Some(e.nodeId),
                R::NodeSlashed(e) => Some(e.nodeId),
                R::NodeEarningsWithdrawn(e) => Some(e.nodeId),
                R::FeesSwept(e) => Some(e.nodeId),
                R::PoolJoined(e) => Some(e.nodeId),
                R::PoolLeft(e) => Some(e.nodeId),
                R::EIP712DomainChanged(_)
                | R::RoleAdminChanged(_)
                | R::RoleGranted(_)
                | R::RoleRevoked(_) => None,
            },
        }
    }
}

/// The job a market event is about, if any.
pub fn market_job_id(event: &JobMarket::JobMarketEvents) -> Option<u64> {
    use JobMarket::JobMarketEvents as M;
    Some(match event {
        M::JobPosted(e) => e.jobId,
        M::JobAssigned(e) => e.jobId,
        M::ResultSubmitted(e) => e.jobId,
        M::JobDisputed(e) => e.jobId,
        M::DisputeResolved(e) => e.jobId,
        M::JobCompleted(e) => e.jobId,
        M::JobReclaimed(e) => e.jobId,
        M::JobRejected(e) => e.jobId,
        M::JobRequeued(e) => e.jobId,
        M::JobFailed(e) => e.jobId,
        M::JobCancelled(e) => e.jobId,
        M::JobExpired(e) => e.jobId,
        M::VerifiedJobPosted(e) => e.jobId,
        M::DrawArmed(e) => e.jobId,
        M::SeatDrawn(e) => e.jobId,
        M::Drawn(e) => e.jobId,
        M::SealCommitted(e) => e.jobId,
        M::SeatFreed(e) => e.jobId,
        M::SeatVacated(e) => e.jobId,
        M::HoldLocked(e) => e.jobId,
        M::HoldForfeited(e) => e.jobId,
        M::RefereesRequested(e) => e.jobId,
        M::RefereesDecided(e) => e.jobId,
        M::HoldReleased(e) => e.jobId,
        M::RevealsOpened(e) => e.jobId,
        M::ResultRevealed(e) => e.jobId,
        M::ProviderRevealed(e) => e.jobId,
        M::SeatReleased(e) => e.jobId,
        M::ReplicaPaid(e) => e.jobId,
        M::ReplicaForfeited(e) => e.jobId,
        M::JobVerified(e) => e.jobId,
        M::NodeSlashed(_)
        | M::NodeMarkedInactive(_)
        | M::Deposited(_)
        | M::Withdrawn(_)
        | crate::market_admin_events!() => return None,
    })
}

/// The Solidity name of event `E`, e.g. `JobPosted`: what subjects and the API's timeline
/// carry, taken from the binding instead of spelled again.
pub fn event_name<E: alloy::sol_types::SolEvent>() -> &'static str {
    let signature = E::SIGNATURE;
    signature
        .split_once('(')
        .map_or(signature, |(name, _)| name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::{Address, B256, LogData, U256};
    use alloy::sol_types::SolEvent;

    #[test]
    fn a_decoded_log_reads_back_typed_with_its_ids() {
        let contracts = Contracts {
            market: Address::repeat_byte(1),
            registry: Address::repeat_byte(2),
        };
        let assigned = JobMarket::JobAssigned {
            jobId: 7,
            nodeId: 3,
            claimed: false,
            until: alloy::primitives::aliases::U40::from(1_700_000_000u64),
        };
        let log = Log {
            address: contracts.market,
            data: assigned.encode_log_data(),
        };
        let decoded = decode(&contracts, &log).unwrap();
        assert_eq!(decoded.name, event_name::<JobMarket::JobAssigned>());
        assert_eq!(decoded.key, "3", "JobAssigned is keyed by node");
        let typed = decoded.typed().unwrap();
        assert_eq!(
            typed,
            GantryEvent::Market(JobMarket::JobMarketEvents::JobAssigned(assigned))
        );
        assert_eq!((typed.job_id(), typed.node_id()), (Some(7), Some(3)));
    }

    #[test]
    fn at_one_address_node_events_read_as_registry_events_and_the_rest_as_market_events() {
        let market = Address::repeat_byte(1);
        let contracts = Contracts {
            market,
            registry: market,
        };
        let log_of = |data: LogData| Log {
            address: market,
            data,
        };
        // Emitted by the market itself, and in both ABIs: a registry event all the same.
        let slashed = NodeRegistry::NodeSlashed {
            nodeId: 2,
            jobId: 5,
            amount: alloy::primitives::aliases::U96::from(10u64),
            stake: alloy::primitives::aliases::U96::from(90u64),
        };
        let decoded = decode(&contracts, &log_of(slashed.encode_log_data())).unwrap();
        assert_eq!(decoded.contract, ContractKind::Registry);
        assert_eq!(
            decoded.typed().unwrap(),
            GantryEvent::Registry(NodeRegistry::NodeRegistryEvents::NodeSlashed(slashed))
        );
        let requeued = JobMarket::JobRequeued {
            jobId: 5,
            faults: 1,
            barred: 1,
        };
        let decoded = decode(&contracts, &log_of(requeued.encode_log_data())).unwrap();
        assert_eq!(decoded.contract, ContractKind::Market);
        assert_eq!(decoded.key, "5");
    }

    #[test]
    fn subjects_are_keyed_by_node_for_assignments_then_job_node_account_or_contract() {
        use JobMarket::JobMarketEvents as M;
        use NodeRegistry::NodeRegistryEvents as R;
        use alloy::primitives::aliases::U96;
        let account = Address::repeat_byte(0xab);
        let key = |event: GantryEvent| DecodedEvent::from(&event).key;
        let assigned = JobMarket::JobAssigned {
            jobId: 7,
            nodeId: 3,
            ..Default::default()
        };
        assert_eq!(key(M::JobAssigned(assigned).into()), "3");
        let slashed = NodeRegistry::NodeSlashed {
            nodeId: 2,
            jobId: 5,
            amount: U96::from(1u64),
            stake: U96::from(1u64),
        };
        assert_eq!(key(R::NodeSlashed(slashed).into()), "5");
        let heartbeat = NodeRegistry::NodeHeartbeat { nodeId: 4, at: 1 };
        assert_eq!(key(R::NodeHeartbeat(heartbeat).into()), "4");
        let deposited = JobMarket::Deposited {
            account,
            amount: U256::from(1u64),
        };
        assert_eq!(
            key(M::Deposited(deposited).into()),
            format!("{account:?}").to_lowercase()
        );
        let paused = JobMarket::PausedSet {
            paused: true,
            by: account,
        };
        assert_eq!(key(M::PausedSet(paused).into()), "market");
        let treasury = JobMarket::TreasuryWithdrawn {
            treasury: account,
            amount: U256::from(1u64),
        };
        assert_eq!(key(M::TreasuryWithdrawn(treasury).into()), "market");
    }

    #[test]
    fn an_unreadable_log_reads_back_as_its_bounded_marker() {
        let contracts = Contracts {
            market: Address::repeat_byte(1),
            registry: Address::repeat_byte(2),
        };
        let log = Log {
            address: contracts.registry,
            data: LogData::new_unchecked(vec![B256::repeat_byte(7)], vec![0u8; 100_000].into()),
        };
        let marker = DecodedEvent::unreadable(&contracts, &log, UnreadableReason::TooLarge);
        assert_eq!(
            (marker.name.as_str(), marker.key.as_str(), marker.contract),
            (UNREADABLE_EVENT, "registry", ContractKind::Registry)
        );
        assert!(serde_json::to_vec(&marker).unwrap().len() < 1_000);
        let GantryEvent::Unreadable(back) = marker.typed().unwrap() else {
            panic!("not a marker")
        };
        assert_eq!(back.data_bytes, 100_000);
        assert_eq!(back.topic0, Some(B256::repeat_byte(7)));
        assert_eq!(
            back.data_hash,
            alloy::primitives::keccak256(vec![0u8; 100_000])
        );
        assert_eq!(
            (
                GantryEvent::Unreadable(back.clone()).job_id(),
                GantryEvent::Unreadable(back).node_id()
            ),
            (None, None)
        );
    }

    #[test]
    fn data_of_another_shape_is_an_error_not_a_panic() {
        let event = DecodedEvent {
            contract: ContractKind::Registry,
            name: "NodeHeartbeat".into(),
            key: "1".into(),
            data: serde_json::json!({"nodeId": "not a number"}),
        };
        assert!(event.typed().is_err());
        let unknown = DecodedEvent {
            name: "NoSuchEvent".into(),
            ..event
        };
        assert!(unknown.typed().is_err());
    }
}
