//! The indexer against the production NATS config (`deploy/nats/`, a user per service):
//! with its user and password in `--nats-url` it connects and publishes the chain stream.
//! (The NATS client ignores a URL's credentials; the services split them off.)

use std::time::Duration;

use futures::StreamExt;
use gantry_testkit::Devnet;
use gantry_testkit::nats_cluster::{ConfiguredNats, NatsConfig};
use tokio_util::sync::CancellationToken;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indexer_connects_with_the_credentials_in_its_nats_url() {
    let devnet = Devnet::start().await.expect("devnet");
    let d = devnet.deployment;
    let config = NatsConfig::render("nats-server.conf", d.chain_id, &[]).expect("config");
    let server = ConfiguredNats::start(&config).expect("nats-server");
    let url = server.url();
    let with_user = |user: &str| {
        url.replacen(
            "nats://",
            &format!("nats://{user}:{}@", config.password(user)),
            1,
        )
    };

    // An operator watches the chain subjects.
    let admin = async_nats::ConnectOptions::with_user_and_password(
        "admin".into(),
        config.password("admin"),
    )
    .connect(&url)
    .await
    .expect("the admin connects");
    let mut chain = admin
        .subscribe(gantry_protocol::names::stream_subjects(d.chain_id))
        .await
        .unwrap();
    admin.flush().await.unwrap();

    let shutdown = CancellationToken::new();
    let indexer = tokio::spawn(gantry_indexer::run(
        devnet.indexer_config(with_user("indexer")),
        shutdown.clone(),
    ));
    gantry_testkit::scenario::lifecycle(&devnet)
        .await
        .expect("the lifecycle");
    let first = tokio::time::timeout(Duration::from_secs(60), chain.next())
        .await
        .expect("the indexer publishes as its NATS user")
        .expect("a message");
    assert!(
        first
            .subject
            .as_str()
            .starts_with(&format!("gantry.{}.", d.chain_id)),
        "{}",
        first.subject
    );
    shutdown.cancel();
    indexer.await.unwrap().expect("the indexer stops cleanly");
}
