//! Logs the stream cannot carry as events: the largest event the market allows is
//! published as it is; a larger one, or a log the ABI does not know, is published as a
//! bounded `Unreadable` marker in its place, and the indexer goes on with the next block.

use alloy::primitives::{U256, keccak256};
use alloy::providers::Provider;
use gantry_protocol::bindings::EventBatcher;
use gantry_protocol::envelope::MAX_EVENT_BYTES;
use gantry_protocol::events::{ContractKind, GantryEvent, UNREADABLE_EVENT, UnreadableReason};
use gantry_testkit::accounts::ADMIN;
use gantry_testkit::confirm_receipt;

use crate::harness::Harness;

/// The market's largest spec (`JobMarket.MAX_SPEC_BYTES`).
const LARGEST_SPEC: usize = 16_384;
/// A spec whose event, hex in JSON, is more than the servers' `max_payload` (1 MiB): NATS
/// itself would refuse it (and more than [`MAX_EVENT_BYTES`], where the indexer stops).
const OVERSIZED_SPEC: usize = 600 * 1024;

#[tokio::test]
async fn an_oversized_or_unknown_log_becomes_a_marker_and_the_indexer_goes_on() {
    let h = Harness::start().await;
    let batcher = h.deploy_batcher().await;
    let indexer = h.spawn(h.config_for(batcher));
    let contract = EventBatcher::new(batcher, h.devnet.provider(ADMIN));
    let terms = gantry_testkit::scenario::batcher_terms();
    let mut oversized_block = 0;
    for (call, size) in [
        ("postSized (largest)", LARGEST_SPEC),
        ("postSized (oversized)", OVERSIZED_SPEC),
    ] {
        let receipt = confirm_receipt(
            call,
            contract
                .postSized(terms.clone(), U256::from(size))
                .gas(20_000_000)
                .send()
                .await,
        )
        .await
        .expect("the event is emitted");
        oversized_block = receipt.block_number.unwrap();
    }
    confirm_receipt(
        "emitForeign",
        contract.emitForeign(U256::from(7)).send().await,
    )
    .await
    .expect("the foreign event is emitted");
    // Life goes on after them.
    h.emit_postings(batcher, 1, 3).await;
    h.wait_for_commit(h.head().await).await;
    indexer.stop().await.expect("clean stop");

    // Every block assembles (each commit counts its messages, markers included).
    // (The registry's deployment events come first: only the batcher's are looked at.)
    let events: Vec<_> = h
        .applied_events()
        .await
        .into_iter()
        .filter(|e| e.event.contract == ContractKind::Market)
        .collect();
    let names: Vec<&str> = events.iter().map(|e| e.event.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "JobPosted",
            UNREADABLE_EVENT,
            UNREADABLE_EVENT,
            "JobPosted",
            "JobPosted",
            "JobPosted"
        ]
    );

    assert!(OVERSIZED_SPEC * 2 > MAX_EVENT_BYTES.max(1 << 20));
    let GantryEvent::Market(gantry_protocol::bindings::JobMarket::JobMarketEvents::JobPosted(
        largest,
    )) = events[0]
        .event
        .typed()
        .expect("the largest event reads back")
    else {
        panic!("not a JobPosted: {:?}", events[0].event.name)
    };
    assert_eq!(largest.spec.len(), LARGEST_SPEC);

    let GantryEvent::Unreadable(too_large) = events[1].event.typed().expect("a marker") else {
        panic!("not a marker")
    };
    assert_eq!(too_large.reason, UnreadableReason::TooLarge);
    assert_eq!(too_large.address, batcher);
    assert_eq!(events[1].block_number, oversized_block);
    // The marker names the log: its data's size and hash, as eth_getLogs returns them.
    let logs = h
        .devnet
        .admin
        .get_logs(
            &alloy::rpc::types::Filter::new()
                .address(batcher)
                .from_block(oversized_block)
                .to_block(oversized_block),
        )
        .await
        .unwrap();
    assert_eq!(too_large.data_bytes, logs[0].data().data.len() as u64);
    assert_eq!(too_large.data_hash, keccak256(&logs[0].data().data));
    assert!(
        serde_json::to_vec(&events[1].event).unwrap().len() < 1_024,
        "the marker is small"
    );

    let GantryEvent::Unreadable(foreign) = events[2].event.typed().expect("a marker") else {
        panic!("not a marker")
    };
    assert_eq!(foreign.reason, UnreadableReason::Undecodable);
    assert_eq!(foreign.data_bytes, 32);
}
