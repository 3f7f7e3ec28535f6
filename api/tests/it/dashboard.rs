//! The dashboard in a real headless Chromium (`tests/dashboard/dashboard.mjs`, driven by
//! playwright-core) against the API serving a projection of a real chain: the jobs show,
//! then a job posted on chain and a worker's progress report and log line arrive on the
//! open pages without a reload; both sides of the market show their money (a dispute's
//! bond, exposure and deadline, refunds and where the slashes went, a reject's charge,
//! each attempt with its node, outcome, whose fault, why and its slash to the treasury; a
//! node's earnings, fees owed, locked stake and slashes with their jobs; the submitter's
//! credits).

use gantry_protocol::names;
use std::process::Stdio;
use std::time::Duration;

use gantry_protocol::api::TokenInfo;
use gantry_protocol::jobs::ProgressUpdate;
use gantry_testkit::accounts::{MATCHER, NODES, SUBMITTER};
use gantry_testkit::{GUSD, TestNet, confirm_receipt};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio_util::sync::CancellationToken;

use crate::harness::{
    Api, JOB_REJECTED, NODE_DISPUTED, chain_with_market, indexed, now_ms, post_job, register_h100,
    sqlite, stdout_line,
};

/// Job 3, rejected in the lifecycle and requeued, runs its second attempt on node 3.
const RUNNING_JOB: u64 = JOB_REJECTED;
const ATTEMPT: u8 = 2;
const NODE: u64 = NODE_DISPUTED + 1;
const EPOCHS: u32 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_shows_the_jobs_and_follows_them_live_in_chromium() {
    let chain = chain_with_market().await;
    run_job_3_on_a_third_node(&chain).await;
    indexed(&chain).await;
    chain.create_jobs_stream().await;
    let mut reported = 0;
    for epoch in 1..=4 {
        reported = publish_epoch(&chain, epoch).await;
    }

    let stop = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    // Not the dev token's 6 decimals and symbol: amounts must show as `/v1/token` says
    // (`tests/dashboard/dashboard.mjs` expects 50 gUSD base units as `0.05 kUSD`).
    let token = TokenInfo {
        symbol: "kUSD".into(),
        decimals: 9,
    };
    let api = Api::start_with_token(&chain, &sqlite(dir.path()), &stop, None, token).await;
    api.caught_up(&chain, reported).await;

    let shots = concat!(env!("CARGO_TARGET_TMPDIR"), "/dashboard");
    std::fs::create_dir_all(shots).unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/dashboard/dashboard.mjs");
    let submitter = format!("{:#x}", chain.address(SUBMITTER));
    let mut browser = tokio::process::Command::new("node")
        .args([script, &api.base, shots, &submitter])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("running node (deploy/setup.sh installs it)");
    let mut stderr = browser.stderr.take().unwrap();
    let errors = tokio::spawn(async move {
        let mut text = String::new();
        stderr.read_to_string(&mut text).await.map(|_| text)
    });
    let mut stdout = BufReader::new(browser.stdout.take().unwrap()).lines();
    let mut said = Vec::new();
    let ready = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            said.push(line.clone());
            if line == "READY" {
                return true;
            }
        }
        false
    })
    .await;
    if ready != Ok(true) {
        let _ = browser.kill().await;
        panic!(
            "the page did not show the jobs ({}): {said:?}\n{}",
            if ready.is_err() {
                "timed out"
            } else {
                "the script ended"
            },
            errors.await.unwrap().unwrap()
        );
    }

    // Changes while the pages are open: a new job on chain, a worker's report.
    post_job(&chain, 20 * GUSD).await;
    publish_epoch(&chain, 7).await;

    let status = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(line) = stdout.next_line().await.unwrap() {
            said.push(line);
        }
        browser.wait().await.unwrap()
    })
    .await
    .expect("the browser script finishes");
    let errors = errors.await.unwrap().unwrap();
    assert!(status.success(), "{said:?}\n{errors}");
    assert_eq!(said, ["READY", "LIVE", "PAGES", "OK"], "{errors}");
    for shot in [
        "jobs.png",
        "job.png",
        "dispute.png",
        "nodes.png",
        "node.png",
        "account.png",
        "network.png",
    ] {
        assert!(
            std::fs::metadata(format!("{shots}/{shot}")).unwrap().len() > 10_000,
            "{shot}"
        );
    }
    stop.cancel();
    api.stopped().await;
}

/// Registers node 3 (served by its operator, `NODES[2]`) and has the matcher assign job 3
/// to it.
async fn run_job_3_on_a_third_node(chain: &TestNet) {
    let operator = NODES[2];
    assert_eq!(register_h100(chain, operator).await, NODE);
    let job = chain.job(RUNNING_JOB).await;
    let matcher = chain.market(MATCHER);
    let assign = matcher.assign(RUNNING_JOB, NODE, job.terms.pack(), job.state.pack());
    confirm_receipt("assign", assign.send().await)
        .await
        .unwrap();
}

/// What job 3's worker reports at the end of `epoch`: progress, loss, GPU figures and a
/// log line. Returns the stream sequence of the last message.
async fn publish_epoch(chain: &TestNet, epoch: u32) -> u64 {
    let chain_id = chain.chain_id();
    let at_ms = now_ms();
    let loss = 2.0 / (1.0 + f64::from(epoch) * 0.3);
    let line = stdout_line(
        RUNNING_JOB,
        ATTEMPT,
        format!("epoch {epoch}/{EPOCHS} loss {loss:.2}"),
        at_ms,
    );
    let update = ProgressUpdate {
        v: 1,
        job_id: RUNNING_JOB,
        node_id: NODE,
        attempt: ATTEMPT,
        progress: Some(f64::from(epoch) / f64::from(EPOCHS)),
        epoch: Some(epoch),
        epochs: Some(EPOCHS),
        metrics: [("loss".to_string(), loss)].into(),
        gpu_utilization: Some(80.0 + f64::from(epoch)),
        gpu_memory_used_mib: Some(60_000),
        elapsed_secs: u64::from(epoch) * 60,
        eta_secs: Some(u64::from(EPOCHS - epoch) * 60),
        at_ms,
    };
    let mut last = 0;
    for (subject, payload) in [
        (
            names::logs_subject(chain_id, NODE, RUNNING_JOB),
            serde_json::to_vec(&line).unwrap(),
        ),
        (
            names::progress_subject(chain_id, NODE, RUNNING_JOB),
            serde_json::to_vec(&update).unwrap(),
        ),
    ] {
        last = chain.publish(subject, payload).await;
    }
    last
}
