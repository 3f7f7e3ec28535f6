//! `gantry node register|status|exit|withdraw` as an operator, with the agent's consent
//! (`gantry node consent`, and an operator who names an agent that did not consent is
//! refused), and `--gpu` names resolved against the models the registered nodes offer
//! (through the API).

use alloy::primitives::aliases::U96;
use alloy::primitives::{Address, U256};

use gantry_testkit::GUSD;
use gantry_testkit::accounts::{AGENT, OPERATOR, OTHER, SUBMITTER};

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

/// What `gantry node consent --json`, run by the agent, printed: its consent to serve a node
/// of the operator.
pub(crate) struct Consent {
    pub(crate) signature: String,
    pub(crate) deadline: u64,
}

impl Consent {
    /// `agent`'s consent to serve a node of `operator`, signed with `gantry node consent`.
    pub(crate) async fn of(net: &Net, agent: usize, operator: usize) -> Self {
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
        Self {
            signature: consent["signature"].as_str().unwrap().to_owned(),
            deadline: consent["deadline"].as_u64().unwrap(),
        }
    }

    /// The flags that carry it, as `gantry node consent` prints them.
    pub(crate) fn flags(&self) -> String {
        format!(
            "--consent {} --consent-deadline {}",
            self.signature, self.deadline
        )
    }

    /// The market's own refusal of `register` with this consent for `agent`, called by
    /// `net`'s `operator` around the CLI.
    async fn refused_register(
        &self,
        net: &Net,
        operator: usize,
        agent: Address,
        stake: u64,
    ) -> alloy::contract::Error {
        net.registry(operator)
            .register(
                gantry_testkit::scenario::h100_node(),
                String::new(),
                U96::from(stake * GUSD),
                agent,
                U256::from(self.deadline),
                self.signature.parse().unwrap(),
            )
            .call()
            .await
            .expect_err("the market refuses")
    }
}

/// The flags that carry `agent`'s consent to serve a node of `operator`, as `gantry node
/// consent` (run by the agent) prints them.
pub(crate) async fn consent_flags(net: &Net, agent: usize, operator: usize) -> String {
    Consent::of(net, agent, operator).await.flags()
}

/// An address as the CLI's JSON prints it (lowercase hex).
#[track_caller]
fn address(value: &serde_json::Value) -> Address {
    value
        .as_str()
        .expect("an address")
        .parse()
        .expect("an address")
}

/// Fails the test unless `error` is the market's refusal of a consent `agent` did not give.
#[track_caller]
pub(crate) fn assert_bad_consent(error: &alloy::contract::Error, agent: Address) {
    use gantry_protocol::bindings::NodeRegistry::NodeRegistryErrors;
    match error.as_decoded_interface_error::<NodeRegistryErrors>() {
        Some(NodeRegistryErrors::NodeRegistry_BadConsent(e)) => assert_eq!(e.agent, agent),
        other => panic!("not BadConsent: {other:?} ({error})"),
    }
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
    let elsewhere = Consent::of(&net, AGENT, SUBMITTER).await;
    let stolen = format!("{flags} {}", elsewhere.flags());
    let nonce = net.nonce(OPERATOR).await;
    register(&operator, Some(&agent), "NVIDIA A100-SXM4-80GB", &stolen)
        .await
        .failed(
            4,
            &format!("{agent} did not consent to serve {}", net.address(OPERATOR)),
        );
    assert_eq!(net.nonce(OPERATOR).await, nonce, "nothing was sent");
    // The market itself refuses it too, to an operator who goes around the CLI.
    let around = elsewhere
        .refused_register(&net, OPERATOR, net.address(AGENT), 150)
        .await;
    assert_bad_consent(&around, net.address(AGENT));

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
    // Twice the registry's minimum by default (room for slashes); below the minimum is
    // refused before anything is sent.
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
        (Some(2), Some("200000000"))
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
    assert_eq!(address(&status["agent"]), net.address(AGENT));
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
        U256::from(800 * GUSD),
        "all but node 2's stake"
    );
    api.caught_up(&net, 0).await;
    let status = status_json(&operator, "1").await;
    assert_eq!(status["status"], "exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_key_signs_the_consent_here_a_consent_serves_once_and_set_agent_needs_one_too() {
    let net = Net::start().await;
    net.mint(OPERATOR, 1_000).await;
    let operator = net.gantry(OPERATOR);
    let key_file = |account: usize| {
        let path = net.dir().join(format!("agent-{account}.key"));
        let key = alloy::hex::encode_prefixed(net.devnet.signer(account).to_bytes());
        std::fs::write(&path, key).unwrap();
        path.display().to_string()
    };
    let (agent_key, other_key) = (key_file(AGENT), key_file(OTHER));
    let flags = "--cpus 4 --ram 8GiB --json";
    // `gantry node register` of a CPU node with `flags`, split on spaces.
    let register_cpu = |flags: String| {
        let operator = &operator;
        async move {
            let mut args = vec!["node", "register"];
            args.extend(flags.split(' '));
            operator.run(&args).await
        }
    };

    // The agent's key file signs its consent here: the node is served by the key's address.
    let node = register_cpu(format!("{flags} --agent-key-file {agent_key}"))
        .await
        .ok()
        .json();
    assert_eq!(address(&node["agent"]), net.address(AGENT));
    assert_eq!(net.node(1).await.agent, net.address(AGENT));
    // A key and an --agent that disagree, or a key and a signature, are refused unsent.
    let nonce = net.nonce(OPERATOR).await;
    operator
        .run(&[
            "node",
            "register",
            "--cpus",
            "4",
            "--ram",
            "8GiB",
            "--agent-key-file",
            &agent_key,
            "--agent",
            &net.address(OTHER).to_string(),
        ])
        .await
        .failed(2, "is not the agent key's address");
    assert_eq!(net.nonce(OPERATOR).await, nonce);

    // A consent is good once: the market counts the agent's consents, so the signature
    // that registered one node cannot register another (nor can the CLI be made to send
    // it).
    let Consent {
        signature,
        deadline,
    } = Consent::of(&net, OTHER, OPERATOR).await;
    let with_consent = format!(
        "{flags} --agent {} --consent-signature {signature} --consent-deadline {deadline}",
        net.address(OTHER)
    );
    let second = register_cpu(with_consent.clone()).await.ok().json();
    assert_eq!(second["nodeId"], 2);
    assert_eq!(address(&second["agent"]), net.address(OTHER));
    let nonce = net.nonce(OPERATOR).await;
    register_cpu(with_consent).await.failed(4, "used already");
    assert_eq!(net.nonce(OPERATOR).await, nonce, "nothing was sent");
    let replayed = Consent {
        signature,
        deadline,
    }
    .refused_register(&net, OPERATOR, net.address(OTHER), 100)
    .await;
    assert_bad_consent(&replayed, net.address(OTHER));

    // Re-pointing a node needs the new agent's consent as registering does: none is
    // refused, one given to another operator is refused (by the market too), the new
    // agent's key signs it here.
    let submitter = net.address(SUBMITTER).to_string();
    let to_submitter = ["node", "set-agent", "1", "--agent", &submitter];
    operator
        .run(&to_submitter)
        .await
        .failed(2, "the agent consents first");
    let elsewhere = Consent::of(&net, SUBMITTER, OTHER).await;
    let deadline = elsewhere.deadline.to_string();
    let consent = [
        "--consent",
        &elsewhere.signature,
        "--consent-deadline",
        &deadline,
    ];
    operator
        .run(&[&to_submitter[..], &consent].concat())
        .await
        .failed(4, "did not consent to serve");
    let hijack = net
        .registry(OPERATOR)
        .setAgent(
            1,
            net.address(SUBMITTER),
            U256::from(elsewhere.deadline),
            elsewhere.signature.parse().unwrap(),
        )
        .call()
        .await
        .err()
        .expect("the market refuses");
    assert_bad_consent(&hijack, net.address(SUBMITTER));
    assert_eq!(net.node(1).await.agent, net.address(AGENT), "unchanged");
    // Only the operator re-points its node, even with a consent in hand.
    net.gantry(OTHER)
        .run(&["node", "set-agent", "1", "--agent-key-file", &other_key])
        .await
        .failed(
            4,
            &format!("node 1 is not operated by {}", net.address(OTHER)),
        );

    let moved = operator
        .run(&[
            "node",
            "set-agent",
            "1",
            "--agent-key-file",
            &other_key,
            "--json",
        ])
        .await
        .ok()
        .json();
    assert_eq!(address(&moved["agent"]), net.address(OTHER));
    assert_eq!(net.node(1).await.agent, net.address(OTHER));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_tops_up_its_node_s_stake_approving_exactly_what_it_adds() {
    let net = Net::start().await;
    let d = net.devnet.deployment;
    net.mint(OPERATOR, 1_000).await;
    net.mint(OTHER, 100).await;
    let operator = net.gantry(OPERATOR);
    operator
        .run(&[
            "node", "register", "--cpus", "4", "--ram", "8GiB", "--stake", "100",
        ])
        .await
        .ok();
    assert_eq!(net.node(1).await.stake, U96::from(100 * GUSD));

    let topped = operator
        .run(&["node", "topup", "1", "50", "--json"])
        .await
        .ok()
        .json();
    assert_eq!(topped["amount"], "50000000");
    assert_eq!(topped["stake"], "150000000");
    assert_eq!(net.node(1).await.stake, U96::from(150 * GUSD));
    assert_eq!(net.allowance(OPERATOR, d.registry).await, U256::ZERO);
    assert_eq!(net.balance(OPERATOR).await, U256::from(850 * GUSD));
    let text = operator
        .run(&["node", "topup", "1", "2.5"])
        .await
        .ok()
        .stdout;
    assert!(
        text.contains("node 1: 2.5 gUSD added, stake now 152.5 gUSD"),
        "{text}"
    );

    // Nothing, more than the wallet holds, or someone else's node: refused.
    operator
        .run(&["node", "topup", "1", "0"])
        .await
        .failed(2, "top up more than nothing");
    operator
        .run(&["node", "topup", "1", "10000"])
        .await
        .failed(4, "exceeds your token balance");
    net.gantry(OTHER)
        .run(&["node", "topup", "1", "10"])
        .await
        .failed(
            4,
            &format!("node 1 is not operated by {}", net.address(OTHER)),
        );
    assert_eq!(net.node(1).await.stake, U96::from(1525 * GUSD / 10));
}
