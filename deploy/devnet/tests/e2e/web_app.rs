//! The web app in headless Chromium against the dev network (`web_app.mjs`): a wallet
//! injected into the page (EIP-1193, announced by EIP-6963) that forwards to anvil, whose
//! accounts are unlocked. What the page says is checked there; what the chain did is
//! checked here, against the market and the API.

use std::collections::BTreeMap;
use std::time::Duration;

use alloy::primitives::{B256, U256};
use gantry_devnet::network::{Network, NetworkConfig};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::spec::Engine;
use gantry_testkit::GUSD;
use gantry_testkit::accounts::{OTHER, SUBMITTER};
use sha2::Digest;
use tokio::io::AsyncBufReadExt;

use crate::support::get;

/// The whole browser run: five jobs' and a node's lives on a loaded two-core machine.
const RUN: Duration = Duration::from_secs(900);

#[tokio::test(flavor = "multi_thread")]
async fn web_app_submits_runs_verifies_cancels_and_registers_a_node_from_the_browser() {
    let dir = tempfile::tempdir().unwrap();
    // A long heartbeat timeout: the node registered from the page has no worker, and must
    // stay active until the matcher places a job on it. A minute's challenge window: the
    // page accepts one result and disputes another within it.
    let network = Network::start(NetworkConfig {
        challenge_window: 60,
        heartbeat_timeout: 600,
        ..NetworkConfig::ephemeral(dir.path(), 1).expect("a config")
    })
    .await
    .expect("the network starts");
    let shots = concat!(env!("CARGO_TARGET_TMPDIR"), "/web_app");
    std::fs::create_dir_all(shots).unwrap();
    let spec = network.dataset.spec(Engine::Wasm);
    let module = spec.wasm.as_ref().expect("a WASM spec").module.clone();
    let input = &spec.inputs[0];
    let devnet = &network.devnet;
    let (submitter, operator) = (devnet.address(SUBMITTER), devnet.address(OTHER));
    let config = serde_json::json!({
        "base": network.api_url,
        "rpc": devnet.anvil.endpoint(),
        "shots": shots,
        "submitter": submitter.to_checksum(None),
        "operator": operator.to_checksum(None),
        "wasm": {
            "moduleUri": module.uri,
            "moduleSha256": module.sha256,
            "inputUri": input.uri,
            "inputSha256": input.sha256,
        },
    });
    let config_file = dir.path().join("web_app.json");
    std::fs::write(&config_file, config.to_string()).unwrap();
    let market = JobMarket::new(devnet.deployment.market, devnet.admin.clone());
    let credits_before = market.creditOf(submitter).call().await.unwrap();

    let repo = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut browser = tokio::process::Command::new("node")
        .arg("deploy/devnet/tests/e2e/web_app.mjs")
        .arg(&config_file)
        .current_dir(repo)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs");
    let mut lines = tokio::io::BufReader::new(browser.stdout.take().unwrap()).lines();
    let mut said = BTreeMap::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            eprintln!("web_app.mjs: {line}");
            let (word, rest) = line.split_once(' ').unwrap_or((&line, ""));
            said.insert(word.to_owned(), rest.to_owned());
        }
        browser.wait().await.unwrap()
    };
    let status = tokio::time::timeout(RUN, read)
        .await
        .expect("the browser run ends in time");
    assert!(
        status.success(),
        "web_app.mjs failed after {:?} (screenshots in {shots})",
        said.keys()
    );
    let number =
        |word: &str, at: usize| -> u64 { said[word].split(' ').nth(at).unwrap().parse().unwrap() };

    // The job posted from the form ran on the dev network's worker, was paid, and its
    // result as the API serves it hashes to the chain's resultHash.
    let job = number("POSTED", 0);
    assert_eq!(number("COMPLETED", 0), job);
    let row = get(&network, &format!("/v1/jobs/{job}")).await;
    assert_eq!(row["status"], "completed", "{row}");
    assert_eq!(
        row["completion"], "accepted",
        "accepted from the page: {row}"
    );
    assert!(row["payout"].as_str().is_some_and(|p| p != "0"), "{row}");
    assert_eq!(row["engine"], "wasm");
    assert_eq!(row["spec"]["wasm"]["module"]["sha256"], module.sha256);
    assert_eq!(row["bounty"], (10 * GUSD).to_string());
    // As a browser asks (gzip welcome): the bytes as stored, not compressed.
    let response = reqwest::Client::new()
        .get(format!("{}/v1/jobs/{job}/result", network.api_url))
        .header("accept-encoding", "gzip")
        .send()
        .await
        .unwrap()
        .error_for_status()
        .unwrap();
    assert!(response.headers().get("content-encoding").is_none());
    let result = response.bytes().await.unwrap();
    let submitted = devnet
        .market(SUBMITTER)
        .ResultSubmitted_filter()
        .topic1(U256::from(job))
        .from_block(0)
        .query()
        .await
        .unwrap();
    assert_eq!(
        B256::from_slice(&sha2::Sha256::digest(&result)),
        submitted.last().expect("a ResultSubmitted").0.resultHash,
        "the served result is the one the chain names"
    );
    assert_eq!(
        market.jobHash(job).call().await.unwrap(),
        B256::ZERO,
        "settled"
    );

    // The second run, disputed from the page: the bond (the policy's 10 gUSD, more than a
    // tenth of the bounty) posted, the node's exposure held.
    let disputed = number("DISPUTED", 0);
    let row = get(&network, &format!("/v1/jobs/{disputed}")).await;
    assert_eq!(row["status"], "disputed", "{row}");
    assert_eq!(row["dispute"]["bond"], (10 * GUSD).to_string(), "{row}");

    // The job nobody could run, cancelled from its page: its whole bounty went back to
    // the submitter's credits, which then paid the last job's bounty (the page posts from
    // credits when they cover it: no permit, no token transfer).
    let cancelled = number("CANCELLED", 0);
    let row = get(&network, &format!("/v1/jobs/{cancelled}")).await;
    assert_eq!(row["status"], "cancelled", "{row}");
    assert_eq!(row["refund"], (10 * GUSD).to_string());
    let placed = number("PLACED", 0);
    let last = get(&network, &format!("/v1/jobs/{placed}")).await;
    assert_eq!(last["fromCredits"], (10 * GUSD).to_string(), "{last}");
    let credits = market.creditOf(submitter).call().await.unwrap();
    assert_eq!(
        credits,
        credits_before + U256::from(10 * GUSD) - U256::from(10 * GUSD),
        "the refund, then the last bounty, in the credits"
    );

    // The node registered from the form is the operator's, with its own agent, the
    // declared machine and twice the minimum stake; the matcher placed a job on it.
    let node = number("REGISTERED", 0);
    let registry = NodeRegistry::new(devnet.deployment.market, devnet.admin.clone());
    let info = registry.getNode(node).call().await.unwrap();
    assert_eq!(info.operator, operator);
    assert!(
        info.agent != operator && !info.agent.is_zero(),
        "a new agent"
    );
    let row = get(&network, &format!("/v1/nodes/{node}")).await;
    assert_eq!(
        (&row["gpuModel"], &row["gpuCount"], &row["vramMib"]),
        (&"WEBAPP-TEST-GPU".into(), &1.into(), &1024.into()),
        "{row}"
    );
    let params = market.params().call().await.unwrap();
    // Twice the minimum at registration, 25 gUSD topped up, then its exit begun.
    assert_eq!(
        U256::from(info.stake),
        U256::from(params.minStake) * U256::from(2) + U256::from(25 * GUSD)
    );
    assert_eq!(number("EXITING", 0), node);
    let exiting = get(&network, &format!("/v1/nodes/{node}")).await;
    assert_eq!(exiting["status"], "exiting", "{exiting}");
    assert!(info.unbondingEndsAt > 0, "its stake unbonds");
    assert_eq!(number("PLACED", 1), node);
    let row = get(&network, &format!("/v1/jobs/{placed}")).await;
    assert_eq!(row["nodeId"], node, "{row}");
    assert_eq!(row["status"], "assigned", "{row}");
    assert!(
        said.contains_key("WALLET-STATES"),
        "no wallet, another chain"
    );
    for shot in [
        "wrong-chain",
        "submit-refused",
        "submit",
        "job-completed",
        "job-disputed",
        "operate-exiting",
        "job-cancelled",
        "operate",
        "job-placed",
        "node",
    ] {
        let bytes = std::fs::metadata(format!("{shots}/{shot}.png"))
            .unwrap()
            .len();
        assert!(bytes > 10_000, "{shot}.png is {bytes} bytes");
    }
}
