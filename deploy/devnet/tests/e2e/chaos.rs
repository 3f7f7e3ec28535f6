//! The chaos suite's short run (`make chaos` runs ten full ones): the whole network with
//! replicas, 16 jobs through the CLI and raw transactions, a minute of seeded faults, then
//! judged against the chain (see `gantry_devnet::chaos`). The seed is printed, and taken
//! from `GANTRY_CHAOS_SEED` when set, to replay a failure.

use gantry_devnet::chaos::{self, ChaosConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_of_chaos_settles_and_the_chain_the_stream_and_the_api_agree() {
    let seed = match std::env::var("GANTRY_CHAOS_SEED") {
        Ok(seed) => seed.parse().expect("GANTRY_CHAOS_SEED is a number"),
        Err(_) => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs(),
    };
    let dir = tempfile::tempdir().unwrap();
    let report = match chaos::run(&ChaosConfig::short(seed, dir.path())).await {
        Ok(report) => report,
        Err(e) => panic!(
            "seed {seed}: the chaos run did not complete (logs in {}): {e:#}",
            dir.keep().display()
        ),
    };
    println!("{}", report.json());
    if !report.passed() {
        // The services' logs stay for the post-mortem.
        println!("run directory kept: {}", dir.keep().display());
    }
    assert!(
        report.passed(),
        "seed {seed} (GANTRY_CHAOS_SEED={seed} to replay): {:#?}",
        report.findings
    );
}
