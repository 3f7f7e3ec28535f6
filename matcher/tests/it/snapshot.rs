//! View snapshots against a real nats-server and a chain stream written by hand: the view
//! restored from a snapshot and the stream's tail (a reorganisation across the snapshot's
//! block included) equals a replay of the whole stream; a snapshot changed anywhere,
//! signed by another account, of another market, or not matching the stream at its
//! position is refused, and the service replays.

use alloy::primitives::{Address, B256, Bytes, aliases::U40, aliases::U96};
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolEvent;
use gantry_matcher::feed::Feed;
use gantry_matcher::project::Projection;
use gantry_matcher::snapshot::{self, Identity, Position, Refused};
use gantry_matcher::view::View;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::eligibility::Requirements;
use gantry_protocol::events::{ContractKind, DecodedEvent};
use gantry_protocol::market::{self, Terms};
use gantry_testkit::hand_stream::{HandStream, block_hash, decoded, node_registered};
use tokio_util::sync::CancellationToken;

use gantry_testkit::accounts::KEEPER;
use gantry_testkit::free_port;

use crate::harness::Net;
use crate::stall::Scrape;

fn market_event<E: SolEvent + serde::Serialize>(key: u64, event: E) -> DecodedEvent {
    decoded(ContractKind::Market, key.to_string(), &event)
}

/// Block `number`'s events in a history where each block posts three jobs, assigns the
/// oldest open ones to the four nodes, pays some, gives some back (requeued, the node
/// barred) and registers a node now and then.
struct History {
    next_job: u64,
    open: Vec<u64>,
    running: Vec<(u64, u64)>,
    nodes: u64,
}

impl History {
    fn new() -> Self {
        Self {
            next_job: 1,
            open: Vec::new(),
            running: Vec::new(),
            nodes: 0,
        }
    }

    fn first_block(&mut self) -> Vec<DecodedEvent> {
        let mut events = vec![market_event(
            0,
            JobMarket::MarketParamsUpdated {
                params: market::dev_params(Address::repeat_byte(4)),
                policyVersion: 1,
            },
        )];
        for _ in 0..4 {
            self.nodes += 1;
            events.push(node_registered(self.nodes));
        }
        events
    }

    fn block(&mut self, number: u64) -> Vec<DecodedEvent> {
        let mut events = Vec::new();
        for _ in 0..3 {
            let id = self.next_job;
            self.next_job += 1;
            let terms = Terms {
                submitter: Address::with_last_byte((id % 5) as u8 + 1),
                bounty: 100,
                spec_hash: B256::ZERO,
                requirements: Requirements {
                    min_gpu_count: 1,
                    max_price_per_gpu_hour: 5_000_000_000_000_000_000,
                    max_runtime: 600,
                    priority: (id % 3) as u8,
                    ..Requirements::default()
                },
                deadline: 1_800_000_000,
                policy: 1,
                verification: market::Verification::NONE,
            };
            events.push(market_event(
                id,
                JobMarket::JobPosted {
                    jobId: id,
                    submitter: terms.submitter,
                    terms: terms.pack(),
                    fromCredits: U96::ZERO,
                    spec: Bytes::from_static(b"{\"image\":\"alpine:3\"}"),
                },
            ));
            self.open.push(id);
        }
        // One running job is paid, one given back (requeued, its node barred).
        if number.is_multiple_of(2) && !self.running.is_empty() {
            let (job, node) = self.running.remove(0);
            events.push(market_event(
                job,
                JobMarket::ResultSubmitted {
                    jobId: job,
                    resultHash: B256::repeat_byte(9),
                    resultURI: String::new(),
                    until: U40::from(1_700_003_600u64),
                },
            ));
            events.push(market_event(
                job,
                JobMarket::JobCompleted {
                    jobId: job,
                    nodeId: node,
                    payout: U96::from(95),
                    fee: U96::from(5),
                    kind: 0,
                },
            ));
        }
        if number.is_multiple_of(3) && !self.running.is_empty() {
            let (job, node) = self.running.remove(0);
            events.push(market_event(
                job,
                JobMarket::JobRejected {
                    jobId: job,
                    nodeId: node,
                    reason: "bad image".into(),
                },
            ));
            events.push(market_event(
                job,
                JobMarket::JobRequeued {
                    jobId: job,
                    faults: 0,
                    barred: 1,
                },
            ));
            self.open.push(job);
        }
        // Each node with its slot free takes the oldest open job.
        for node in 1..=self.nodes {
            if self.running.iter().any(|(_, n)| *n == node) || self.open.is_empty() {
                continue;
            }
            let job = self.open.remove(0);
            events.push(decoded(
                ContractKind::Market,
                node.to_string(),
                &JobMarket::JobAssigned {
                    jobId: job,
                    nodeId: node,
                    claimed: false,
                    until: U40::from(1_700_000_000 + number + 600),
                },
            ));
            self.running.push((job, node));
        }
        if number.is_multiple_of(10) {
            self.nodes += 1;
            events.push(node_registered(self.nodes));
        }
        if number.is_multiple_of(7) {
            events.push(decoded(
                ContractKind::Registry,
                "1".into(),
                &NodeRegistry::NodeHeartbeat {
                    nodeId: 1,
                    at: 1_700_000_000 + number as u32,
                },
            ));
        }
        events
    }
}

/// Reads the stream after `after` into `projection` up to its last message.
async fn follow(
    stream: &HandStream,
    after: (u64, Option<u64>),
    mut projection: Projection,
) -> (Projection, Feed) {
    let mut feed = Feed::open(
        stream.jetstream(),
        stream.chain_id(),
        "matcher",
        after,
        &CancellationToken::new(),
    )
    .await
    .expect("the feed opens")
    .expect("not cancelled");
    while feed.applied < feed.caught_up_at {
        let message = feed.next().await.expect("more messages").expect("read");
        feed.apply(&mut projection, message).expect("applied");
    }
    (projection, feed)
}

/// The whole stream replayed.
async fn replay(stream: &HandStream) -> View {
    follow(stream, (0, None), Projection::default())
        .await
        .0
        .view()
        .clone()
}

fn identity(chain_id: u64, signer: &PrivateKeySigner) -> Identity {
    Identity {
        service: "matcher",
        chain_id,
        market: Address::repeat_byte(0xaa),
        registry: Address::repeat_byte(0xbb),
        signer: signer.address(),
    }
}

async fn put(stream: &HandStream, identity: &Identity, bytes: &[u8]) {
    let store = stream
        .jetstream()
        .get_object_store(identity.bucket())
        .await
        .expect("the bucket exists");
    store
        .put(identity.object().as_str(), &mut &bytes[..])
        .await
        .expect("put");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_view_equals_a_replay_and_a_tampered_snapshot_is_refused() {
    let net = Net::without_indexer().await;
    let stream = HandStream::create(&net).await;
    let chain_id = stream.chain_id();
    let signer = PrivateKeySigner::random();
    let me = identity(chain_id, &signer);

    // Given 60 blocks (blocks up to 40 final),
    let mut history = History::new();
    stream.block(1, &history.first_block()).await;
    for number in 2..=60 {
        stream.block(number, &history.block(number)).await;
    }
    stream.finality(40).await;
    // when the view is snapshotted at block 60,
    let (projection, feed) = follow(&stream, (0, None), Projection::default()).await;
    let (saved, at) = projection.save().expect("at a commit");
    let position = Position {
        sequence: feed.applied,
        commit_sequence: feed.last_commit.expect("a commit applied"),
        block: at.number,
        hash: at.hash.expect("known"),
    };
    assert_eq!(position.block, 60);
    let bytes = snapshot::encode(&me, &signer, position, &saved).expect("encoded");
    snapshot::write(stream.jetstream(), &me, &signer, 1, position, saved.clone())
        .await
        .expect("written");

    // and the chain goes on: blocks 61–70, then a reorganisation back to block 58 (blocks
    // 59–70 orphaned: the snapshot's own block among them) and a fork of 15 blocks,
    stream.block(61, &history.block(61)).await;
    for number in 62..=70 {
        stream.block(number, &history.block(number)).await;
    }
    stream.retract(58, 70).await;
    let fork = |number: u64| B256::repeat_byte(0xf0) ^ block_hash(number);
    let mut forked = History::new();
    // The fork's history: the same first 58 blocks, then blocks of its own.
    forked.first_block();
    for number in 2..=58 {
        forked.block(number);
    }
    for number in 59..=73 {
        let parent = if number == 59 {
            block_hash(58)
        } else {
            fork(number - 1)
        };
        stream
            .block_on(number, fork(number), parent, &forked.block(number + 100))
            .await;
    }

    // then the view restored from the snapshot, with the tail read after it, is the view a
    // replay of the whole stream builds.
    let restored = snapshot::restore(stream.jetstream(), &me)
        .await
        .expect("the snapshot is taken");
    assert_eq!(restored.position, position);
    assert_eq!(restored.projection.view(), projection.view());
    let after = (position.sequence, Some(position.commit_sequence));
    let (tail, _) = follow(&stream, after, restored.projection).await;
    let replayed = replay(&stream).await;
    assert_eq!(replayed.block, 73);
    assert!(replayed.jobs.len() > 40, "{} jobs", replayed.jobs.len());
    assert_eq!(tail.view(), &replayed, "restore + tail = replay");

    // A snapshot changed in its body, in its header, or signed by another account is
    // refused before anything is read from it; so is one of another market, and one that
    // is not a snapshot.
    let body_flipped = {
        let mut bytes = bytes.clone();
        let last = bytes.len() - 10;
        bytes[last] ^= 1;
        bytes
    };
    assert!(matches!(
        snapshot::decode(&me, &body_flipped),
        Err(Refused::Body)
    ));
    // The header says block 59 instead of 60 (its length kept: the digit changes).
    let header_changed = {
        let length = u32::from_be_bytes(bytes[4..8].try_into().unwrap()) as usize;
        let header = std::str::from_utf8(&bytes[8..8 + length]).expect("JSON");
        let changed = header.replacen("\"block\":60", "\"block\":59", 1);
        assert_ne!(changed, header);
        [&bytes[..8], changed.as_bytes(), &bytes[8 + length..]].concat()
    };
    assert!(matches!(
        snapshot::decode(&me, &header_changed),
        Err(Refused::Signature(_))
    ));
    let stranger = PrivateKeySigner::random();
    let forged = snapshot::encode(&me, &stranger, position, &saved).expect("encoded");
    assert!(matches!(
        snapshot::decode(&me, &forged),
        Err(Refused::Signature(_))
    ));
    let other_market = Identity {
        market: Address::repeat_byte(0xcc),
        ..me.clone()
    };
    let foreign = snapshot::encode(&other_market, &signer, position, &saved).expect("encoded");
    assert!(matches!(
        snapshot::decode(&me, &foreign),
        Err(Refused::Foreign(_))
    ));
    assert!(matches!(
        snapshot::decode(&me, b"GSNP\0\0\0\x02{}"),
        Err(Refused::Malformed(_))
    ));
    // Each, put where the service looks, is refused there too (the service replays).
    // (A stranger's header in front of a large body: refused from the header alone.)
    let large = [&forged[..], &vec![0u8; 8 << 20][..]].concat();
    for tampered in [&body_flipped, &header_changed, &forged, &foreign, &large] {
        put(&stream, &me, tampered).await;
        assert!(snapshot::restore(stream.jetstream(), &me).await.is_none());
    }
    // A snapshot signed by the right account but not matching the stream at its position
    // (another block's hash, or a commit sequence that is an event) is refused.
    for wrong in [
        Position {
            hash: B256::repeat_byte(1),
            ..position
        },
        Position {
            commit_sequence: position.commit_sequence - 1,
            ..position
        },
    ] {
        let bytes = snapshot::encode(&me, &signer, wrong, &saved).expect("encoded");
        put(&stream, &me, &bytes).await;
        assert!(snapshot::restore(stream.jetstream(), &me).await.is_none());
    }
    // The genuine one, put back, is taken again.
    put(&stream, &me, &bytes).await;
    assert!(snapshot::restore(stream.jetstream(), &me).await.is_some());
}

/// The keeper binary writes its snapshot as it goes and, restarted, reads it back and
/// replays only the tail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_restarts_from_its_snapshot() {
    let net = Net::without_indexer().await;
    let stream = HandStream::create(&net).await;
    let mut history = History::new();
    stream.block(1, &history.first_block()).await;
    for number in 2..=30 {
        stream.block(number, &history.block(number)).await;
    }
    let addr = format!("127.0.0.1:{}", free_port().unwrap());
    let base = format!("http://{addr}");
    let flags = ["--metrics-addr", &addr, "--snapshot-every", "50"];
    let samples = |scrape: &Scrape, outcome: &str| {
        scrape
            .sample(
                "gantry_snapshots_total",
                &[&format!("outcome=\"{outcome}\"")],
            )
            .unwrap_or(0.0)
    };
    // Given a keeper that replayed 30 blocks (no snapshot yet) and wrote one,
    let keeper = net.spawn_liveness_with(KEEPER, "keeper", &flags);
    net.wait_until("the keeper replays and writes a snapshot", || async {
        Scrape::of(&base).await.is_some_and(|s| {
            s.view_block() == Some(30.0)
                && samples(&s, "missing") == 1.0
                && samples(&s, "written") >= 1.0
        })
    })
    .await;
    keeper.kill();
    // when it is restarted after five more blocks,
    for number in 31..=35 {
        stream.block(number, &history.block(number)).await;
    }
    let mut keeper = net.spawn_liveness_with(KEEPER, "keeper", &flags);
    // then it starts from the snapshot and reads the tail: its view is at block 35.
    net.wait_until(
        "the keeper restores its view and reads the tail",
        || async {
            Scrape::of(&base).await.is_some_and(|s| {
                s.ready && s.view_block() == Some(35.0) && samples(&s, "restored") == 1.0
            })
        },
    )
    .await;
    keeper.assert_running();
}
