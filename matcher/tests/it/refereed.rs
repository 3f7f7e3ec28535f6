//! The matcher places a refereed job's provider as it places any open job's node, alone,
//! with `assignRefereed`; a node whose free stake cannot hold the provider's hold is
//! refused in a simulation, never in a mined transaction.

use alloy::providers::Provider;
use gantry_protocol::bindings::NodeRegistry;
use gantry_protocol::market::Verification;
use gantry_protocol::spec::{Engine, JobSpec, ModuleSpec, WasmSpec};
use gantry_protocol::status::JobStatus;
use gantry_testkit::GUSD;
use gantry_testkit::accounts::{MATCHER, NODES};

use crate::harness::Net;

fn wasm_node(cores: u16, ram_mib: u32) -> NodeRegistry::NodeCapabilities {
    NodeRegistry::NodeCapabilities {
        cpuCores: cores,
        ramMiB: ram_mib,
        maxConcurrentJobs: 1,
        engines: gantry_protocol::eligibility::Engines::WASM.0,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refereed_job_is_placed_alone_on_a_node_that_can_hold_it() {
    let net = Net::start(|params| params).await;
    // The planner's favourite (it fits the job best) holds only the minimum stake: the
    // provider's hold (seat stake and the referees' pay) would take it under, and the
    // market refuses the placement. The other node has room.
    let short = net
        .register_node(
            NODES[0],
            net.address(NODES[0]),
            wasm_node(1, 64),
            100 * GUSD,
        )
        .await;
    let roomy = net.register_own_node(NODES[1], wasm_node(16, 65_536)).await;
    let spec = JobSpec {
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
        timeout_secs: 20,
        wasm: Some(WasmSpec {
            module: ModuleSpec {
                uri: format!(
                    "nats://{}/m.wasm",
                    gantry_protocol::names::inputs_bucket(net.chain_id())
                ),
                sha256: "ab".repeat(32),
                max_bytes: Some(1 << 20),
            },
            entry: None,
            memory_mib: Some(16),
            deterministic: true,
        }),
    };
    let job = net
        .post_verified_spec(Verification::REFEREED, 3, 0, spec.to_posted().unwrap())
        .await;
    let matcher = net.address(MATCHER);
    let nonce = |net: &Net| {
        let provider = net.provider(MATCHER);
        async move { provider.get_transaction_count(matcher).await.unwrap() }
    };
    let before = nonce(&net).await;
    let _matcher = net.spawn_matcher(MATCHER, &[]);

    net.wait_for_status(job, JobStatus::Assigned).await;
    assert_eq!(net.job(job).await.state.node_id, roomy);
    assert_ne!(roomy, short);
    // One transaction: the placement that landed; the refused one was only simulated.
    assert_eq!(
        nonce(&net).await - before,
        1,
        "no reverted placement was mined"
    );
}
