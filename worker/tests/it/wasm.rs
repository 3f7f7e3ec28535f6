//! WASM jobs through the whole pipeline, on workers that run no Docker engine
//! (`engines = ["wasm"]`).

use std::collections::BTreeMap;
use std::time::Duration;

use futures::StreamExt;
use gantry_protocol::jobs::ProgressUpdate;
use gantry_protocol::spec::{Engine, InputSpec, JobSpec, ModuleSpec, WasmSpec};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::NODES;
use sha2::{Digest, Sha256};

use crate::harness::{Net, Services, wasm_job};

pub(crate) const WASM_ONLY: &str = "engines = [\"wasm\"]";
pub(crate) const DEMO: &str = include_str!("../../../deploy/demo/summary.wat");

/// A WASM spec running `module` (put in the inputs bucket as `name`).
pub(crate) async fn wasm_spec(net: &Net, name: &str, module: &str, deterministic: bool) -> JobSpec {
    let uri = net.put_input(name, module.as_bytes()).await;
    JobSpec {
        encryption: None,
        version: 2,
        kind: Default::default(),
        engine: Engine::Wasm,
        image: String::new(),
        command: vec![],
        env: Default::default(),
        inputs: vec![],
        outputs: Default::default(),
        resources: Default::default(),
        timeout_secs: 30,
        wasm: Some(WasmSpec {
            module: ModuleSpec {
                uri,
                sha256: hex::encode(Sha256::digest(module.as_bytes())),
                max_bytes: None,
            },
            entry: None,
            memory_mib: Some(16),
            deterministic,
        }),
    }
}

/// The demo module summarising a small CSV at `/inputs/data.csv` (both put in the inputs
/// bucket): its `summary.json` starts `{"lines":3,"bytes":20,`.
pub(crate) async fn demo_spec(net: &Net) -> JobSpec {
    let csv = b"x1,x2,y\n1,2,3\n4,5,6\n";
    let mut spec = wasm_spec(net, "summary.wat", DEMO, false).await;
    spec.inputs.push(InputSpec {
        encrypted: false,
        uri: net.put_input("data.csv", csv).await,
        sha256: Some(hex::encode(Sha256::digest(csv))),
        path: "/inputs/data.csv".into(),
        max_bytes: None,
    });
    spec
}

/// The observer module as the verified tests post it: deterministic, with 15 s of fuel,
/// which a 600 s seat fits (design 18's fit rule), writing at most 1 MiB.
async fn verified_spec(net: &Net) -> JobSpec {
    let mut spec = wasm_spec(net, "observer.wat", OBSERVER, true).await;
    spec.timeout_secs = 15;
    // What it may write: the test workers keep less than the protocol's default.
    spec.outputs.max_bytes = Some(1 << 20);
    spec
}

fn text_files(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<&str, String> {
    files
        .iter()
        .map(|(name, bytes)| (name.as_str(), String::from_utf8_lossy(bytes).into_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_wasm_job_runs_on_a_worker_without_docker_and_a_trapping_one_is_its_own_fault() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let worker = net.spawn_worker(NODES[0], WASM_ONLY).await;

    let spec = demo_spec(&net).await;
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let mut progress = client
        .subscribe(format!("gantry.jobs.{}.progress.>", net.chain_id()))
        .await
        .unwrap();

    // The node says on chain that it runs WASM alone.
    assert_eq!(
        net.node(worker.node_id).await.engines,
        gantry_protocol::eligibility::Engines::WASM.0
    );
    let job = net.post(wasm_job(64), &spec).await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    assert_eq!(net.job(job).await.state.node_id, worker.node_id);
    // The result on chain is the SHA-256 of the uploaded tar of /outputs.
    let event = net.submitted_result(job).await;
    let tar = net.download(&event.resultURI).await;
    assert_eq!(event.resultHash.0, <[u8; 32]>::from(Sha256::digest(&tar)));
    let files = net.result_files(job).await;
    assert!(
        text_files(&files)["summary.json"].starts_with("{\"lines\":3,\"bytes\":20,"),
        "{files:?}"
    );
    let update = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            let message = progress.next().await.unwrap();
            let update: ProgressUpdate = serde_json::from_slice(&message.payload).unwrap();
            if update.job_id == job && update.progress == Some(1.0) {
                return update;
            }
        }
    })
    .await
    .expect("the module's last progress line");
    assert_eq!(update.progress, Some(1.0));

    // A module that traps: answered with its failure report (paid: the node did the work),
    // never given back or reclaimed; the worker takes the next job.
    let trap = wasm_spec(
        &net,
        "trap.wat",
        r#"(module (memory (export "memory") 1) (func (export "_start") unreachable))"#,
        false,
    )
    .await;
    let trapped = net.post(wasm_job(64), &trap).await;
    net.wait_for_status(trapped, JobStatus::Submitted).await;
    let report = net.failure_report(trapped).await.expect("a failure report");
    let reason = report["reason"].as_str().unwrap();
    assert!(
        reason.starts_with("trapped: ") && reason.contains("unreachable"),
        "{report}"
    );
    assert!(net.slashes(worker.node_id).await.is_empty());
    let again = net.post(wasm_job(64), &spec).await;
    net.wait_for_status(again, JobStatus::Submitted).await;
    assert_eq!(
        net.submitted_result(again).await.resultHash,
        event.resultHash
    );
    assert!(worker.stop().success());
}

/// Writes the clocks and random bytes it reads to /outputs/seen.
const OBSERVER: &str = include_str!("../modules/observer.wat");

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_deterministic_wasm_job_gives_the_same_result_on_two_workers() {
    let net = Net::start(|p| p).await;
    net.fund_submitter().await;
    let spec = wasm_spec(&net, "observer.wat", OBSERVER, true).await;

    // The same spec run by two nodes, one after the other.
    let first = net.spawn_worker(NODES[0], WASM_ONLY).await;
    let a = net.post(wasm_job(64), &spec).await;
    net.wait_for_status(a, JobStatus::Submitted).await;
    assert!(first.stop().success());
    let second = net.spawn_worker(NODES[1], WASM_ONLY).await;
    let b = net.post(wasm_job(64), &spec).await;
    net.wait_for_status(b, JobStatus::Submitted).await;
    let (on_a, on_b) = (
        net.job(a).await.state.node_id,
        net.job(b).await.state.node_id,
    );
    assert_ne!(on_a, on_b, "two nodes");

    let (result_a, result_b) = (net.submitted_result(a).await, net.submitted_result(b).await);
    assert_eq!(result_a.resultHash, result_b.resultHash, "the same result");
    let seen = &net.result_files(a).await["seen"];
    assert_eq!(
        u64::from_le_bytes(seen[0..8].try_into().unwrap()),
        gantry_worker::wasm::FIXED_WALL_CLOCK.as_nanos() as u64,
        "the fixed wall clock"
    );
    assert!(second.stop().success());

    // Not deterministic, the same module reads the host's clock: another result.
    let free = wasm_spec(&net, "observer-free.wat", OBSERVER, false).await;
    let third = net.spawn_worker(NODES[2], WASM_ONLY).await;
    let c = net.post(wasm_job(64), &free).await;
    net.wait_for_status(c, JobStatus::Submitted).await;
    assert_ne!(
        net.submitted_result(c).await.resultHash,
        result_a.resultHash
    );
    assert!(third.stop().success());
}

/// A refereed job its provider could not finish (its fuel does not fit the run: the fit
/// rule) is given back at once and free, the hold released and the job requeued: the
/// provider never starts a run the wall clock would end and pays for.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refereed_job_its_provider_cannot_finish_is_given_back_at_once_and_free() {
    use gantry_protocol::bindings::Referees;
    use gantry_protocol::market::Verification;
    use gantry_testkit::accounts::MATCHER;

    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    let worker = net.spawn_worker(NODES[0], WASM_ONLY).await;
    let mut spec = wasm_spec(&net, "observer.wat", OBSERVER, true).await;
    spec.timeout_secs = 300;
    let job = net
        .post_verified_spec(Verification::REFEREED, 3, 0, spec.to_posted().unwrap())
        .await;
    let open = net.job(job).await;
    gantry_testkit::confirm_receipt(
        "assignRefereed",
        Referees::new(net.devnet.deployment.market, net.provider(MATCHER))
            .assignRefereed(
                job,
                worker.node_id,
                open.terms.pack().into(),
                open.state.pack_verified().unwrap().into(),
            )
            .send()
            .await,
    )
    .await
    .expect("the matcher places it");
    let rejection = net.given_back(job, worker.node_id).await;
    assert!(
        rejection.reason.contains("does not fit a verified seat"),
        "{}",
        rejection.reason
    );
    assert_eq!(rejection.charge, 0, "free within the grace");
    let after = net.job(job).await;
    assert_eq!(
        after.state.status,
        JobStatus::Open,
        "requeued for another node"
    );
    assert_eq!(
        net.node(worker.node_id).await.lockedStake.to::<u64>(),
        0,
        "the hold released"
    );
}

/// Design 18's replicated tier end to end on three workers of three operators (the whole
/// pool, so all three are seated) and the keeper: each worker runs the deterministic job
/// for its seat, commits its seal and reveals it once the keeper opened the reveals; the
/// keeper decides; all three agree and are paid, their seat stakes released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_replicated_3_2_on_three_workers_pays_all_three() {
    use gantry_protocol::market::Verification;

    let net = Net::start(|p| p).await;
    let mut workers = Vec::new();
    for account in &NODES[1..] {
        workers.push(net.spawn_worker(*account, WASM_ONLY).await);
    }
    let nodes: Vec<u64> = workers.iter().map(|w| w.node_id).collect();
    joined_the_pool(&net, 3).await;
    let spec = verified_spec(&net).await;
    let job = net
        .post_verified_spec(Verification::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Completed).await;
    for node in &nodes {
        let info = net.node(*node).await;
        assert_eq!(
            info.lockedStake.to::<u64>(),
            0,
            "node {node}'s seat released"
        );
        assert!(info.earnings.to::<u64>() > 0, "node {node} paid");
    }
    // After the decision the paid seats upload the outcome the quorum agreed on: its
    // SHA-256 is the digest on chain, and it holds the module's outputs and the outcome.
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
    assert_eq!(
        <[u8; 32]>::from(Sha256::digest(&tar)),
        digest.0,
        "the agreed digest"
    );
    let mut outcome = String::new();
    let mut archive = tar::Archive::new(tar.as_slice());
    for entry in archive.entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.path().unwrap().ends_with(".gantry/outcome") {
            std::io::Read::read_to_string(&mut entry, &mut outcome).unwrap();
        }
    }
    assert_eq!(outcome, "v1 exit 0\n");
    for worker in workers {
        assert!(worker.stop().success());
    }
}

/// One of the three workers lies (the debug builds' test hook seals another digest): the
/// two honest ones reach the quorum and are paid, the liar is slashed its seat stake and
/// paid nothing, and the job completes with the honest result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_lying_worker_is_slashed_and_the_job_still_completes() {
    use gantry_protocol::market::Verification;

    let net = Net::start(|p| p).await;
    let honest = [
        net.spawn_worker(NODES[1], WASM_ONLY).await,
        net.spawn_worker(NODES[2], WASM_ONLY).await,
    ];
    let liar = net
        .spawn_worker(
            NODES[3],
            &format!("{WASM_ONLY}\n\n[test]\ncorrupt_digest = true"),
        )
        .await;
    joined_the_pool(&net, 3).await;
    let stake_before = net.node(liar.node_id).await.stake;
    let spec = verified_spec(&net).await;
    let job = net
        .post_verified_spec(Verification::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Completed).await;
    let seat_stake = net.job(job).await.state.verified.unwrap().draw.seat_stake;
    for worker in &honest {
        let info = net.node(worker.node_id).await;
        assert!(info.earnings.to::<u64>() > 0, "an honest replica is paid");
        assert_eq!(info.stake, stake_before, "and not slashed");
    }
    let info = net.node(liar.node_id).await;
    assert_eq!(info.earnings.to::<u64>(), 0, "the liar is not paid");
    assert_eq!(
        stake_before.to::<u128>() - info.stake.to::<u128>(),
        seat_stake,
        "the liar loses its seat stake"
    );
    assert_eq!(info.lockedStake.to::<u64>(), 0);
    for worker in honest.into_iter().chain([liar]) {
        assert!(worker.stop().success());
    }
}

/// A worker killed after committing its seat, and started again, still reveals it: its
/// seal record survives the start (the one directory a start does not empty) and the
/// seat's message, never acknowledged, comes back to it. (Without the record the seat
/// would stay committed and be slashed as a non-revealer.) No keeper: the test draws,
/// opens the reveals and decides itself, so the phases wait for the restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_worker_restarted_after_its_commit_still_reveals() {
    use gantry_protocol::market::{Seat, Verification as Policy};

    let net = Net::start_with(|p| p, crate::harness::Services::NO_KEEPER).await;
    let mut workers = Vec::new();
    for account in &NODES[1..] {
        workers.push(net.spawn_worker(*account, WASM_ONLY).await);
    }
    let nodes: Vec<u64> = workers.iter().map(|w| w.node_id).collect();
    joined_the_pool(&net, 3).await;
    let spec = verified_spec(&net).await;
    let job = net
        .post_verified_spec(Policy::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.draw(job).await;

    net.wait_until("every seat committed", || {
        all_seats(&net, job, Seat::COMMITTED)
    })
    .await;

    // The first worker dies (SIGKILL) and comes back.
    let first = workers.remove(0);
    first.kill();
    workers.insert(0, net.spawn_worker(NODES[1], WASM_ONLY).await);

    open_reveals_and_decide(
        &net,
        job,
        &nodes,
        "every seat revealed, the restarted one too",
    )
    .await;
    for worker in workers {
        assert!(worker.stop().success());
    }
}

/// The fit rule: a verified job whose fuel no conforming node finishes within a seat's run
/// (here 300 s of fuel in a 600 s seat) is declined by every seat within the grace, free:
/// no honest node starts a run the wall clock would end and then pays for giving it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_job_no_seat_can_finish_is_declined_by_every_seat_free() {
    let net = Net::start_with(|p| p, crate::harness::Services::NO_KEEPER).await;
    let mut spec = verified_spec(&net).await;
    spec.timeout_secs = 300;
    let why = spec.verified_fit(600).unwrap_err();
    assert!(why.contains("does not fit"), "{why}");
    declined_by_every_seat(&net, WASM_ONLY, &spec).await;
}

/// Design 18, G1: a seat whose reveal window is shorter than twice the node's wait for
/// finality (here 40 blocks against a 60 s window) is declined within the grace, free: the
/// node reveals only once the reveal phase is final, and would miss the window.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_seat_whose_reveal_window_the_node_cannot_keep_is_declined_free() {
    let net = Net::start_with(|p| p, crate::harness::Services::NO_KEEPER).await;
    let spec = verified_spec(&net).await;
    declined_by_every_seat(&net, &format!("{WASM_ONLY}\nfinality_depth = 40"), &spec).await;
}

/// Three workers (`jobs` their extra job settings) in the pool; a replicated 3/2 job of
/// `spec` drawn onto them: every seat is declined, and no node is charged.
async fn declined_by_every_seat(net: &Net, jobs: &str, spec: &JobSpec) {
    use gantry_protocol::market::{Seat, Verification as Policy};

    let mut workers = Vec::new();
    for account in &NODES[1..] {
        workers.push(net.spawn_worker(*account, jobs).await);
    }
    joined_the_pool(net, 3).await;
    let mut stakes = Vec::new();
    for worker in &workers {
        stakes.push(net.node(worker.node_id).await.stake);
    }
    let job = net
        .post_verified_spec(Policy::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.draw(job).await;
    net.wait_until("every seat declined", || {
        all_seats(net, job, Seat::DECLINED)
    })
    .await;
    for (worker, stake) in workers.iter().zip(stakes) {
        let info = net.node(worker.node_id).await;
        assert_eq!(info.stake, stake, "node {} charged nothing", worker.node_id);
        assert_eq!(info.lockedStake.to::<u64>(), 0, "its seat stake released");
    }
    for worker in workers {
        assert!(worker.stop().success());
    }
}

/// A refereed job of the submitter's, provided by a worker of `NODES[0]` (lying when
/// `lying`: the debug builds' hook seals another digest) and disputed by its submitter;
/// referees from the three other workers (four operators: the pool less the provider is the
/// panel), drawn, opened and decided by the keeper. Returns (the job, the provider's
/// node, its stake before, the referees' nodes) once the job is settled.
async fn refereed_dispute(net: &Net, lying: bool) -> (u64, u64, u128, Vec<u64>) {
    use gantry_protocol::bindings::Referees;
    use gantry_protocol::market::Verification;
    use gantry_testkit::accounts::{MATCHER, SUBMITTER};

    let hook = if lying {
        "\n\n[test]\ncorrupt_digest = true"
    } else {
        ""
    };
    let provider = net
        .spawn_worker(NODES[0], &format!("{WASM_ONLY}{hook}"))
        .await;
    let mut referees = Vec::new();
    for account in &NODES[1..] {
        referees.push(net.spawn_worker(*account, WASM_ONLY).await);
    }
    joined_the_pool(net, 4).await;
    let stake = net.node(provider.node_id).await.stake.to::<u128>();
    let spec = verified_spec(net).await;
    let job = net
        .post_verified_spec(Verification::REFEREED, 3, 0, spec.to_posted().unwrap())
        .await;
    let market = net.devnet.deployment.market;
    let open = net.job(job).await;
    gantry_testkit::confirm_receipt(
        "assignRefereed",
        Referees::new(market, net.provider(MATCHER))
            .assignRefereed(
                job,
                provider.node_id,
                open.terms.pack().into(),
                open.state.pack_verified().unwrap().into(),
            )
            .send()
            .await,
    )
    .await
    .expect("the matcher places it");
    net.wait_for_status(job, JobStatus::Submitted).await;

    // What the provider put for the submitter opens the seal on chain: the tar's SHA-256
    // is the digest sealed (unless it lied), with the salt beside it.
    let bucket = gantry_protocol::names::sealed_bucket(net.chain_id());
    let read = |key: String| {
        let bucket = &bucket;
        let net = &net;
        async move {
            net.scoped_object(bucket, provider.node_id, &key)
                .await
                .expect("the provider's sealed object")
        }
    };
    let tar = read(gantry_protocol::names::provider_result_key(job)).await;
    let opening: gantry_protocol::names::ProviderSeal =
        serde_json::from_slice(&read(gantry_protocol::names::provider_seal_key(job)).await)
            .unwrap();
    let submitted = net.job(job).await;
    let sealed = gantry_protocol::market::seal(
        net.chain_id(),
        market,
        job,
        gantry_protocol::market::PROVIDER_SEAT,
        provider.node_id,
        opening.digest,
        opening.salt,
    );
    assert_eq!(
        submitted.state.verified.unwrap().result,
        sealed,
        "the seal opens"
    );
    assert_eq!(
        <[u8; 32]>::from(Sha256::digest(&tar)) == opening.digest.0,
        !lying,
        "the tar is the digest sealed unless the provider lied"
    );

    // The submitter disputes: the bond and the referees' pay escrowed, the keeper draws.
    gantry_testkit::confirm_receipt(
        "requestReferees",
        Referees::new(market, net.provider(SUBMITTER))
            .requestReferees(
                job,
                submitted.terms.pack().into(),
                submitted.state.pack_verified().unwrap().into(),
            )
            .send()
            .await,
    )
    .await
    .expect("disputed");
    net.wait_until("the dispute decided", || async {
        net.job(job).await.state.status.is_settled()
    })
    .await;
    // Decided by the referees (no arbiter), with the provider's seal opened: the provider
    // stood by the digest it sealed, and the referees found theirs.
    let decided = referees_decided(net, job).await;
    assert_eq!(decided.outcome, if lying { 1 } else { 0 }, "{decided:?}");
    let revealed = gantry_runtime::market::read_provider_revealed(
        &net.devnet.admin,
        market,
        net.devnet.deployment.start_block,
        job,
    )
    .await
    .unwrap()
    .expect("the provider's worker opened its seal");
    assert_eq!(revealed, opening.digest);
    assert_eq!(
        decided.digest.0,
        <[u8; 32]>::from(Sha256::digest(&tar)),
        "the referees' majority is the honest outcome"
    );
    let referee_nodes = referees.iter().map(|w| w.node_id).collect();
    let provider_node = provider.node_id;
    for worker in referees.into_iter().chain([provider]) {
        assert!(worker.stop().success());
    }
    (job, provider_node, stake, referee_nodes)
}

/// Permissionless providers: a worker in claim mode takes a refereed job no matcher placed
/// (`claimRefereed`, its hold locked), runs, seals and submits it; the submitter accepts
/// the result it can check (the opening opens the seal), the provider is paid and its hold
/// released.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_a_provider_in_claim_mode_takes_a_refereed_job_and_is_paid() {
    use gantry_protocol::bindings::Referees;
    use gantry_protocol::market::Verification;
    use gantry_testkit::accounts::SUBMITTER;

    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    let provider = net
        .spawn_worker(NODES[0], &format!("{WASM_ONLY}\nauto_accept = true"))
        .await;
    let spec = verified_spec(&net).await;
    let job = net
        .post_verified_spec(Verification::REFEREED, 3, 0, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    let submitted = net.job(job).await;
    assert_eq!(
        submitted.state.node_id, provider.node_id,
        "claimed by the provider"
    );
    assert!(
        net.node(provider.node_id).await.lockedStake.to::<u128>() > 0,
        "its hold locked"
    );
    gantry_testkit::confirm_receipt(
        "acceptVerified",
        Referees::new(net.devnet.deployment.market, net.provider(SUBMITTER))
            .acceptVerified(
                job,
                submitted.terms.pack().into(),
                submitted.state.pack_verified().unwrap().into(),
            )
            .send()
            .await,
    )
    .await
    .expect("accepted");
    assert_eq!(net.job(job).await.state.status, JobStatus::Completed);
    let info = net.node(provider.node_id).await;
    assert!(info.earnings.to::<u64>() > 0, "the provider is paid");
    assert_eq!(info.lockedStake.to::<u64>(), 0, "its hold released");
    assert!(provider.stop().success());
}

/// The matcher places a refereed job's provider as it places any open job's node
/// (`assignRefereed`, the provider's hold locked): a worker that is not in claim mode runs,
/// seals and submits it, and is paid once its submitter accepts the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_the_matcher_places_a_refereed_job_and_its_provider_is_paid() {
    use gantry_protocol::bindings::Referees;
    use gantry_protocol::market::Verification;
    use gantry_testkit::accounts::{ADMIN, SUBMITTER};

    let net = Net::start(|p| p).await;
    let provider = net.spawn_worker(NODES[0], WASM_ONLY).await;
    let spec = verified_spec(&net).await;
    let job = net
        .post_verified_spec(Verification::REFEREED, 3, 0, spec.to_posted().unwrap())
        .await;
    net.wait_for_status(job, JobStatus::Submitted).await;
    let assigned = crate::scripts::of_job(net.market(ADMIN).JobAssigned_filter(), job).await;
    assert_eq!(assigned.len(), 1);
    assert_eq!(assigned[0].0.nodeId, provider.node_id);
    assert!(!assigned[0].0.claimed, "placed by the matcher, not claimed");
    let held = crate::scripts::of_job(net.market(ADMIN).HoldLocked_filter(), job).await;
    assert_eq!(held.len(), 1, "the provider's hold locked");
    let submitted = net.job(job).await;
    gantry_testkit::confirm_receipt(
        "acceptVerified",
        Referees::new(net.devnet.deployment.market, net.provider(SUBMITTER))
            .acceptVerified(
                job,
                submitted.terms.pack().into(),
                submitted.state.pack_verified().unwrap().into(),
            )
            .send()
            .await,
    )
    .await
    .expect("accepted");
    let info = net.node(provider.node_id).await;
    assert!(info.earnings.to::<u64>() > 0, "the provider is paid");
    assert_eq!(info.lockedStake.to::<u64>(), 0, "its hold released");
    assert!(provider.stop().success());
}

/// Claim mode checks a refereed job as a verified run is admitted before it claims it (a
/// claimed job given back after the grace is charged): a module that cannot link here is
/// left unclaimed, while the next job, which can run, is claimed and answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_claim_mode_leaves_a_refereed_job_it_could_not_run_unclaimed() {
    use gantry_protocol::market::Verification;

    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    let provider = net
        .spawn_worker(NODES[0], &format!("{WASM_ONLY}\nauto_accept = true"))
        .await;
    let broken = r#"(module
      (import "env" "not_here" (func))
      (memory (export "memory") 1)
      (func (export "_start")))"#;
    let mut unlinkable = wasm_spec(&net, "unlinkable.wat", broken, true).await;
    unlinkable.timeout_secs = 15;
    unlinkable.outputs.max_bytes = Some(1 << 20);
    let left = net
        .post_verified_spec(
            Verification::REFEREED,
            3,
            0,
            unlinkable.to_posted().unwrap(),
        )
        .await;
    let spec = verified_spec(&net).await;
    let taken = net
        .post_verified_spec(Verification::REFEREED, 3, 0, spec.to_posted().unwrap())
        .await;
    // Claim mode considers the jobs one at a time, in order: once the second is answered,
    // the first was considered.
    net.wait_for_status(taken, JobStatus::Submitted).await;
    let info = net.job(left).await;
    assert_eq!(info.state.status, JobStatus::Open, "never claimed");
    assert_eq!(info.state.barred, 0, "nor given back");
    assert!(provider.stop().success());
}

/// Job `job`'s `RefereesDecided`.
async fn referees_decided(
    net: &Net,
    job: u64,
) -> gantry_protocol::bindings::JobMarket::RefereesDecided {
    use alloy::providers::Provider;
    use alloy::sol_types::SolEvent;
    use gantry_protocol::bindings::JobMarket::RefereesDecided;

    let filter = alloy::rpc::types::Filter::new()
        .address(net.devnet.deployment.market)
        .event_signature(RefereesDecided::SIGNATURE_HASH)
        .topic1(alloy::primitives::B256::from(
            alloy::primitives::U256::from(job),
        ))
        .from_block(0);
    let logs = net.devnet.admin.get_logs(&filter).await.unwrap();
    let log = logs.last().expect("RefereesDecided");
    RefereesDecided::decode_log(&log.inner).unwrap().data
}

/// Design 18, §2.6: a provider that sealed a wrong result is overturned by three referees
/// that re-ran the job, without the arbiter: the job fails, the provider loses its seat
/// stake and is not paid, the referees are paid from the submitter's prepay (which the
/// provider's hold repays).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_referees_overturn_a_lying_provider() {
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    let (job, provider, stake, referees) = refereed_dispute(&net, true).await;
    let settled = net.job(job).await;
    assert_eq!(settled.state.status, JobStatus::Failed, "overturned");
    let info = net.node(provider).await;
    assert!(
        info.stake.to::<u128>() < stake,
        "the lying provider is slashed"
    );
    assert_eq!(info.earnings.to::<u64>(), 0, "and not paid");
    assert_eq!(info.lockedStake.to::<u64>(), 0, "its hold released");
    for node in referees {
        assert!(
            net.node(node).await.earnings.to::<u64>() > 0,
            "referee {node} paid"
        );
    }
}

/// Design 18, §2.6: a dispute of an honest provider's result is upheld by the referees:
/// the provider is paid and keeps its stake, the referees are paid, the submitter loses
/// its bond. No arbiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_referees_uphold_a_frivolous_dispute() {
    let net = Net::start_with(|p| p, Services::NO_MATCHER).await;
    let (job, provider, stake, referees) = refereed_dispute(&net, false).await;
    let settled = net.job(job).await;
    assert_eq!(settled.state.status, JobStatus::Completed, "upheld");
    let info = net.node(provider).await;
    assert_eq!(
        info.stake.to::<u128>(),
        stake,
        "the honest provider keeps its stake"
    );
    assert!(info.earnings.to::<u64>() > 0, "and is paid");
    assert_eq!(info.lockedStake.to::<u64>(), 0, "its hold released");
    for node in referees {
        assert!(
            net.node(node).await.earnings.to::<u64>() > 0,
            "referee {node} paid"
        );
    }
}

/// The seat path under a reorganisation: the blocks from the first commit on are replaced
/// (the commits gone from the chain); each worker sees its seat Seated again and commits
/// again, from the seal it kept, and the job is decided with all three paid. No keeper:
/// the test draws, opens the reveals and decides, so the phases wait for the recommits.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn verification_commits_a_reorganisation_took_away_are_sent_again() {
    use alloy::providers::Provider;
    use alloy::sol_types::SolEvent;
    use gantry_protocol::bindings::JobMarket::SealCommitted;
    use gantry_protocol::market::{Seat, Verification as Policy};

    let net = Net::start_with(|p| p, crate::harness::Services::NO_KEEPER).await;
    let mut workers = Vec::new();
    for account in &NODES[1..] {
        // Deeper than the test's reorganisation: the commits are not final when it lands,
        // as a node's finality_depth must be for the reorganisations it expects.
        workers.push(
            net.spawn_worker(*account, &format!("{WASM_ONLY}\nfinality_depth = 10"))
                .await,
        );
    }
    let nodes: Vec<u64> = workers.iter().map(|w| w.node_id).collect();
    let market = net.devnet.deployment.market;
    joined_the_pool(&net, 3).await;
    let spec = verified_spec(&net).await;
    let job = net
        .post_verified_spec(Policy::REPLICATED, 3, 2, spec.to_posted().unwrap())
        .await;
    net.draw(job).await;
    net.wait_until("every seat committed", || {
        all_seats(&net, job, Seat::COMMITTED)
    })
    .await;

    let commits = || async {
        net.devnet
            .admin
            .get_logs(
                &alloy::rpc::types::Filter::new()
                    .address(market)
                    .event_signature(SealCommitted::SIGNATURE_HASH)
                    .from_block(0),
            )
            .await
            .unwrap()
    };
    let first = commits()
        .await
        .iter()
        .filter_map(|log| log.block_number)
        .min()
        .expect("the commits' blocks");
    let head = net.devnet.admin.get_block_number().await.unwrap();
    net.devnet.reorg_from(first).await.expect("anvil_reorg");
    net.wait_until("every seat committed again", || {
        all_seats(&net, job, Seat::COMMITTED)
    })
    .await;
    // The commits on chain now are all sent again: every one lies past the replaced blocks.
    let again = commits().await;
    assert_eq!(again.len(), 3, "one commit a seat");
    assert!(
        again.iter().all(|log| log.block_number > Some(head)),
        "every commit on chain was sent after the reorganisation"
    );

    open_reveals_and_decide(&net, job, &nodes, "every seat revealed").await;
    for worker in workers {
        assert!(worker.stop().success());
    }
}

/// Opens replicated job `job`'s reveals as anyone may, waits until every seat revealed
/// (`revealed` says what that wait is), decides it, and checks it completed with every
/// node of `nodes` paid.
async fn open_reveals_and_decide(net: &Net, job: u64, nodes: &[u64], revealed: &str) {
    use gantry_protocol::market::Seat;

    net.open_reveals(job).await;
    net.wait_until(revealed, || all_seats(net, job, Seat::REVEALED))
        .await;
    net.decide(job).await;
    assert_eq!(net.job(job).await.state.status, JobStatus::Completed);
    for node in nodes {
        assert!(
            net.node(*node).await.earnings.to::<u64>() > 0,
            "node {node} paid"
        );
    }
}

/// Whether the job's three seats are all in `phase`.
async fn all_seats(net: &Net, job: u64, phase: u8) -> bool {
    net.seats(job).await.0[..3].iter().all(|s| s.phase == phase)
}

/// Waits until the verification pool holds `members` nodes: workers that serve WASM join
/// it by themselves (their heartbeat loop sends `syncPool`).
pub(crate) async fn joined_the_pool(net: &Net, members: u64) {
    net.wait_until(
        &format!("{members} nodes in the verification pool"),
        || async {
            net.registry(gantry_testkit::accounts::OTHER)
                .poolSize()
                .call()
                .await
                .is_ok_and(|size| size >= alloy::primitives::U256::from(members))
        },
    )
    .await;
}
