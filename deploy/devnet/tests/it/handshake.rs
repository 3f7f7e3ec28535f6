//! Design 19, the handshake, as an attacker tries it: the production NATS config (no user
//! for any node) with the auth service answering the callout on a real chain. Only a
//! registered node's agent gets in, once per token, as that node alone; its access is
//! renewed while the node stands and ends when it exits.

use std::time::Duration;

use alloy::primitives::{Address, B128};
use alloy::signers::SignerSync as _;
use alloy::signers::local::PrivateKeySigner;
use async_nats::ConnectErrorKind;
use gantry_protocol::handshake::{Manifest, Token};
use gantry_protocol::{names, storage};
use gantry_testkit::accounts::{AGENT, NODES, OPERATOR, OTHER};
use gantry_testkit::scenario::h100_node;
use gantry_testkit::{GUSD, TestNet, confirm_receipt};
use tokio::sync::mpsc;

use crate::nats_config::Session;

const STAKE: u64 = 500 * GUSD;

/// A network whose NATS runs as in production, credentials lasting `ttl` seconds, with
/// two nodes registered by the operator: one served by [`AGENT`], one by `NODES[1]`.
async fn network(ttl: u64) -> (TestNet, u64, u64) {
    let net = TestNet::builder()
        .handshake(ttl)
        .start()
        .await
        .expect("the test net starts");
    let mut ids = Vec::new();
    for agent in [AGENT, NODES[1]] {
        let agent = net.address(agent);
        ids.push(net.register_node(OPERATOR, agent, h100_node(), STAKE).await);
    }
    (net, ids[0], ids[1])
}

/// The unix second now.
fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// A token for `node` signed by `signer` (claiming to be `agent`) at `issued_at`.
fn token(
    net: &TestNet,
    signer: &PrivateKeySigner,
    agent: Address,
    node: u64,
    issued_at: u64,
) -> String {
    let token = Token::unsigned(
        node,
        agent,
        issued_at,
        B128::from(rand::random::<[u8; 16]>()),
        &Manifest::default(),
    );
    let digest = token.digest(net.chain_id(), net.deployment().market);
    token
        .signed(&signer.sign_hash_sync(&digest).unwrap())
        .encode()
}

/// Connects as a worker of `node` whose every connection sends `token()`.
async fn join(
    net: &TestNet,
    node: u64,
    token: impl Fn() -> String + Send + Sync + 'static,
) -> Result<Session, async_nats::ConnectError> {
    let (servers, options) = gantry_runtime::nats::node_options(&net.nats_url(), node, token);
    Session::connect(&servers, options).await
}

/// A worker of `node` signing each token with `signer`, as `gantry-worker` does.
async fn join_as(
    net: &TestNet,
    node: u64,
    signer: PrivateKeySigner,
) -> Result<Session, async_nats::ConnectError> {
    let (chain_id, market) = (net.chain_id(), net.deployment().market);
    join(net, node, move || {
        gantry_runtime::nats::handshake_token(&signer, chain_id, market, node, &Manifest::default())
    })
    .await
}

fn refused(outcome: Result<Session, async_nats::ConnectError>, what: &str) {
    match outcome {
        Ok(_) => panic!("{what} was let in"),
        Err(error) => assert_eq!(
            error.kind(),
            ConnectErrorKind::AuthorizationViolation,
            "{what}: {error}"
        ),
    }
}

/// Who is turned away at the door: a key that is not the node's agent (whether it claims
/// to be the agent or says who it is), a node that does not exist, a token whose signature
/// does not cover what it says (another node, another chain's domain), a stale one, one
/// used before, none at all, and something that is not a token.
#[tokio::test(flavor = "multi_thread")]
async fn handshake_only_a_registered_nodes_agent_is_let_in_once_per_token() {
    let (net, node, _) = network(300).await;
    let agent = net.devnet.signer(AGENT);
    let stranger = net.devnet.signer(OTHER);

    // The agent is let in; the token it used is not good again.
    let used = token(&net, &agent, agent.address(), node, now());
    let first = used.clone();
    let session = join(&net, node, move || first.clone())
        .await
        .expect("the agent joins");
    session.client.flush().await.unwrap();
    drop(session);
    let again = used.clone();
    refused(
        join(&net, node, move || again.clone()).await,
        "a replayed token",
    );
    // The same token with its signature re-encoded (`v` as 0 or 1): still that token.
    let mut reencoded: Token = serde_json::from_str(&used).unwrap();
    let mut bytes = alloy::hex::decode(&reencoded.signature).unwrap();
    bytes[64] -= 27;
    reencoded.signature = alloy::hex::encode_prefixed(bytes);
    let reencoded = reencoded.encode();
    refused(
        join(&net, node, move || reencoded.clone()).await,
        "a used token with its signature re-encoded",
    );

    let (claimed, honest) = (
        token(&net, &stranger, agent.address(), node, now()),
        token(&net, &stranger, stranger.address(), node, now()),
    );
    refused(
        join(&net, node, move || claimed.clone()).await,
        "a stranger claiming to be the agent",
    );
    refused(
        join(&net, node, move || honest.clone()).await,
        "a stranger as itself",
    );
    refused(
        join_as(&net, 99, agent.clone()).await,
        "a node that does not exist",
    );

    // The agent's signature over one node, presented for another.
    let mut moved: Token =
        serde_json::from_str(&token(&net, &agent, agent.address(), node, now())).unwrap();
    moved.node = node + 1;
    let moved = moved.encode();
    refused(
        join(&net, node + 1, move || moved.clone()).await,
        "a token moved to another node",
    );
    // Signed in another chain's domain.
    let elsewhere = {
        let token = Token::unsigned(
            node,
            agent.address(),
            now(),
            B128::from(rand::random::<[u8; 16]>()),
            &Manifest::default(),
        );
        let digest = token.digest(net.chain_id() + 1, net.deployment().market);
        token
            .signed(&agent.sign_hash_sync(&digest).unwrap())
            .encode()
    };
    refused(
        join(&net, node, move || elsewhere.clone()).await,
        "a token for another chain",
    );
    let stale = token(&net, &agent, agent.address(), node, now() - 3_600);
    refused(
        join(&net, node, move || stale.clone()).await,
        "a token an hour old",
    );
    refused(join(&net, node, String::new).await, "no token");
    refused(
        join(&net, node, || "{\"v\":1}".to_owned()).await,
        "not a token",
    );

    // The agent still gets in with a fresh one.
    join_as(&net, node, agent)
        .await
        .expect("the agent joins again");
}

/// In, a worker has its own node's consumers, inbox and bucket of sealed results, and
/// none of another node's.
#[tokio::test(flavor = "multi_thread")]
async fn handshake_a_worker_is_refused_another_nodes_consumers_inbox_and_bucket() {
    let (net, node, other) = network(300).await;
    let chain = net.chain_id();
    let admin = net.jetstream().await;
    admin
        .create_stream(storage::chain_stream(chain, 1))
        .await
        .expect("the chain stream");
    let worker = join_as(&net, node, net.devnet.signer(AGENT))
        .await
        .expect("the agent joins");

    let stream = worker
        .js
        .get_stream(names::stream_name(chain))
        .await
        .expect("the chain stream's info");
    stream
        .get_or_create_consumer(
            &names::worker_consumer(chain, node),
            storage::assignment_consumer(chain, node),
        )
        .await
        .expect("its own assignment consumer");
    let sealed = names::sealed_bucket(chain);
    gantry_runtime::objects::put(
        &worker.js,
        &sealed,
        node,
        "1-p",
        Default::default(),
        [1u8; 3].as_slice(),
    )
    .await
    .expect("its own sealed results, in the bucket the auth service made");
    worker.assert_no_refusals("the worker's own work").await;

    let theirs = worker.refusing_stream(&names::stream_name(chain)).await;
    worker
        .refused_call(
            theirs.create_consumer(storage::assignment_consumer(chain, other)),
            format!(
                "$JS.API.CONSUMER.CREATE.{}.{}.{}",
                names::stream_name(chain),
                names::worker_consumer(chain, other),
                names::assignments_of(chain, other)
            ),
        )
        .await;
    let inbox = format!("_INBOX_worker-{other}.>");
    let _subscription = worker.client.subscribe(inbox.clone()).await.unwrap();
    worker.refused("Subscription", &inbox).await;
    worker
        .refused_call_prefix(
            gantry_runtime::objects::put(
                &worker.refusing_js,
                &sealed,
                other,
                "1-p",
                Default::default(),
                [0u8; 3].as_slice(),
            ),
            format!("$O.{sealed}.C.{other}."),
        )
        .await;
    // Nor may it make a stream (one sourcing another's bucket would read it).
    worker
        .refused_call(
            worker
                .refusing_js
                .create_object_store(storage::object_store("mine", 1)),
            "$JS.API.STREAM.CREATE.OBJ_mine".to_owned(),
        )
        .await;
}

/// The server ends a worker's credentials at their expiry and the worker signs in again,
/// as long as its node stands; once the node has exited (its stake withdrawn) the next
/// renewal is refused, and so is any new handshake.
#[tokio::test(flavor = "multi_thread")]
async fn handshake_access_is_renewed_until_the_node_exits() {
    const TTL: u64 = 2;
    let (net, node, _) = network(TTL).await;
    let agent = net.devnet.signer(AGENT);
    let (events_tx, mut events) = mpsc::unbounded_channel();
    let (servers, options) = {
        let (chain_id, market) = (net.chain_id(), net.deployment().market);
        let signer = agent.clone();
        gantry_runtime::nats::node_options(&net.nats_url(), node, move || {
            gantry_runtime::nats::handshake_token(
                &signer,
                chain_id,
                market,
                node,
                &Manifest::default(),
            )
        })
    };
    let client = options
        .event_callback(move |event| {
            let events_tx = events_tx.clone();
            async move {
                let _ = events_tx.send(event.to_string());
            }
        })
        .connect(&servers)
        .await
        .expect("the agent joins");
    // Expired and renewed, twice (the first event is the first connection's).
    let (mut seen, mut renewals) = (Vec::new(), 0);
    while renewals < 2 {
        let event = next_event(&mut events, TTL).await;
        if event == "connected" && seen.last().is_some_and(|e| e == "disconnected") {
            renewals += 1;
        }
        seen.push(event);
    }
    assert!(
        seen.iter()
            .any(|e| e.contains("User Authentication Expired")),
        "{seen:?}"
    );
    client.flush().await.expect("renewed");

    // The operator exits the node and withdraws its stake.
    let registry = net.registry(OPERATOR);
    confirm_receipt("beginExit", registry.beginExit(node).send().await)
        .await
        .unwrap();
    net.advance(11 * 24 * 3600).await;
    confirm_receipt("withdrawStake", registry.withdrawStake(node).send().await)
        .await
        .unwrap();
    assert_eq!(net.node(node).await.status, 4, "exited");

    // At the next expiry the connection ends and is not let back.
    loop {
        if next_event(&mut events, TTL).await == "disconnected" {
            break;
        }
    }
    refused(join_as(&net, node, agent).await, "an exited node's agent");
    let request = tokio::time::timeout(
        Duration::from_secs(3 * TTL),
        client.request("anything", "".into()),
    )
    .await;
    assert!(
        !matches!(request, Ok(Ok(_))),
        "the old connection answers nothing"
    );
    // Drain: no later event says it is connected again.
    while let Ok(event) = events.try_recv() {
        assert_ne!(event, "connected", "let back in after the node exited");
    }
}

/// The client's next event (`connected`, `disconnected`, `server error: …`).
async fn next_event(events: &mut mpsc::UnboundedReceiver<String>, ttl: u64) -> String {
    tokio::time::timeout(Duration::from_secs(10 * ttl), events.recv())
        .await
        .expect("an event before long")
        .expect("the client lives")
}
