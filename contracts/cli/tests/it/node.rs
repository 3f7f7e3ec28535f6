//! `gantry node register|status|exit|withdraw` as an operator, with the agent's consent
//! (`gantry node consent`, and an operator who names an agent that did not consent is
//! refused), and `--gpu` names resolved against the models the registered nodes offer
//! (through the API).

use alloy::primitives::U256;

use gantry_testkit::GUSD;
use gantry_testkit::accounts::{AGENT, OPERATOR, SUBMITTER};

use crate::harness::{Gantry, Net, Output};

/// `gantry node register [--agent <agent>] --gpu <gpu> <flags>`, the flags split on spaces.
pub(crate) async fn register(
    gantry: &Gantry,
    agent: Option<&str>,
    gpu: &str,
    flags: &str,
) -> Output {
    let mut args = vec!["node", "register"];
    if let Some(agent) = agent {
        args.extend(["--agent", agent]);
    }
    args.extend(["--gpu", gpu]);
    args.extend(flags.split(' '));
    gantry.run(&args).await
}

/// The flags that carry `agent`'s consent to serve a node of `operator`, as `gantry node
/// consent` (run by the agent) prints them.
pub(crate) async fn consent_flags(net: &Net, agent: usize, operator: usize) -> String {
    let consent = net
        .gantry(agent)
        .run(&[
            "node",
            "consent",
            "--operator",
            &net.address(operator).to_string(),
            "--json",
        ])
        .await
        .ok()
        .json();
    format!(
        "--consent {} --consent-deadline {}",
        consent["signature"].as_str().unwrap(),
        consent["deadline"]
    )
}

/// `gantry node status <id> --json`, which must succeed.
async fn status_json(gantry: &Gantry, id: &str) -> serde_json::Value {
    gantry
        .run(&["node", "status", id, "--json"])
        .await
        .ok()
        .json()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_registers_exits_and_withdraws_and_gpu_names_resolve_to_offered_models() {
    let (net, api) = Net::start_with_api().await;
    let d = net.devnet.deployment;
    net.mint(OPERATOR, 1_000).await;
    let operator = net.gantry(OPERATOR);
    let agent = net.address(AGENT).to_string();
    let flags =
        "--gpus 8 --vram 80GiB --cpus 64 --ram 512GiB --price 2 --slots 2 --stake 150 --json";

    // Naming an agent that has not consented is refused before anything is sent,
    operator
        .run(&[
            "node", "register", "--agent", &agent, "--cpus", "4", "--ram", "8GiB",
        ])
        .await
        .failed(2, "the agent consents first");
    // and a consent given to another operator is refused by the market.
    let elsewhere = net
        .gantry(AGENT)
        .run(&[
            "node",
            "consent",
            "--operator",
            &net.address(SUBMITTER).to_string(),
            "--json",
        ])
        .await
        .ok()
        .json();
    let stolen = format!(
        "{flags} --consent {} --consent-deadline {}",
        elsewhere["signature"].as_str().unwrap(),
        elsewhere["deadline"]
    );
    register(&operator, Some(&agent), "NVIDIA A100-SXM4-80GB", &stolen)
        .await
        .failed(4, "did not consent to serve this operator");
    assert_eq!(
        net.balance(OPERATOR).await,
        U256::from(1_000 * GUSD),
        "nothing moved"
    );

    // The agent consents to this operator; the operator registers with what it printed.
    let flags = format!("{flags} {}", consent_flags(&net, AGENT, OPERATOR).await);
    let first = register(&operator, Some(&agent), "NVIDIA A100-SXM4-80GB", &flags)
        .await
        .ok()
        .json();
    assert_eq!(first["nodeId"], 1);
    assert_eq!(first["stake"], "150000000");
    // The registry was approved for exactly the stake, which it took.
    assert_eq!(net.allowance(OPERATOR, d.registry).await, U256::ZERO);
    let node = net.node(1).await;
    assert_eq!(node.agent, net.address(AGENT));
    // The registry's minimum by default; below it is refused before anything is sent.
    let second = register(
        &operator,
        None,
        "NVIDIA A100-SXM4-40GB",
        "--gpus 4 --vram 40GiB --cpus 32 --ram 256GiB --json",
    )
    .await
    .ok()
    .json();
    assert_eq!(
        (second["nodeId"].as_u64(), second["stake"].as_str()),
        (Some(2), Some("100000000"))
    );
    operator
        .run(&[
            "node", "register", "--cpus", "4", "--ram", "8GiB", "--stake", "50",
        ])
        .await
        .failed(
            4,
            "a stake of 50 gUSD is below the registry's minimum 100 gUSD",
        );

    api.caught_up(&net, 0).await;
    let status = status_json(&operator, "1").await;
    assert_eq!(status["status"], "active");
    assert_eq!(status["gpuModel"], "NVIDIA-A100-SXM4-80GB");
    assert_eq!(status["stake"], "150000000");
    assert_eq!(status["agent"], net.address(AGENT).to_string());
    assert_eq!(status["vramMib"], 80 * 1024);
    assert_eq!(status["ramMib"], 512 * 1024);
    assert_eq!(status["maxConcurrentJobs"], 2);
    let text = operator.run(&["node", "status", "1"]).await.ok().stdout;
    assert!(
        text.contains("8× NVIDIA-A100-SXM4-80GB (80 GiB each) · 64 CPU cores · 512 GiB RAM · 2 gUSD per GPU-hour"),
        "{text}"
    );
    operator
        .run(&["node", "status", "9"])
        .await
        .failed(3, "node 9 not found");

    // `--gpu A100` is either node's model: more VRAM than the 40 GB card picks the 80 GB.
    net.mint(SUBMITTER, 10).await;
    let submitter = net.gantry(SUBMITTER);
    let dry = submitter
        .run(&[
            "job",
            "submit",
            "--image",
            "busybox",
            "--bounty",
            "1",
            "--gpu",
            "A100",
            "--vram",
            "60GiB",
            "--dry-run",
            "--json",
        ])
        .await
        .ok()
        .json();
    let model = format!(
        "{}",
        alloy::primitives::B256::right_padding_from(b"NVIDIA-A100-SXM4-80GB")
    );
    assert_eq!(dry["requirements"]["gpuModel"], model);
    assert_eq!(dry["requirements"]["minGpuCount"], 1);
    submitter
        .run(&["job", "submit", "--image", "busybox", "--bounty", "1", "--gpu", "A100"])
        .await
        .failed(
            2,
            "`A100` matches several GPU models (NVIDIA-A100-SXM4-40GB on 1 node, NVIDIA-A100-SXM4-80GB on 1 node)",
        );
    submitter
        .run(&[
            "job", "submit", "--image", "busybox", "--bounty", "1", "--gpu", "H100",
        ])
        .await
        .failed(2, "no registered node offers a GPU model matching `H100`");

    // Exit, wait out the unbonding, withdraw.
    let exit = operator.run(&["node", "exit", "1"]).await.ok().stdout;
    assert!(exit.contains("node 1 is exiting"), "{exit}");
    operator
        .run(&["node", "withdraw", "1"])
        .await
        .failed(4, "node 1 is unbonding until");
    submitter.run(&["node", "exit", "2"]).await.failed(
        4,
        &format!("node 2 is not operated by {}", net.address(SUBMITTER)),
    );
    // The unbonding period: the longest runtime plus the longest challenge window.
    net.devnet.advance(10 * 24 * 3600 + 1).await.unwrap();
    let withdrawn = operator
        .run(&["node", "withdraw", "1", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(withdrawn["amount"], "150000000");
    assert_eq!(
        net.balance(OPERATOR).await,
        U256::from(900 * GUSD),
        "all but node 2's stake"
    );
    api.caught_up(&net, 0).await;
    let status = status_json(&operator, "1").await;
    assert_eq!(status["status"], "exited");
}
