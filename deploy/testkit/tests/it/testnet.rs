//! A `TestNet` starts what a test asks for: with the services in this process it runs
//! the market (a posted job is assigned by the matcher it started, as the account it
//! granted the role); with PostgreSQL alone, it has no NATS.

use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{KEEPER, NODES, SECOND_MATCHER, SUBMITTER};
use gantry_testkit::{JobPost, TestNet, scenario};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posted_job_is_assigned_by_the_matcher_the_net_started() {
    let net = TestNet::builder()
        .indexer()
        .matcher(SECOND_MATCHER)
        .keeper(KEEPER)
        .start()
        .await
        .expect("the test net starts");
    let node = net.register_own_node(NODES[0], scenario::h100_node()).await;
    net.fund_submitter().await;
    let job = net.post_job(SUBMITTER, JobPost::default()).await;

    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, node);
    assert_eq!(net.node(node).await.operator, net.address(NODES[0]));
}

#[tokio::test]
async fn a_test_net_starts_what_it_is_asked_for_and_nothing_else() {
    let net = TestNet::builder()
        .postgres()
        .start()
        .await
        .expect("the test net starts");
    assert_eq!(net.postgres().psql("select 1").expect("psql"), "1");
    assert!(net.now().await > 0, "the chain runs");
    let nats = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| net.nats().url()));
    assert!(nats.is_err(), "no NATS unless asked for");
}
