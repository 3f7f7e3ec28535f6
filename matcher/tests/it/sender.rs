//! The sender against a reorganisation that un-mines one of its transactions: the nonce
//! it had is free again, and the next transaction (one nonce above) could never be mined.
//! The sender fills the gap and the next transaction lands. (Before, it re-sent the stuck
//! one at the same nonce forever, and its service held its role wedged.)

use std::time::Duration;

use alloy::providers::Provider;
use gantry_matcher::liveness::Action;
use gantry_matcher::sender::{self, Call, Outcome, SenderConfig};
use gantry_testkit::PATIENCE;
use gantry_testkit::accounts::OTHER;
use tokio_util::sync::CancellationToken;

use crate::harness::Net;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_un_mined_by_a_reorg_does_not_wedge_the_sender() {
    let net = Net::start(|params| params).await;
    let chain = net.devnet.chain_args();
    let (mut sender, sending) = sender::start(SenderConfig {
        rpc_url: chain.rpc_url,
        chain_id: chain.chain_id,
        market: chain.market,
        registry: chain.registry,
        signer: net.devnet.signer(OTHER),
        max_pending: 4,
        replace_after: Duration::from_secs(2),
        poll: Duration::from_millis(50),
        stuck_after: Duration::from_secs(60),
    })
    .await
    .unwrap();
    let cancel = CancellationToken::new();
    tokio::spawn(sending.run(cancel.clone()));
    let from = net.address(OTHER);
    let nonce = || async {
        net.devnet
            .admin
            .get_transaction_count(from)
            .latest()
            .await
            .unwrap()
    };
    // Any call does: marking an unknown node inactive reverts, and takes its nonce.
    let mark = |node| Call::Keep(Action::MarkInactive { node }, None);
    let report = async |sender: &mut sender::Sender| {
        tokio::time::timeout(PATIENCE, sender.reports.recv())
            .await
            .expect("a report")
            .expect("the sender runs")
    };

    let first = nonce().await;
    assert!(sender.try_send(mark(901)));
    let mined = report(&mut sender).await;
    assert!(
        matches!(mined.outcome, Outcome::Reverted { .. }),
        "{mined:?}"
    );
    assert_eq!(nonce().await, first + 1);

    // The block that held it is replaced by an empty one: its nonce is free again.
    let _: serde_json::Value = net
        .devnet
        .admin
        .raw_request("anvil_reorg".into(), (1, Vec::<serde_json::Value>::new()))
        .await
        .expect("anvil_reorg");
    assert_eq!(nonce().await, first, "un-mined");

    // The next call gets the nonce after it; the sender fills the gap, and it lands.
    assert!(sender.try_send(mark(902)));
    let next = report(&mut sender).await;
    assert_eq!(next.call, mark(902));
    assert!(matches!(next.outcome, Outcome::Reverted { .. }), "{next:?}");
    assert_eq!(nonce().await, first + 2);
    cancel.cancel();
}
