//! One job through its whole life on a real chain: register (with the agent's consent),
//! post (with a permit), assign, submit, finalize, withdraw the earnings, with every event
//! decoded as consumers will and every call passing the job's terms and state.

use alloy::primitives::{Address, U256, aliases::U96, keccak256};
use alloy::providers::{DynProvider, Provider};
use alloy::rpc::types::TransactionReceipt;
use alloy::signers::SignerSync;
use alloy::sol_types::{SolStruct, eip712_domain};
use gantry_protocol::bindings::{GantryTestToken, JobMarket, NodeRegistry, Permit};
use gantry_protocol::events::{Contracts, DecodedEvent, decode};
use gantry_protocol::spec::{InputSpec, JobSpec, OutputSpec};
use gantry_protocol::status::JobStatus;
use gantry_testkit::accounts::{AGENT, OPERATOR, OTHER, SUBMITTER};
use gantry_testkit::{Devnet, GUSD, confirm_receipt, scenario};

fn events(devnet: &Devnet, receipt: &TransactionReceipt) -> Vec<DecodedEvent> {
    let contracts = Contracts {
        market: devnet.deployment.market,
        registry: devnet.deployment.registry,
    };
    receipt
        .inner
        .logs()
        .iter()
        .filter(|log| contracts.kind_of(log.address()).is_some())
        .map(|log| decode(&contracts, &log.inner).expect("every Gantry log decodes"))
        .collect()
}

fn names(events: &[DecodedEvent]) -> Vec<&str> {
    events.iter().map(|e| e.name.as_str()).collect()
}

async fn advance_time(provider: &DynProvider, seconds: u64) {
    let _: serde_json::Value = provider
        .raw_request("evm_increaseTime".into(), (seconds,))
        .await
        .unwrap();
    let _: serde_json::Value = provider.raw_request("evm_mine".into(), ()).await.unwrap();
}

async fn balance(devnet: &Devnet, account: Address) -> U256 {
    GantryTestToken::new(devnet.deployment.token, devnet.admin.clone())
        .balanceOf(account)
        .call()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_job_goes_from_post_to_paid_on_anvil() {
    let devnet = Devnet::start().await.expect("devnet starts");
    let d = devnet.deployment;
    let (operator, agent, submitter) = (
        devnet.provider(OPERATOR),
        devnet.provider(AGENT),
        devnet.provider(SUBMITTER),
    );
    let operator_address = devnet.address(OPERATOR);
    let agent_address = devnet.address(AGENT);
    let submitter_key = devnet.signer(SUBMITTER);
    let stake = U96::from(500 * GUSD);
    let bounty = U96::from(50 * GUSD);
    devnet
        .mint(operator_address, U256::from(1_000 * GUSD))
        .await
        .unwrap();
    devnet
        .mint(submitter_key.address(), U256::from(1_000 * GUSD))
        .await
        .unwrap();

    // The operator stakes a node whose agent is a separate hot key.
    let token_as_operator = GantryTestToken::new(d.token, operator.clone());
    confirm_receipt(
        "approve",
        token_as_operator
            .approve(d.registry, U256::MAX)
            .send()
            .await,
    )
    .await
    .unwrap();
    let registry = NodeRegistry::new(d.registry, operator.clone());
    let caps = scenario::h100_node();
    let (consent_deadline, consent) = devnet
        .consent(operator_address, &devnet.signer(AGENT))
        .await
        .unwrap();
    let receipt = confirm_receipt(
        "register",
        registry
            .register(
                caps,
                "ipfs://node".into(),
                stake,
                agent_address,
                consent_deadline,
                consent,
            )
            .send()
            .await,
    )
    .await
    .unwrap();
    let registered = events(&devnet, &receipt);
    assert_eq!(names(&registered), ["NodeRegistered"]);
    assert_eq!(registered[0].key, "1");
    let node_id = 1u64;

    // The submitter posts in one transaction: an EIP-2612 permit instead of an approval.
    let spec = JobSpec {
        encryption: None,
        version: 1,
        kind: Default::default(),
        image:
            "gantry/demo@sha256:9f2c4e1b7a0d3c5e8f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e"
                .into(),
        command: vec![
            "python".into(),
            "train.py".into(),
            "--epochs".into(),
            "3".into(),
        ],
        env: [("SEED".to_string(), "42".to_string())].into(),
        inputs: vec![InputSpec {
            encrypted: false,
            uri: "https://data.example.org/cifar10.tar".into(),
            sha256: Some("3f".repeat(32)),
            path: "/inputs/cifar10.tar".into(),
            max_bytes: None,
        }],
        outputs: OutputSpec::default(),
        resources: Default::default(),
        timeout_secs: 3_600,
        engine: gantry_protocol::spec::Engine::Docker,
        wasm: None,
    };
    let spec_bytes = spec.to_vec();
    let now = devnet.now().await.unwrap();
    let permit = Permit {
        owner: submitter_key.address(),
        spender: d.market,
        value: U256::from(bounty),
        nonce: U256::ZERO,
        deadline: U256::from(now + 600),
    };
    let domain = eip712_domain! {
        name: "Gantry Test USD",
        version: "1",
        chain_id: d.chain_id,
        verifying_contract: d.token,
    };
    let signature = submitter_key
        .sign_hash_sync(&permit.eip712_signing_hash(&domain))
        .unwrap();
    let requirements = scenario::h100_requirements();
    let market_as_submitter = JobMarket::new(d.market, submitter.clone());
    let receipt = confirm_receipt(
        "postJobWithPermit",
        market_as_submitter
            .postJobWithPermit(
                requirements,
                bounty,
                alloy::primitives::aliases::U40::from(now + 86_400),
                spec_bytes.clone().into(),
                permit.deadline,
                27 + u8::from(signature.v()),
                signature.r().into(),
                signature.s().into(),
            )
            .send()
            .await,
    )
    .await
    .unwrap();
    let posted = events(&devnet, &receipt);
    assert_eq!(names(&posted), ["JobPosted"]);
    assert_eq!(posted[0].key, "1");
    let job_id = 1u64;
    // The chain alone carries the full spec: read it back from the event.
    let emitted: alloy::primitives::Bytes =
        serde_json::from_value(posted[0].data["spec"].clone()).unwrap();
    assert_eq!(JobSpec::from_slice(&emitted).unwrap(), spec);
    let job = devnet.job(job_id).await.unwrap();
    assert_eq!(job.terms.spec_hash, keccak256(&spec_bytes));
    assert_eq!(job.terms.bounty, 50 * u128::from(GUSD));
    // The market holds the node's stake and the escrowed bounty.
    assert_eq!(
        balance(&devnet, d.market).await,
        U256::from(stake) + U256::from(bounty)
    );

    // The matcher (admin on the dev network) assigns; the agent submits.
    let market_as_matcher = JobMarket::new(d.market, devnet.admin.clone());
    let receipt = confirm_receipt(
        "assign",
        market_as_matcher
            .assign(job_id, node_id, job.terms.pack(), job.state.pack())
            .send()
            .await,
    )
    .await
    .unwrap();
    let assigned = events(&devnet, &receipt);
    assert_eq!(names(&assigned), ["JobAssigned"]);
    assert_eq!(
        assigned[0].key,
        node_id.to_string(),
        "assignments are keyed by node for workers"
    );

    let market_as_agent = JobMarket::new(d.market, agent.clone());
    let result_hash = keccak256(b"model weights");
    let state = devnet.job(job_id).await.unwrap().state.pack();
    let receipt = confirm_receipt(
        "submitResult",
        market_as_agent
            .submitResult(job_id, state, result_hash, "ipfs://result".into())
            .send()
            .await,
    )
    .await
    .unwrap();
    assert_eq!(names(&events(&devnet, &receipt)), ["ResultSubmitted"]);
    // The result's hash lives in its event (the job's state does not keep it).
    let answered = receipt.decoded_log::<JobMarket::ResultSubmitted>().unwrap();
    assert_eq!(answered.resultHash, result_hash);

    // Finalize is refused inside the challenge window, accepted after it, by anyone.
    let market_as_stranger = JobMarket::new(d.market, devnet.provider(OTHER));
    let submitted = devnet.job(job_id).await.unwrap().state.pack();
    let early = market_as_stranger
        .finalize(job_id, submitted.clone())
        .call()
        .await
        .err()
        .expect("finalize inside the window reverts");
    let decoded = early.as_decoded_interface_error::<JobMarket::JobMarketErrors>();
    assert!(
        matches!(
            decoded,
            Some(JobMarket::JobMarketErrors::JobMarket_ChallengeWindowOpen(_))
        ),
        "got {early}"
    );
    let window = market_as_stranger
        .params()
        .call()
        .await
        .unwrap()
        .challengeWindow;
    advance_time(&devnet.admin, u64::from(window)).await;
    let receipt = confirm_receipt(
        "finalize",
        market_as_stranger.finalize(job_id, submitted).send().await,
    )
    .await
    .unwrap();
    let completed = events(&devnet, &receipt);
    assert_eq!(names(&completed), ["JobCompleted"]);

    let job = devnet.job(job_id).await.unwrap();
    assert_eq!(job.state.status, JobStatus::Completed);

    // Pay is pulled: the operator withdraws the node's earnings, bounty minus the 2.5%
    // fee; the fee goes to the treasury with it.
    let fee = U256::from(bounty) * U256::from(250) / U256::from(10_000);
    let node = registry.getNode(node_id).call().await.unwrap();
    assert_eq!(U256::from(node.earnings), U256::from(bounty) - fee);
    assert_eq!(U256::from(node.feesOwed), fee);
    let before = balance(&devnet, operator_address).await;
    let receipt = confirm_receipt(
        "withdrawEarnings",
        registry.withdrawEarnings(node_id).send().await,
    )
    .await
    .unwrap();
    assert_eq!(
        names(&events(&devnet, &receipt)),
        ["FeesSwept", "NodeEarningsWithdrawn"]
    );
    assert_eq!(
        balance(&devnet, operator_address).await - before,
        U256::from(bounty) - fee
    );
    // What stays in the market is exactly the stake and the treasury's fee.
    let treasury = market_as_stranger.treasuryBalance().call().await.unwrap();
    assert_eq!(treasury, fee);
    assert_eq!(balance(&devnet, d.market).await, U256::from(stake) + fee);

    let node = registry.getNode(node_id).call().await.unwrap();
    assert_eq!((node.earnings, node.feesOwed), (U96::ZERO, U96::ZERO));
    assert_eq!(node.stake, stake);
}
