//! `gantry-worker inventory` on a machine without NVML (this one): the hardware it would
//! register, no GPU and the reason why, no device request, and telemetry lines that say
//! nothing rather than zero. (On an H200 the same command printed the GPU, its UUID in the
//! device request and the load's telemetry: see the worker's README.)

#[test]
fn the_inventory_says_what_the_node_registers_and_why_it_has_no_gpus() {
    let dir = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gantry-worker"))
        .args(["inventory", "--sample-secs", "1", "--work-dir"])
        .arg(dir.path())
        .output()
        .expect("gantry-worker runs");
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8(output.stdout).unwrap();
    let mut stream = serde_json::Deserializer::from_str(&text).into_iter::<serde_json::Value>();
    let report = stream.next().unwrap().unwrap();
    let cores = std::thread::available_parallelism().unwrap().get();
    assert_eq!(report["registers"]["cpuCores"], cores);
    assert_eq!(report["registers"]["gpuCount"], 0);
    assert_eq!(report["registers"]["gpuModel"], "");
    assert!(report["registers"]["ramMiB"].as_u64().unwrap() > 0);
    assert!(report["freeDiskMiB"].as_u64().unwrap() > 0);
    assert!(
        report["nvmlUnavailable"]
            .as_str()
            .is_some_and(|why| why.contains("NVML")),
        "{report}"
    );
    assert!(report["deviceRequests"].is_null());
    let samples: Vec<serde_json::Value> = stream.map(Result::unwrap).collect();
    assert!(samples.len() >= 2, "a sample each half second: {samples:?}");
    for sample in &samples {
        assert!(sample["utilization"].is_null() && sample["memoryUsedMiB"].is_null());
    }
}
