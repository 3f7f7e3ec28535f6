//! The projection equals the chain's state after a scripted lifecycle, after a restart,
//! and after a rebuild from an empty database.

use std::time::Duration;

use gantry_api::model::NodeStatus;
use gantry_api::project::{self, Progress};
use gantry_api::store::Store;
use gantry_protocol::api::JobDetail;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_testkit::{Postgres, TestNet, scenario};
use tokio_util::sync::CancellationToken;

/// A chain and NATS with the indexer running, after the scripted lifecycle.
pub(crate) async fn chain_with_lifecycle() -> TestNet {
    let chain = TestNet::builder()
        .indexer()
        .start()
        .await
        .expect("the test net starts");
    scenario::lifecycle(&chain.devnet)
        .await
        .expect("the scripted lifecycle");
    chain
}

/// Projects into `url` until the projection has applied the chain's head block.
pub(crate) async fn project_to_head(chain: &TestNet, url: &str) -> Store {
    let store = Store::open(url).await.expect("store opens");
    let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
        .await
        .unwrap();
    let js = chain.jetstream().await;
    let (tx, mut rx) = tokio::sync::watch::channel(Progress::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(project::run(
        js,
        chain.devnet.deployment.chain_id,
        store.clone(),
        tx,
        gantry_api::live::Live::default(),
        stop.clone(),
    ));
    let reached = tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
        .await
        .map(|r| r.map(|_| ()));
    match reached {
        Ok(Ok(())) => {}
        Ok(Err(_)) => panic!("the projection stopped: {:?}", task.await),
        Err(_) => panic!(
            "the projection did not reach block {head}: {:?}",
            *rx.borrow()
        ),
    }
    stop.cancel();
    task.await.unwrap().expect("the projection stops cleanly");
    store
}

/// Every job and node row against `getJob`/`getNode`.
pub(crate) async fn assert_matches_chain(chain: &TestNet, store: &Store) {
    let d = chain.devnet.deployment;
    let market = JobMarket::new(d.market, chain.devnet.admin.clone());
    let registry = NodeRegistry::new(d.registry, chain.devnet.admin.clone());
    let count = market.jobCount().call().await.unwrap();
    let jobs = store.all_jobs().await.unwrap();
    assert_eq!(jobs.len() as u64, count, "one row per job");
    for job in &jobs {
        let info = market.getJob(job.job_id as u64).call().await.unwrap();
        assert_status(&job.status, info.status as u8, "job", job.job_id);
        assert_eq!(job.attempts, i64::from(info.attempts), "job {}", job.job_id);
        assert_eq!(job.bounty, info.bounty.to_string());
        assert_eq!(job.submitter, info.submitter.to_string());
        if let Some(hash) = &job.result_hash {
            assert_eq!(hash, &format!("{:#x}", info.resultHash));
        }
    }
    let nodes = store.all_nodes().await.unwrap();
    assert_eq!(
        nodes.len() as u64,
        registry.nodeCount().call().await.unwrap()
    );
    for node in &nodes {
        let info = registry.getNode(node.node_id as u64).call().await.unwrap();
        assert_status(&node.status, info.status as u8, "node", node.node_id);
        assert_eq!(node.stake, info.stake.to_string());
        assert_eq!(node.completed_jobs, i64::from(info.completedJobs));
        assert_eq!(node.failed_jobs, i64::from(info.failedJobs));
        assert_eq!(node.active_jobs, i64::from(info.activeJobs));
        assert_eq!(node.last_heartbeat, i64::from(info.lastHeartbeat));
    }
}

/// A projected status against the chain's `on_chain` one, for `what` `id`.
fn assert_status<S>(projected: &S, on_chain: u8, what: &str, id: i64)
where
    S: TryFrom<u8> + PartialEq + std::fmt::Debug,
    S::Error: std::fmt::Debug,
{
    assert_eq!(projected, &S::try_from(on_chain).unwrap(), "{what} {id}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_projection_equals_the_chain_and_rebuilds_the_same() {
    let chain = chain_with_lifecycle().await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("api.db").display());
    let store = project_to_head(&chain, &url).await;
    assert_matches_chain(&chain, &store).await;
    let timeline: Vec<String> = store
        .timeline(1)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(
        timeline,
        [
            "JobPosted",
            "JobAssigned",
            "ResultSubmitted",
            "JobCompleted"
        ],
        "job 1's timeline"
    );
    let jobs = store.all_jobs().await.unwrap();
    let nodes = store.all_nodes().await.unwrap();

    // A restart resumes from the checkpoint and changes nothing.
    let checkpoint = store.checkpoint().await.unwrap();
    drop(store);
    let again = project_to_head(&chain, &url).await;
    assert!(again.checkpoint().await.unwrap() >= checkpoint);
    assert_eq!(again.all_jobs().await.unwrap(), jobs);

    // A rebuild from an empty database gives the same rows.
    let rebuilt_url = format!("sqlite://{}", dir.path().join("rebuilt.db").display());
    let rebuilt = project_to_head(&chain, &rebuilt_url).await;
    assert_eq!(rebuilt.all_jobs().await.unwrap(), jobs);
    assert_eq!(rebuilt.all_nodes().await.unwrap(), nodes);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_projection_equals_the_chain_and_the_sqlite_one() {
    let chain = chain_with_lifecycle().await;
    let postgres = Postgres::start().expect("postgres starts");
    let store = project_to_head(&chain, &postgres.url()).await;
    assert_matches_chain(&chain, &store).await;

    let dir = tempfile::tempdir().unwrap();
    let sqlite = project_to_head(
        &chain,
        &format!("sqlite://{}", dir.path().join("api.db").display()),
    )
    .await;
    assert_eq!(
        store.all_jobs().await.unwrap(),
        sqlite.all_jobs().await.unwrap()
    );
    assert_eq!(
        store.all_nodes().await.unwrap(),
        sqlite.all_nodes().await.unwrap()
    );
    assert_eq!(
        store.timeline(1).await.unwrap(),
        sqlite.timeline(1).await.unwrap()
    );
    // A job's detail (one statement, with SQL that differs by backend) is the same on
    // both and equals its parts read one by one.
    let reports = crate::http::worker_reports(chain.devnet.deployment.chain_id);
    let batch: Vec<(u64, gantry_api::reports::Report)> = reports
        .iter()
        .enumerate()
        .map(|(i, (subject, payload))| {
            let report = gantry_api::reports::Report::decode(subject, payload).expect("decodes");
            (i as u64 + 1, report)
        })
        .collect();
    for store in [&store, &sqlite] {
        store
            .apply_reports(&batch, batch.len() as u64)
            .await
            .unwrap();
    }
    // The document the database builds for GET /v1/jobs/{id}: the same JSON on both
    // backends, and what the separate reads return.
    for job in 1..=3 {
        let document = store.job_document(job).await.unwrap().expect("the job");
        let on_sqlite = sqlite.job_document(job).await.unwrap().expect("the job");
        let value: serde_json::Value = serde_json::from_str(&document.json).unwrap();
        assert_eq!(
            value,
            serde_json::from_str::<serde_json::Value>(&on_sqlite.json).unwrap()
        );
        assert_eq!(document.status, on_sqlite.status);
        assert_eq!(value["pending"], serde_json::Value::Null);
        let detail: JobDetail = serde_json::from_value(value).unwrap();
        assert_eq!(detail.job, store.job(job).await.unwrap().unwrap());
        assert_eq!(detail.job.status, document.status);
        assert_eq!(detail.timeline, store.timeline(job).await.unwrap());
        assert_eq!(detail.progress, store.progress(job).await.unwrap());
        assert_eq!(detail.completions, store.completions(job).await.unwrap());
    }
    let document = store.job_document(1).await.unwrap().unwrap();
    let detail: JobDetail = serde_json::from_str(&document.json).unwrap();
    assert_eq!(detail.completions.len(), 1);
    assert_eq!(detail.progress.unwrap().epoch, Some(3));
    assert_eq!(store.job_document(99).await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_is_rolled_back_to_the_chain_s_state() {
    use alloy::providers::Provider;
    use futures::StreamExt;

    let chain = chain_with_lifecycle().await;
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("sqlite://{}", dir.path().join("api.db").display()))
        .await
        .unwrap();
    let chain_id = chain.devnet.deployment.chain_id;
    let js = chain.jetstream().await;
    let (tx, mut rx) = tokio::sync::watch::channel(Progress::default());
    let stop = CancellationToken::new();
    let task = tokio::spawn(project::run(
        js.clone(),
        chain_id,
        store.clone(),
        tx,
        gantry_api::live::Live::default(),
        stop.clone(),
    ));
    let admin = &chain.devnet.admin;
    let head = admin.get_block_number().await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
        .await
        .expect("projected to the head")
        .unwrap();
    // The last blocks hold the operator's withdrawal and exit: the node is Exiting.
    assert_eq!(
        store.node(1).await.unwrap().unwrap().status,
        NodeStatus::Exiting
    );

    // Replace the last 3 blocks with empty ones, and wait for the indexer to publish the
    // new head's commit.
    let mut commits = async_nats::connect(chain.nats().url())
        .await
        .unwrap()
        .subscribe(gantry_protocol::names::block_commit(chain_id, head))
        .await
        .unwrap();
    let _: serde_json::Value = admin
        .raw_request(
            "anvil_reorg".into(),
            (3u64, Vec::<serde_json::Value>::new()),
        )
        .await
        .expect("anvil_reorg");
    let new_head = admin
        .get_block(alloy::eips::BlockId::latest())
        .await
        .unwrap()
        .unwrap()
        .header
        .hash;
    let recommitted = async {
        loop {
            let message = commits.next().await.unwrap();
            let commit: gantry_protocol::envelope::BlockCommit =
                serde_json::from_slice(&message.payload).unwrap();
            if commit.block_hash == new_head {
                return;
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(60), recommitted)
        .await
        .expect("the indexer publishes the new branch");
    let last = js
        .get_stream(gantry_protocol::names::stream_name(chain_id))
        .await
        .unwrap()
        .info()
        .await
        .unwrap()
        .state
        .last_sequence;
    tokio::time::timeout(
        Duration::from_secs(60),
        rx.wait_for(|p| p.checkpoint >= last),
    )
    .await
    .expect("the projection follows the new branch")
    .unwrap();
    stop.cancel();
    task.await.unwrap().unwrap();

    assert_eq!(
        store.node(1).await.unwrap().unwrap().status,
        NodeStatus::Active,
        "the exit was undone"
    );
    assert_matches_chain(&chain, &store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_sharing_one_postgres_apply_each_block_once_and_all_feed_live() {
    let chain = chain_with_lifecycle().await;
    let postgres = Postgres::start().expect("postgres starts");
    let chain_id = chain.devnet.deployment.chain_id;
    let head = alloy::providers::Provider::get_block_number(&chain.devnet.admin)
        .await
        .unwrap();
    let stop = CancellationToken::new();
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let store = Store::open(&postgres.url()).await.unwrap();
        let js = chain.jetstream().await;
        let live = gantry_api::live::Live::default();
        let feed = live.subscribe();
        let (tx, rx) = tokio::sync::watch::channel(Progress::default());
        let task = tokio::spawn(project::run(
            js,
            chain_id,
            store.clone(),
            tx,
            live,
            stop.clone(),
        ));
        replicas.push((store, feed, rx, task));
    }
    for (_, _, rx, _) in &mut replicas {
        tokio::time::timeout(Duration::from_secs(60), rx.wait_for(|p| p.block >= head))
            .await
            .expect("each replica reaches the head")
            .unwrap();
    }
    stop.cancel();
    let dir = tempfile::tempdir().unwrap();
    let alone = project_to_head(
        &chain,
        &format!("sqlite://{}", dir.path().join("api.db").display()),
    )
    .await;
    let events = |store: &Store| {
        let pool = store.pool().clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM events")
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    for (store, mut feed, _, task) in replicas {
        task.await.unwrap().expect("no replica fails");
        assert_matches_chain(&chain, &store).await;
        assert_eq!(
            events(&store).await,
            events(&alone).await,
            "each event once"
        );
        assert_eq!(
            store.all_jobs().await.unwrap(),
            alone.all_jobs().await.unwrap()
        );
        // Each replica's live feed has every job, whoever wrote it.
        let mut jobs = std::collections::BTreeSet::new();
        while let Ok(event) = feed.try_recv() {
            if let gantry_api::live::LiveEvent::Job(row) = &*event {
                jobs.insert(row.job_id);
            }
        }
        assert_eq!(jobs, [1, 2, 3].into());
    }
}
