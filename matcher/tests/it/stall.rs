//! A damaged chain stream ends nothing: the `gantry-liveness` binary, reading a stream
//! written by hand (no indexer), stalls at the last good block when a block's event is
//! lost (its `/readyz` 503, `gantry_chain_stream_stalled` 1, its view at the block before)
//! and skips messages that do not decode; once the block is published again whole it
//! catches up by itself, without a restart.

use gantry_protocol::names;
use gantry_testkit::accounts::KEEPER;
use gantry_testkit::free_port;
use gantry_testkit::hand_stream::{HandStream, node_registered};

use crate::harness::Net;

/// What the keeper's listener says: `/readyz`'s status and `/metrics`.
pub(crate) struct Scrape {
    pub(crate) ready: bool,
    metrics: String,
}

impl Scrape {
    pub(crate) async fn of(base: &str) -> Option<Self> {
        let ready = reqwest::get(format!("{base}/readyz")).await.ok()?.status();
        let metrics = reqwest::get(format!("{base}/metrics")).await.ok()?;
        Some(Self {
            ready: ready.is_success(),
            metrics: metrics.text().await.ok()?,
        })
    }

    /// The sample of `metric` (with label `service="liveness"` and every one of `labels`).
    pub(crate) fn sample(&self, metric: &str, labels: &[&str]) -> Option<f64> {
        self.metrics.lines().find_map(|line| {
            let (name, value) = line.rsplit_once(' ')?;
            let matches = name.starts_with(&format!("{metric}{{"))
                && name.contains("service=\"liveness\"")
                && labels.iter().all(|label| name.contains(label));
            matches.then(|| value.parse().unwrap())
        })
    }

    pub(crate) fn view_block(&self) -> Option<f64> {
        self.sample("gantry_matcher_view_block", &[])
    }

    fn stalled(&self) -> Option<f64> {
        self.sample("gantry_chain_stream_stalled", &[])
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_keeper_stalls_on_a_damaged_block_and_reads_on_once_it_is_published_whole() {
    let net = Net::without_indexer().await;
    let stream = HandStream::create(&net).await;
    let chain = stream.chain_id();
    // Given a keeper that has applied block 1,
    stream.block(1, &[node_registered(1)]).await;
    let addr = format!("127.0.0.1:{}", free_port().unwrap());
    let base = format!("http://{addr}");
    let mut keeper = net.spawn_liveness_with(KEEPER, "keeper", &["--metrics-addr", &addr]);
    // (the keeper's lease renewals wake every wait below)
    net.wait_until("the keeper has applied block 1 and is ready", || async {
        Scrape::of(&base)
            .await
            .is_some_and(|s| s.ready && s.view_block() == Some(1.0) && s.stalled() == Some(0.0))
    })
    .await;

    // when block 2's commit arrives without its event, with messages that do not decode
    // (bad JSON on an event subject, a subject no reader knows) and block 3 after it,
    stream.commit(2, 1).await;
    stream
        .garbage(names::event(chain, "NodeHeartbeat", "1"))
        .await;
    stream.garbage(format!("gantry.{chain}.bogus")).await;
    stream.block(3, &[node_registered(3)]).await;

    // then the keeper does not exit: it is not ready, says it is stalled on block 2, has
    // skipped the two messages and block 3, and its view stays at block 1.
    net.wait_until("the keeper reports the stall", || async {
        Scrape::of(&base).await.is_some_and(|s| {
            !s.ready
                && s.stalled() == Some(1.0)
                && s.sample(
                    "gantry_chain_stream_skipped_messages_total",
                    &["reason=\"stalled\""],
                ) == Some(1.0)
        })
    })
    .await;
    let scrape = Scrape::of(&base).await.unwrap();
    assert_eq!(
        scrape.sample("gantry_chain_stream_missing_block", &[]),
        Some(2.0)
    );
    assert_eq!(
        scrape.sample(
            "gantry_chain_stream_damaged_blocks_total",
            &["kind=\"count_mismatch\""]
        ),
        Some(1.0)
    );
    for reason in ["undecodable", "foreign_subject"] {
        assert_eq!(
            scrape.sample(
                "gantry_chain_stream_skipped_messages_total",
                &[&format!("reason=\"{reason}\"")]
            ),
            Some(1.0),
            "{reason}"
        );
    }
    assert_eq!(
        scrape.view_block(),
        Some(1.0),
        "nothing past block 1 applied"
    );
    let readyz = reqwest::get(format!("{base}/readyz")).await.unwrap();
    assert!(readyz.text().await.unwrap().contains("block 2"));
    keeper.assert_running();

    // When the repair publishes blocks 2 and 3 again, whole, the keeper catches up by
    // itself and is ready again.
    stream.block(2, &[node_registered(2)]).await;
    stream.block(3, &[node_registered(3)]).await;
    net.wait_until("the keeper catches up", || async {
        Scrape::of(&base)
            .await
            .is_some_and(|s| s.ready && s.view_block() == Some(3.0) && s.stalled() == Some(0.0))
    })
    .await;
    keeper.assert_running();
}
