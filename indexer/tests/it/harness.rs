//! A test net with a chain and a JetStream server (the kit's `TestNet`), indexers started
//! by the tests, and readers of what the stream holds.

use std::time::Duration;

use alloy::primitives::Address;
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use async_nats::HeaderMap;
use async_nats::jetstream::{self, consumer};
use futures::StreamExt;
use gantry_indexer::Config;
use gantry_indexer::stream::Outgoing;
use gantry_protocol::bindings::EventBatcher;
use gantry_protocol::chain_stream::{Assembled, BlockAssembler};
use gantry_protocol::envelope::{BlockCommit, EventEnvelope};
use gantry_protocol::events::{Contracts, DecodedEvent, decode};
use gantry_protocol::names;
use gantry_testkit::accounts::ADMIN;
use gantry_testkit::scenario::post_batches;
use gantry_testkit::{TestNet, wait_until};
use tokio_util::sync::CancellationToken;

/// Longest any wait for the stream may take.
pub(crate) const PATIENCE: Duration = Duration::from_secs(120);

gantry_testkit::harness! {
    /// The test net; its indexer config polls every 50 ms.
    pub(crate) struct Harness
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

/// One message of the stream, decoded as every consumer decodes it.
pub(crate) use gantry_protocol::chain_stream::ChainMessage as Message;

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
        let net = TestNet::builder()
            .nats()
            .indexer_config(|config| Config {
                poll: std::time::Duration::from_millis(50),
                ..config
            })
            .start()
            .await
            .expect("the test net starts");
        Self(net)
    }

    pub(crate) fn spawn(&self, config: Config) -> Running {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(gantry_indexer::run(config, shutdown.clone()));
        Running { shutdown, task }
    }

    /// Waits until the stream holds the commit of block `number` (or a later one).
    pub(crate) async fn wait_for_commit(&self, number: u64) {
        self.wait_for_commit_where(
            &format!("commit of block {number}"),
            names::block_commits(self.chain_id()),
            |commit| commit.block_number >= number,
        )
        .await;
    }

    /// Waits until the stream holds the commit of block `number` with `hash`.
    pub(crate) async fn wait_for_block(&self, number: u64, hash: alloy::primitives::B256) {
        self.wait_for_commit_where(
            &format!("commit of block {number} ({hash})"),
            names::block_commit(self.chain_id(), number),
            |commit| commit.block_hash == hash,
        )
        .await;
    }

    /// Waits until the last commit stored on `subject`, or one stored there after, is
    /// `reached`. Reads through a JetStream consumer, which delivers only what the stream
    /// stored: a commit published in a batch the stream has not applied yet, or refused,
    /// does not count.
    async fn wait_for_commit_where(
        &self,
        what: &str,
        subject: String,
        reached: impl Fn(&BlockCommit) -> bool,
    ) {
        let stream = self.chain_stream().await;
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                filter_subject: subject,
                deliver_policy: consumer::DeliverPolicy::LastPerSubject,
                ..Default::default()
            })
            .await
            .expect("ordered consumer");
        let mut commits = consumer.messages().await.expect("consumer delivers");
        let found = async {
            while let Some(message) = commits.next().await {
                let message = message.expect("a stored commit");
                let commit: BlockCommit = serde_json::from_slice(&message.payload).unwrap();
                if reached(&commit) {
                    return;
                }
            }
        };
        tokio::time::timeout(PATIENCE, found)
            .await
            .unwrap_or_else(|_| panic!("no {what} within 120 s"));
    }

    /// The chain stream, once the indexer created it (woken by messages published on it).
    async fn chain_stream(&self) -> jetstream::stream::Stream {
        let client = async_nats::connect(self.nats().url())
            .await
            .expect("nats connects");
        let published = client
            .subscribe(names::stream_subjects(self.chain_id()))
            .await
            .unwrap();
        let js = jetstream::new(client);
        let name = names::stream_name(self.chain_id());
        wait_until("the chain stream exists", PATIENCE, published, || async {
            js.get_stream(&name).await.is_ok()
        })
        .await;
        js.get_stream(&name).await.expect("stream exists")
    }

    /// Waits until the stream holds the chain's current head block.
    pub(crate) async fn wait_for_head(&self) {
        let head = self
            .devnet
            .admin
            .get_block(alloy::eips::BlockId::latest())
            .await
            .unwrap()
            .expect("a head block")
            .header;
        self.wait_for_block(head.number, head.hash).await;
    }

    /// Waits until the stream holds at least `count` messages: a consumer starting at
    /// sequence `count` delivers one.
    pub(crate) async fn wait_for_messages(&self, count: u64) {
        let stream = self.chain_stream().await;
        let consumer = stream
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::ByStartSequence {
                    start_sequence: count.max(1),
                },
                ..Default::default()
            })
            .await
            .expect("ordered consumer");
        let mut stored = consumer.messages().await.expect("consumer delivers");
        tokio::time::timeout(PATIENCE, stored.next())
            .await
            .unwrap_or_else(|_| panic!("the stream does not hold {count} messages within 120 s"))
            .expect("consumer delivers")
            .expect("a stored message");
    }

    /// Every message of the stream, in order.
    pub(crate) async fn messages(&self) -> Vec<Message> {
        let js = self.jetstream().await;
        let mut stream = js
            .get_stream(names::stream_name(self.chain_id()))
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
            out.push(
                Message::decode(self.chain_id(), &message.subject, &message.payload)
                    .expect("every message of the stream decodes"),
            );
        }
        out
    }

    /// The canonical events as a consumer ends up with them: each block's events applied
    /// at its commit, retracted blocks undone.
    pub(crate) async fn applied_events(&self) -> Vec<EventId> {
        self.fold(true).await
    }

    /// The same, for a stream repaired after damage: the damaged commit and the blocks
    /// after it are refused, as every reader refuses them, and applied once published
    /// again; nothing may be missing at the end.
    pub(crate) async fn applied_events_after_repair(&self) -> Vec<EventId> {
        self.fold(false).await
    }

    async fn fold(&self, strict: bool) -> Vec<EventId> {
        let mut assembler = BlockAssembler::new();
        let mut applied: Vec<EventId> = Vec::new();
        for message in self.messages().await {
            // The assembler checks that each commit counts its events and that they are
            // all of the committed block (number and hash).
            let assembled = match assembler.push(message) {
                Ok(assembled) => assembled,
                Err(refused) if !strict => {
                    eprintln!("refused: {refused}");
                    continue;
                }
                Err(refused) => panic!("each commit holds its block's events: {refused:?}"),
            };
            match assembled {
                Assembled::Held | Assembled::Final(_) => {}
                Assembled::Block { events, .. } => applied.extend(events.into_iter().map(event_id)),
                Assembled::Retracted(retraction) => {
                    applied.retain(|e| !retraction.orphaned.iter().any(|o| o.hash == e.block_hash));
                }
            }
        }
        assert!(
            assembler.is_idle(),
            "events after the last commit, or a block missing"
        );
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

    /// The stored messages at `sequences`, as they would be appended again.
    pub(crate) async fn stored(&self, sequences: std::ops::RangeInclusive<u64>) -> Vec<Outgoing> {
        let js = self.jetstream().await;
        let stream = js
            .get_stream(names::stream_name(self.chain_id()))
            .await
            .expect("stream exists");
        let mut out = Vec::new();
        for sequence in sequences {
            let message = stream.get_raw_message(sequence).await.expect("stored");
            out.push(Outgoing {
                subject: message.subject.to_string(),
                headers: HeaderMap::new(),
                payload: message.payload,
            });
        }
        out
    }

    /// Mines `blocks` empty blocks.
    pub(crate) async fn mine(&self, blocks: u64) {
        let _: serde_json::Value = self
            .devnet
            .admin
            .raw_request("anvil_mine".into(), (blocks,))
            .await
            .expect("anvil mines");
    }

    pub(crate) async fn head(&self) -> u64 {
        self.devnet.admin.get_block_number().await.unwrap()
    }

    /// Deploys an EventBatcher, which an indexer then treats as the market.
    pub(crate) async fn deploy_batcher(&self) -> Address {
        *EventBatcher::deploy(self.devnet.admin.clone())
            .await
            .expect("batcher deploys")
            .address()
    }

    /// `transactions` transactions of `per_transaction` JobPosted events each.
    pub(crate) async fn emit_postings(
        &self,
        batcher: Address,
        transactions: usize,
        per_transaction: usize,
    ) {
        // A fresh provider: it asks the chain for the nonce, which a reorg may have wound back.
        post_batches(
            &self.devnet.provider(ADMIN),
            batcher,
            transactions,
            per_transaction,
        )
        .await
        .expect("postings land");
    }

    /// The config of an indexer of the contract at `market` alone (node calls are served
    /// at the market's address: the registry is the same contract).
    pub(crate) fn config_for(&self, market: Address) -> Config {
        let mut config = self.indexer_config();
        config.chain.market = market;
        config.chain.registry = market;
        config
    }

    /// Starts the indexer binary, which can be SIGKILLed.
    pub(crate) fn spawn_process(&self, config: &Config, instance: &str) -> Process {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_gantry-indexer"))
            .args(["--rpc-url", config.chain.rpc_url.as_str()])
            .args(["--chain-id", &config.chain.chain_id.to_string()])
            .args(["--market", &config.chain.market.to_string()])
            .args(["--registry", &config.chain.registry.to_string()])
            .args(["--start-block", &config.start_block.to_string()])
            .args(["--nats-url", &config.nats.nats_url])
            .args(["--finality-tag", "none"])
            .args(["--initial-range", &config.initial_range.to_string()])
            .args(["--max-range", &config.max_range.to_string()])
            .args(["--poll-ms", &config.poll.as_millis().to_string()])
            .args(["--lease-ttl-ms", &config.lease_ttl.as_millis().to_string()])
            .args(["--instance-id", instance])
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("indexer binary starts");
        Process(child)
    }

    /// Sequence of the stream's last message.
    pub(crate) async fn last_sequence(&self) -> u64 {
        let js = self.jetstream().await;
        match js.get_stream(names::stream_name(self.chain_id())).await {
            Ok(mut stream) => stream.info().await.unwrap().state.last_sequence,
            Err(_) => 0,
        }
    }
}

/// An indexer process, SIGKILLed on drop.
pub(crate) struct Process(std::process::Child);

impl Process {
    pub(crate) fn kill(mut self) {
        self.0.kill().expect("SIGKILL");
        self.0.wait().expect("reaped");
    }

    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Checks that each block commit comes right after all its own events and nothing else:
/// every event belongs to the run of its block's events that its commit closes.
pub(crate) fn assert_commits_follow_their_events(messages: &[Message]) {
    let mut run: Vec<&EventEnvelope> = Vec::new();
    for (index, message) in messages.iter().enumerate() {
        let sequence = index + 1;
        match message {
            Message::Event(event) => {
                if let Some(previous) = run.last() {
                    assert!(
                        previous.block_hash == event.block_hash
                            && previous.log_index < event.log_index,
                        "sequence {sequence}: event {} of block {} follows event {} of block {} \
                         without a commit between",
                        event.log_index,
                        event.block_number,
                        previous.log_index,
                        previous.block_number
                    );
                }
                run.push(event);
            }
            Message::Commit(commit) => {
                assert!(
                    run.len() == commit.event_count as usize
                        && run.iter().all(|e| e.block_hash == commit.block_hash),
                    "sequence {sequence}: the commit of block {} counts {} events but follows {} \
                     (of blocks {:?})",
                    commit.block_number,
                    commit.event_count,
                    run.len(),
                    run.iter().map(|e| e.block_number).collect::<Vec<_>>()
                );
                run.clear();
            }
            Message::Retraction(_) | Message::Finality(_) => assert!(
                run.is_empty(),
                "sequence {sequence}: a retraction or watermark inside a block's events"
            ),
        }
    }
    assert!(run.is_empty(), "events without their commit at the end");
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
