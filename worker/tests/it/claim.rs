//! Claim mode: with no matcher at all, a worker with `auto_accept` claims the open jobs
//! it fits and pays enough, and leaves the others.

use alloy::primitives::U256;

use crate::harness::{Net, cpu_job, shell, status};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_in_claim_mode_claims_what_it_fits() {
    let net = Net::start_with(|p| p, false).await;
    net.fund_submitter().await;
    let worker = net
        .spawn_worker(
            1,
            "auto_accept = true\nauto_accept_min_payment = \"10000000\"\naccept_inference = false",
        )
        .await;

    // Too much memory for this machine, an inference job, a bounty under the minimum:
    // never claimed.
    let too_big = net.post(cpu_job(4 << 20), &shell("true", 30)).await;
    let mut inference = shell("true", 30);
    inference.kind = gantry_protocol::spec::JobKind::Inference;
    let not_taken = net.post(cpu_job(64), &inference).await;
    let fits = net
        .post(cpu_job(64), &shell("echo claimed > /outputs/x", 30))
        .await;
    net.wait_for_status(fits, status::SUBMITTED).await;

    let claims = net
        .market(0)
        .JobAssigned_filter()
        .topic1(U256::from(fits))
        .from_block(0)
        .query()
        .await
        .unwrap();
    let (assigned, _) = claims.last().expect("JobAssigned");
    assert!(
        assigned.claimed,
        "claimed by the agent, not assigned by a matcher"
    );
    assert_eq!(assigned.nodeId, worker.node_id);
    assert_eq!(net.job(too_big).await.status, 1, "still open");
    assert_eq!(net.job(not_taken).await.status, 1, "still open");
    assert!(worker.stop().success());
}
