//! A reorganisation that undoes an assignment: the job is open again on chain, and the
//! replica that placed it places it again, because it holds its claim until the placement
//! is final. (Before, the claim was released as soon as the view showed the job assigned:
//! after the reorg no replica held it, and the job stayed open until it expired. The chaos
//! suite found four such jobs of sixteen.)

use alloy::providers::Provider;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::MATCHER;

use crate::harness::{Net, needs};
use crate::placement::register_nodes;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assignment_undone_by_a_reorg_is_placed_again() {
    let net = Net::start(|params| params).await;
    let [node] = register_nodes(&net, [("NVIDIA-H100-80GB", 8, 80, 2, 2)]).await;
    net.fund_submitter().await;
    let _matcher = net.spawn_matcher(MATCHER, &[]);
    let deadline = net.now().await + 86_400;
    let job = net.post(needs("", 16, 3_600), deadline).await;
    net.wait_for_status(job, JobStatus::Assigned).await;

    // when the blocks from the assignment on are replaced by empty ones,
    let assigned = net.market_logs::<JobMarket::JobAssigned>().await;
    let at = assigned.last().unwrap().block_number.unwrap();
    let head = net.devnet.admin.get_block_number().await.unwrap();
    let _: serde_json::Value = net
        .devnet
        .admin
        .raw_request(
            "anvil_reorg".into(),
            (head - at + 1, Vec::<serde_json::Value>::new()),
        )
        .await
        .expect("anvil_reorg");
    assert_eq!(
        net.job(job).await.state.status,
        JobStatus::Open,
        "un-assigned"
    );

    // then the matcher assigns the job again.
    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, node);
}
