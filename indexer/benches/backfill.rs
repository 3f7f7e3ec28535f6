//! `cargo bench -p gantry-indexer --bench backfill`
//!
//! Makes ≥ 100k JobPosted logs on anvil (an EventBatcher, 1,000 per transaction), then in
//! the same run measures:
//! - the raw JetStream async-publish rate on this machine, with the indexer's own
//!   envelopes (same sizes) and 2,048 publishes in flight, into a scratch stream;
//! - the `eth_getLogs` rate alone (the RPC side);
//! - the indexer's end-to-end backfill rate, from an empty stream to the head committed.
//!
//! Prints the figures and a final JSON line with the ratio end-to-end / raw publish.

use std::time::{Duration, Instant};

use alloy::primitives::B256;
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use futures::StreamExt;
use gantry_indexer::Config;
use gantry_protocol::bindings::EventBatcher;
use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION, EventEnvelope};
use gantry_protocol::events::{Contracts, DecodedEvent, UnreadableReason, decode};
use gantry_protocol::names;
use gantry_testkit::TestNet;
use gantry_testkit::scenario::post_batches;
use tokio_util::sync::CancellationToken;

/// CPU seconds (user + system) a process has used so far.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses and may contain spaces.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let ticks: f64 = fields.get(11).and_then(|f| f.parse().ok()).unwrap_or(0.0)
        + fields.get(12).and_then(|f| f.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

/// CPU seconds of this process, anvil and nats-server.
fn cpu(anvil: u32, nats: u32) -> [f64; 3] {
    [
        cpu_seconds("self"),
        cpu_seconds(&anvil.to_string()),
        cpu_seconds(&nats.to_string()),
    ]
}

fn cpu_line(what: &str, before: [f64; 3], after: [f64; 3], wall: f64) {
    let used: Vec<String> = ["this process", "anvil", "nats-server"]
        .iter()
        .zip(before.iter().zip(after))
        .map(|(name, (b, a))| format!("{name} {:.0}%", 100.0 * (a - b) / wall))
        .collect();
    println!(
        "  cpu during {what}: {} (of 200% on two cores)",
        used.join(", ")
    );
}

const TRANSACTIONS: usize = 100;
const EVENTS_PER_TRANSACTION: usize = 1_000;
const MAX_IN_FLIGHT: usize = 2_048;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let net = TestNet::builder().nats().start().await?;
    let (devnet, nats) = (&net.devnet, net.nats());
    let chain_id = devnet.deployment.chain_id;

    // ---- the chain: 100k logs
    let started = Instant::now();
    let batcher = *EventBatcher::deploy(devnet.admin.clone()).await?.address();
    post_batches(&devnet.admin, batcher, TRANSACTIONS, EVENTS_PER_TRANSACTION).await?;
    let head = devnet.admin.get_block_number().await?;
    println!(
        "chain: {} logs in {} blocks, made in {:.1?}",
        TRANSACTIONS * EVENTS_PER_TRANSACTION,
        head,
        started.elapsed()
    );

    // ---- RPC alone: the same logs through eth_getLogs, 10 blocks per call
    let (anvil_pid, nats_pid) = (devnet.anvil.child().id(), nats.pid());
    let contracts = Contracts {
        market: batcher,
        registry: devnet.deployment.registry,
    };
    let cpu_before = cpu(anvil_pid, nats_pid);
    let started = Instant::now();
    let mut logs = Vec::new();
    let mut from = devnet.deployment.start_block;
    while from <= head {
        let to = (from + 9).min(head);
        let filter = Filter::new()
            .address(vec![batcher, devnet.deployment.registry])
            .from_block(from)
            .to_block(to);
        logs.extend(devnet.admin.get_logs(&filter).await?);
        from = to + 1;
    }
    let rpc_secs = started.elapsed().as_secs_f64();
    let events = logs.len();
    println!(
        "rpc: eth_getLogs {events} logs in {rpc_secs:.2} s = {:.0} logs/s",
        events as f64 / rpc_secs
    );
    cpu_line(
        "eth_getLogs",
        cpu_before,
        cpu(anvil_pid, nats_pid),
        rpc_secs,
    );

    // ---- raw JetStream: the indexer's envelopes, pipelined, into a scratch stream
    let payloads: Vec<Bytes> = logs
        .iter()
        .map(|log| {
            let envelope = EventEnvelope {
                v: ENVELOPE_VERSION,
                chain_id,
                block_number: log.block_number.unwrap(),
                block_hash: log.block_hash.unwrap(),
                block_timestamp: 0,
                tx_hash: log.transaction_hash.unwrap(),
                log_index: log.log_index.unwrap(),
                // As the indexer does: a log of the market served at the registry's
                // address does not decode as a registry event and becomes a marker.
                event: decode(&contracts, &log.inner).unwrap_or_else(|_| {
                    DecodedEvent::unreadable(&contracts, &log.inner, UnreadableReason::Undecodable)
                }),
            };
            Bytes::from(serde_json::to_vec(&envelope).unwrap())
        })
        .collect();
    let mean_size = payloads.iter().map(Bytes::len).sum::<usize>() / payloads.len();
    let client = async_nats::connect(nats.url()).await?;
    let js = jetstream::ContextBuilder::new()
        .max_ack_inflight(MAX_IN_FLIGHT * 2)
        .build(client);
    js.get_or_create_stream(stream::Config {
        name: "BENCH_RAW".into(),
        subjects: vec!["bench.raw.>".into()],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await?;
    let cpu_before = cpu(anvil_pid, nats_pid);
    let started = Instant::now();
    let mut in_flight = std::collections::VecDeque::new();
    for (i, payload) in payloads.iter().enumerate() {
        in_flight.push_back(
            js.publish(format!("bench.raw.ev.{}", i % 64), payload.clone())
                .await?,
        );
        if in_flight.len() >= MAX_IN_FLIGHT {
            in_flight.pop_front().unwrap().await?;
        }
    }
    for ack in in_flight {
        ack.await?;
    }
    let raw_secs = started.elapsed().as_secs_f64();
    let raw_publish_per_s = events as f64 / raw_secs;
    println!(
        "nats: raw async publish of {events} messages ({mean_size} B mean) in {raw_secs:.2} s = {raw_publish_per_s:.0} msg/s"
    );
    cpu_line(
        "raw publish",
        cpu_before,
        cpu(anvil_pid, nats_pid),
        raw_secs,
    );

    // The same with what exactly-once adds: Nats-Msg-Id, Nats-Expected-Last-Sequence and the
    // five identity headers, one ordered writer.
    js.get_or_create_stream(stream::Config {
        name: "BENCH_HEADERS".into(),
        subjects: vec!["bench.headers.>".into()],
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await?;
    let started = Instant::now();
    let mut in_flight = std::collections::VecDeque::new();
    for (i, payload) in payloads.iter().enumerate() {
        let sequence = i as u64 + 1;
        let mut headers = async_nats::HeaderMap::new();
        for (name, value) in [
            ("Gantry-Chain-Id", chain_id.to_string()),
            ("Gantry-Block-Number", sequence.to_string()),
            ("Gantry-Block-Hash", B256::repeat_byte(1).to_string()),
            ("Gantry-Tx-Hash", B256::repeat_byte(2).to_string()),
            ("Gantry-Log-Index", i.to_string()),
        ] {
            headers.insert(name, value.as_str());
        }
        let message = async_nats::jetstream::message::PublishMessage::build()
            .payload(payload.clone())
            .headers(headers)
            .message_id(names::message_id(chain_id, sequence))
            .expected_last_sequence(sequence - 1);
        in_flight.push_back(
            js.send_publish(format!("bench.headers.ev.{}", i % 64), message)
                .await?,
        );
        if in_flight.len() >= MAX_IN_FLIGHT {
            in_flight.pop_front().unwrap().await?;
        }
    }
    for ack in in_flight {
        ack.await?;
    }
    let headers_secs = started.elapsed().as_secs_f64();
    println!(
        "nats: the same with the indexer's headers and expected sequence in {headers_secs:.2} s = {:.0} msg/s",
        events as f64 / headers_secs
    );

    // ---- the indexer, end to end
    let base = net.indexer_config();
    let config = Config {
        chain: gantry_runtime::args::ChainArgs {
            market: batcher,
            ..base.chain.clone()
        },
        reorg_window: 16,
        initial_range: 10,
        max_batch: gantry_indexer::stream::MAX_BATCH,
        poll: std::time::Duration::from_millis(100),
        lease_ttl: std::time::Duration::from_secs(3),
        instance: gantry_runtime::args::InstanceArgs {
            instance_id: Some("bench".into()),
            metrics_addr: None,
        },
        ..base
    };
    let watcher = async_nats::connect(nats.url()).await?;
    let mut commits = watcher
        .subscribe(names::block_commit(chain_id, head))
        .await?;
    let shutdown = CancellationToken::new();
    let cpu_before = cpu(anvil_pid, nats_pid);
    let started = Instant::now();
    let indexer = tokio::spawn(gantry_indexer::run(config, shutdown.clone()));
    let committed = tokio::time::timeout(Duration::from_secs(600), commits.next())
        .await?
        .expect("head commit");
    let indexer_secs = started.elapsed().as_secs_f64();
    let cpu_after = cpu(anvil_pid, nats_pid);
    let commit: BlockCommit = serde_json::from_slice(&committed.payload)?;
    assert_eq!(commit.block_number, head);
    shutdown.cancel();
    indexer.await??;
    let events_per_s = events as f64 / indexer_secs;
    println!(
        "indexer: {events} events backfilled in {indexer_secs:.2} s = {events_per_s:.0} events/s"
    );
    cpu_line(
        "the indexer's backfill",
        cpu_before,
        cpu_after,
        indexer_secs,
    );

    let ratio = events_per_s / raw_publish_per_s;
    let bound = if rpc_secs > raw_secs { "rpc" } else { "nats" };
    println!("ratio end-to-end / raw publish = {ratio:.2}; the slower side alone is {bound}");
    println!(
        "{}",
        serde_json::json!({
            "bench": "indexer_backfill",
            "events": events,
            "events_per_s": events_per_s.round(),
            "raw_publish_per_s": raw_publish_per_s.round(),
            "ratio": (ratio * 1000.0).round() / 1000.0,
            "rpc_logs_per_s": (events as f64 / rpc_secs).round(),
            "exactly_once_publish_per_s": (events as f64 / headers_secs).round(),
        })
    );
    Ok(())
}
