//! The happy path: input in, progress and logs out, result hash on-chain, bounty paid.

use gantry_protocol::names;
use std::io::Read;

use futures::StreamExt;

use gantry_protocol::jobs::{
    CompletionReport, CompletionStatus, LogLine, LogStream, ProgressUpdate,
};
use gantry_protocol::spec::InputSpec;
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;
use sha2::{Digest, Sha256};

use crate::harness::{Net, cpu_job, shell};

const SCRIPT: &str = r###"set -e
test "$(id -u)" = 65534 || { echo "running as $(id -u)" >&2; exit 9; }
if touch /rootfs-write 2>/dev/null; then echo "root is writable" >&2; exit 8; fi
for epoch in 1 2 3; do
  echo "##gantry {\"progress\":$(awk "BEGIN{print $epoch/3}"),\"epoch\":$epoch,\"epochs\":3,\"metrics\":{\"loss\":$(awk "BEGIN{print 1/$epoch}")}}"
done
echo "training done" >&2
mkdir -p /outputs/model
sha256sum /inputs/data/train.csv | cut -d' ' -f1 > /outputs/model/input.sha256
wc -l < /inputs/data/train.csv | tr -d ' ' > /outputs/lines
"###;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_job_runs_reports_and_gets_paid() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;

    let csv = b"x,y\n1,2\n2,4\n3,6\n".repeat(100);
    let csv_hash = hex::encode(Sha256::digest(&csv));
    let uri = net.put_input("train.csv", &csv).await;
    let mut spec = shell(SCRIPT, 60);
    spec.inputs.push(InputSpec {
        encrypted: false,
        uri,
        sha256: Some(csv_hash.clone()),
        path: "/inputs/data/train.csv".into(),
        max_bytes: Some(1 << 20),
    });

    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let chain = net.chain_id();
    let mut progress = client
        .subscribe(format!("gantry.jobs.{chain}.progress.>"))
        .await
        .unwrap();
    let mut logs = client
        .subscribe(format!("gantry.jobs.{chain}.logs.>"))
        .await
        .unwrap();
    let mut done = client
        .subscribe(format!("gantry.jobs.{chain}.done.>"))
        .await
        .unwrap();

    let job = net.post(cpu_job(256), &spec).await;
    net.wait_for_status(job, JobStatus::Submitted).await;

    // The result on-chain is the SHA-256 of the uploaded tar of /outputs.
    let info = net.job(job).await;
    assert_eq!(info.state.node_id, worker.node_id);
    let event = net.submitted_result(job).await;
    let tar = net.download(&event.resultURI).await;
    assert_eq!(event.resultHash.0, <[u8; 32]>::from(Sha256::digest(&tar)));
    let mut archive = tar::Archive::new(&tar[..]);
    let mut files = std::collections::BTreeMap::new();
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().display().to_string();
        let mut text = String::new();
        if entry.header().entry_type().is_file() {
            entry.read_to_string(&mut text).unwrap();
        }
        files.insert(name, text);
    }
    assert_eq!(
        files["model/input.sha256"].trim(),
        csv_hash,
        "the job read its input"
    );
    assert_eq!(files["lines"].trim(), "400");

    // Progress, logs and the completion report arrived on NATS.
    let expect_progress = async {
        loop {
            let message = progress.next().await.unwrap();
            let update: ProgressUpdate = serde_json::from_slice(&message.payload).unwrap();
            assert_eq!(update.job_id, job);
            if update.epoch == Some(3) {
                return update;
            }
        }
    };
    let update = tokio::time::timeout(std::time::Duration::from_secs(30), expect_progress)
        .await
        .expect("a progress update for epoch 3");
    assert_eq!(update.epochs, Some(3));
    assert_eq!(update.progress, Some(1.0));
    assert!(
        (update.metrics["loss"] - 1.0 / 3.0).abs() < 1e-4,
        "{update:?}"
    );
    let mut seen_stderr = false;
    while !seen_stderr {
        let message = tokio::time::timeout(std::time::Duration::from_secs(30), logs.next())
            .await
            .expect("log lines")
            .unwrap();
        let line: LogLine = serde_json::from_slice(&message.payload).unwrap();
        seen_stderr = line.stream == LogStream::Stderr && line.line == "training done";
    }
    let message = tokio::time::timeout(std::time::Duration::from_secs(30), done.next())
        .await
        .expect("a completion report")
        .unwrap();
    assert_eq!(
        message.subject.as_str(),
        names::completion_subject(chain, worker.node_id, job)
    );
    let report: CompletionReport = serde_json::from_slice(&message.payload).unwrap();
    assert_eq!(report.status, CompletionStatus::Submitted);
    assert_eq!(report.result_hash, Some(event.resultHash));
    assert_eq!(report.output_bytes, Some(tar.len() as u64));

    // After the challenge window the keeper finalizes and the node's earnings grow by the
    // bounty less the fee; its stake is untouched.
    let before = net.node(worker.node_id).await;
    net.advance(31).await;
    net.wait_for_status(job, JobStatus::Completed).await;
    let after = net.node(worker.node_id).await;
    let bounty = 50 * gantry_testkit::GUSD;
    assert_eq!(
        after.earnings.to::<u64>() - before.earnings.to::<u64>(),
        bounty - bounty * 250 / 10_000
    );
    assert_eq!(after.stake.to::<u64>(), crate::harness::STAKE);
    assert!(net.slashes(worker.node_id).await.is_empty());

    net.wait_for_no_containers().await;
    let status = worker.stop();
    assert!(
        status.success(),
        "the worker stops cleanly on SIGTERM: {status}"
    );
}
