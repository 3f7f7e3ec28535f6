//! Hostile and broken jobs are contained and end with a reason; the node stays healthy
//! and nothing is left behind.

use gantry_protocol::spec::{InputSpec, OutputSpec};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;

use crate::harness::{Net, cpu_job, shell};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_jobs_are_contained_and_end_with_a_reason() {
    // One attempt: a rejected job fails at once instead of going round the fleet.
    let net = Net::start(|mut p| {
        p.market.maxAttempts = 1;
        p
    })
    .await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;

    let input = net.put_input("honest.bin", b"the real bytes").await;
    let mut cases: Vec<(&str, u64, &str)> = Vec::new();

    // Memory hog: a 64 MiB limit, a 200 MB string.
    let job = net
        .post(
            cpu_job(64),
            &shell(
                "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}",
                60,
            ),
        )
        .await;
    cases.push(("memory hog", job, "out of memory"));

    // Fork bomb: stopped by the pids limit (64), so the shell cannot fork.
    let job = net
        .post(
            cpu_job(128),
            &shell(
                "i=0; while [ $i -lt 1000 ]; do sleep 60 & i=$((i+1)); done; echo spawned $i",
                60,
            ),
        )
        .await;
    cases.push(("fork bomb", job, "exited with code"));

    // Endless loop: the wall-clock limit.
    let job = net
        .post(cpu_job(64), &shell("while :; do :; done", 2))
        .await;
    cases.push(("endless loop", job, "timeout"));

    // Network: there is none.
    let job = net
        .post(
            cpu_job(64),
            &shell(
                "if wget -q -T 2 -O /dev/null http://1.1.1.1/; then exit 0; else exit 7; fi",
                30,
            ),
        )
        .await;
    cases.push(("network attempt", job, "exited with code 7"));

    // Oversized output: 2 MB against a 1 MB limit.
    let mut spec = shell("head -c 2000000 /dev/urandom > /outputs/big", 30);
    spec.outputs = OutputSpec {
        max_bytes: Some(1_000_000),
        ..OutputSpec::default()
    };
    let job = net.post(cpu_job(64), &spec).await;
    cases.push(("oversized output", job, "output too large"));

    // Input hash mismatch.
    let mut spec = shell("cat /inputs/x", 30);
    spec.inputs.push(InputSpec {
        uri: input,
        sha256: Some("00".repeat(32)),
        path: "/inputs/x".into(),
        max_bytes: None,
    });
    let job = net.post(cpu_job(64), &spec).await;
    cases.push(("input hash mismatch", job, "sha256 mismatch"));

    // An image no registry has.
    let mut spec = shell("true", 30);
    spec.image = "gantry-test/absent:1".into();
    let job = net.post(cpu_job(64), &spec).await;
    cases.push(("missing image", job, "could not be pulled"));

    // Not a spec at all.
    let job = net
        .post_raw(
            cpu_job(64),
            br#"{"version":1,"image":"","outputs":{},"timeoutSecs":5}"#.to_vec(),
        )
        .await;
    cases.push(("invalid spec", job, "invalid spec"));

    for (name, job, _) in &cases {
        net.wait_until(&format!("the {name} job ({job}) fails"), || async {
            net.job(*job).await.status == JobStatus::Failed as u8
        })
        .await;
    }
    let reasons = net.rejections().await;
    for (name, job, expected) in &cases {
        let reason = reasons
            .get(job)
            .unwrap_or_else(|| panic!("{name}: no JobRejected"));
        assert!(
            reason.to_lowercase().contains(expected),
            "{name}: reason {reason:?} does not say {expected:?}"
        );
        let info = net.job(*job).await;
        assert_eq!(info.nodeId, worker.node_id, "{name}");
    }

    // The node was never slashed for any of it and still takes work.
    let node = net.node(worker.node_id).await;
    assert_eq!(node.totalSlashed, alloy::primitives::aliases::U96::ZERO);
    let job = net
        .post(cpu_job(64), &shell("echo fine > /outputs/ok", 30))
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;

    net.wait_for_no_containers().await;
    assert!(worker.stop().success());
}
