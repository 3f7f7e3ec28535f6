//! Reorganisations that undo what a service did. An assignment undone: the job is open
//! again on chain, and the replica that placed it places it again, because it holds its
//! claim until the placement is final. A finalize undone: the keeper sends it again. (Before, the claim was released as soon as the view showed the job assigned:
//! after the reorg no replica held it, and the job stayed open until it expired. The chaos
//! suite found four such jobs of sixteen.)

use alloy::primitives::B256;
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{KEEPER, MATCHER, NODES};

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
    net.devnet.reorg_from(at).await.expect("anvil_reorg");
    assert_eq!(
        net.job(job).await.state.status,
        JobStatus::Open,
        "un-assigned"
    );

    // then the matcher assigns the job again.
    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, node);
}

/// A finalize a reorganisation undoes: the result is Submitted again on chain with its
/// window closed, and the keeper finalizes it again. (Before, the keeper held the action
/// as attempted for as long as it stayed due: the result was never paid. The chaos suite
/// found one such job.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finalize_undone_by_a_reorg_is_sent_again() {
    let net = Net::start(|params| params).await;
    let [node] = register_nodes(&net, [("NVIDIA-L4", 1, 24, 1, 1)]).await;
    net.fund_submitter().await;
    let _matcher = net.spawn_matcher(MATCHER, &[]);
    let _keeper = net.spawn_liveness(KEEPER, "keeper");
    let job = net
        .post(needs("NVIDIA-L4", 16, 3_600), net.now().await + 86_400)
        .await;
    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, node);
    net.submit_result(NODES[0], job, B256::repeat_byte(7), "ipfs://result")
        .await;
    // Past the 30 s window, the keeper finalizes it.
    net.advance(60).await;
    net.wait_for_status(job, JobStatus::Completed).await;

    // when the blocks from the finalize on are replaced by empty ones,
    let completed = net.market_logs::<JobMarket::JobCompleted>().await;
    let first = completed.last().unwrap();
    let (at, paid_in) = (first.block_number.unwrap(), first.block_hash.unwrap());
    net.devnet.reorg_from(at).await.expect("anvil_reorg");

    // then the keeper finalizes it again (a block on the new branch shows it still due):
    // the job is paid once, in a block of the new branch. (Whether the test reads the job
    // Submitted between the two is a race with the keeper, which may already have sent it
    // again: the block the payment is in is what shows the first one was undone.)
    net.advance(1).await;
    net.wait_for_status(job, JobStatus::Completed).await;
    let completed = net.market_logs::<JobMarket::JobCompleted>().await;
    assert_eq!(completed.len(), 1, "paid once");
    assert_ne!(
        completed[0].block_hash.unwrap(),
        paid_in,
        "paid again, on the new branch"
    );
}
