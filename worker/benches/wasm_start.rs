//! `cargo bench -p gantry-worker --bench wasm_start`: the time from a WASM job's
//! assignment message arriving at the worker to its module running, against a bare
//! wasmtime instantiate of the same module (compiled once, a fresh store and WASI context
//! per run, as the worker makes them) measured in the same run, alternating with the
//! worker's runs. The worker's path adds what the Docker one does (the on-chain check of
//! the job, the spec read from the stream, admission, the job's clock, its directories in
//! a fixed-size space, the checkpoint lookup) and the module's fetch (a cache hit after
//! the first run) and compile (cached by digest).
//!
//! Prints per-run figures and a final JSON line:
//! `{"bench":"wasm_start","p50_ms":..,"bare_p50_ms":..,"ratio":..}` (goal ≤ 1.2).

use std::time::{Duration, Instant};

use alloy::primitives::{B256, aliases::U96};
use gantry_protocol::bindings::JobMarket;
use gantry_protocol::names;
use gantry_protocol::spec::{Engine, JobSpec, ModuleSpec, WasmSpec};
use gantry_testkit::accounts::SECOND_MATCHER;
use gantry_testkit::{GUSD, TestNet};
use sha2::{Digest, Sha256};

const RUNS: usize = 25;
/// A module that does nothing: what is measured is getting it running.
const MODULE: &str = r#"(module (memory (export "memory") 1) (func (export "_start")))"#;

mod support;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let net = TestNet::builder()
        .indexer()
        .matcher(SECOND_MATCHER)
        .start()
        .await
        .expect("the test net starts");

    // The module, where the worker fetches it: the chain's inputs bucket.
    let client = async_nats::connect(net.nats().url()).await.unwrap();
    let js = async_nats::jetstream::new(client.clone());
    let bucket = names::inputs_bucket(net.chain_id());
    let store = js
        .create_object_store(async_nats::jetstream::object_store::Config {
            bucket: bucket.clone(),
            ..Default::default()
        })
        .await
        .unwrap();
    store
        .put("bench.wat", &mut MODULE.as_bytes())
        .await
        .unwrap();

    // The worker, WASM only (no Docker engine), in this process, with a hook on "running".
    let dir = tempfile::tempdir().unwrap();
    let (services, mut started) =
        support::spawn_worker(&net, dir.path(), "engines = [\"wasm\"]").await;

    net.fund_submitter().await;
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
        timeout_secs: 60,
        wasm: Some(WasmSpec {
            module: ModuleSpec {
                uri: format!("nats://{bucket}/bench.wat"),
                sha256: hex::encode(Sha256::digest(MODULE.as_bytes())),
                max_bytes: None,
            },
            entry: None,
            memory_mib: Some(16),
            deterministic: false,
        }),
    };
    let requirements = JobMarket::JobRequirements {
        gpuModel: B256::ZERO,
        minGpuCount: 0,
        minVramMiB: 0,
        minCpuCores: 1,
        minRamMiB: 16,
        maxPricePerGpuHour: U96::from(5 * GUSD),
        maxRuntime: 600,
        priority: 5,
        engine: Engine::Wasm.code(),
    };
    let bare = Bare::new();

    let measured = support::alternate(
        &net,
        &mut started,
        (&requirements, &spec),
        RUNS,
        (2, 3),
        |_| {
            let took = bare.instantiate(dir.path());
            async move { took }
        },
    )
    .await;
    services.cancel();
    support::report(
        "wasm_start",
        measured,
        RUNS,
        (
            "assignment → module running:",
            "bare instantiate:           ",
        ),
        (2, 3),
    );
}

/// The module compiled once, run the way the worker runs one: a store with a WASI
/// context preopening three directories, instantiated, its entry looked up.
struct Bare {
    engine: wasmtime::Engine,
    linker: wasmtime::Linker<wasmtime_wasi::p1::WasiP1Ctx>,
    module: wasmtime::Module,
}

impl Bare {
    fn new() -> Self {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = wasmtime::Engine::new(&config).unwrap();
        let mut linker = wasmtime::Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |ctx| ctx).unwrap();
        let module = wasmtime::Module::new(&engine, MODULE).unwrap();
        Self {
            engine,
            linker,
            module,
        }
    }

    /// How long a store, its WASI context and the instance took, to the entry's call.
    fn instantiate(&self, dir: &std::path::Path) -> Duration {
        let began = Instant::now();
        let mut wasi = wasmtime_wasi::WasiCtxBuilder::new();
        for name in ["inputs", "outputs", "checkpoints"] {
            let host = dir.join(format!("bare-{name}"));
            std::fs::create_dir_all(&host).unwrap();
            wasi.preopened_dir(&host, format!("/{name}"), wasmtime_wasi::FsPerms::ReadWrite)
                .unwrap();
        }
        let mut store = wasmtime::Store::new(&self.engine, wasi.build_p1());
        store.set_epoch_deadline(1);
        let instance = self.linker.instantiate(&mut store, &self.module).unwrap();
        let entry = instance
            .get_typed_func::<(), ()>(&mut store, "_start")
            .unwrap();
        let took = began.elapsed();
        entry.call(&mut store, ()).unwrap();
        took
    }
}
