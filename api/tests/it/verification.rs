//! A replicated job's verification state, through the API and in the dashboard: who was
//! seated, committed, revealed and agreed; the liar slashed; the digest the quorum agreed on.

use std::process::Stdio;
use std::time::Duration;

use alloy::primitives::{B256, keccak256};
use gantry_testkit::TestNet;
use tokio_util::sync::CancellationToken;

use crate::harness::{Api, sqlite};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_the_api_and_the_dashboard_show_who_committed_revealed_and_agreed() {
    let chain = TestNet::builder()
        .indexer()
        .start()
        .await
        .expect("the test net starts");
    let nodes = chain.wasm_pool().await;
    let id = chain.post_replicated().await;
    let (truth, liar) = (keccak256("the module's output"), nodes[1]);
    let lie = keccak256("another output");
    chain
        .decide_replicated(id, &nodes, |node| if node == liar { lie } else { truth })
        .await;

    let stop = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(&chain, &sqlite(dir.path()), &stop, None).await;
    api.caught_up(&chain, 0).await;

    let job: serde_json::Value = reqwest::get(format!("{}/v1/jobs/{id}", api.base))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let hex = |d: B256| format!("{d:#x}");
    assert_eq!(job["status"], "completed");
    assert_eq!(job["completion"], "verified");
    let v = &job["verification"];
    assert_eq!(v["tier"], "replicated");
    assert_eq!(v["verifiedDigest"], hex(truth));
    assert_eq!(v["agreed"], 2);
    let mut seats: Vec<(u64, String, String)> = v["seatRows"]
        .as_array()
        .expect("seat rows")
        .iter()
        .map(|s| {
            assert!(s["committedAt"].is_u64() && s["revealedAt"].is_u64(), "{s}");
            (
                s["nodeId"].as_u64().unwrap(),
                s["outcome"].as_str().unwrap().to_owned(),
                s["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    seats.sort();
    let mut expected: Vec<(u64, String, String)> = nodes
        .iter()
        .map(|&n| {
            if n == liar {
                (n, "slashed".to_owned(), hex(lie))
            } else {
                (n, "paid".to_owned(), hex(truth))
            }
        })
        .collect();
    expected.sort();
    assert_eq!(seats, expected);

    // The dashboard's job page shows the same.
    let shots = concat!(env!("CARGO_TARGET_TMPDIR"), "/dashboard");
    std::fs::create_dir_all(shots).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/dashboard/verification.mjs"
    );
    let output = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::process::Command::new("node")
            .args([script, &api.base, shots, &id.to_string(), &liar.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("the browser script finishes")
    .expect("running node (deploy/setup.sh installs it)");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && said.trim_end().ends_with("OK"),
        "{said}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stop.cancel();
    api.stopped().await;
}
