//! Reads through the API while a job runs: `job status`/`job list` JSON, `job logs` (the
//! tail, then `--follow` until the job settles), `job watch` from open to completed (exit
//! 0) and to cancelled (exit 5) after a give-back for the job's fault and a reclaim for
//! the node's (each attempt and the refund, the slash and its treasury, shown), the bond a dispute would post while the
//! result is challengeable, and `job result` checked against the on-chain hash (a
//! tampered upload refused with exit 6).

use gantry_protocol::names;
use std::time::{SystemTime, UNIX_EPOCH};

use alloy::primitives::B256;
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::jobs::{LogLine, LogStream, ProgressUpdate};
use gantry_testkit::accounts::{AGENT, MATCHER, NODES, OPERATOR, OTHER, SUBMITTER};
use gantry_testkit::{confirm_receipt, scenario};
use sha2::{Digest, Sha256};

use crate::harness::Net;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn log_line(job_id: u64, line: &str) -> Vec<u8> {
    serde_json::to_vec(&LogLine {
        v: 1,
        job_id,
        attempt: 1,
        stream: LogStream::Stdout,
        line: line.into(),
        at_ms: now_ms(),
    })
    .unwrap()
}

/// A result tar as a worker packs one.
fn result_tar() -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in [
        ("metrics.json", &br#"{"loss":0.21}"#[..]),
        ("model/weights.bin", &[7u8; 3000][..]),
    ] {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, path, data).unwrap();
    }
    builder.into_inner().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_followed_through_the_api_and_its_result_verified() {
    let (net, api) = Net::start_with_api().await;
    let d = net.devnet.deployment;
    let chain_id = d.chain_id;
    net.mint(OPERATOR, 1_000).await;
    net.mint(SUBMITTER, 100).await;
    let agent = net.address(AGENT).to_string();
    let flags = format!(
        "--vram 80GiB --cpus 16 --ram 64GiB {}",
        crate::node::consent_flags(&net, AGENT, OPERATOR).await
    );
    crate::node::register(
        &net.gantry(OPERATOR),
        Some(&agent),
        "NVIDIA H100 80GB HBM3",
        &flags,
    )
    .await
    .ok();
    // A second node, for the reclaim below (registered first: the kit mints through the
    // admin's own provider, whose nonces the matcher's sends below would leave behind).
    let second = net
        .register_own_node(
            NODES[1],
            NodeRegistry::NodeCapabilities {
                gpuModel: B256::right_padding_from(b"NVIDIA-H100-80GB-HBM3"),
                ..scenario::h100_node()
            },
        )
        .await;
    let gantry = net.gantry(SUBMITTER);
    let submit = |bounty: &'static str| {
        let gantry = &gantry;
        async move {
            let out = gantry
                .run(&[
                    "job", "submit", "--image", "busybox", "--gpu", "H100", "--bounty", bounty,
                    "--json", "--", "sh", "-c", "train",
                ])
                .await
                .ok();
            out.json()["jobId"].as_u64().unwrap()
        }
    };
    api.caught_up(&net, 0).await;
    let job = submit("12.5").await;
    let id = job.to_string();
    api.caught_up(&net, 0).await;

    // The watcher prints the state it starts from, then each change.
    let mut watch = gantry.spawn(&["job", "watch", &id, "--json"]);
    let first = watch.until(|_| true).await;
    assert_eq!(first["status"], "open");

    net.assign(MATCHER, job, 1).await;
    watch.until(|v| v["status"] == "assigned").await;
    let update = ProgressUpdate {
        v: 1,
        job_id: job,
        node_id: 1,
        attempt: 1,
        progress: Some(0.4),
        epoch: Some(4),
        epochs: Some(10),
        metrics: [("loss".to_string(), 0.21)].into(),
        gpu_utilization: Some(90.0),
        gpu_memory_used_mib: Some(1024),
        elapsed_secs: 60,
        eta_secs: Some(90),
        at_ms: now_ms(),
    };
    net.publish(
        names::progress_subject(chain_id, 1, job),
        serde_json::to_vec(&update).unwrap(),
    )
    .await;
    let progressed = watch.until(|v| v["epoch"] == 4).await;
    assert_eq!(progressed["epochs"], 10);
    assert_eq!(progressed["metrics"]["loss"], 0.21);
    assert_eq!(progressed["etaSecs"], 90);
    assert_eq!(progressed["progress"], 0.4);
    net.publish(
        names::logs_subject(chain_id, 1, job),
        log_line(job, "line one"),
    )
    .await;
    let seq = net
        .publish(
            names::logs_subject(chain_id, 1, job),
            log_line(job, "line two"),
        )
        .await;
    api.caught_up(&net, seq).await;

    // Status and list, as the API has them.
    let status = gantry
        .run(&["job", "status", &id, "--json"])
        .await
        .ok()
        .json();
    assert_eq!(status["status"], "assigned");
    assert_eq!(status["nodeId"], 1);
    assert_eq!(status["progress"]["epoch"], 4);
    assert_eq!(status["bounty"], "12500000");
    let text = gantry.run(&["job", "status", &id]).await.ok().stdout;
    assert!(text.contains("bounty     12.5 gUSD"), "{text}");
    assert!(
        text.contains("needs      1× NVIDIA-H100-80GB-HBM3"),
        "{text}"
    );
    assert!(
        text.contains("progress   40% · epoch 4/10 · loss 0.2100 · ETA 1m 30s"),
        "{text}"
    );
    let running = gantry
        .run(&["job", "list", "--status", "running", "--mine", "--json"])
        .await
        .ok()
        .json();
    let ids: Vec<u64> = running["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobId"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, [job]);
    let open = gantry
        .run(&["job", "list", "--status", "open", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(open["items"].as_array().unwrap().len(), 0);
    gantry
        .run(&["job", "list", "--status", "lost"])
        .await
        .failed(2, "query parameter `status`");
    gantry
        .run(&["job", "status", "99"])
        .await
        .failed(3, "job 99 not found");

    // Logs: the tail, then a follower that gets new lines until the job settles.
    let logs = gantry.run(&["job", "logs", &id]).await.ok().stdout;
    assert_eq!(logs, "line one\nline two\n");
    let mut follow = gantry.spawn(&["job", "logs", &id, "--follow", "--tail", "1"]);
    assert_eq!(follow.line().await, "line two");
    net.publish(
        names::logs_subject(chain_id, 1, job),
        log_line(job, "line three"),
    )
    .await;
    assert_eq!(follow.line().await, "line three");

    // The agent uploads its result and submits its hash.
    let tar = result_tar();
    let hash = B256::from(<[u8; 32]>::from(Sha256::digest(&tar)));
    let bucket = names::results_bucket(chain_id);
    let js = net.jetstream().await;
    gantry_runtime::objects::open(&js, &bucket, 1)
        .await
        .unwrap();
    let key = format!("{job}-1");
    gantry_runtime::objects::put(&js, &bucket, 1, &key, Default::default(), &tar[..])
        .await
        .unwrap();
    net.submit_result(AGENT, job, hash, &names::result_uri(chain_id, 1, &key))
        .await;
    watch.until(|v| v["status"] == "submitted").await;
    api.caught_up(&net, 0).await;
    // What a dispute would cost: the job's policy floor (10 gUSD; a tenth of 12.5 is less).
    let text = gantry.run(&["job", "status", &id]).await.ok().stdout;
    assert!(
        text.contains(&format!(
            "a dispute posts a bond of 10 gUSD (`gantry job dispute {job}`)"
        )),
        "{text}"
    );

    let out_dir = net.dir().join("result");
    let out = out_dir.display().to_string();
    let fetched = gantry
        .run(&["job", "result", &id, "-o", &out, "--json"])
        .await
        .ok()
        .json();
    assert_eq!(fetched["bytes"], tar.len());
    assert_eq!(fetched["sha256"], format!("{hash}"));
    assert_eq!(fetched["files"], 2);
    assert_eq!(
        std::fs::read(out_dir.join("model/weights.bin")).unwrap(),
        [7u8; 3000]
    );
    assert_eq!(
        std::fs::read_to_string(out_dir.join("metrics.json")).unwrap(),
        r#"{"loss":0.21}"#
    );

    // The same key with other bytes: refused, nothing unpacked, nothing left behind.
    let mut tampered = tar.clone();
    tampered[600] ^= 1;
    gantry_runtime::objects::put(&js, &bucket, 1, &key, Default::default(), &tampered[..])
        .await
        .unwrap();
    let elsewhere = net.dir().join("tampered");
    gantry
        .run(&["job", "result", &id, "-o", &elsewhere.display().to_string()])
        .await
        .failed(
            6,
            &format!("the on-chain resultHash is {hash}: refusing it"),
        );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // Accepting settles it: the watcher exits 0, the follower gets `end`.
    gantry.run(&["job", "accept", &id]).await.ok();
    let (code, rest) = watch.finished().await;
    assert_eq!(code, 0, "{rest:?}");
    let last: serde_json::Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(last["status"], "completed");
    let (code, rest) = follow.finished().await;
    assert_eq!((code, rest.len()), (0, 0), "{rest:?}");

    // A job cancelled while watched: exit 5. Watched at once, before the API may have it
    // (the watcher then waits for its row).
    let other = submit("1").await;
    let mut watch = gantry.spawn(&["job", "watch", &other.to_string(), "--json"]);
    assert_eq!(watch.until(|_| true).await["status"], "open");
    // Before that, node 1 gives it back for the job's fault and a second node goes
    // offline with it and is reclaimed, slashed.
    give_back_then_reclaim(&net, other, second).await;
    gantry
        .run(&["job", "cancel", &other.to_string()])
        .await
        .ok();
    let (code, rest) = watch.finished().await;
    assert_eq!(code, 5, "{rest:?}");
    let last: serde_json::Value = serde_json::from_str(rest.last().unwrap()).unwrap();
    assert_eq!(last["status"], "cancelled");
    let text = gantry
        .run(&["job", "status", &other.to_string()])
        .await
        .ok()
        .stdout;
    assert!(
        text.contains("refunded   1 gUSD to the submitter's credits"),
        "{text}"
    );
    // Each attempt: its node, how it ended, whose fault, why, the slash and where it
    // went; and the refund, which is the bounty and not the slashes.
    let market = JobMarket::new(net.devnet.deployment.market, net.devnet.admin.clone());
    let treasury = market.params().call().await.unwrap().treasury;
    assert!(
        text.contains(&format!(
            "attempt 1  node 1: gave the job back, the job's fault: {JOB_FAULT}"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "attempt 2  node {second}: reclaimed: the node went inactive, the node's fault: \
             the node was marked inactive; slashed 50 gUSD to the treasury {treasury}"
        )),
        "{text}"
    );
    assert!(
        text.contains(": the whole bounty; the nodes' slashes ("),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            ") went to the treasury {treasury}, not to the submitter"
        )),
        "{text}"
    );
}

/// The reason node 1 gives `job` back with: the job's fault.
const JOB_FAULT: &str = "invalid spec: no such entrypoint";

/// Job `job`, open: assigned to node 1, whose agent gives it back for the job's fault,
/// then to node `second` (500 gUSD staked, served by `NODES[1]`) whose agent takes it
/// offline, and reclaimed by a stranger (the node slashed a tenth of its stake).
async fn give_back_then_reclaim(net: &Net, job: u64, second: u64) {
    net.assign(MATCHER, job, 1).await;
    let state = net.job(job).await;
    let agent = net.market(AGENT);
    let reject = agent.reject(
        job,
        state.terms.pack(),
        state.state.pack(),
        JOB_FAULT.into(),
    );
    gantry_testkit::send_as_worker("reject", reject)
        .await
        .unwrap();
    net.assign(MATCHER, job, second).await;
    let registry = net.registry(NODES[1]);
    let offline = registry.markInactive(second);
    confirm_receipt("markInactive", offline.send().await)
        .await
        .unwrap();
    let state = net.job(job).await;
    let stranger = net.market(OTHER);
    let reclaim = stranger.reclaim(job, state.terms.pack(), state.state.pack());
    confirm_receipt("reclaim", reclaim.send().await)
        .await
        .unwrap();
}

/// `gantry job result` of a replicated job: the outcome its quorum agreed on, fetched
/// from where its paid seats upload it after the decision, and checked against the digest
/// on chain (a replicated job has no provider's `ResultSubmitted`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_result_of_a_replicated_job_is_the_outcome_its_quorum_agreed_on() {
    let (net, _api) = Net::start_with_api().await;
    let nodes = net.wasm_pool().await;
    let job = net.post_replicated().await;
    let tar = result_tar();
    let digest = B256::from(<[u8; 32]>::from(Sha256::digest(&tar)));
    net.decide_replicated(job, &nodes, |_| digest).await;
    // As a paid seat does once the job is decided, under its own id: the last one here
    // (the CLI tries each paid seat's until one holds it).
    let js = net.jetstream().await;
    let bucket = names::results_bucket(net.chain_id());
    gantry_runtime::objects::open(&js, &bucket, 1)
        .await
        .unwrap();
    gantry_runtime::objects::put(
        &js,
        &bucket,
        *nodes.last().unwrap(),
        &names::verified_result_key(job),
        Default::default(),
        &tar[..],
    )
    .await
    .unwrap();
    let out_dir = net.dir().join("verified");
    let fetched = net
        .gantry(SUBMITTER)
        .run(&[
            "job",
            "result",
            &job.to_string(),
            "-o",
            &out_dir.display().to_string(),
            "--json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(fetched["sha256"], format!("{digest}"));
    assert_eq!(fetched["files"], 2);
    assert_eq!(
        std::fs::read_to_string(out_dir.join("metrics.json")).unwrap(),
        r#"{"loss":0.21}"#
    );
}

/// `gantry job result` of a refereed job: the provider's answer is a seal; the CLI fetches
/// the outcome and what opens the seal from the provider's bucket of sealed results (the
/// chain's provider, whatever URI it submitted), checks that it opens the seal on chain
/// for that node and that the outcome is the digest sealed, and unpacks it. An opening
/// that does not open the seal is refused, with the advice to dispute.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_result_of_a_refereed_job_is_the_outcome_its_provider_sealed() {
    use gantry_protocol::names::{self, ProviderSeal};

    let (net, _api) = Net::start_with_api().await;
    let chain_id = net.chain_id();
    let tar = result_tar();
    let digest = B256::from(<[u8; 32]>::from(Sha256::digest(&tar)));
    let (node, job) = net
        // A URI of the provider's choosing: never trusted for a refereed job, whose outcome
        // is read from the chain's provider's bucket of sealed results and checked against
        // the seal (a liar could otherwise seal the hash of a file it serves there).
        .answered_refereed_at(digest, |_| {
            "https://results.example.invalid/fake.tar".into()
        })
        .await;
    let bucket = names::sealed_bucket(chain_id);
    let js = net.jetstream().await;
    gantry_runtime::objects::open(&js, &bucket, 1)
        .await
        .unwrap();
    let put = |key: String, bytes: Vec<u8>| {
        let (js, bucket) = (js.clone(), bucket.clone());
        async move {
            gantry_runtime::objects::put(
                &js,
                &bucket,
                node,
                &key,
                Default::default(),
                bytes.as_slice(),
            )
            .await
            .unwrap();
        }
    };
    put(names::provider_result_key(job), tar.clone()).await;
    let opening = |salt| serde_json::to_vec(&ProviderSeal { node, digest, salt }).unwrap();
    // The testkit's provider salts with keccak256("salt").
    put(
        names::provider_seal_key(job),
        opening(alloy::primitives::keccak256("salt")),
    )
    .await;
    let gantry = net.gantry(SUBMITTER);
    let out_dir = net.dir().join("refereed");
    let out = out_dir.display().to_string();
    let fetched = gantry
        .run(&["job", "result", &job.to_string(), "-o", &out, "--json"])
        .await
        .ok()
        .json();
    assert_eq!(fetched["sha256"], format!("{digest}"));
    assert_eq!(fetched["files"], 2);

    // Another salt: the opening does not open the seal.
    put(names::provider_seal_key(job), opening(B256::repeat_byte(9))).await;
    let elsewhere = net.dir().join("refereed-unopened").display().to_string();
    gantry
        .run(&["job", "result", &job.to_string(), "-o", &elsewhere])
        .await
        .failed(6, "does not open the seal it submitted: dispute it");
}
