//! A chain, a JetStream server and indexers, and readers of what the stream holds.

use std::time::Duration;

use alloy::primitives::Address;
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use gantry_devnet::{Devnet, NatsServer};
use gantry_indexer::Config;
use gantry_indexer::config::FinalityTag;
use gantry_protocol::envelope::{BlockCommit, EventEnvelope, Retraction};
use gantry_protocol::events::{Contracts, DecodedEvent, decode};
use gantry_protocol::subjects;
use tokio_util::sync::CancellationToken;

pub(crate) struct Harness {
    pub(crate) devnet: Devnet,
    pub(crate) nats: NatsServer,
}

/// An indexer running in this process.
pub(crate) struct Running {
    pub(crate) shutdown: CancellationToken,
    pub(crate) task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Running {
    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        self.shutdown.cancel();
        self.task.await.expect("indexer task")
    }
}

/// One message of the stream, decoded.
#[derive(Debug, Clone)]
pub(crate) enum Message {
    Event(EventEnvelope),
    Commit(BlockCommit),
    Retraction(Retraction),
    Finality,
}

/// An event as both the stream and `eth_getLogs` describe it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct EventId {
    pub(crate) block_number: u64,
    pub(crate) block_hash: alloy::primitives::B256,
    pub(crate) tx_hash: alloy::primitives::B256,
    pub(crate) log_index: u64,
    pub(crate) event: DecodedEvent,
}

impl Harness {
    pub(crate) async fn start() -> Self {
        let devnet = Devnet::start().await.expect("devnet starts");
        let nats = NatsServer::start().expect("nats-server starts");
        Self { devnet, nats }
    }

    pub(crate) fn chain_id(&self) -> u64 {
        self.devnet.deployment.chain_id
    }

    pub(crate) fn config(&self) -> Config {
        Config {
            rpc_url: self.devnet.anvil.endpoint_url(),
            chain_id: self.chain_id(),
            market: self.devnet.deployment.market,
            registry: self.devnet.deployment.registry,
            start_block: self.devnet.deployment.start_block,
            nats_url: self.nats.url(),
            confirmations: 0,
            finality_tag: FinalityTag::None,
            reorg_window: 64,
            min_range: 1,
            max_range: 10_000,
            initial_range: 100,
            max_in_flight: 512,
            poll_ms: 50,
            lease_ttl_ms: 1_500,
            instance_id: None,
            metrics_addr: None,
        }
    }

    pub(crate) fn spawn(&self, config: Config) -> Running {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(gantry_indexer::run(config, shutdown.clone()));
        Running { shutdown, task }
    }

    pub(crate) async fn jetstream(&self) -> jetstream::Context {
        jetstream::new(
            async_nats::connect(self.nats.url())
                .await
                .expect("nats connects"),
        )
    }

    /// Waits until the stream holds the commit of block `number` (or a later one).
    pub(crate) async fn wait_for_commit(&self, number: u64) {
        let client = async_nats::connect(self.nats.url())
            .await
            .expect("nats connects");
        // Subscribe before looking at the stream, so no commit slips between the two.
        let mut commits = client
            .subscribe(subjects::block_commits(self.chain_id()))
            .await
            .unwrap();
        let js = jetstream::new(client.clone());
        let reached = async {
            if let Ok(mut stream) = js.get_stream(subjects::stream_name(self.chain_id())).await {
                let last = stream.info().await.unwrap().state.last_sequence;
                if last > 0
                    && let Ok(message) = stream
                        .get_last_raw_message_by_subject(&subjects::block_commits(self.chain_id()))
                        .await
                {
                    let commit: BlockCommit = serde_json::from_slice(&message.payload).unwrap();
                    if commit.block_number >= number {
                        return;
                    }
                }
            }
            while let Some(message) = commits.next().await {
                let commit: BlockCommit = serde_json::from_slice(&message.payload).unwrap();
                if commit.block_number >= number {
                    return;
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(120), reached)
            .await
            .unwrap_or_else(|_| panic!("no commit of block {number} within 120 s"));
    }

    /// Every message of the stream, in order.
    pub(crate) async fn messages(&self) -> Vec<Message> {
        let js = self.jetstream().await;
        let mut stream = js
            .get_stream(subjects::stream_name(self.chain_id()))
            .await
            .expect("stream exists");
        let last = stream.info().await.unwrap().state.last_sequence;
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                ..Default::default()
            })
            .await
            .expect("ordered consumer");
        let mut delivered = consumer.messages().await.unwrap();
        let mut out = Vec::with_capacity(last as usize);
        while (out.len() as u64) < last {
            let message = delivered
                .next()
                .await
                .expect("stream ends early")
                .expect("message");
            let subject = message.subject.as_str();
            let payload = &message.payload;
            out.push(if subject.contains(".ev.") {
                Message::Event(serde_json::from_slice(payload).unwrap())
            } else if subject.contains(".block.") {
                Message::Commit(serde_json::from_slice(payload).unwrap())
            } else if subject.ends_with(".retract") {
                Message::Retraction(serde_json::from_slice(payload).unwrap())
            } else {
                Message::Finality
            });
        }
        out
    }

    /// The canonical events as a consumer ends up with them: each block's events applied
    /// at its commit, retracted blocks undone.
    pub(crate) async fn applied_events(&self) -> Vec<EventId> {
        let mut pending: Vec<EventEnvelope> = Vec::new();
        let mut applied: Vec<EventId> = Vec::new();
        for message in self.messages().await {
            match message {
                Message::Event(event) => pending.push(event),
                Message::Commit(commit) => {
                    let events: Vec<EventEnvelope> = std::mem::take(&mut pending);
                    assert_eq!(
                        events.len() as u32,
                        commit.event_count,
                        "commit of block {} counts its events",
                        commit.block_number
                    );
                    assert!(events.iter().all(|e| e.block_hash == commit.block_hash));
                    applied.extend(events.into_iter().map(event_id));
                }
                Message::Retraction(retraction) => {
                    pending.clear();
                    applied.retain(|e| !retraction.orphaned.iter().any(|o| o.hash == e.block_hash));
                }
                Message::Finality => {}
            }
        }
        assert!(pending.is_empty(), "events after the last commit");
        applied
    }

    /// What `eth_getLogs` says the canonical chain holds, decoded the same way.
    pub(crate) async fn chain_events(&self, market: Address, registry: Address) -> Vec<EventId> {
        let provider = &self.devnet.admin;
        let head = provider.get_block_number().await.unwrap();
        let filter = Filter::new()
            .address(vec![market, registry])
            .from_block(self.devnet.deployment.start_block)
            .to_block(head);
        let contracts = Contracts { market, registry };
        provider
            .get_logs(&filter)
            .await
            .unwrap()
            .into_iter()
            .map(|log| EventId {
                block_number: log.block_number.unwrap(),
                block_hash: log.block_hash.unwrap(),
                tx_hash: log.transaction_hash.unwrap(),
                log_index: log.log_index.unwrap(),
                event: decode(&contracts, &log.inner).unwrap(),
            })
            .collect()
    }

    pub(crate) async fn head(&self) -> u64 {
        self.devnet.admin.get_block_number().await.unwrap()
    }
}

fn event_id(e: EventEnvelope) -> EventId {
    EventId {
        block_number: e.block_number,
        block_hash: e.block_hash,
        tx_hash: e.tx_hash,
        log_index: e.log_index,
        event: e.event,
    }
}
