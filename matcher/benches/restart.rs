//! `cargo bench -p gantry-matcher --bench restart`
//!
//! Restart time after 1,000,000 chain-stream events, from a snapshot against a replay, in
//! the same run on a real nats-server: the bench writes the stream as the indexer would
//! (10,000 nodes registered, then jobs posted, assigned, answered and paid, 100,000 of them
//! left open), then measures what a service does on start before it can plan — reading the
//! whole stream into its view (the baseline), and restoring its snapshot (read, checked
//! against the stream, rebuilt) and reading the tail — and the snapshot's write. Prints a
//! final JSON line `{"bench":"restart",...}`.

use std::time::Instant;

use alloy::primitives::{Address, B256, Bytes, aliases::U40, aliases::U96};
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolEvent;
use async_nats::jetstream;
use gantry_matcher::feed::Feed;
use gantry_matcher::project::Projection;
use gantry_matcher::snapshot::{self, Identity, Position};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::{Engines, Requirements};
use gantry_protocol::envelope::{BlockCommit, ENVELOPE_VERSION, EventEnvelope, FinalityWatermark};
use gantry_protocol::events::{ContractKind, DecodedEvent, event_name};
use gantry_protocol::market::{self, Terms};
use gantry_protocol::{names, storage};
use gantry_testkit::NatsServer;
use tokio_util::sync::CancellationToken;

const CHAIN: u64 = 31_337;
const NODES: u64 = 10_000;
const EVENTS: u64 = 1_000_000;
const OPEN: u64 = 100_000;
/// Events a block holds.
const PER_BLOCK: usize = 100;

fn decoded<E: SolEvent + serde::Serialize>(
    contract: ContractKind,
    key: u64,
    event: &E,
) -> DecodedEvent {
    DecodedEvent {
        contract,
        name: event_name::<E>().into(),
        key: key.to_string(),
        data: serde_json::to_value(event).expect("events serialize"),
    }
}

fn registered(id: u64) -> DecodedEvent {
    let event = NodeRegistry::NodeRegistered {
        nodeId: id,
        operator: Address::with_last_byte(1),
        agent: Address::with_last_byte(2),
        capabilities: NodeRegistry::NodeCapabilities {
            gpuModel: B256::right_padding_from(format!("GPU-{}", id % 10).as_bytes()),
            gpuCount: 1 << (id % 4),
            vramMiB: [16, 24, 40, 80][(id % 4) as usize] * 1024,
            cpuCores: 32,
            ramMiB: 262_144,
            pricePerGpuHour: U96::from(1 + id % 10),
            maxConcurrentJobs: 4,
            engines: Engines::ALL.0,
        },
        metadataURI: String::new(),
        stake: U96::from(500u64),
        at: 1_700_000_000,
    };
    decoded(ContractKind::Registry, id, &event)
}

fn posted(id: u64) -> DecodedEvent {
    let terms = Terms {
        submitter: Address::with_last_byte((id % 50) as u8 + 1),
        bounty: 100,
        spec_hash: B256::ZERO,
        requirements: Requirements {
            gpu_model: B256::right_padding_from(format!("GPU-{}", id % 10).as_bytes()),
            min_gpu_count: 1,
            min_vram_mib: [8, 16, 24, 40, 80][(id % 5) as usize] * 1024,
            max_price_per_gpu_hour: 20,
            max_runtime: 3_600,
            priority: (id % 10) as u8,
            ..Requirements::default()
        },
        deadline: 1_900_000_000,
        policy: 1,
        verification: market::Verification::NONE,
    };
    let event = JobMarket::JobPosted {
        jobId: id,
        submitter: terms.submitter,
        terms: terms.pack(),
        fromCredits: U96::ZERO,
        spec: Bytes::from_static(b"{\"image\":\"alpine:3\",\"command\":[\"true\"]}"),
    };
    decoded(ContractKind::Market, id, &event)
}

/// The stream's events, in blocks: the market's parameters and the nodes first, then each
/// job posted and, for all but the last `OPEN`, assigned, answered and paid.
fn history() -> Vec<Vec<DecodedEvent>> {
    let mut events: Vec<DecodedEvent> = vec![decoded(
        ContractKind::Market,
        0,
        &JobMarket::MarketParamsUpdated {
            params: market::dev_params(Address::repeat_byte(4)),
            policyVersion: 1,
        },
    )];
    events.extend((1..=NODES).map(registered));
    let left = EVENTS - events.len() as u64 - OPEN;
    let settled = left / 4;
    for id in 1..=settled {
        let node = 1 + id % NODES;
        events.push(posted(id));
        events.push(decoded(
            ContractKind::Market,
            node,
            &JobMarket::JobAssigned {
                jobId: id,
                nodeId: node,
                claimed: false,
                until: U40::from(1_700_100_000u64),
            },
        ));
        events.push(decoded(
            ContractKind::Market,
            id,
            &JobMarket::ResultSubmitted {
                jobId: id,
                resultHash: B256::repeat_byte(9),
                resultURI: String::new(),
                until: U40::from(1_700_100_000u64),
            },
        ));
        events.push(decoded(
            ContractKind::Market,
            id,
            &JobMarket::JobCompleted {
                jobId: id,
                nodeId: node,
                payout: U96::from(95),
                fee: U96::from(5),
                kind: 0,
            },
        ));
    }
    events.extend((settled + 1..=settled + OPEN).map(posted));
    events
        .chunks(PER_BLOCK)
        .map(<[DecodedEvent]>::to_vec)
        .collect()
}

fn block_hash(number: u64) -> B256 {
    B256::left_padding_from(&(0xb10c_0000_0000 + number).to_be_bytes())
}

/// Publishes the blocks as the indexer would, a block's publishes in flight together.
async fn publish(js: &jetstream::Context, blocks: &[Vec<DecodedEvent>]) -> u64 {
    let mut last = 0;
    for (i, events) in blocks.iter().enumerate() {
        let number = i as u64 + 1;
        let mut acks = Vec::with_capacity(events.len() + 1);
        for (index, event) in events.iter().enumerate() {
            let envelope = EventEnvelope {
                v: ENVELOPE_VERSION,
                chain_id: CHAIN,
                block_number: number,
                block_hash: block_hash(number),
                block_timestamp: 1_700_000_000 + number,
                tx_hash: B256::repeat_byte(7),
                log_index: index as u64,
                event: event.clone(),
            };
            let subject = names::event(CHAIN, &event.name, &event.key);
            acks.push(
                js.publish(subject, serde_json::to_vec(&envelope).unwrap().into())
                    .await
                    .expect("published"),
            );
        }
        let commit = BlockCommit {
            v: ENVELOPE_VERSION,
            chain_id: CHAIN,
            block_number: number,
            block_hash: block_hash(number),
            parent_hash: block_hash(number - 1),
            block_timestamp: 1_700_000_000 + number,
            event_count: events.len() as u32,
        };
        acks.push(
            js.publish(
                names::block_commit(CHAIN, number),
                serde_json::to_vec(&commit).unwrap().into(),
            )
            .await
            .expect("published"),
        );
        // Finality as an indexer following a finalized tag says it: every ten blocks, 64
        // blocks behind.
        if number.is_multiple_of(10) && number > 64 {
            let watermark = FinalityWatermark {
                v: ENVELOPE_VERSION,
                chain_id: CHAIN,
                block_number: number - 64,
                block_hash: block_hash(number - 64),
            };
            acks.push(
                js.publish(
                    names::finality(CHAIN),
                    serde_json::to_vec(&watermark).unwrap().into(),
                )
                .await
                .expect("published"),
            );
        }
        for ack in acks {
            last = ack.await.expect("acknowledged").sequence;
        }
    }
    last
}

/// Reads the stream after `after` into `projection` until it has applied everything.
async fn follow(
    js: &jetstream::Context,
    after: (u64, Option<u64>),
    mut projection: Projection,
) -> (Projection, Feed) {
    let mut feed = Feed::open(js, CHAIN, "matcher", after, &CancellationToken::new())
        .await
        .expect("the feed opens")
        .expect("not cancelled");
    while feed.applied < feed.caught_up_at {
        let message = feed.next().await.expect("more").expect("read");
        feed.apply(&mut projection, message).expect("applied");
    }
    (projection, feed)
}

#[tokio::main]
async fn main() {
    let nats = NatsServer::start().expect("nats-server starts");
    let client = async_nats::connect(nats.url()).await.expect("connects");
    let js = jetstream::new(client);
    js.create_stream(storage::chain_stream(CHAIN, 1))
        .await
        .expect("the chain stream");
    let blocks = history();
    let events: usize = blocks.iter().map(Vec::len).sum();
    let started = Instant::now();
    let last = publish(&js, &blocks).await;
    println!(
        "wrote {events} events in {} blocks ({last} messages) in {:.1} s",
        blocks.len(),
        started.elapsed().as_secs_f64()
    );
    drop(blocks);

    // Baseline: a start that replays the whole stream.
    let started = Instant::now();
    let (projection, feed) = follow(&js, (0, None), Projection::default()).await;
    let replay = started.elapsed().as_secs_f64();
    let view = projection.view().clone();
    println!(
        "replay: {:.2} s ({:.0} events/s); the view: {} nodes, {} open jobs, block {}",
        replay,
        events as f64 / replay,
        view.nodes.len(),
        view.open_jobs().count(),
        view.block
    );

    // The snapshot, written as a service writes it.
    let signer = PrivateKeySigner::random();
    let identity = Identity {
        service: "matcher",
        chain_id: CHAIN,
        market: Address::repeat_byte(0xaa),
        registry: Address::repeat_byte(0xbb),
        signer: signer.address(),
    };
    let (saved, at) = projection.save().expect("at a commit");
    let position = Position {
        sequence: feed.applied,
        commit_sequence: feed.last_commit.expect("a commit"),
        block: at.number,
        hash: at.hash.expect("known"),
    };
    drop(projection);
    let started = Instant::now();
    let bytes = snapshot::write(&js, &identity, &signer, 1, position, saved)
        .await
        .expect("written");
    let write = started.elapsed().as_secs_f64();
    println!("snapshot: {bytes} bytes written in {write:.2} s");

    // A start from the snapshot: restored, checked, and the (empty) tail read.
    let started = Instant::now();
    let restored = snapshot::restore(&js, &identity)
        .await
        .expect("the snapshot is taken");
    let after = (
        restored.position.sequence,
        Some(restored.position.commit_sequence),
    );
    let (restarted, _) = follow(&js, after, restored.projection).await;
    let restore = started.elapsed().as_secs_f64();
    assert_eq!(restarted.view(), &view, "restore = replay");
    println!(
        "restore: {restore:.2} s, {:.1}x faster than the replay of the same run",
        replay / restore
    );
    println!(
        "{}",
        serde_json::json!({
            "bench": "restart", "events": events, "open_jobs": OPEN, "nodes": NODES,
            "replay_s": (replay * 100.0).round() / 100.0,
            "snapshot_restore_s": (restore * 100.0).round() / 100.0,
            "snapshot_write_s": (write * 100.0).round() / 100.0,
            "snapshot_bytes": bytes,
            "speedup": (replay / restore * 10.0).round() / 10.0,
        })
    );
}
