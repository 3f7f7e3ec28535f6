//! A provider registers the node with its operator key, naming the worker's key as the
//! agent (as `gantry node register --agent` does), and runs the worker with the agent
//! key: the worker serves that node, leaves the registered capabilities alone (only the
//! operator may change them) and takes work.

use gantry_protocol::status::JobStatus;
use gantry_testkit::GUSD;
use gantry_testkit::accounts::{ADMIN, AGENT, OPERATOR};

use crate::harness::{Net, cpu_job, shell, small_node};
use crate::scripts::of_node;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_serves_the_node_its_operator_registered_for_it() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    // Less than this machine has: the worker would raise them, but may not.
    net.register_node(OPERATOR, net.address(AGENT), small_node(), 500 * GUSD)
        .await;

    let worker = net.spawn_worker(AGENT, "").await;
    let node = net.node(worker.node_id).await;
    assert_eq!(node.operator, net.address(OPERATOR));
    assert_eq!(node.agent, net.address(AGENT));
    let updates = of_node(
        net.registry(ADMIN).NodeCapabilitiesUpdated_filter(),
        worker.node_id,
    )
    .await;
    assert!(updates.is_empty(), "the operator's registration stands");

    let job = net
        .post(cpu_job(64), &shell("echo served > /outputs/x", 30))
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.state.node_id, worker.node_id);
    assert!(worker.stop().success());
}
