//! `gantry job submit`: what is posted is what was asked, from flags or a spec file; the
//! balance is checked before anything is sent.

use alloy::primitives::aliases::U96;
use alloy::primitives::{B256, U256};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::eligibility::Requirements;
use gantry_protocol::market::Terms;
use gantry_protocol::spec::{JobKind, JobSpec, SETUP_ALLOWANCE_SECS, runtime_for};
use gantry_testkit::accounts::SUBMITTER;

use crate::harness::Net;

/// The job's JobPosted event, as the chain has it.
async fn posted(net: &Net, job_id: u64) -> JobMarket::JobPosted {
    let logs = net
        .devnet
        .job_events::<JobMarket::JobPosted>(job_id)
        .await
        .unwrap();
    assert_eq!(logs.len(), 1, "one JobPosted for job {job_id}");
    logs.into_iter().next().unwrap().0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_with_flags_posts_the_requirements_bounty_deadline_and_spec_asked_for() {
    let net = Net::start().await;
    net.mint(SUBMITTER, 100).await;
    let sha = "3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a";
    let input = format!("data.tar=https://data.example.org/d.tar#sha256={sha}");
    let before = net.devnet.now().await.unwrap();
    let out = net
        .gantry(SUBMITTER)
        .run(&[
            "job",
            "submit",
            "--image",
            "ghcr.io/acme/train:1",
            "--gpu-model",
            "NVIDIA A100-SXM4-80GB",
            "--gpus",
            "2",
            "--vram",
            "40GiB",
            "--ram",
            "64GiB",
            "--cpus",
            "8",
            "--duration",
            "4h",
            "--max-price",
            "2.5",
            "--priority",
            "7",
            "--bounty",
            "12.5",
            "--deadline",
            "24h",
            "--env",
            "SEED=42",
            "--input",
            &input,
            "--kind",
            "inference",
            "--json",
            "--",
            "python",
            "train.py",
            "--epochs",
            "3",
        ])
        .await
        .ok();
    let after = net.devnet.now().await.unwrap();
    let printed = out.json();
    let job_id = printed["jobId"].as_u64().expect("the job id");
    assert!(printed["tx"].as_str().unwrap().starts_with("0x"));

    let job = net.job(job_id).await.terms;
    assert_eq!(job.submitter, net.address(SUBMITTER));
    assert_eq!(job.bounty, 12_500_000);
    assert_eq!(
        job.requirements,
        Requirements::from(&JobMarket::JobRequirements {
            gpuModel: B256::right_padding_from(b"NVIDIA-A100-SXM4-80GB"),
            minGpuCount: 2,
            minVramMiB: 40 * 1024,
            minCpuCores: 8,
            minRamMiB: 64 * 1024,
            maxPricePerGpuHour: U96::from(2_500_000u64),
            // The job's own 4 h, and the time to start and answer.
            maxRuntime: 4 * 3600 + 120,
            priority: 7,
            engine: gantry_protocol::spec::Engine::Docker.code(),
        })
    );
    let deadline = job.deadline;
    assert!(
        (before + 86_400..=after + 86_400).contains(&deadline),
        "deadline {deadline} is 24h after chain time {before}..{after}"
    );

    let event = posted(&net, job_id).await;
    assert_eq!(job.spec_hash, JobSpec::hash_bytes(&event.spec));
    let spec = JobSpec::from_slice(&event.spec).expect("a valid spec");
    assert_eq!(spec.image, "ghcr.io/acme/train:1");
    assert_eq!(spec.kind, JobKind::Inference);
    assert_eq!(spec.command, ["python", "train.py", "--epochs", "3"]);
    assert_eq!(spec.env["SEED"], "42");
    assert_eq!(spec.inputs[0].path, "/inputs/data.tar");
    assert_eq!(spec.inputs[0].uri, "https://data.example.org/d.tar");
    assert_eq!(spec.inputs[0].sha256.as_deref(), Some(sha));
    assert_eq!(spec.timeout_secs, 4 * 3600);
    assert_eq!(
        runtime_for(spec.timeout_secs),
        4 * 3600 + SETUP_ALLOWANCE_SECS
    );

    // The bounty moved with a permit: nothing is left approved.
    let allowance = net.allowance(SUBMITTER, net.devnet.deployment.market).await;
    assert_eq!(allowance, U256::ZERO);
    assert_eq!(net.balance(SUBMITTER).await, U256::from(87_500_000u64));
    assert_eq!(
        net.nonce(SUBMITTER).await,
        1,
        "one transaction: postJobWithPermit"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spec_file_is_posted_in_canonical_form_after_the_balance_and_flags_are_checked() {
    let net = Net::start().await;
    // 12.5 gUSD, and the market may already take all of it.
    net.devnet
        .fund(
            SUBMITTER,
            net.devnet.deployment.market,
            U256::from(12_500_000u64),
        )
        .await
        .unwrap();
    let file = net.dir().join("spec.json");
    let spec: serde_json::Value =
        serde_json::from_slice(&gantry_testkit::scenario::example_spec()).unwrap();
    std::fs::write(&file, serde_json::to_string_pretty(&spec).unwrap()).unwrap();
    let file = file.display().to_string();
    let gantry = net.gantry(SUBMITTER);
    let nonce = net.nonce(SUBMITTER).await;

    // Refused before any transaction, with the balance in the message.
    let out = gantry
        .run(&["job", "submit", &file, "--bounty", "20", "--json"])
        .await
        .failed(4, "bounty 20 gUSD exceeds your token balance 12.5 gUSD");
    let error: serde_json::Value = serde_json::from_str(out.stderr.trim()).unwrap();
    assert_eq!(error["exitCode"], 4);
    // Usage errors name the flag; none sends anything either.
    for (flags, message) in [
        (
            "--bounty 1.0000001",
            "--bounty: `1.0000001` has more than the token's 6 decimals",
        ),
        (
            "--bounty 1 --duration 1h",
            "--duration 1h leaves the job less than its timeoutSecs (2h) plus 2m",
        ),
        ("--bounty 1 --vram 40", "--vram: `40` is not a size"),
    ] {
        let mut args = vec!["job", "submit", &file];
        args.extend(flags.split(' '));
        gantry.run(&args).await.failed(2, message);
    }
    net.gantry_without_key()
        .run(&["job", "submit", &file, "--bounty", "1"])
        .await
        .failed(
            2,
            "this command sends a transaction: set GANTRY_PRIVATE_KEY",
        );
    // A deadline that leaves no room for the job's runtime (2 h 2 min) is refused by the market:
    // no provider can be made to run out of time on it.
    gantry
        .run(&["job", "submit", &file, "--bounty", "1", "--deadline", "1h"])
        .await
        .failed(4, "leaves no room for one attempt");
    assert_eq!(net.nonce(SUBMITTER).await, nonce, "nothing was sent");

    let out = gantry
        .run(&[
            "job", "submit", &file, "--bounty", "12.5", "--gpu", "any", "--gpus", "1",
        ])
        .await
        .ok();
    assert!(
        out.stdout.starts_with("job 1 posted: bounty 12.5 gUSD"),
        "{out:#?}"
    );
    let event = posted(&net, 1).await;
    let canonical = JobSpec::from_slice(&gantry_testkit::scenario::example_spec())
        .unwrap()
        .to_vec();
    assert_eq!(
        event.spec.to_vec(),
        canonical,
        "the compact, canonical bytes"
    );
    let terms = Terms::unpack(&event.terms);
    assert_eq!(terms.requirements.gpu_model, B256::ZERO, "any model");
    assert_eq!(terms.requirements.min_gpu_count, 1);
    assert_eq!(
        u64::from(terms.requirements.max_runtime),
        7_200 + SETUP_ALLOWANCE_SECS,
        "the spec's timeout and the setup allowance by default"
    );
    assert_eq!(net.balance(SUBMITTER).await, U256::ZERO);
    // The allowance the user had set was used as it was, not replaced by a permit.
    let allowance = net.allowance(SUBMITTER, net.devnet.deployment.market).await;
    assert_eq!(allowance, U256::MAX);
    assert_eq!(
        net.nonce(SUBMITTER).await,
        nonce + 1,
        "one transaction: postJob"
    );
}

/// Mines `blocks` empty blocks.
async fn mine(net: &Net, blocks: u64) {
    use alloy::providers::Provider;
    for _ in 0..blocks {
        let _: serde_json::Value = net
            .devnet
            .admin
            .raw_request("evm_mine".into(), ())
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_job_id_is_printed_once_confirmed_read_from_the_receipt_and_a_dropped_posting_says_so()
{
    use alloy::providers::Provider;
    let net = Net::start().await;
    net.mint(SUBMITTER, 100).await;
    let gantry = net.gantry(SUBMITTER);
    let submit = |confirmations: Option<&'static str>| {
        let mut args = vec!["job", "submit", "--image", "busybox", "--bounty", "1"];
        if let Some(confirmations) = confirmations {
            args.extend(["--confirmations", confirmations]);
        }
        args.push("--json");
        args
    };
    // The log of job `id`'s JobPosted, as the chain has it now.
    let log_of = |id: u64| {
        let net = &net;
        async move {
            let logs = net
                .devnet
                .job_events::<JobMarket::JobPosted>(id)
                .await
                .unwrap();
            logs.into_iter().map(|(_, log)| log).collect::<Vec<_>>()
        }
    };

    // On anvil's dev chain one confirmation is the default: printed once mined.
    let first = gantry.run(&submit(None)).await.ok().json();
    assert_eq!(first["jobId"], 1);
    assert_eq!(first["confirmations"], 1);
    let log = log_of(1).await.pop().expect("job 1 was posted");
    assert_eq!(first["block"], log.block_number.unwrap());
    assert_eq!(
        first["tx"],
        serde_json::json!(log.transaction_hash.unwrap())
    );

    // With three, the id comes only once two more blocks hold the posting, and it is
    // the JobPosted event's.
    let mut running = gantry.spawn(&submit(Some("3")));
    let waiting = running.stderr_until("waiting for 3 confirmations").await;
    assert!(waiting.contains("postJob"), "{waiting}");
    mine(&net, 2).await;
    let (code, lines) = running.finished().await;
    assert_eq!(code, 0, "{lines:?}");
    let printed: serde_json::Value = serde_json::from_str(&lines.join("\n")).unwrap();
    let log = log_of(2).await.pop().expect("job 2 was posted");
    assert_eq!(printed["jobId"], 2);
    assert_eq!(printed["block"], log.block_number.unwrap());
    assert_eq!(
        printed["tx"],
        serde_json::json!(log.transaction_hash.unwrap())
    );
    let head = net.devnet.admin.get_block_number().await.unwrap();
    assert!(head >= log.block_number.unwrap() + 2);

    // A posting a reorganisation drops before its confirmations: no id, and it says so.
    let snapshot: serde_json::Value = net
        .devnet
        .admin
        .raw_request("evm_snapshot".into(), ())
        .await
        .unwrap();
    let mut running = gantry.spawn(&submit(Some("2")));
    running.stderr_until("waiting for 2 confirmations").await;
    let reverted: bool = net
        .devnet
        .admin
        .raw_request("evm_revert".into(), (snapshot,))
        .await
        .unwrap();
    assert!(reverted);
    mine(&net, 2).await;
    let said = running.stderr_until("reorganisation").await;
    assert!(
        said.contains("dropped it") && said.contains("send it again"),
        "{said}"
    );
    let (code, lines) = running.finished().await;
    assert_eq!(code, 4, "refused: {lines:?}");
    assert!(lines.is_empty(), "no id printed: {lines:?}");
    assert!(log_of(3).await.is_empty(), "job 3 is not on the chain");
}

/// A posting that leaves the pool before it is mined (a reorganisation dropped it): the
/// CLI says so within seconds, as a refusal with what to do, prints no id and posts
/// nothing; it used to wait out its whole two-minute receipt timeout (the chaos suite).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_posting_dropped_before_it_is_mined_is_refused_at_once() {
    use alloy::providers::Provider;
    let net = Net::start().await;
    net.mint(SUBMITTER, 100).await;
    let gantry = net.gantry(SUBMITTER);
    let admin = &net.devnet.admin;
    let _: serde_json::Value = admin
        .raw_request("evm_setAutomine".into(), (false,))
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut running = gantry.spawn(&[
        "job", "submit", "--image", "busybox", "--bounty", "1", "--json",
    ]);
    // The posting waits in the pool (nothing mines it): polled, as nothing else happens.
    loop {
        let status: serde_json::Value =
            admin.raw_request("txpool_status".into(), ()).await.unwrap();
        let pending = status["pending"].as_str().map_or(0, |hex| {
            u64::from_str_radix(hex.trim_start_matches("0x"), 16).unwrap()
        });
        if pending > 0 {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "the posting was never sent"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let _: serde_json::Value = admin
        .raw_request("anvil_dropAllTransactions".into(), ())
        .await
        .unwrap();
    let said = running.stderr_until("left the chain and the pool").await;
    assert!(said.contains("send it again"), "{said}");
    let (code, lines) = running.finished().await;
    assert_eq!(code, 4, "refused: {lines:?}");
    assert!(lines.is_empty(), "no id printed: {lines:?}");
    assert!(
        started.elapsed().as_secs() < 60,
        "said within seconds, not after the receipt timeout"
    );
    let _: serde_json::Value = admin
        .raw_request("evm_setAutomine".into(), (true,))
        .await
        .unwrap();
    let market = JobMarket::new(net.devnet.deployment.market, admin.clone());
    assert_eq!(market.jobCount().call().await.unwrap(), 0, "nothing posted");
}

/// `--verify replicated:3/2` posts a verified job: its policy in the terms (the reveal
/// window the market's minimum), three bounties escrowed; a job that is not deterministic
/// WASM, or a policy the market would refuse, is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_submit_posts_a_replicated_job_escrowing_n_bounties() {
    use gantry_protocol::market::Verification;

    let net = Net::start().await;
    net.wasm_pool().await;
    net.mint(SUBMITTER, 100).await;
    let gantry = net.gantry(SUBMITTER);
    let nonce = net.nonce(SUBMITTER).await;
    // Every node must fetch the same bytes: a verified job's module is a nats:// input.
    let module = format!(
        "nats://{}/m.wasm#sha256=3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a",
        gantry_protocol::names::inputs_bucket(net.chain_id())
    );
    let wasm = ["--wasm", module.as_str(), "--memory", "64MiB"];
    for (flags, message) in [
        (
            vec!["--verify", "replicated:3/2"],
            "--verify: a verified WASM job runs deterministically",
        ),
        (
            vec!["--deterministic", "--verify", "replicated:3/3"],
            "--verify: \"replicated:3/3\": K must be a majority of N and less than N",
        ),
        (
            vec!["--deterministic", "--reveal-window", "1h"],
            "--reveal-window: only a verified job (--verify) has a reveal window",
        ),
    ] {
        let mut args = vec!["job", "submit", "--bounty", "5"];
        args.extend(wasm);
        args.extend(flags);
        gantry.run(&args).await.failed(2, message);
    }
    gantry
        .run(&[
            "job",
            "submit",
            "--bounty",
            "5",
            "--wasm",
            "https://modules.example.org/m.wasm#sha256=3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a",
            "--memory",
            "64MiB",
            "--deterministic",
            "--verify",
            "replicated:3/2",
        ])
        .await
        .failed(
            2,
            "--verify: a verified job's module comes from the network's nats:// inputs",
        );
    // A Docker job: replicated only, on the CPU, its image pinned by digest.
    let pinned = format!("acme/train@sha256:{}", "9f".repeat(32));
    for (image, flags, message) in [
        (
            "busybox:1",
            vec!["--verify", "replicated:3/2"],
            "--verify: a verified Docker job names its image by digest",
        ),
        (
            pinned.as_str(),
            vec!["--verify", "refereed:3"],
            "--verify: a Docker job is verified by replication only",
        ),
        (
            pinned.as_str(),
            vec!["--verify", "replicated:3/2", "--gpus", "1"],
            "--verify: a verified Docker job runs on the CPU",
        ),
    ] {
        let mut args = vec!["job", "submit", "--bounty", "5", "--image", image];
        args.extend(flags);
        args.extend(["--", "true"]);
        gantry.run(&args).await.failed(2, message);
    }
    assert_eq!(net.nonce(SUBMITTER).await, nonce, "nothing was sent");

    let before = net.balance(SUBMITTER).await;
    // A minute of fuel: its seats keep 120 + 2 + 1 s beside it (margins, the module's
    // download, the memory's first touch), then the minute's fuel at the verified rate
    // (design 18's fit rule), not the minute plus two.
    let mut args = vec!["job", "submit", "--bounty", "5", "--deadline", "2h"];
    args.extend(wasm);
    args.extend(["--duration", "1m"]);
    args.extend(["--deterministic", "--verify", "replicated:3/2", "--json"]);
    let out = gantry.run(&args).await.ok();
    let printed = out.json();
    assert_eq!(printed["verify"]["tier"], "replicated");
    let job_id = printed["jobId"].as_u64().expect("the job id");
    let job = net.job(job_id).await;
    let rules = gantry_protocol::market::dev_verify_params();
    let fuel_secs =
        60 * gantry_protocol::spec::FUEL_PER_SECOND / gantry_protocol::spec::VERIFIED_FUEL_RATE;
    assert_eq!(
        u64::from(job.terms.requirements.max_runtime),
        120 + 2 + 1 + fuel_secs
    );
    assert_eq!(
        job.terms.verification,
        Verification {
            tier: Verification::REPLICATED,
            size: 3,
            quorum: 2,
            reveal_window: u16::try_from(rules.minRevealWindow).unwrap(),
        }
    );
    assert_eq!(
        before - net.balance(SUBMITTER).await,
        U256::from(15 * gantry_testkit::GUSD),
        "three bounties escrowed"
    );
    assert_eq!(
        job.state.status,
        gantry_protocol::status::JobStatus::Committing
    );
}

/// `gantry job dispute` on a refereed job escrows the bond and the referees' pay (three
/// bounties) and starts the referees' commit phase; nothing goes to the arbiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_dispute_of_a_refereed_job_escrows_the_bond_and_the_referees_pay() {
    use gantry_protocol::status::JobStatus;

    let net = Net::start().await;
    let (_, id) = net
        .answered_refereed(alloy::primitives::keccak256("the output"))
        .await;
    let before = net.balance(SUBMITTER).await;
    let out = net
        .gantry(SUBMITTER)
        .run(&["job", "dispute", &id.to_string(), "--json"])
        .await
        .ok();
    let printed = out.json();
    assert_eq!(printed["referees"], 3);
    let bond = printed["bond"].as_str().unwrap().parse::<U256>().unwrap();
    assert_eq!(
        printed["prepay"].as_str().unwrap(),
        (15 * gantry_testkit::GUSD).to_string()
    );
    assert_eq!(
        before - net.balance(SUBMITTER).await,
        bond + U256::from(15 * gantry_testkit::GUSD),
        "the bond and three bounties escrowed"
    );
    let job = net.job(id).await;
    assert_eq!(
        job.state.status,
        JobStatus::Committing,
        "the referees' commit phase"
    );
}
