//! Two workers; the one running the demo job is SIGKILLed after its first checkpoint.
//! The keeper marks its node inactive after the heartbeat timeout and reclaims the job
//! (slashing the node), the matcher assigns it to the other worker, which resumes from
//! the checkpoint and completes it; the job is paid to the surviving node.

use std::io::Read;

use alloy::primitives::{Address, B256, U256};
use gantry_devnet::demo;
use gantry_devnet::network::Network;
use gantry_protocol::bindings::NodeRegistry;
use gantry_testkit::accounts::{NODES, SUBMITTER};
use sha2::{Digest, Sha256};

use crate::support::{Feed, get, job as job_row, network};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_job_is_slashed_and_the_job_resumes_on_the_other_from_its_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let mut network = network(dir.path(), 2).await;
    let mut feed = Feed::open(&network).await;
    while get(&network, "/v1/nodes?status=active").await["items"]
        .as_array()
        .unwrap()
        .len()
        < 2
    {
        feed.until("a node event", |name, _| (name == "node").then_some(()))
            .await;
    }

    // A longer run than the demo's, so that the kill lands mid-job.
    let mut spec = demo::spec(network.dataset.url(), network.dataset.sha256());
    spec.env.insert("EPOCHS".into(), "40".into());
    spec.env.insert("EPOCH_PAUSE".into(), "0.5".into());
    let job = demo::post(&network.devnet, SUBMITTER, &spec).await.unwrap();
    let path = format!("/v1/jobs/{job}");
    let first = loop {
        let row = job_row(&network, job).await;
        if row["status"] == "assigned" {
            break row["nodeId"].as_u64().unwrap();
        }
        feed.until("the assignment", |name, data| {
            (name == "job" && data["jobId"] == job).then_some(())
        })
        .await;
    };
    let victim = worker_of(&network, first).await;

    // Once its worker has stored a checkpoint past epoch 5, the worker dies.
    let js = async_nats::jetstream::new(async_nats::connect(network.nats.url()).await.unwrap());
    let chain_id = network.devnet.deployment.chain_id;
    let checkpoints = gantry_protocol::names::checkpoints_bucket(chain_id);
    loop {
        let epoch = feed
            .until("progress", |name, data| {
                (name == "progress" && data["jobId"] == job).then(|| data["epoch"].as_u64())
            })
            .await;
        // Its checkpoint, under its node's id.
        let stored = gantry_runtime::objects::get(&js, &checkpoints, first, &job.to_string())
            .await
            .unwrap()
            .is_some();
        if epoch >= Some(5) && stored {
            break;
        }
    }
    let d = network.devnet.deployment;
    let registry = NodeRegistry::new(d.registry, network.devnet.admin.clone());
    let stake_before = registry.getNode(first).call().await.unwrap().stake;
    network.kill_worker(victim).await.unwrap();

    // The job settles on the other node.
    let done = loop {
        let row = job_row(&network, job).await;
        match row["status"].as_str().unwrap_or_default() {
            "completed" => break row,
            "failed" | "cancelled" | "expired" => panic!("the job ended {row}"),
            _ => {}
        }
        feed.until("the job's next step", |name, data| {
            (name == "job" && data["jobId"] == job).then_some(())
        })
        .await;
    };
    let second = done["nodeId"].as_u64().unwrap();
    assert_ne!(second, first, "the job moved");
    assert_eq!(done["attempts"], 2);

    // The dead node was reclaimed from for inactivity and slashed.
    let detail = get(&network, &path).await;
    let reclaimed = detail["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "JobReclaimed")
        .expect("a JobReclaimed event");
    assert_eq!(reclaimed["data"]["nodeId"], first);
    assert_eq!(reclaimed["data"]["kind"], 0, "NodeInactive");
    let info = registry.getNode(first).call().await.unwrap();
    assert!(info.stake < stake_before, "the dead node was slashed");
    assert_eq!(info.status, 2, "inactive");

    // The second attempt resumed from the checkpoint.
    let logs = get(&network, &format!("/v1/jobs/{job}/logs?tail=1000")).await;
    let resumed = logs.as_array().unwrap().iter().any(|line| {
        line["attempt"] == 2
            && line["line"]
                .as_str()
                .is_some_and(|l| l.starts_with("resuming after epoch"))
    });
    assert!(resumed, "attempt 2 resumed from a checkpoint: {logs}");

    // The result is what the chain says, and a model that fits the data.
    let (on_chain, _) = network.devnet.result(job).await.unwrap().expect("a result");
    let holder = network.devnet.job(job).await.unwrap().state.node_id;
    let object = gantry_runtime::objects::get(
        &js,
        &gantry_protocol::names::results_bucket(chain_id),
        holder,
        &format!("{job}-2"),
    )
    .await
    .unwrap()
    .expect("the second attempt's result");
    let chunks: Vec<_> = futures::StreamExt::collect(object.bytes(u64::MAX)).await;
    let tar_bytes: Vec<u8> = chunks
        .into_iter()
        .flat_map(|chunk| chunk.unwrap().to_vec())
        .collect();
    assert_eq!(B256::from_slice(&Sha256::digest(&tar_bytes)), on_chain);
    let model = model_in(&tar_bytes);
    let weights = model["weights"].as_array().unwrap();
    assert!((weights[0].as_f64().unwrap() - 3.0).abs() < 0.05, "{model}");
    assert!((weights[1].as_f64().unwrap() + 2.0).abs() < 0.05, "{model}");

    // The surviving node earned the pay.
    let payout: U256 = done["payout"].as_str().unwrap().parse().unwrap();
    assert!(U256::from(registry.getNode(second).call().await.unwrap().earnings) >= payout);
    network.stop().await;
}

/// The index of the worker whose node is `node_id` (by its agent's address).
async fn worker_of(network: &Network, node_id: u64) -> usize {
    let node = get(network, &format!("/v1/nodes/{node_id}")).await;
    let agent: Address = node["agent"].as_str().unwrap().parse().unwrap();
    NODES
        .iter()
        .position(|account| network.devnet.address(*account) == agent)
        .expect("a worker's node")
}

/// `model.json` from the result tar.
fn model_in(tar_bytes: &[u8]) -> serde_json::Value {
    let mut archive = tar::Archive::new(tar_bytes);
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().ends_with("model.json") {
            let mut text = String::new();
            entry.read_to_string(&mut text).unwrap();
            return serde_json::from_str(&text).unwrap();
        }
    }
    panic!("no model.json in the result");
}
