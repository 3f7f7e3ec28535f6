//! A crash in the middle of a block's transaction loses and repeats nothing: the
//! `gantry-api` binary dies with a block half written, and once restarted its projection
//! equals the chain again. A block's transaction writes its events and the rows they
//! change, then the block, then the checkpoint. PostgreSQL: the process is SIGKILLed
//! while that transaction waits on a lock the test holds on the blocks table. SQLite: a
//! trigger aborts the block's insert, and the process exits on the error.

use std::path::Path;
use std::time::Duration;

use alloy::providers::Provider;
use gantry_api::store::Store;
use gantry_testkit::{Postgres, TestNet};
use sqlx::Connection;

use crate::harness::{JOB_DISPUTE_LOST, chain_with_market, post_job};
use crate::projection::assert_matches_chain;

/// Jobs the scripted market posts.
const JOBS: usize = JOB_DISPUTE_LOST as usize;

const WAIT: Duration = Duration::from_secs(60);

/// The `gantry-api` binary, logging to a file.
struct ApiProcess {
    child: tokio::process::Child,
    base: String,
    log: std::path::PathBuf,
}

impl ApiProcess {
    fn spawn(chain: &TestNet, database_url: &str, log: &Path) -> Self {
        let port = gantry_testkit::free_port().unwrap();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_gantry-api"))
            .args([
                "--chain-id",
                &chain.devnet.deployment.chain_id.to_string(),
                "--nats-url",
                &chain.nats().url(),
                "--database-url",
                database_url,
                "--listen",
                &format!("127.0.0.1:{port}"),
            ])
            .env("RUST_LOG", "info")
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log: log.to_owned(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until `/readyz` says the projection has applied `block`.
    async fn projected(&mut self, block: u64) {
        let http = reqwest::Client::new();
        let readyz = format!("{}/readyz", self.base);
        let applied = async || {
            let Ok(response) = http.get(&readyz).send().await else {
                return false;
            };
            let body = response.json::<serde_json::Value>().await;
            body.is_ok_and(|body| body["block"].as_u64().is_some_and(|b| b >= block))
        };
        self.wait_for(&format!("block {block} not projected"), 50, applied)
            .await;
    }

    /// Asks `done` every `every_ms` until it says yes; fails with the log (saying `what`)
    /// when the process exits or [`WAIT`] passes first.
    async fn wait_for(&mut self, what: &str, every_ms: u64, mut done: impl AsyncFnMut() -> bool) {
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("gantry-api exited ({status}):\n{}", self.log());
            }
            if done().await {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(every_ms)).await;
        }
    }
}

async fn head(chain: &TestNet) -> u64 {
    chain.devnet.admin.get_block_number().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_process_killed_mid_transaction_resumes_exactly() {
    let chain = chain_with_market().await;
    let postgres = Postgres::start().expect("postgres starts");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("api.log");
    let mut api = ApiProcess::spawn(&chain, &postgres.url(), &log);
    api.projected(head(&chain).await).await;

    // Hold the blocks table: the next block's transaction writes its events and rows,
    // then waits.
    let mut holder = sqlx::PgConnection::connect(&postgres.url()).await.unwrap();
    sqlx::raw_sql("BEGIN; LOCK TABLE blocks IN ACCESS EXCLUSIVE MODE")
        .execute(&mut holder)
        .await
        .unwrap();
    post_job(&chain, 1_000_000).await;
    let mut watcher = sqlx::PgConnection::connect(&postgres.url()).await.unwrap();
    let at_the_insert = async || {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%INSERT INTO blocks%'",
        )
        .fetch_one(&mut watcher)
        .await
        .unwrap();
        waiting > 0
    };
    api.wait_for(
        "the projection never reached the block's insert",
        20,
        at_the_insert,
    )
    .await;
    // The block's job row is written, uncommitted: kill the process there.
    api.child.start_kill().unwrap();
    api.child.wait().await.unwrap();
    sqlx::raw_sql("COMMIT").execute(&mut holder).await.unwrap();

    let store = Store::open(&postgres.url()).await.unwrap();
    assert_eq!(
        store.all_jobs().await.unwrap().len(),
        JOBS,
        "nothing of the killed transaction is stored"
    );
    post_job(&chain, 1_000_000).await;
    let mut api = ApiProcess::spawn(&chain, &postgres.url(), &log);
    api.projected(head(&chain).await).await;
    assert_matches_chain(&chain, &store).await;
    assert_eq!(store.all_jobs().await.unwrap().len(), JOBS + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_transaction_failing_mid_block_resumes_exactly() {
    let chain = chain_with_market().await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("api.db").display());
    let log = dir.path().join("api.log");
    let mut api = ApiProcess::spawn(&chain, &url, &log);
    api.projected(head(&chain).await).await;

    // From now on a block's insert (after its events and rows) aborts.
    let mut db = sqlx::SqliteConnection::connect(&url).await.unwrap();
    sqlx::raw_sql(
        "CREATE TRIGGER crash BEFORE INSERT ON blocks \
         BEGIN SELECT RAISE(ABORT, 'injected crash'); END",
    )
    .execute(&mut db)
    .await
    .unwrap();
    post_job(&chain, 1_000_000).await;
    let status = tokio::time::timeout(WAIT, api.child.wait())
        .await
        .expect("the process stops on the failed transaction")
        .unwrap();
    assert!(!status.success());
    assert!(api.log().contains("injected crash"), "{}", api.log());
    let jobs: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM jobs")
        .fetch_one(&mut db)
        .await
        .unwrap();
    assert_eq!(jobs, JOBS as i64, "nothing of the failed block is stored");

    sqlx::raw_sql("DROP TRIGGER crash")
        .execute(&mut db)
        .await
        .unwrap();
    post_job(&chain, 1_000_000).await;
    let mut api = ApiProcess::spawn(&chain, &url, &log);
    api.projected(head(&chain).await).await;
    let store = Store::open(&url).await.unwrap();
    assert_matches_chain(&chain, &store).await;
    assert_eq!(store.all_jobs().await.unwrap().len(), JOBS + 2);
}
