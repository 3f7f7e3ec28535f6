//! `cargo bench -p gantry-indexer --bench backfill`
//!
//! Makes ≥ 100k JobPosted logs on anvil (an EventBatcher, 1,000 per transaction, one
//! transaction a block), then measures in the same run, in three rounds (the best of each
//! figure counts; the machine is shared):
//! - the RPC stage: the indexer's `eth_getLogs` calls alone over the same ranges (10 blocks
//!   each, as the indexer's adaptive range settles on these blocks);
//! - the publish stage: the same logs as the indexer prepares them (each block's events
//!   and commit, with the exactly-once headers), grouped as it groups them and appended by
//!   its `Publisher` in atomic batches, one at a time, as it must;
//! - the indexer end to end, from an empty stream to the head's commit, with `--prefetch
//!   0` (each range fetched only once the one before is published) and with the default.
//!
//! The indexer's figure is its rate over the slower of the two stages. Then, for
//! reference, the raw JetStream async-publish rate (2,048 in flight) and the same with
//! exactly-once headers fenced message by message (which the indexer may not do). Prints
//! the figures and a final JSON line.

use std::time::{Duration, Instant};

use alloy::primitives::B256;
use alloy::providers::Provider;
use alloy::rpc::types::Log;
use async_nats::jetstream::{self, stream};
use bytes::Bytes;
use futures::StreamExt;
use gantry_indexer::chain::{Chain, Header};
use gantry_indexer::stream::{ChainStream, MAX_BATCH, Outgoing};
use gantry_indexer::{Config, follower};
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
        "    cpu during {what}: {} (of 200% on two cores)",
        used.join(", ")
    );
}

const TRANSACTIONS: usize = 100;
const EVENTS_PER_TRANSACTION: usize = 1_000;
const MAX_IN_FLIGHT: usize = 2_048;
/// Blocks per `eth_getLogs` call, in the RPC stage and as the indexer's initial range.
const RANGE: u64 = 10;
/// The indexer's reorg window in this bench: the last this many blocks are followed one at
/// a time, as near the head.
const REORG_WINDOW: usize = 16;
/// The indexer's `--prefetch`: none, then the default.
const PREFETCH: [usize; 2] = [0, 2];
const ROUNDS: usize = 3;

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

    let (anvil_pid, nats_pid) = (devnet.anvil.child().id(), nats.pid());
    let pids = (anvil_pid, nats_pid);
    let contracts = Contracts {
        market: batcher,
        registry: devnet.deployment.registry,
    };
    let base = net.indexer_config();
    let chain = Chain::connect(
        base.chain.rpc_url.clone(),
        vec![contracts.market, contracts.registry],
    );
    let start_block = devnet.deployment.start_block;
    let client = async_nats::connect(nats.url()).await?;
    let js = jetstream::ContextBuilder::new()
        .max_ack_inflight(MAX_IN_FLIGHT * 2)
        .build(client);
    let config = Config {
        chain: gantry_runtime::args::ChainArgs {
            market: batcher,
            ..base.chain.clone()
        },
        reorg_window: REORG_WINDOW,
        initial_range: RANGE,
        max_batch: MAX_BATCH,
        poll: std::time::Duration::from_millis(100),
        lease_ttl: std::time::Duration::from_secs(3),
        instance: gantry_runtime::args::InstanceArgs {
            instance_id: Some("bench".into()),
            metrics_addr: None,
        },
        ..base
    };

    // ---- rounds: RPC stage, publish stage, the indexer without and with prefetch
    let mut logs = Vec::new();
    let (mut rpc_best, mut atomic_best) = (f64::MAX, f64::MAX);
    let mut indexer_best = [f64::MAX; PREFETCH.len()];
    for round in 1..=ROUNDS {
        println!("round {round}");
        let cpu_before = cpu(anvil_pid, nats_pid);
        let started = Instant::now();
        logs = rpc_stage(&chain, start_block, head).await?;
        let rpc_secs = started.elapsed().as_secs_f64();
        let events = logs.len() as f64;
        println!(
            "  rpc: eth_getLogs, {RANGE} blocks a call: {} logs in {rpc_secs:.2} s = {:.0} logs/s",
            logs.len(),
            events / rpc_secs
        );
        cpu_line(
            "eth_getLogs",
            cpu_before,
            cpu(anvil_pid, nats_pid),
            rpc_secs,
        );

        // A scratch chain stream (the chain stream's configuration, another chain id).
        let scratch_chain = chain_id + 1_000_000;
        delete_stream(&js, scratch_chain).await?;
        let scratch = ChainStream::open(js.clone(), scratch_chain, 1).await?;
        let appends = prepare_appends(scratch_chain, &contracts, start_block, &logs)?;
        let append_count = appends.len();
        let mut publisher = scratch.publisher(0, MAX_BATCH);
        let cpu_before = cpu(anvil_pid, nats_pid);
        let started = Instant::now();
        for messages in appends {
            publisher.append(messages).await?;
        }
        let atomic_secs = started.elapsed().as_secs_f64();
        println!(
            "  nats: atomic batches as the indexer appends them ({append_count} appends, one \
             batch at a time): {atomic_secs:.2} s = {:.0} events/s",
            events / atomic_secs
        );
        cpu_line(
            "atomic batches",
            cpu_before,
            cpu(anvil_pid, nats_pid),
            atomic_secs,
        );
        let slower_secs = rpc_secs.max(atomic_secs);
        rpc_best = rpc_best.min(rpc_secs);
        atomic_best = atomic_best.min(atomic_secs);

        for (variant, prefetch) in PREFETCH.into_iter().enumerate() {
            delete_stream(&js, chain_id).await?;
            let config = Config {
                prefetch,
                ..config.clone()
            };
            let (secs, backfill_secs) =
                index_once(&nats.url(), config, chain_id, head, pids).await?;
            println!(
                "  indexer, prefetch {prefetch}: {} events in {secs:.2} s = {:.0} events/s, \
                 {:.2} x the slower stage of this round (the last {REORG_WINDOW} blocks, \
                 followed one at a time, {:.2} s of it)",
                logs.len(),
                events / secs,
                slower_secs / secs,
                secs - backfill_secs,
            );
            indexer_best[variant] = indexer_best[variant].min(secs);
        }
    }
    let events = logs.len();
    let rate = |secs: f64| events as f64 / secs;
    let (slower, slower_secs) = if rpc_best > atomic_best {
        ("eth_getLogs", rpc_best)
    } else {
        ("atomic batches", atomic_best)
    };
    let ratios = indexer_best.map(|secs| slower_secs / secs);
    println!(
        "best of {ROUNDS}: eth_getLogs {:.0} logs/s, atomic batches {:.0} events/s (the slower: \
         {slower}); the indexer with prefetch {} {:.0} events/s = {:.2} x, with prefetch {} \
         {:.0} events/s = {:.2} x",
        rate(rpc_best),
        rate(atomic_best),
        PREFETCH[0],
        rate(indexer_best[0]),
        ratios[0],
        PREFETCH[1],
        rate(indexer_best[1]),
        ratios[1],
    );

    // ---- for reference: publishing without atomic batches, into scratch streams
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
    println!(
        "nats: raw async publish of {events} messages ({mean_size} B mean) in {raw_secs:.2} s = {:.0} msg/s",
        rate(raw_secs)
    );
    cpu_line(
        "raw publish",
        cpu_before,
        cpu(anvil_pid, nats_pid),
        raw_secs,
    );

    // The same with exactly-once headers fenced message by message (Nats-Msg-Id,
    // Nats-Expected-Last-Sequence, the five identity headers), pipelined: what the indexer
    // did before atomic batches, and may not do (issue 16).
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
        "nats: the same fenced message by message, pipelined, in {headers_secs:.2} s = {:.0} msg/s",
        rate(headers_secs)
    );

    println!(
        "{}",
        serde_json::json!({
            "bench": "indexer_backfill",
            "events": events,
            "rpc_logs_per_s": rate(rpc_best).round(),
            "atomic_publish_per_s": rate(atomic_best).round(),
            "slower_stage": slower,
            "prefetch": PREFETCH[1],
            "events_per_s": rate(indexer_best[1]).round(),
            "ratio_to_slower_stage": round3(ratios[1]),
            "events_per_s_prefetch_0": rate(indexer_best[0]).round(),
            "ratio_to_slower_stage_prefetch_0": round3(ratios[0]),
            "raw_publish_per_s": rate(raw_secs).round(),
            "fenced_pipelined_publish_per_s": rate(headers_secs).round(),
        })
    );
    Ok(())
}

/// The contracts' logs of `from..=head` through the indexer's `eth_getLogs` call, [`RANGE`]
/// blocks at a time.
async fn rpc_stage(chain: &Chain, from: u64, head: u64) -> anyhow::Result<Vec<Log>> {
    let mut logs = Vec::new();
    let mut start = from;
    while start <= head {
        let stop = (start + RANGE - 1).min(head);
        logs.extend(chain.logs(start, stop).await?);
        start = stop + 1;
    }
    Ok(logs)
}

/// `logs` as the indexer appends them on chain `chain_id`: each block's events and commit
/// prepared by its own code, the blocks of each [`RANGE`]-block range grouped as it groups
/// them; one `Publisher::append` each.
fn prepare_appends(
    chain_id: u64,
    contracts: &Contracts,
    start_block: u64,
    logs: &[Log],
) -> anyhow::Result<Vec<Vec<Outgoing>>> {
    let mut by_range: std::collections::BTreeMap<u64, std::collections::BTreeMap<u64, Vec<Log>>> =
        Default::default();
    for log in logs {
        let number = log.block_number.expect("a mined log");
        by_range
            .entry((number - start_block) / RANGE)
            .or_default()
            .entry(number)
            .or_default()
            .push(log.clone());
    }
    let mut appends = Vec::new();
    for blocks in by_range.into_values() {
        let mut prepared = Vec::new();
        for (number, block_logs) in blocks {
            let header = Header {
                number,
                hash: block_logs[0].block_hash.expect("a mined log"),
                parent_hash: B256::ZERO,
                timestamp: 0,
            };
            prepared.push(follower::prepare_block(
                chain_id,
                contracts,
                &header,
                &block_logs,
                0,
            )?);
        }
        appends.extend(
            follower::batches(prepared, MAX_BATCH)
                .into_iter()
                .map(|blocks| {
                    blocks
                        .into_iter()
                        .flat_map(follower::PreparedBlock::into_messages)
                        .collect()
                }),
        );
    }
    Ok(appends)
}

/// Deletes chain `chain_id`'s stream, if there is one.
async fn delete_stream(js: &jetstream::Context, chain_id: u64) -> anyhow::Result<()> {
    let name = names::stream_name(chain_id);
    if js.get_stream(&name).await.is_ok() {
        js.delete_stream(&name).await?;
    }
    Ok(())
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Runs the indexer from an empty stream until the head block's commit is stored; returns
/// the seconds it took and the seconds to the commit of the backfill's last block.
async fn index_once(
    nats_url: &str,
    config: Config,
    chain_id: u64,
    head: u64,
    (anvil_pid, nats_pid): (u32, u32),
) -> anyhow::Result<(f64, f64)> {
    let watcher = async_nats::connect(nats_url).await?;
    let mut backfilled = watcher
        .subscribe(names::block_commit(chain_id, head - REORG_WINDOW as u64))
        .await?;
    let mut commits = watcher
        .subscribe(names::block_commit(chain_id, head))
        .await?;
    let shutdown = CancellationToken::new();
    let prefetch = config.prefetch;
    let cpu_before = cpu(anvil_pid, nats_pid);
    let started = Instant::now();
    let indexer = tokio::spawn(gantry_indexer::run(config, shutdown.clone()));
    tokio::time::timeout(Duration::from_secs(600), backfilled.next())
        .await?
        .expect("the backfill's last commit");
    let backfill_secs = started.elapsed().as_secs_f64();
    let committed = tokio::time::timeout(Duration::from_secs(600), commits.next())
        .await?
        .expect("the head's commit");
    let secs = started.elapsed().as_secs_f64();
    let cpu_after = cpu(anvil_pid, nats_pid);
    let commit: BlockCommit = serde_json::from_slice(&committed.payload)?;
    assert_eq!(commit.block_number, head);
    shutdown.cancel();
    indexer.await??;
    cpu_line(
        &format!("the indexer, prefetch {prefetch}"),
        cpu_before,
        cpu_after,
        secs,
    );
    Ok((secs, backfill_secs))
}
