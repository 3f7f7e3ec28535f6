//! A submitter's whole path through the `gantry` CLI on the dev network: submit the demo
//! job from a spec file, watch it to the end (assigned, running in a container with its
//! progress, completed), see its progress and logs through the API, download the result
//! and check it against the on-chain hash, and the provider withdraws the node's earnings
//! (the bounty less the fee). A WASM job from a local module (`--wasm`, uploaded by the
//! CLI) goes the same way on the WASM engine.

use std::process::Output;

use alloy::primitives::{B256, U256};
use gantry_devnet::demo;
use gantry_devnet::network::Network;
use gantry_protocol::bindings::{GantryTestToken, NodeRegistry};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{NODES, SUBMITTER};

use crate::support::{Feed, WAIT, get, network};

/// Runs `gantry` against `network`, signing as anvil account `key` if given.
async fn gantry(network: &Network, key: Option<usize>, args: &[&str]) -> Output {
    let bin = gantry_devnet::network::bin_dir().unwrap().join("gantry");
    assert!(
        bin.exists(),
        "{} is not built (cargo build --workspace)",
        bin.display()
    );
    let mut command = tokio::process::Command::new(bin);
    command
        .args([
            "--deployment",
            network.run_dir.join("deployment.json").to_str().unwrap(),
            "--rpc-url",
            network.devnet.anvil.endpoint_url().as_str(),
            "--api-url",
            &network.api_url,
            "--nats-url",
            &network.nats.url(),
        ])
        .args(args)
        .env_remove("GANTRY_PRIVATE_KEY")
        .kill_on_drop(true);
    if let Some(account) = key {
        command.env("GANTRY_PRIVATE_KEY", network.devnet.private_key(account));
    }
    tokio::time::timeout(WAIT, command.output())
        .await
        .expect("gantry finishes")
        .unwrap()
}

fn ok(output: &Output) -> String {
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// `gantry --json job submit ARGS` as the submitter, for a 5 gUSD bounty within the hour,
/// asking one core and 256 MiB; returns the new job's id.
async fn submit(network: &Network, args: &[&str]) -> u64 {
    let small = [
        "--json",
        "job",
        "submit",
        "--bounty",
        "5",
        "--deadline",
        "1h",
        "--cpus",
        "1",
        "--ram",
        "256MiB",
    ];
    let command = [&small, args].concat();
    let submitted = ok(&gantry(network, Some(SUBMITTER), &command).await);
    let submitted: serde_json::Value = serde_json::from_str(submitted.trim()).unwrap();
    submitted["jobId"].as_u64().expect("a job id")
}

/// `gantry --json job watch JOB` to the end: one JSON object per change.
async fn watch(network: &Network, job: u64) -> Vec<serde_json::Value> {
    let watched = ok(&gantry(network, None, &["--json", "job", "watch", &job.to_string()]).await);
    watched
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `gantry job result JOB -o OUT` (as anvil account `key`, if given: its identity reads
/// an encrypted result): the result downloaded into `out`, the hash it reports the
/// chain's; its JSON answer.
async fn download_result(
    network: &Network,
    key: Option<usize>,
    job: u64,
    out: &std::path::Path,
) -> serde_json::Value {
    let result = ok(&gantry(
        network,
        key,
        &[
            "--json",
            "job",
            "result",
            &job.to_string(),
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .await);
    let result: serde_json::Value = serde_json::from_str(result.trim()).unwrap();
    let (on_chain, _) = network.devnet.result(job).await.unwrap().expect("a result");
    let reported: B256 = result["sha256"].as_str().unwrap().parse().unwrap();
    assert_eq!(reported, on_chain);
    result
}

/// Waits until the API shows an active node; returns its id.
async fn active_node(network: &Network) -> u64 {
    let mut feed = Feed::open(network).await;
    loop {
        let nodes = get(network, "/v1/nodes?status=active").await;
        if let Some(node) = nodes["items"].as_array().unwrap().first() {
            return node["nodeId"].as_u64().expect("a node id");
        }
        feed.until("a node event", |name, _| (name == "node").then_some(()))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_through_the_cli_from_submission_to_the_provider_s_withdrawal() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(dir.path(), 1).await;
    active_node(&network).await;

    // Submit from a spec file; the bounty is taken with a permit.
    let spec = demo::spec(network.dataset.url(), network.dataset.sha256());
    let spec_file = dir.path().join("spec.json");
    std::fs::write(&spec_file, serde_json::to_vec_pretty(&spec).unwrap()).unwrap();
    let job = submit(
        &network,
        &[spec_file.to_str().unwrap(), "--duration", "10m"],
    )
    .await;
    let d = network.devnet.deployment;
    // Posted by the submitter as an Open job: its `JobPosted` is on chain. (Its status read
    // now may already be Assigned: the network's matcher places it while the CLI waits for
    // its confirmations.)
    let posted = network
        .devnet
        .market(SUBMITTER)
        .JobPosted_filter()
        .topic1(U256::from(job))
        .from_block(0)
        .query()
        .await
        .unwrap();
    assert_eq!(posted.len(), 1, "one JobPosted for job {job}");
    assert_eq!(posted[0].0.submitter, network.devnet.address(SUBMITTER));
    assert!(
        matches!(
            network.devnet.job(job).await.unwrap().state.status,
            JobStatus::Open | JobStatus::Assigned
        ),
        "job {job} is open or already placed"
    );

    // Watch it to the end: one JSON object per change.
    let changes = watch(&network, job).await;
    let statuses: Vec<&str> = changes
        .iter()
        .filter_map(|c| c["status"].as_str())
        .collect();
    assert!(statuses.contains(&"assigned"), "{changes:?}");
    assert_eq!(statuses.last(), Some(&"completed"), "{changes:?}");

    // The API shows it completed, with its progress and its logs.
    let detail = get(&network, &format!("/v1/jobs/{job}")).await;
    assert_eq!(detail["status"], "completed");
    assert_eq!(detail["progress"]["epoch"], demo::EPOCHS);
    assert!(detail["progress"]["metrics"]["loss"].as_f64().unwrap() < 0.01);
    let logs = get(&network, &format!("/v1/jobs/{job}/logs?tail=1000")).await;
    let lines: Vec<&str> = logs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["line"].as_str())
        .collect();
    let last_epoch = format!("epoch {0}/{0} loss", demo::EPOCHS);
    assert!(
        lines.iter().any(|l| l.starts_with(&last_epoch)),
        "{lines:?}"
    );
    let logged = ok(&gantry(
        &network,
        None,
        &["job", "logs", &job.to_string(), "--tail", "1"],
    )
    .await);
    assert!(logged.contains("wrote /outputs/model.json"), "{logged}");
    let status = ok(&gantry(
        &network,
        None,
        &["--json", "job", "status", &job.to_string()],
    )
    .await);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["status"], "completed");

    // The result: downloaded, its hash the chain's, a model that fits the data.
    let out = dir.path().join("out");
    download_result(&network, None, job, &out).await;
    let model: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("model.json")).unwrap()).unwrap();
    assert!(
        (model["weights"][0].as_f64().unwrap() - 3.0).abs() < 0.05,
        "{model}"
    );

    // The provider (the worker's agent registered the node, so it operates it) withdraws.
    let provider = NODES[0];
    let address = network.devnet.address(provider);
    let token = GantryTestToken::new(d.token, network.devnet.admin.clone());
    let before = token.balanceOf(address).call().await.unwrap();
    let payout: U256 = detail["payout"].as_str().unwrap().parse().unwrap();
    let node = detail["nodeId"].as_u64().expect("the job's node");
    ok(&gantry(
        &network,
        Some(provider),
        &["node", "withdraw-earnings", &node.to_string()],
    )
    .await);
    let after = token.balanceOf(address).call().await.unwrap();
    assert_eq!(after - before, payout, "the node's one payout, withdrawn");
    let registry = NodeRegistry::new(d.registry, network.devnet.admin.clone());
    assert_eq!(
        registry.getNode(node).call().await.unwrap().earnings,
        alloy::primitives::aliases::U96::ZERO
    );
    network.stop().await;
}

/// A job that runs past its own time, submitted with nothing but `--duration`: the CLI
/// leaves the attempt the setup allowance beyond it, so the worker stops the job at its
/// own timeout and answers in time — the job's fault, reported as its result and paid;
/// the node is never reclaimed or slashed, and its stake is whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_past_its_own_timeout_is_its_own_fault_and_the_node_keeps_its_stake() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(dir.path(), 1).await;
    let node = active_node(&network).await;
    let registry = NodeRegistry::new(
        network.devnet.deployment.registry,
        network.devnet.admin.clone(),
    );
    let stake = registry.getNode(node).call().await.unwrap().stake;

    let job = submit(
        &network,
        &[
            "--image",
            demo::DEMO_IMAGE,
            "--duration",
            "20s",
            "--",
            "sh",
            "-c",
            "sleep 600",
        ],
    )
    .await;
    let terms = network.devnet.job(job).await.unwrap().terms;
    assert_eq!(
        u64::from(terms.requirements.max_runtime),
        20 + gantry_protocol::spec::SETUP_ALLOWANCE_SECS
    );

    let changes = watch(&network, job).await;
    let last = changes.last().expect("a change");
    assert_eq!(last["status"], "completed", "{changes:?}");
    let detail = get(&network, &format!("/v1/jobs/{job}")).await;
    assert_eq!(detail["attempts"], 1, "{detail}");
    assert_eq!(detail["faults"], 0, "{detail}");
    assert_eq!(registry.getNode(node).call().await.unwrap().stake, stake);
    network.stop().await;
}

/// A WASM job from a local module, through the CLI: `--wasm summary.wat` uploads the
/// module to the chain's inputs bucket and posts a job for the WASM engine; the node (it
/// runs both engines, and says so on chain) runs it deterministically on the dataset, and
/// the job is paid. The API shows the engine of the job and the engines of the node; the
/// result downloads, its hash the chain's, the summary the dataset's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wasm_job_through_the_cli_from_a_local_module_to_its_payout() {
    let dir = tempfile::tempdir().unwrap();
    let network = network(dir.path(), 1).await;
    let node = active_node(&network).await;
    let shown = get(&network, &format!("/v1/nodes/{node}")).await;
    assert_eq!(shown["engines"], serde_json::json!(["docker", "wasm"]));

    let module = dir.path().join("summary.wat");
    std::fs::write(&module, demo::WASM_MODULE).unwrap();
    let input = format!(
        "data.csv={}#sha256={}",
        network.dataset.url(),
        network.dataset.sha256()
    );
    let job = submit(
        &network,
        &[
            "--wasm",
            module.to_str().unwrap(),
            "--deterministic",
            "--memory",
            "16MiB",
            "--input",
            &input,
            "--duration",
            "1m",
        ],
    )
    .await;
    let terms = network.devnet.job(job).await.unwrap().terms;
    assert_eq!(
        terms.requirements.engine(),
        Some(gantry_protocol::spec::Engine::Wasm)
    );

    let changes = watch(&network, job).await;
    let last = changes.last().expect("a change");
    assert_eq!(last["status"], "completed", "{changes:?}");
    let detail = get(&network, &format!("/v1/jobs/{job}")).await;
    assert_eq!(detail["engine"], "wasm", "{detail}");
    assert_eq!(detail["attempts"], 1, "{detail}");
    let spec = &detail["spec"];
    let uri = spec["wasm"]["module"]["uri"].as_str().unwrap();
    assert!(
        uri.starts_with(&format!(
            "nats://{}/wasm-",
            gantry_protocol::names::inputs_bucket(network.devnet.deployment.chain_id)
        )),
        "{uri}"
    );

    let out = dir.path().join("out");
    download_result(&network, None, job, &out).await;
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    let data = demo::dataset();
    assert_eq!(summary["bytes"], data.len(), "{summary}");
    assert_eq!(
        summary["lines"],
        data.iter().filter(|b| **b == b'\n').count(),
        "{summary}"
    );
    network.stop().await;
}

/// Design 19, §3, from `gantry job submit` to `gantry job result` on the dev network's
/// worker: a secret input (`--secret-input`, encrypted by the CLI to the job key and
/// uploaded as ciphertext), the key released by the submitter's `gantry job watch` once
/// the job is assigned, the result encrypted to the submitter (its identity derived from
/// its wallet): the store holds ciphertext only, and the submitter gets the plaintext with
/// both hashes checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_a_job_through_the_cli_from_a_secret_input_to_its_decrypted_result() {
    use futures::StreamExt as _;
    let dir = tempfile::tempdir().unwrap();
    let network = network(dir.path(), 1).await;
    active_node(&network).await;
    let module = dir.path().join("summary.wat");
    std::fs::write(&module, demo::WASM_MODULE).unwrap();
    let data = demo::dataset();
    let secret = dir.path().join("data.csv");
    std::fs::write(&secret, &data).unwrap();
    let secret_input = format!("data.csv={}", secret.display());
    let job = submit(
        &network,
        &[
            "--wasm",
            module.to_str().unwrap(),
            "--deterministic",
            "--memory",
            "16MiB",
            "--secret-input",
            &secret_input,
            "--duration",
            "5m",
        ],
    )
    .await;

    // The submitter's watch, started at once, releases the key to the node when it asks
    // (within 15 s of the assignment); the job completes.
    let changes = ok(&gantry(
        &network,
        Some(SUBMITTER),
        &["--json", "job", "watch", &job.to_string()],
    )
    .await);
    let changes: Vec<serde_json::Value> = changes
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(changes.iter().any(|c| c["released"] == true), "{changes:?}");
    assert_eq!(
        changes.last().unwrap()["status"],
        "completed",
        "{changes:?}"
    );

    // The spec on chain names the encrypted input by its ciphertext; the store holds that.
    let detail = get(&network, &format!("/v1/jobs/{job}")).await;
    let spec: gantry_protocol::spec::JobSpec =
        serde_json::from_value(detail["spec"].clone()).unwrap();
    let input = &spec.inputs[0];
    assert!(input.encrypted && spec.encryption.is_some(), "{spec:?}");
    let js = async_nats::jetstream::new(
        gantry_runtime::nats::connect(&network.nats.url(), false)
            .await
            .unwrap(),
    );
    let (bucket, key) = input
        .uri
        .strip_prefix("nats://")
        .and_then(|rest| rest.split_once('/'))
        .unwrap();
    let mut stored = Vec::new();
    let mut object = js
        .get_object_store(bucket)
        .await
        .unwrap()
        .get(key)
        .await
        .unwrap();
    tokio::io::AsyncReadExt::read_to_end(&mut object, &mut stored)
        .await
        .unwrap();
    assert_ne!(stored, data);
    assert!(!stored.windows(32).any(|w| w == &data[..32]), "ciphertext");

    // The stored result is ciphertext; `job result` decrypts it and checks both hashes.
    let (_, uri) = network.devnet.result(job).await.unwrap().expect("a result");
    let (base, ciphertext) = gantry_protocol::encryption::split_ciphertext(&uri).unwrap();
    assert!(ciphertext.is_some(), "{uri}");
    let (bucket, rest) = base
        .strip_prefix("nats://")
        .and_then(|rest| rest.split_once('/'))
        .unwrap();
    let (node, key) = rest.split_once('/').unwrap();
    let object = gantry_runtime::objects::get(&js, bucket, node.parse().unwrap(), key)
        .await
        .unwrap()
        .expect("the stored result");
    let sealed: Vec<u8> = object
        .bytes(u64::MAX)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .flat_map(|chunk| chunk.unwrap().to_vec())
        .collect();
    assert!(
        sealed.starts_with(b"age-encryption.org/v1\n"),
        "age, not a tar"
    );
    assert_eq!(
        Some(gantry_protocol::encryption::sha256(&sealed)),
        ciphertext
    );

    let out = dir.path().join("out");
    let result = download_result(&network, Some(SUBMITTER), job, &out).await;
    assert_eq!(result["ciphertextChecked"], true, "{result}");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["bytes"], data.len(), "{summary}");
    network.stop().await;
}
