//! Capacity comes back by itself: a worker frozen (SIGSTOP) past the heartbeat timeout,
//! its node marked inactive by the keeper, brings the node back to Active on its own once
//! it runs again; a node that takes no work says why on `/metrics` and `/readyz`. And an
//! attempt that is over on chain unanswered (the worker frozen past `until`, its answer
//! refused) is acknowledged and dropped, never run again. And a transaction whose nonce a
//! reorganisation left behind a gap is mined, the gap filled, before the node times out;
//! a node's transactions wait for their receipts together, and only a free nonce below
//! one is filled, never one of the node's own pending.

use alloy::providers::Provider;
use gantry_protocol::status::{JobStatus, NodeStatus};
use gantry_testkit::accounts::{ADMIN, KEEPER, NODES, OTHER};

use crate::harness::{Net, RunningWorker, Services, cpu_job, shell};
use crate::scripts::{last_of_job, of_node};

/// The gauge of `reason` on the worker's `/metrics`.
async fn not_taking_work(worker: &RunningWorker, reason: &str) -> Option<f64> {
    worker
        .metric(&format!(
            "gantry_worker_not_taking_work{{reason=\"{reason}\"}}"
        ))
        .await
}

async fn status(net: &Net, node: u64) -> NodeStatus {
    NodeStatus::try_from(net.node(node).await.status).expect("a node status")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_paused_worker_brings_its_node_back_to_active_and_says_why_it_takes_no_work() {
    let net = Net::start(|p| p).await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let node = worker.node_id;
    net.wait_until("the worker is ready and takes work", || async {
        worker.readyz().await.is_some_and(|(ready, _)| ready)
            && not_taking_work(&worker, "inactive").await == Some(0.0)
    })
    .await;

    // Frozen past the heartbeat timeout (60 s at the dev parameters): the keeper marks the
    // node inactive.
    worker.pause();
    net.advance(61).await;
    net.wait_until("the keeper marks the node inactive", || async {
        status(&net, node).await == NodeStatus::Inactive
    })
    .await;
    let (marked, _) = net.marked_inactive(node).await;
    assert_eq!(marked.by, net.address(KEEPER));

    // Running again, its next heartbeat reactivates the node: nobody else acts.
    worker.resume();
    net.wait_until("the node is active again", || async {
        status(&net, node).await == NodeStatus::Active
    })
    .await;
    net.wait_until("the worker says it takes work", || async {
        worker.readyz().await.is_some_and(|(ready, _)| ready)
            && not_taking_work(&worker, "inactive").await == Some(0.0)
    })
    .await;

    // A node that takes no work says why: here its operator (the agent, which registered
    // it) begins its exit.
    net.registry(NODES[0])
        .beginExit(node)
        .send()
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    net.wait_until("the worker says its node is exiting", || async {
        not_taking_work(&worker, "exiting").await == Some(1.0)
    })
    .await;
    let (ready, why) = worker.readyz().await.expect("/readyz answers");
    assert!(!ready, "{why}");
    assert!(why.contains(&format!("node {node} takes no work")), "{why}");
    assert!(why.contains("exiting"), "{why}");
    assert_eq!(not_taking_work(&worker, "inactive").await, Some(0.0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_attempt_over_on_chain_unanswered_is_dropped_not_run_again() {
    // No keeper: nobody reclaims the job past its attempt, so the chain keeps it Assigned
    // to this node and only the worker decides.
    let net = Net::start_with(|p| p, Services::NO_KEEPER).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let job = net
        .post(
            cpu_job(64),
            &shell("echo started > /outputs/started; sleep 120", 300),
        )
        .await;
    net.wait_for_status(job, JobStatus::Assigned).await;
    net.wait_until("the job's container runs", || async {
        !net.containers().await.is_empty()
    })
    .await;

    // Frozen until the attempt is over on chain: the answer it sends when it runs again
    // is refused (past `until`).
    worker.pause();
    let (assigned, _) = last_of_job(net.market(ADMIN).JobAssigned_filter(), job).await;
    let until = assigned.until.to::<u64>();
    let now = net.devnet.now().await.unwrap();
    net.advance(until + 1 - now).await;
    worker.resume();

    let expired = "gantry_worker_jobs_total{outcome=\"expired\"}";
    net.wait_until("the worker drops the attempt", || async {
        worker.metric(expired).await == Some(1.0)
    })
    .await;
    // Acknowledged: nothing left to redeliver, so it does not run again.
    let js = net.jetstream().await;
    let stream = js
        .get_stream(gantry_protocol::names::stream_name(net.chain_id()))
        .await
        .unwrap();
    let mut consumer: async_nats::jetstream::consumer::PullConsumer = stream
        .get_consumer(&gantry_protocol::names::worker_consumer(
            net.chain_id(),
            worker.node_id,
        ))
        .await
        .unwrap();
    let info = consumer.info().await.unwrap();
    assert_eq!(info.num_ack_pending, 0, "{info:?}");
    assert_eq!(info.num_pending, 0, "{info:?}");
    assert_eq!(
        worker
            .metric("gantry_worker_jobs_total{outcome=\"unreported\"}")
            .await,
        None,
        "never left to be redelivered"
    );
    net.wait_for_no_containers().await;
    // Still Assigned on chain, unanswered: a keeper's to reclaim.
    let state = net.job(job).await.state;
    assert_eq!(state.status, JobStatus::Assigned);
    assert_eq!(state.node_id, worker.node_id);
    assert!(worker.stop().success());
}

/// A heartbeat the chain dropped (a reorganisation, a node that lost its pool) is sent
/// again soon enough that the node never times out: here the registry's timeout is 10 s
/// and the heartbeat in flight is dropped from the pool; the keeper runs. Counted as
/// dropped only after 10 s (the old grace), the next heartbeat came after the timeout
/// and the keeper marked the healthy node inactive.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dropped_heartbeat_is_sent_again_before_the_node_times_out() {
    let net = Net::start(|mut p| {
        p.market.heartbeatTimeout = 10;
        p
    })
    .await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let node = worker.node_id;
    let anvil = &net.devnet.admin;
    let agent = net.address(NODES[0]);
    let rpc = |method: &'static str, params: serde_json::Value| async move {
        let _: serde_json::Value = anvil.raw_request(method.into(), params).await.unwrap();
    };

    // Blocks stop: the worker's next heartbeat waits in the pool, and is dropped there.
    rpc("evm_setAutomine", serde_json::json!([false])).await;
    net.wait_until("a heartbeat waits in the pool", || async {
        let pending = anvil.get_transaction_count(agent).pending().await.unwrap();
        let mined = anvil.get_transaction_count(agent).await.unwrap();
        pending > mined
    })
    .await;
    let last = net.node(node).await.lastHeartbeat;
    rpc("anvil_dropAllTransactions", serde_json::json!([])).await;
    // The chain's time goes on, a block a second, with the keeper watching.
    rpc("evm_setAutomine", serde_json::json!([true])).await;
    rpc("evm_setIntervalMining", serde_json::json!([1])).await;
    net.wait_until("a new heartbeat lands", || async {
        net.node(node).await.lastHeartbeat > last
    })
    .await;
    let gap = net.node(node).await.lastHeartbeat - last;
    assert!(
        of_node(net.market(ADMIN).NodeMarkedInactive_filter(), node)
            .await
            .is_empty(),
        "the healthy node was marked inactive (heartbeats {gap} s apart on chain)"
    );
    assert_eq!(status(&net, node).await, NodeStatus::Active);
    assert!(worker.stop().success());
}

/// The worker signs its next transaction with the nonce after its last one, and a
/// reorganisation takes that last one away before the new one reaches the pool: the new
/// one's nonce follows a gap, and the pool holds it until something takes the free nonce.
/// The worker's later transactions queue behind it (`gantry_runtime::tx::mined`), so
/// nothing would: it waited out its receipt timeout (a minute), its heartbeats queued
/// behind, and the keeper marked the healthy node inactive and slashed its jobs (the chaos
/// suite in the fresh-clone CI: a `submitResult` sent as a 1-block reorg landed). The
/// wait fills the gap once it has lasted its grace.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_behind_a_nonce_a_reorg_emptied_is_mined_once_the_gap_is_filled() {
    use alloy::network::{EthereumWallet, NetworkTransactionBuilder, TransactionBuilder};
    use alloy::rpc::types::TransactionRequest;
    use gantry_runtime::tx::{Wait, mined};
    use std::time::Duration;

    let devnet = gantry_testkit::Devnet::start().await.unwrap();
    let (provider, sender) = (devnet.provider(OTHER), devnet.address(OTHER));
    let transfer = || {
        TransactionRequest::default()
            .with_to(sender)
            .with_from(sender)
    };
    provider
        .send_transaction(transfer())
        .await
        .unwrap()
        .get_receipt()
        .await
        .unwrap();
    let next = provider.get_transaction_count(sender).await.unwrap();
    let chain_id = provider.get_chain_id().await.unwrap();
    let signed = transfer()
        .with_nonce(next)
        .with_chain_id(chain_id)
        .with_gas_limit(21_000)
        .with_max_fee_per_gas(10_000_000_000)
        .with_max_priority_fee_per_gas(1_000_000_000)
        .build(&EthereumWallet::from(devnet.signer(OTHER)))
        .await
        .unwrap();

    let head = provider.get_block_number().await.unwrap();
    devnet.reorg_from(head).await.unwrap();
    assert_eq!(
        provider.get_transaction_count(sender).await.unwrap(),
        next - 1,
        "the reorg took the last transaction away"
    );
    let tx = *provider
        .send_raw_transaction(&alloy::eips::eip2718::Encodable2718::encoded_2718(&signed))
        .await
        .unwrap()
        .tx_hash();

    let wait = Wait {
        timeout: Duration::from_secs(30),
        drop_grace: Duration::from_secs(1),
        poll: Duration::from_millis(100),
    };
    let receipt = mined(&provider, tx, wait)
        .await
        .expect("mined once the gap below it is filled");
    assert!(receipt.status());
    assert_eq!(
        provider.get_transaction_count(sender).await.unwrap(),
        next + 1,
        "the free nonce was taken by a filler, then this one"
    );
}

/// A node's transactions are broadcast one after another but wait for their receipts side
/// by side: a node whose slots finish together answers them in one block. The worker held
/// its one-at-a-time lock until each receipt, so a node answered at most one job a block
/// (on a chain of 12 s blocks, eight slots finishing together took eight blocks; on the
/// end-to-end WASM run's 100 ms blocks, a few answers a second). Each takes the nonce after
/// the last one broadcast (or the chain's pending count, if larger). Blocks stop here:
/// every send must be in the pool, with its own nonce, before one block mines them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_s_transactions_wait_for_their_receipts_together_not_one_a_block() {
    use gantry_protocol::bindings::NodeRegistry::NodeCapabilities;
    use gantry_worker::chain::Chain;

    const SENDS: u64 = 4;
    let net = gantry_testkit::TestNet::builder().start().await.unwrap();
    let capabilities = NodeCapabilities {
        cpuCores: 2,
        ramMiB: 1_024,
        maxConcurrentJobs: SENDS as u8,
        engines: gantry_protocol::eligibility::Engines::WASM.0,
        ..Default::default()
    };
    let node = net.register_own_node(NODES[0], capabilities).await;
    let d = net.deployment();
    let chain = Chain::connect(
        net.devnet.anvil.endpoint_url(),
        d.chain_id,
        d.market,
        d.registry,
        d.token,
        d.start_block,
        net.devnet.signer(NODES[0]),
    )
    .await
    .unwrap();
    let anvil = &net.devnet.admin;
    let agent = net.address(NODES[0]);
    let _: serde_json::Value = anvil
        .raw_request("evm_setAutomine".into(), [false])
        .await
        .unwrap();
    let mined_before = anvil.get_transaction_count(agent).await.unwrap();

    let sends = futures::future::join_all((0..SENDS).map(|_| chain.heartbeat(node)));
    let all_wait = format!("{SENDS} of the node's transactions wait in the pool together");
    let mine_once_all_wait = mine_once_pending_reach(anvil, agent, mined_before + SENDS, &all_wait);
    let (sent, ()) = tokio::join!(sends, mine_once_all_wait);
    for result in sent {
        result.expect("each heartbeat mined");
    }
    assert_eq!(
        anvil.get_transaction_count(agent).await.unwrap(),
        mined_before + SENDS,
        "one block mined them all"
    );
}

/// With several of a node's transactions in flight, one pending below another is no gap:
/// only a nonce the pool holds nothing at is filled. (Counting gaps from the mined count
/// alone, a transaction waiting past the grace behind the node's own earlier one — on any
/// chain slower than the grace — sent a filler at that one's nonce, which replaces it once
/// fees have risen.) Blocks stop; the node's transactions A and B wait in the pool, C waits
/// above a free nonce: one filler goes, at that nonce, and one block mines A, B, the filler
/// and C, A and B as they were sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_free_nonces_below_a_transaction_are_filled_not_the_node_s_pending_ones() {
    use alloy::network::{EthereumWallet, NetworkTransactionBuilder, TransactionBuilder};
    use alloy::rpc::types::TransactionRequest;
    use gantry_runtime::tx::{Wait, mined_among};
    use std::time::Duration;

    let devnet = gantry_testkit::Devnet::start().await.unwrap();
    let (provider, sender) = (devnet.provider(OTHER), devnet.address(OTHER));
    let chain_id = provider.get_chain_id().await.unwrap();
    let wallet = EthereumWallet::from(devnet.signer(OTHER));
    let first = provider.get_transaction_count(sender).await.unwrap();
    let _: serde_json::Value = devnet
        .admin
        .raw_request("evm_setAutomine".into(), [false])
        .await
        .unwrap();
    // A and B pay just over the base fee and no tip: a filler (the provider's estimate,
    // twice the base fee) outbids them, so a filler at their nonces would replace them.
    let base_fee = provider
        .get_block_by_number(alloy::eips::BlockNumberOrTag::Latest)
        .await
        .unwrap()
        .and_then(|block| block.header.base_fee_per_gas)
        .expect("anvil has a base fee") as u128;
    let (max_fee, tip) = (base_fee * 113 / 100 + 1, 0u128);
    let estimate = provider.estimate_eip1559_fees().await.unwrap();
    assert!(
        estimate.max_fee_per_gas >= max_fee * 11 / 10 && estimate.max_priority_fee_per_gas > tip,
        "a filler outbids A and B ({estimate:?}, base fee {base_fee})"
    );
    let send_at = |nonce: u64| {
        let (provider, wallet) = (provider.clone(), wallet.clone());
        async move {
            let signed = TransactionRequest::default()
                .with_to(sender)
                .with_from(sender)
                .with_nonce(nonce)
                .with_chain_id(chain_id)
                .with_gas_limit(21_000)
                .with_max_fee_per_gas(max_fee)
                .with_max_priority_fee_per_gas(tip)
                .build(&wallet)
                .await
                .unwrap();
            let raw = alloy::eips::eip2718::Encodable2718::encoded_2718(&signed);
            *provider.send_raw_transaction(&raw).await.unwrap().tx_hash()
        }
    };
    let a = send_at(first).await;
    let b = send_at(first + 1).await;
    let c = send_at(first + 3).await;
    let in_flight = |nonce: u64| [first, first + 1, first + 3].contains(&nonce);

    let wait = Wait {
        timeout: Duration::from_secs(60),
        drop_grace: Duration::ZERO,
        poll: Duration::from_millis(20),
    };
    let waiting = mined_among(&provider, c, wait, &in_flight);
    let mine_once_filled =
        mine_once_pending_reach(&provider, sender, first + 4, "the free nonce is filled");
    let (receipt, ()) = tokio::join!(waiting, mine_once_filled);
    assert!(receipt.expect("C mined once the gap is filled").status());
    for (name, tx) in [("A", a), ("B", b)] {
        assert!(
            provider
                .get_transaction_receipt(tx)
                .await
                .unwrap()
                .is_some(),
            "{name} was mined as sent, not replaced by a filler"
        );
    }
    assert_eq!(
        provider.get_transaction_count(sender).await.unwrap(),
        first + 4,
        "A, B, one filler and C"
    );
}

/// Mines one block once the pool counts `count` transactions of `account` (mined, then
/// pending in a row), looked at again on each arrival in the pool; blocks are stopped.
async fn mine_once_pending_reach(
    provider: &alloy::providers::DynProvider,
    account: alloy::primitives::Address,
    count: u64,
    what: &str,
) {
    let arrivals = provider
        .watch_pending_transactions()
        .await
        .unwrap()
        .into_stream();
    gantry_testkit::wait_until(what, gantry_testkit::PATIENCE, arrivals, || async {
        provider
            .get_transaction_count(account)
            .pending()
            .await
            .unwrap()
            == count
    })
    .await;
    let _: serde_json::Value = provider.raw_request("evm_mine".into(), ()).await.unwrap();
}
