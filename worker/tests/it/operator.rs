//! A provider registers the node with its operator key, naming the worker's key as the
//! agent (as `gantry node register --agent` does), and runs the worker with the agent
//! key: the worker serves that node, leaves the registered capabilities alone (only the
//! operator may change them) and takes work.

use alloy::primitives::{B256, aliases::U96};
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::status::JobStatus;
use gantry_testkit::GUSD;
use gantry_testkit::accounts::{AGENT, OPERATOR};

use crate::harness::{Net, cpu_job, shell};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_serves_the_node_its_operator_registered_for_it() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    // Less than this machine has: the worker would raise them, but may not.
    let registered = NodeRegistry::NodeCapabilities {
        gpuModel: B256::ZERO,
        gpuCount: 0,
        vramMiB: 0,
        cpuCores: 1,
        ramMiB: 1024,
        pricePerGpuHour: U96::from(GUSD),
        maxConcurrentJobs: 1,
    };
    net.register_node(OPERATOR, net.address(AGENT), registered.clone(), 500 * GUSD)
        .await;

    let worker = net.spawn_worker(AGENT, "").await;
    let node = net.node(worker.node_id).await;
    assert_eq!(node.operator, net.address(OPERATOR));
    assert_eq!(node.agent, net.address(AGENT));
    assert_eq!(
        node.capabilities, registered,
        "the operator's registration stands"
    );

    let job = net
        .post(cpu_job(64), &shell("echo served > /outputs/x", 30))
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.nodeId, worker.node_id);
    assert!(worker.stop().success());
}
