//! Start-up order: a worker started before the indexer waits for the chain stream (and
//! says so on `/metrics`), then takes work once the indexer has created it.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;

use crate::harness::{Net, Services, cpu_job, shell};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_started_before_the_indexer_waits_then_takes_work() {
    let net = Net::start_with(
        |p| p,
        Services {
            indexer: false,
            matcher: true,
            keeper: true,
        },
    )
    .await;
    net.fund_submitter().await;
    let worker = net.spawn_registered(NODES[0], "").await;
    let stream = gantry_protocol::names::stream_name(net.chain_id());
    let js = net.jetstream().await;
    // (wait_until re-checks on every NATS message: the worker asks for the stream each
    // second while it waits.)
    net.wait_until("the worker waits for the chain stream", || async {
        worker
            .metric("gantry_worker_waiting_for_chain_stream")
            .await
            == Some(1.0)
    })
    .await;
    assert!(
        js.get_stream(&stream).await.is_err(),
        "no chain stream without the indexer"
    );

    net.start_indexer();
    net.taking_work(&worker).await;
    assert_eq!(
        worker
            .metric("gantry_worker_waiting_for_chain_stream")
            .await,
        Some(0.0)
    );
    let job = net
        .post(cpu_job(64), &shell("echo started late > /outputs/x", 30))
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.state.node_id, worker.node_id);
    assert!(worker.stop().success());
}
