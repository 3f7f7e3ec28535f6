//! Verified Docker jobs (design 18, §1): a CPU Docker job, deterministic by its
//! submitter's word, replicated on workers that opted into the deterministic sandbox
//! (`verified_docker = true`). The sandbox fixes what a container sees of its node (host
//! name, CPUs, environment, limits); what it cannot fix (a job that reads randomness or
//! the clock) parts honest seats, and parting never slashes.

use gantry_protocol::market::Verification;
use gantry_protocol::spec::{Engine, InputSpec, JobSpec};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;
use sha2::{Digest, Sha256};

use gantry_testkit::accounts::ADMIN;

use crate::harness::{IMAGE, Net};
use crate::scripts::of_job;
use crate::wasm::joined_the_pool;

const SANDBOXED: &str = "verified_docker = true";

/// A CPU Docker job on the test image, pinned by its id, running `script` with one input
/// from the network's inputs bucket.
async fn docker_spec(net: &Net, script: &str) -> JobSpec {
    let id = net
        .docker()
        .inspect_image(IMAGE)
        .await
        .unwrap()
        .id
        .expect("the image's id");
    let data = b"the same bytes on every node\n";
    JobSpec {
        encryption: None,
        version: 2,
        kind: Default::default(),
        engine: Engine::Docker,
        image: id,
        command: vec!["sh".into(), "-c".into(), script.into()],
        env: [("GREETING".to_owned(), "hello".to_owned())].into(),
        inputs: vec![InputSpec {
            encrypted: false,
            uri: net.put_input("data.txt", data).await,
            sha256: Some(hex::encode(Sha256::digest(data))),
            path: "/inputs/data.txt".into(),
            max_bytes: Some(1 << 10),
        }],
        outputs: gantry_protocol::spec::OutputSpec {
            max_bytes: Some(1 << 20),
            ..Default::default()
        },
        resources: Default::default(),
        timeout_secs: 30,
        wasm: None,
    }
}

/// Three sandboxed workers of three operators (the whole pool) run a deterministic
/// container for their seats: what it sees of its node (host name, CPU count,
/// environment) is the same on each, so all three agree, are paid, and the agreed
/// outcome holds the job's outputs. The container also leaves a fifo where the outcome
/// entry goes (`.gantry`): the worker writes its outcome elsewhere and never opens it
/// (a write into it would block the seat until it is slashed).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_docker_job_replicated_3_2_is_paid_to_all_three() {
    let net = Net::start(|p| p).await;
    let mut workers = Vec::new();
    for account in &NODES[1..] {
        workers.push(net.spawn_worker(*account, SANDBOXED).await);
    }
    for worker in &workers {
        let engines = net.node(worker.node_id).await.engines;
        assert!(
            gantry_protocol::eligibility::Engines(engines).sandboxed(),
            "the node registered the sandbox: {engines:#b}"
        );
    }
    joined_the_pool(&net, 3).await;
    let spec = docker_spec(
        &net,
        "sha256sum /inputs/data.txt > /outputs/sum.txt; \
         echo \"$(hostname) $(nproc) $GREETING $(env | grep -c GANTRY)\" > /outputs/node.txt; \
         mkfifo /outputs/.gantry",
    )
    .await;
    let job = net
        .post_verified_spec(Verification::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Completed).await;
    for worker in &workers {
        let info = net.node(worker.node_id).await;
        assert!(
            info.earnings.to::<u64>() > 0,
            "node {} paid",
            worker.node_id
        );
        assert_eq!(info.lockedStake.to::<u64>(), 0, "its seat released");
    }
    let digest = gantry_runtime::market::read_verified(
        &net.devnet.admin,
        net.devnet.deployment.market,
        net.devnet.deployment.start_block,
        job,
    )
    .await
    .unwrap()
    .expect("JobVerified");
    let tar = net.verified_result(job).await;
    assert_eq!(<[u8; 32]>::from(Sha256::digest(&tar)), digest.0);
    let mut files = std::collections::BTreeMap::new();
    for entry in tar::Archive::new(tar.as_slice()).entries().unwrap() {
        let mut entry = entry.unwrap();
        let name = entry.path().unwrap().to_string_lossy().into_owned();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut entry, &mut text).unwrap();
        files.insert(name, text);
    }
    assert_eq!(files[".gantry/outcome"], "v1 exit 0\n", "{files:?}");
    assert_eq!(
        files["node.txt"], "gantry 1 hello 0\n",
        "a fixed host name, one CPU, the spec's environment only"
    );
    assert!(files["sum.txt"].contains("/inputs/data.txt"), "{files:?}");
    assert_eq!(
        files.keys().collect::<Vec<_>>(),
        [".gantry", ".gantry/outcome", "node.txt", "sum.txt"],
        "the job's own .gantry is not packed"
    );
    for worker in workers {
        assert!(worker.stop().success());
    }
}

/// The attack the sandbox cannot stop: a submitter posts a "deterministic" job that
/// reads randomness, hoping honest seats disagree and are slashed. Each seat reveals its
/// own digest; there is no quorum; nobody is slashed or paid, every lock ends, and the
/// revealers' bounties go to the treasury: the submitter gets neither a result nor its
/// money back (it could otherwise read an answer from the public digests for free).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_docker_job_that_is_not_deterministic_slashes_no_seat() {
    let net = Net::start(|p| p).await;
    let mut workers = Vec::new();
    for account in &NODES[1..] {
        workers.push(net.spawn_worker(*account, SANDBOXED).await);
    }
    joined_the_pool(&net, 3).await;
    let mut stakes = Vec::new();
    for worker in &workers {
        stakes.push(net.node(worker.node_id).await.stake);
    }
    let spec = docker_spec(&net, "head -c 32 /dev/urandom > /outputs/noise").await;
    let job = net
        .post_verified_spec(Verification::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Failed).await;
    let revealed = of_job(net.market(ADMIN).ResultRevealed_filter(), job).await;
    let digests: std::collections::BTreeSet<_> = revealed.iter().map(|(e, _)| e.digest).collect();
    assert_eq!(digests.len(), 3, "every seat revealed its own digest");
    let failed = of_job(net.market(ADMIN).JobFailed_filter(), job).await;
    assert_eq!(failed.len(), 1, "no quorum");
    assert_eq!(
        failed[0].0.refund.to::<u64>(),
        0,
        "nothing back to the submitter"
    );
    let forfeited = of_job(net.market(ADMIN).ReplicaForfeited_filter(), job).await;
    assert_eq!(
        forfeited.len(),
        3,
        "every revealer's bounty to the treasury"
    );
    for (worker, stake) in workers.iter().zip(stakes) {
        let info = net.node(worker.node_id).await;
        assert_eq!(info.stake, stake, "node {} not slashed", worker.node_id);
        assert_eq!(info.earnings.to::<u64>(), 0);
        assert_eq!(info.lockedStake.to::<u64>(), 0);
    }
    for worker in workers {
        assert!(worker.stop().success());
    }
}

/// A job whose input does not match its declared hash fails on every node alike, after
/// the seats were taken: each seat seals `input-refused` (giving the seat back then would
/// be charged, the grace long over), all three agree, and all three are paid for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_docker_job_whose_input_does_not_match_is_sealed_and_paid() {
    let net = Net::start(|p| p).await;
    let mut workers = Vec::new();
    for account in &NODES[1..] {
        workers.push(net.spawn_worker(*account, SANDBOXED).await);
    }
    joined_the_pool(&net, 3).await;
    let mut spec = docker_spec(&net, "cat /inputs/data.txt > /outputs/copy").await;
    spec.inputs[0].sha256 = Some("00".repeat(32));
    let job = net
        .post_verified_spec(Verification::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Completed).await;
    for worker in &workers {
        let info = net.node(worker.node_id).await;
        assert!(
            info.earnings.to::<u64>() > 0,
            "node {} paid",
            worker.node_id
        );
    }
    let tar = net.verified_result(job).await;
    let mut outcome = String::new();
    for entry in tar::Archive::new(tar.as_slice()).entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().ends_with(".gantry/outcome") {
            std::io::Read::read_to_string(&mut entry, &mut outcome).unwrap();
        }
    }
    assert_eq!(outcome, "v1 trap input-refused\n");
    for worker in workers {
        assert!(worker.stop().success());
    }
}
