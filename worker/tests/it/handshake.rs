//! Design 19: NATS as run in production — the users `nats_auth` renders, none of them for
//! any node, and the auth service answering the server's callout — and a worker that joins
//! it with nothing but its agent key and the chain.

use gantry_protocol::handshake::Manifest;
use gantry_protocol::names;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;

use crate::harness::{Net, wasm_job};
use crate::wasm::{WASM_ONLY, demo_spec};

/// The worker registers its node on chain, connects with a token its agent key signed
/// (no user of its own in the server's configuration, no operator step), takes its
/// assignment, reads the module and input, reports and uploads: the job is submitted with
/// the hash of the tar it uploaded, and its manifest is where the matcher reads it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handshake_a_worker_joins_with_only_its_agent_key_and_runs_a_job() {
    let net = Net::start_handshake(|p| p, 300).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], WASM_ONLY).await;

    let spec = demo_spec(&net).await;
    let job = net.post(wasm_job(64), &spec).await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.state.node_id, worker.node_id);
    let files = net.result_files(job).await;
    let summary = String::from_utf8_lossy(&files["summary.json"]).into_owned();
    assert!(
        summary.starts_with("{\"lines\":3,\"bytes\":20,"),
        "{summary}"
    );
    assert!(net.slashes(worker.node_id).await.is_empty());

    let nodes = net
        .jetstream()
        .await
        .get_key_value(names::nodes_bucket(net.chain_id()))
        .await
        .expect("the auth service keeps the manifests");
    let entry = nodes
        .get(worker.node_id.to_string())
        .await
        .unwrap()
        .expect("the worker's manifest");
    let record: serde_json::Value = serde_json::from_slice(&entry).unwrap();
    let manifest: Manifest = serde_json::from_value(record["manifest"].clone()).unwrap();
    assert_eq!(
        manifest.engines,
        gantry_protocol::eligibility::Engines::WASM.0
    );
    assert_eq!(manifest.worker, env!("CARGO_PKG_VERSION"));
    assert!(worker.stop().success());
}
