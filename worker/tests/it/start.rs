//! Start-up order: a worker started before the indexer waits for the chain stream (and
//! says so on `/metrics`), then takes work once the indexer has created it; one started
//! while nats-server is down waits for it the same way.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;

use gantry_testkit::PATIENCE;

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

/// A worker started while nats-server is down (restarted by its supervisor during an
/// outage) waits for NATS rather than exit, and takes work once it is back. (It exited,
/// and stayed down unless something restarted it again: the chaos suite.)
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_started_while_nats_is_down_waits_then_takes_work() {
    let mut net = Net::start(|p| p).await;
    net.fund_submitter().await;
    net.nats_mut().kill();
    let mut worker = net.spawn_process(NODES[0], "").await;
    // With NATS down nothing flows there to wake a wait: the worker's metrics are read
    // every 100 ms until it says it waits for the chain stream (it connected, in the
    // background, and goes on).
    let every = tokio::time::interval(std::time::Duration::from_millis(100));
    let ticks = Box::pin(futures::stream::unfold(every, |mut every| async {
        every.tick().await;
        Some(((), every))
    }));
    gantry_testkit::wait_until("the worker waits for NATS", PATIENCE, ticks, || async {
        worker
            .metric("gantry_worker_waiting_for_chain_stream")
            .await
            == Some(1.0)
    })
    .await;
    net.nats_mut().restart().expect("nats-server starts again");
    worker.node_id = net
        .node_of(net.address(NODES[0]))
        .await
        .expect("registered");
    net.taking_work(&worker).await;
    let job = net
        .post(
            cpu_job(64),
            &shell("echo after the outage > /outputs/x", 30),
        )
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.state.node_id, worker.node_id);
}
