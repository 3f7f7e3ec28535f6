//! Hostile and broken jobs, as a submitter who wants the provider slashed would write them:
//! each is contained and ends with a reason, and none costs the node its stake.
//!
//! - A job that fails by itself while it runs (out of memory, a fork bomb, an endless
//!   loop, a timeout as long as the whole runtime, a network attempt, too much output, no
//!   output, writing without end into /outputs or /tmp, printing without end, inputs
//!   trickled slower than its own time limit) is answered with its failure report as the
//!   result, in time: the node is paid, never reclaimed. A healthy job running beside
//!   them all completes undisturbed, and a spec of exactly the size limit runs.
//! - A job that cannot start (an input that fails its hash, an image nobody has, a spec
//!   the validator refuses — not a spec, an image reference Docker refuses, a NUL in the
//!   env —, a runtime too short to answer in) is rejected at once, for a small share of a
//!   slash. The matcher never assigns a spec the validator refuses; those are assigned here
//!   by hand, as a matcher of someone else's could.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use gantry_protocol::spec::{InputSpec, JobSpec, MAX_SPEC_BYTES, OutputSpec};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{ADMIN, NODES};

use crate::harness::{Net, STAKE, cpu_job, shell};
use crate::scripts::{last_of_job, of_job};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hostile_jobs_are_contained_answered_in_time_and_never_cost_the_stake() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], "").await;
    let input = net.put_input("honest.bin", b"the real bytes").await;
    let trickle = trickle_server().await;

    // ---- refused first, while the node is idle: (name, job, what the reason says)
    let mut refused: Vec<(&str, u64, &str)> = Vec::new();
    // Specs no worker can run, posted by a raw client: the matcher never assigns them (no
    // node pays for them); assigned all the same (a matcher of someone else's), each is
    // refused once, at once, by the spec validator: not a spec at all, an image reference
    // Docker answers 400 to, a NUL byte in the env.
    for (name, spec) in [
        (
            "invalid spec",
            r#"{"version":1,"image":"","outputs":{},"timeoutSecs":5}"#,
        ),
        (
            "upper-case image",
            r#"{"version":1,"image":"ghcr.io/Acme/Train:v1","outputs":{},"timeoutSecs":5}"#,
        ),
        (
            "NUL in env",
            r#"{"version":1,"image":"gantry-test/busybox:1","env":{"A":"x\u0000y"},"outputs":{},"timeoutSecs":5}"#,
        ),
    ] {
        let job = net.post_raw(cpu_job(64), spec.as_bytes().to_vec()).await;
        net.assign(job, worker.node_id).await;
        // One at a time, while the node is idle: a full node would give it back as such.
        net.given_back(job, worker.node_id).await;
        refused.push((name, job, "invalid spec"));
    }
    // The same spec left to the market: the matcher never assigns it, however many rounds
    // it places the jobs below in, so no node ever pays anything for it.
    let never_assigned = net
        .post_raw(
            cpu_job(64),
            br#"{"version":1,"image":"ghcr.io/Acme/Train:v1","outputs":{},"timeoutSecs":5}"#
                .to_vec(),
        )
        .await;

    // A healthy job runs beside the hostile ones from here on, and is never disturbed.
    let beside = net
        .post(
            cpu_job(64),
            &shell(
                "i=0; while [ $i -lt 40 ]; do echo step $i; sleep 0.5; i=$((i+1)); done; echo ok > /outputs/ok",
                120,
            ),
        )
        .await;

    // ---- answered with a failure report: (name, job, what the reason says)
    let mut failed: Vec<(&str, u64, &str)> = Vec::new();

    // (name, memory MiB, command, its own time limit in s, what the reason says)
    let self_inflicted: [(&str, u32, &str, u64, &str); 7] = [
        // A 64 MiB limit, a 200 MB string.
        (
            "memory hog",
            64,
            "x=$(head -c 200000000 /dev/zero | tr '\\0' a); echo ${#x}",
            60,
            "out of memory",
        ),
        // Stopped by the pids limit (64), so the shell cannot fork.
        (
            "fork bomb",
            128,
            "i=0; while [ $i -lt 1000 ]; do sleep 60 & i=$((i+1)); done; echo spawned $i",
            60,
            "exited with code",
        ),
        // Its own 6 s limit, counted from the assignment (room for a loaded machine to see
        // the assignment before the limit passes, else it is given back as late).
        ("endless loop", 64, "while :; do :; done", 6, "timeout"),
        // There is no network.
        (
            "network attempt",
            64,
            "if wget -q -T 2 -O /dev/null http://1.1.1.1/; then exit 0; else exit 7; fi",
            30,
            "exited with code 7",
        ),
        // Writes without end: stopped by the kernel at the job's space (16 MiB of
        // result, 16 of checkpoint, 8 of scratch in the test config), whichever directory
        // it writes, and never a byte of the host's disk beyond it.
        (
            "fills /outputs",
            64,
            "cat /dev/zero > /outputs/fill",
            60,
            "disk limit: the job filled its 40 mib",
        ),
        (
            "fills /tmp",
            64,
            "cat /dev/zero > /tmp/fill",
            60,
            "disk limit: the job filled its 40 mib",
        ),
        // Prints without end: killed at the node's log limit (1 MiB in the test config).
        ("floods stdout", 64, "cat /dev/zero", 60, "log limit"),
    ];
    for (name, memory, command, timeout, expected) in self_inflicted {
        let job = net.post(cpu_job(memory), &shell(command, timeout)).await;
        failed.push((name, job, expected));
    }

    // A timeout as long as the whole runtime: the job is stopped the node's answer margin
    // (60 s) before the attempt ends, so the node answers in time (70 s runtime: 10 s).
    let mut whole_runtime = cpu_job(64);
    whole_runtime.maxRuntime = 70;
    let job = net.post(whole_runtime, &shell("sleep 1000", 70)).await;
    failed.push(("timeout as long as the runtime", job, "timeout"));

    // Oversized output: 2 MB against a 1 MB limit.
    let mut spec = shell("head -c 2000000 /dev/urandom > /outputs/big", 30);
    spec.outputs = OutputSpec {
        max_bytes: Some(1_000_000),
        ..OutputSpec::default()
    };
    let job = net.post(cpu_job(64), &spec).await;
    failed.push(("oversized output", job, "output too large"));

    // No output where the spec says.
    let mut spec = shell("true", 30);
    spec.outputs.path = "/outputs/model".into();
    let job = net.post(cpu_job(64), &spec).await;
    failed.push(("no output", job, "was not created"));

    // An input served one byte a second, so that its download would outlast the job's
    // time, and the attempt's, were it not on the job's clock.
    let mut spec = shell("cat /inputs/slow", 5);
    spec.inputs.push(InputSpec {
        encrypted: false,
        uri: format!("http://{trickle}/slow"),
        sha256: None,
        path: "/inputs/slow".into(),
        max_bytes: None,
    });
    let job = net.post(cpu_job(64), &spec).await;
    failed.push(("trickled input", job, "inputs were not ready"));

    // ---- rejected at once: (name, job, what the reason says)
    let mut rejected: Vec<(&str, u64, &str)> = Vec::new();

    // Input hash mismatch.
    let mut spec = shell("cat /inputs/x", 30);
    spec.inputs.push(InputSpec {
        encrypted: false,
        uri: input,
        sha256: Some("00".repeat(32)),
        path: "/inputs/x".into(),
        max_bytes: None,
    });
    let job = net.post(cpu_job(64), &spec).await;
    rejected.push(("input hash mismatch", job, "sha256 mismatch"));

    // An image no registry has.
    let mut spec = shell("true", 30);
    spec.image = "gantry-test/absent:1".into();
    let job = net.post(cpu_job(64), &spec).await;
    rejected.push(("missing image", job, "could not be pulled"));

    // Inputs that reach into the provider's network: the worker's own metrics by name
    // (the test config allows 127.0.0.1 as written, not `localhost`), and the cloud's
    // metadata service through a redirect from a host the provider allowed.
    for (name, uri) in [
        (
            "input on a loopback service",
            format!("http://localhost:{}/metrics", worker.metrics_port()),
        ),
        (
            "input redirected to a private address",
            format!("http://{trickle}/to-metadata"),
        ),
    ] {
        let mut spec = shell("cat /inputs/x", 30);
        spec.inputs.push(InputSpec {
            encrypted: false,
            uri,
            sha256: None,
            path: "/inputs/x".into(),
            max_bytes: None,
        });
        let job = net.post(cpu_job(64), &spec).await;
        rejected.push((name, job, "not public"));
    }

    // A runtime no longer than the node's answer margin: nothing could run and answer.
    let mut too_short = cpu_job(64);
    too_short.maxRuntime = 60;
    let job = net.post(too_short, &shell("true", 30)).await;
    rejected.push(("runtime within the margin", job, "no time to run"));

    let market = net.market(ADMIN);
    for (name, job, expected) in &failed {
        net.wait_for_status(*job, JobStatus::Submitted).await;
        let report = net
            .failure_report(*job)
            .await
            .unwrap_or_else(|| panic!("{name}: no failure report in its result"));
        let reason = report["reason"].as_str().unwrap_or_default().to_lowercase();
        assert!(
            reason.contains(expected),
            "{name}: reason {reason:?} does not say {expected:?}"
        );
        // Its disk: never more than its space (its output limit, 16 MiB of checkpoint
        // and 8 of scratch), whatever it wrote.
        let disk = report["diskBytes"].as_u64().expect("diskBytes");
        let limit = report["diskLimitBytes"].as_u64().expect("diskLimitBytes");
        assert!(disk <= limit, "{name}: {disk} of {limit}");
        if expected.starts_with("disk limit") {
            assert_eq!(limit, 40 << 20, "{name}");
            assert!(disk > limit - (1 << 20), "{name} filled it: {disk}");
        }
        // Answered before the attempt's end: the node can never be reclaimed for it.
        let (assigned, _) = last_of_job(market.JobAssigned_filter(), *job).await;
        let (_, submitted) = last_of_job(market.ResultSubmitted_filter(), *job).await;
        assert_eq!(assigned.nodeId, worker.node_id, "{name}");
        assert!(
            net.block_time(&submitted).await <= assigned.until.to::<u64>(),
            "{name}: answered after the attempt ended"
        );
    }
    rejected.extend(refused);
    for (name, job, expected) in &rejected {
        let rejection = net.given_back(*job, worker.node_id).await;
        assert!(
            rejection.reason.to_lowercase().contains(expected),
            "{name}: {rejection:?} does not say {expected:?}"
        );
        rejection.assert_at_once(30);
        // Back on the market without using an attempt; this node may not take it again.
        let state = net.job(*job).await.state;
        assert_eq!(state.status, JobStatus::Open, "{name}");
        assert_eq!((state.barred, state.faults), (1, 0), "{name}");
    }

    // After the challenge window every answered job is paid to the node, the healthy
    // one beside them too.
    net.wait_for_status(beside, JobStatus::Submitted).await;
    net.advance(31).await;
    for job in failed.iter().map(|(_, job, _)| job).chain([&beside]) {
        net.wait_for_status(*job, JobStatus::Completed).await;
    }
    let node = net.node(worker.node_id).await;
    let bounty = 50 * gantry_testkit::GUSD;
    assert_eq!(
        node.earnings.to::<u64>(),
        (failed.len() as u64 + 1) * (bounty - bounty * 250 / 10_000)
    );

    // Nothing was ever reclaimed from the node; its stake paid only the rejects' small
    // charges, and it still takes work.
    for (_, job, _) in failed.iter().chain(&rejected) {
        assert!(of_job(market.JobReclaimed_filter(), *job).await.is_empty());
    }
    let rejected_jobs: Vec<u64> = rejected.iter().map(|(_, job, _)| *job).collect();
    let slashes = net.slashes(worker.node_id).await;
    assert!(
        slashes.iter().all(|s| rejected_jobs.contains(&s.jobId)),
        "charged only for the jobs it gave back: {slashes:?}"
    );
    let charged: u64 = slashes.iter().map(|s| s.amount.to::<u64>()).sum();
    assert_eq!(node.stake.to::<u64>(), STAKE - charged);
    assert!(
        of_job(market.JobAssigned_filter(), never_assigned)
            .await
            .is_empty()
    );
    assert_eq!(net.job(never_assigned).await.state.status, JobStatus::Open);
    // The job beside them was never disturbed.
    assert!(net.failure_report(beside).await.is_none());
    assert_eq!(net.result_files(beside).await["ok"], b"ok\n");
    // And the node runs the next job: a spec of exactly the market's size limit, as
    // posted (the worker measures the bytes posted, not its re-serialisation, which
    // adds the defaults and would be over).
    let head = r#"{"version":1,"image":"gantry-test/busybox:1","command":["/bin/sh","-c","echo fine > /outputs/ok"],"outputs":{},"timeoutSecs":30,"env":{"PAD":""#;
    let tail = r#""}}"#;
    let pad = "x".repeat(MAX_SPEC_BYTES - head.len() - tail.len());
    let spec = format!("{head}{pad}{tail}");
    assert_eq!(spec.len(), MAX_SPEC_BYTES);
    assert!(JobSpec::from_slice(spec.as_bytes()).unwrap().to_vec().len() > MAX_SPEC_BYTES);
    let job = net.post_raw(cpu_job(64), spec.into_bytes()).await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert!(net.failure_report(job).await.is_none());
    assert_eq!(net.result_files(job).await["ok"], b"fine\n");

    net.wait_for_no_containers().await;
    assert!(worker.stop().success());
}

/// An HTTP server whose `/slow` sends one byte a second, for ten minutes: an input that
/// never quite stalls (each byte within the fetcher's read timeout) and never ends in time;
/// and whose `/to-metadata` redirects to the cloud's metadata service.
async fn trickle_server() -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let slow = || async {
        let bytes = futures::stream::unfold(0u32, |sent| async move {
            if sent == 600 {
                return None;
            }
            // The attacker's pace, not a test's wait.
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((Ok::<_, Infallible>(Bytes::from_static(b"x")), sent + 1))
        });
        axum::body::Body::from_stream(bytes)
    };
    let to_metadata = || async {
        axum::response::Redirect::temporary("http://169.254.169.254/latest/meta-data/")
    };
    let app = axum::Router::new()
        .route("/slow", axum::routing::get(slow))
        .route("/to-metadata", axum::routing::get(to_metadata));
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
