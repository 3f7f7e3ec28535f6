//! The WASM engine: a job whose spec says `"engine":"wasm"` runs in the embedded wasmtime
//! as a WASI preview 1 command, behind the same pipeline as a container (inputs,
//! checkpoint, run, upload, report) and with the same fault classes.
//!
//! The sandbox: `/inputs` preopened read-only, `/outputs`, `/checkpoints` and `/tmp`
//! read-write (all three in the job's fixed-size space, as for a container), nothing else
//! of the host; no network (preview 1 has no sockets); stdin closed; the module's
//! arguments and the spec's environment only. Linear memory is capped by a resource
//! limiter (growing past it traps: `out of memory`); time by epoch interruption, checked
//! every [`TICK`] against the job's stop and the worker's stop token; stdout and stderr are
//! split into lines for the same `##gantry` progress parsing and log forwarding as a
//! container's, and a module that prints more than its plan's `max_log_bytes` is stopped.
//!
//! **Deterministic mode** (the spec's `deterministic`) runs on a second engine: fuel
//! instead of the clock decides when a run ends ([`FUEL_PER_SECOND`] × `timeoutSecs`,
//! the same on every node: the same call always completes or always runs out), NaNs
//! canonicalised, relaxed SIMD deterministic, no threads (the `threads` feature is not
//! built), the wall clock fixed at [`FIXED_WALL_CLOCK`], the monotonic clock advancing
//! [`MONOTONIC_STEP_NS`] per read, the random sources seeded from the job
//! ([`Determinism::seed`]) and `poll_oneoff` (sleeping) refused with `ENOTSUP`. The
//! memory limit is the spec's. Fuel also pays for work one operator or host call can ask
//! for: bulk memory operations one unit per byte, `memory.grow` per page, every host call
//! [`VERIFIED_HOST_CALL_FUEL`] and the byte-moving ones (`fd_read`, `fd_write`, `fd_pread`,
//! `fd_pwrite`, `random_get`) one unit per byte they may move, so that no module outruns
//! its fuel on the wall clock by re-reading its inputs or looping on system calls; a
//! file's status reads device, inode and times as 0; listing a directory is refused
//! (`ENOTSUP`: its order is the node's file system's) and flushing does nothing.
//! [`WasmEngine::verified_rate`] measures this node against the adversarial probe (design
//! 18's fit rule). The stack is the protocol's `VERIFIED_STACK_BYTES`. Not deterministic
//! even so: a run stopped by the wall clock (a node too slow for the job's time gives a
//! timeout, never another result), and across wasmtime builds the depth at which the stack
//! overflows (frame sizes are the compiler's).
//!
//! Compiled modules are kept in memory by SHA-256 (and mode), [`MODULE_CACHE`] at most.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use gantry_protocol::jobs::LogStream;
use tokio::sync::{mpsc, oneshot};
use wasmtime::{Config, Engine, Linker, Module, Store, Trap, UpdateDeadline};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p1::wasi_snapshot_preview1::WasiSnapshotPreview1;
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamError, StreamResult};
use wasmtime_wasi::{FsPerms, I32Exit, WasiCtxBuilder};

use crate::docker::{Ending, MAX_LINE, OutputLine, RunOutcome};
use crate::fault::Failure;

/// How often the engines' epoch advances: the resolution of a WASM job's timeout and stop.
pub const TICK: Duration = Duration::from_millis(50);
/// Fuel a deterministic run gets per second of its `timeoutSecs`: a protocol constant, so
/// that every node stops it at the same instruction.
pub use gantry_protocol::spec::FUEL_PER_SECOND;
/// What a deterministic run's host calls cost beside their bytes (the protocol's).
use gantry_protocol::spec::VERIFIED_HOST_CALL_FUEL;
/// Fuel `memory.grow` costs per 64 KiB page (at most what the engine's cost table holds).
const GROW_FUEL_PER_PAGE: u8 = u8::MAX;
/// The target deterministic runs are compiled for, with no CPU feature inferred from the
/// host: every node of one worker build makes the same code (verified seats are served
/// only by builds for it).
pub const DETERMINISTIC_TARGET: &str = "x86_64-unknown-linux-gnu";
/// WASI preview 1's module name.
const P1: &str = "wasi_snapshot_preview1";
/// The wall clock a deterministic run reads: 2026-01-01T00:00:00Z.
pub const FIXED_WALL_CLOCK: Duration = Duration::from_secs(1_767_225_600);
/// How far a deterministic run's monotonic clock advances per read, nanoseconds.
pub const MONOTONIC_STEP_NS: u64 = 1_000;
/// Compiled modules kept in memory.
pub const MODULE_CACHE: usize = 32;
/// Largest module fetched, bytes ([`gantry_protocol::spec::MAX_WASM_MODULE_BYTES`]).
pub const MAX_MODULE_BYTES: u64 = gantry_protocol::spec::MAX_WASM_MODULE_BYTES;
/// The name a module sees as `argv[0]`.
pub const ARGV0: &str = "job.wasm";

/// What makes a deterministic run the same on every node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Determinism {
    /// Fuel for the whole run.
    pub fuel: u64,
    /// Seeds the module's random sources.
    pub seed: u64,
}

impl Determinism {
    /// A spec's: fuel for its `timeout_secs`, the seed from the posted spec's hash. The
    /// run is a function of the spec (module, arguments, environment, inputs) and the
    /// checkpoint it resumes from, and of nothing of the node, the attempt or the job id:
    /// two jobs posted with the same spec give the same result.
    pub fn of(spec_hash: &[u8; 32], timeout_secs: u64) -> Self {
        let mut seed = [0u8; 8];
        seed.copy_from_slice(&spec_hash[..8]);
        Self {
            fuel: timeout_secs.saturating_mul(FUEL_PER_SECOND),
            seed: u64::from_be_bytes(seed),
        }
    }
}

/// Everything that decides one run of a module.
#[derive(Debug, Clone, PartialEq)]
pub struct WasmPlan {
    /// The module's bytes (binary or text), checked against `sha256` by the fetcher.
    pub module_path: PathBuf,
    pub sha256: String,
    pub entry: String,
    /// The module's arguments, after [`ARGV0`].
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub inputs_dir: PathBuf,
    pub outputs_dir: PathBuf,
    pub checkpoints_dir: PathBuf,
    pub tmp_dir: PathBuf,
    /// Most linear memory, bytes.
    pub memory_bytes: u64,
    /// Output (stdout and stderr) the module may print before it is stopped, bytes.
    pub max_log_bytes: u64,
    pub deterministic: Option<Determinism>,
    /// The most the module may ask to write, to any descriptor, bytes (a deterministic run's:
    /// asking for more ends it with [`WRITE_LIMIT`], on every node alike, before a node's
    /// disk could fill); `None`: only the space's size bounds it.
    pub write_limit: Option<u64>,
}

/// The embedded runtime: two engines (free-running and deterministic), their linkers and
/// the compiled modules.
pub struct WasmEngine {
    free: Mode,
    deterministic: Mode,
    modules: Mutex<Modules>,
    ticking: Arc<AtomicBool>,
    verified_rate: tokio::sync::OnceCell<u64>,
}

impl std::fmt::Debug for WasmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WasmEngine").finish_non_exhaustive()
    }
}

#[derive(Clone)]
struct Mode {
    engine: Engine,
    /// What a module links against (in deterministic mode, [`shadow`]'s calls shadow
    /// WASI's).
    linker: Linker<JobState>,
    deterministic: bool,
}

#[derive(Default)]
struct Modules {
    compiled: HashMap<(String, bool), Module>,
    order: VecDeque<(String, bool)>,
}

/// A store's data: the WASI context and the memory limit.
struct JobState {
    wasi: WasiP1Ctx,
    limiter: MemoryLimiter,
    /// Bytes asked to be written to files so far, and the most (the plan's `write_limit`).
    writes: Option<(u64, u64)>,
}

/// How a deterministic run that asked to write more than its `write_limit` ends.
pub const WRITE_LIMIT: &str = "write limit exceeded";

#[derive(Debug, thiserror::Error)]
#[error("{WRITE_LIMIT}")]
struct WriteLimitExceeded;

/// Counts a write of `bytes` against the run's write limit, whatever its descriptor: the
/// number does not say what it is (`fd_renumber` can put a file where stdout was).
fn count_write(caller: &mut wasmtime::Caller<'_, JobState>, bytes: u64) -> wasmtime::Result<()> {
    if let Some((written, limit)) = caller.data_mut().writes.as_mut() {
        *written = written.saturating_add(bytes);
        if *written > *limit {
            return Err(wasmtime::Error::new(WriteLimitExceeded));
        }
    }
    Ok(())
}

impl WasmEngine {
    /// Both engines, and the thread that advances their epochs while the worker lives.
    pub fn new() -> Result<Self, Failure> {
        let free = Mode::new(false)?;
        let deterministic = Mode::new(true)?;
        let ticking = Arc::new(AtomicBool::new(true));
        let engines = [free.engine.clone(), deterministic.engine.clone()];
        let alive = ticking.clone();
        std::thread::Builder::new()
            .name("wasm-epoch".into())
            .spawn(move || {
                while alive.load(Ordering::Relaxed) {
                    std::thread::sleep(TICK);
                    for engine in &engines {
                        engine.increment_epoch();
                    }
                }
            })
            .map_err(|e| Failure::node(format!("wasm: starting the epoch thread: {e}")))?;
        Ok(Self {
            free,
            deterministic,
            modules: Mutex::new(Modules::default()),
            ticking,
            verified_rate: tokio::sync::OnceCell::new(),
        })
    }

    /// Runs `plan` to its end, forwarding its output lines to `lines`, until `ending`.
    /// `on_running` is called once the module is instantiated, with the time since `run`
    /// began (compiling included).
    pub async fn run(
        &self,
        plan: &WasmPlan,
        ending: Ending<impl FnOnce() -> Duration>,
        lines: mpsc::Sender<OutputLine>,
        on_running: impl FnOnce(Duration),
    ) -> Result<RunOutcome, Failure> {
        let began = Instant::now();
        let module = self.module(plan).await?;
        let mode = if plan.deterministic.is_some() {
            &self.deterministic
        } else {
            &self.free
        };
        let (wasi, printed) = wasi_context(plan, &lines)?;
        let stop = Arc::new(AtomicBool::new(false));
        let deadline = Instant::now() + ending.timeout;
        let (running_tx, running_rx) = oneshot::channel();
        let run = {
            let mode = mode.clone();
            let plan = plan.clone();
            let stop = stop.clone();
            tokio::task::spawn_blocking(move || {
                let run = Run {
                    wasi,
                    printed,
                    stop,
                    deadline,
                    running: running_tx,
                };
                call(&mode, &module, &plan, run)
            })
        };
        // The stop token ends the run at the next tick; a module gets no grace (it has
        // no signals to catch), what it checkpointed stays.
        let stopper = {
            let stop = stop.clone();
            let token = ending.stop.clone();
            tokio::spawn(async move {
                token.cancelled().await;
                stop.store(true, Ordering::Relaxed);
            })
        };
        if running_rx.await.is_ok() {
            on_running(began.elapsed());
        }
        let ended = run.await;
        stopper.abort();
        let ended = ended.map_err(|e| Failure::node(format!("wasm: the run's thread: {e}")))?;
        let elapsed = began.elapsed();
        Ok(outcome(ended?, ending.stop.is_cancelled(), plan, elapsed))
    }

    /// Compiles `plan`'s module (kept for its run) and checks that it links here and has
    /// its entry: what a module could fail at is found before its inputs are staged, so
    /// a seat declines it within the grace instead of after it.
    pub async fn check(&self, plan: &WasmPlan) -> Result<(), Failure> {
        let module = self.module(plan).await?;
        let mode = if plan.deterministic.is_some() {
            &self.deterministic
        } else {
            &self.free
        };
        mode.linker
            .instantiate_pre(&module)
            .map_err(|e| Failure::job(format!("the module cannot run here: {}", one_line(&e))))?;
        match module.get_export(&plan.entry) {
            Some(wasmtime::ExternType::Func(f))
                if f.params().len() == 0 && f.results().len() == 0 =>
            {
                Ok(())
            }
            _ => Err(Failure::job(format!(
                "the module has no entry point {:?} taking and returning nothing",
                plan.entry
            ))),
        }
    }

    /// The compiled module, from memory or compiled now (off the async threads).
    async fn module(&self, plan: &WasmPlan) -> Result<Module, Failure> {
        let key = (plan.sha256.clone(), plan.deterministic.is_some());
        if let Some(module) = self.cached(&key) {
            return Ok(module);
        }
        let engine = if key.1 {
            self.deterministic.engine.clone()
        } else {
            self.free.engine.clone()
        };
        let bytes = tokio::fs::read(&plan.module_path)
            .await
            .map_err(|e| Failure::node(format!("wasm: reading the fetched module: {e}")))?;
        let started = Instant::now();
        let module = tokio::task::spawn_blocking(move || Module::new(&engine, bytes))
            .await
            .map_err(|e| Failure::node(format!("wasm: the compiler's thread: {e}")))?
            .map_err(|e| Failure::job(format!("invalid module: {}", one_line(&e))))?;
        tracing::info!(elapsed = ?started.elapsed(), sha256 = %key.0, "compiled the module");
        let mut modules = self.modules.lock().expect("never poisoned");
        if modules.order.len() >= MODULE_CACHE
            && let Some(oldest) = modules.order.pop_front()
        {
            modules.compiled.remove(&oldest);
        }
        modules.order.push_back(key.clone());
        modules.compiled.insert(key, module.clone());
        Ok(module)
    }

    fn cached(&self, key: &(String, bool)) -> Option<Module> {
        self.modules
            .lock()
            .expect("never poisoned")
            .compiled
            .get(key)
            .cloned()
    }
}

impl WasmEngine {
    /// This node's deterministic speed against an adversarial module: fuel per CPU second of
    /// a dependent chain of random loads over `memory_bytes` of linear memory (every load
    /// waits for the one before it, and misses the caches once the memory outgrows them).
    /// Runs `fuel` units on this thread.
    pub fn fuel_rate(&self, memory_bytes: u64, fuel: u64) -> Result<u64, Failure> {
        probe(&self.deterministic.engine, memory_bytes, fuel)
    }

    /// This node's fuel rate for verified seats ([`fuel_rate`](Self::fuel_rate) over
    /// [`PROBE_MEMORY`], measured once, off the async threads, when first asked).
    pub async fn verified_rate(&self) -> Result<u64, Failure> {
        let engine = self.deterministic.engine.clone();
        self.verified_rate
            .get_or_try_init(|| async move {
                let rate =
                    tokio::task::spawn_blocking(move || probe(&engine, PROBE_MEMORY, PROBE_FUEL))
                        .await
                        .map_err(|e| Failure::node(format!("wasm: the probe's thread: {e}")))??;
                tracing::info!(
                    fuel_per_second = rate,
                    least = gantry_protocol::spec::VERIFIED_NODE_FUEL_RATE,
                    "measured this node's deterministic speed"
                );
                Ok(rate)
            })
            .await
            .copied()
    }
}

/// Linear memory the verified probe chases over: far beyond any cache.
pub const PROBE_MEMORY: u64 = 256 << 20;
/// Fuel the verified probe runs (about a third of a second here).
pub const PROBE_FUEL: u64 = 50_000_000;

/// Fuel per second of a dependent chain of random loads over `memory_bytes`, `fuel` units
/// long, on `engine` (deterministic), on this thread.
fn probe(engine: &Engine, memory_bytes: u64, fuel: u64) -> Result<u64, Failure> {
    let pages = memory_bytes.div_ceil(65_536).max(1);
    let mask = (pages * 65_536 - 1) & !7;
    let wat = format!(
        r#"(module
  (memory {pages})
  (func (export "_start") (local $x i64) (local $v i64) (local $p i32)
    ;; every page its own (untouched pages all read the one zero page)
    (loop $touch
      (i64.store (local.get $p) (i64.const 1))
      (local.set $p (i32.add (local.get $p) (i32.const 4096)))
      (br_if $touch (i32.lt_u (local.get $p) (i32.const {mask}))))
    (local.set $x (i64.const 88172645463325252))
    (loop $chase
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 13))))
      (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 7))))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 17))))
      (local.set $v (i64.load (i32.and (i32.wrap_i64 (i64.xor (local.get $x) (local.get $v))) (i32.const {mask}))))
      (br $chase))))"#
    );
    let module = Module::new(engine, wat)
        .map_err(|e| Failure::node(format!("wasm: the probe: {}", one_line(&e))))?;
    let mut store = Store::new(engine, ());
    store
        .set_fuel(fuel)
        .map_err(|e| Failure::node(format!("wasm: fuel: {}", one_line(&e))))?;
    store.set_epoch_deadline(1 << 40);
    let instance = wasmtime::Instance::new(&mut store, &module, &[])
        .map_err(|e| Failure::node(format!("wasm: the probe: {}", one_line(&e))))?;
    let start = instance
        .get_typed_func::<(), ()>(&mut store, "_start")
        .map_err(|e| Failure::node(format!("wasm: the probe: {}", one_line(&e))))?;
    // The thread's own CPU time: the node's speed, not how busy its neighbours are.
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(
            u64::try_from(t.tv_sec).unwrap_or(0),
            u32::try_from(t.tv_nsec).unwrap_or(0),
        )
    };
    let began = cpu();
    let ended = start.call(&mut store, ());
    if !matches!(
        ended.as_ref().map_err(|e| e.downcast_ref::<Trap>()),
        Err(Some(Trap::OutOfFuel))
    ) {
        return Err(Failure::node(format!(
            "wasm: the probe ended before its fuel: {ended:?}"
        )));
    }
    let elapsed = cpu().saturating_sub(began).as_secs_f64().max(1e-9);
    Ok((fuel as f64 / elapsed) as u64)
}

impl Drop for WasmEngine {
    fn drop(&mut self) {
        self.ticking.store(false, Ordering::Relaxed);
    }
}

impl Mode {
    fn new(deterministic: bool) -> Result<Self, Failure> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        if deterministic {
            // Work a module can ask for in one operator is charged by its size, so
            // that no loop outruns its fuel on the wall clock.
            let mut cost = wasmtime::OperatorCost::new();
            cost.variable.memory_grow_per_page = GROW_FUEL_PER_PAGE;
            config
                .consume_fuel(true)
                .max_wasm_stack(gantry_protocol::spec::VERIFIED_STACK_BYTES)
                .operator_cost(cost)
                .cranelift_nan_canonicalization(true)
                .relaxed_simd_deterministic(true);
            // The code, and so each frame's size and where a recursion overflows the
            // stack, must not depend on the node's CPU: compiled for the architecture's
            // baseline, never for the features this CPU happens to have.
            config
                .target(DETERMINISTIC_TARGET)
                .map_err(|e| Failure::node(format!("wasm: the target: {}", one_line(&e))))?;
        }
        let engine = Engine::new(&config)
            .map_err(|e| Failure::node(format!("wasm: the engine: {}", one_line(&e))))?;
        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p1::add_to_linker_sync(&mut linker, |state: &mut JobState| &mut state.wasi)
            .map_err(|e| Failure::node(format!("wasm: linking WASI: {}", one_line(&e))))?;
        if !deterministic {
            return Ok(Self {
                engine,
                linker,
                deterministic,
            });
        }
        let link = |e: wasmtime::Error| Failure::node(format!("wasm: linking: {}", one_line(&e)));
        linker.allow_shadowing(true);
        // No sleeping on the host's clock: a deterministic run's time is its fuel.
        linker
            .func_wrap(
                P1,
                "poll_oneoff",
                |_in: i32, _out: i32, _subscriptions: i32, _events: i32| -> i32 { ENOTSUP },
            )
            .map_err(link)?;
        shadow(&mut linker).map_err(link)?;
        Ok(Self {
            engine,
            linker,
            deterministic,
        })
    }
}

/// The deterministic mode's shadows of WASI's calls whose work grows with their
/// arguments: each charges one unit of fuel per byte it may move (and per byte of its
/// list of buffers) before WASI's own call runs, so that reading an input again and again
/// costs fuel as a loop over memory would. The stat calls zero what differs between
/// nodes (device, inode, times) in what they return.
fn shadow(linker: &mut Linker<JobState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p1::wasi_snapshot_preview1 as p1;
    use wasmtime_wasi::runtime::in_tokio;
    type C<'a> = wasmtime::Caller<'a, JobState>;
    linker.func_wrap(
        P1,
        "fd_read",
        |mut c: C<'_>, fd: i32, iovs: i32, n: i32, out: i32| {
            charge_buffers(&mut c, iovs, n)?;
            with_wasi(&mut c, |w, m| in_tokio(p1::fd_read(w, m, fd, iovs, n, out)))
        },
    )?;
    linker.func_wrap(
        P1,
        "fd_write",
        |mut c: C<'_>, fd: i32, iovs: i32, n: i32, out: i32| {
            let bytes = charge_buffers(&mut c, iovs, n)?;
            count_write(&mut c, bytes)?;
            with_wasi(&mut c, |w, m| {
                in_tokio(p1::fd_write(w, m, fd, iovs, n, out))
            })
        },
    )?;
    linker.func_wrap(
        P1,
        "fd_pread",
        |mut c: C<'_>, fd: i32, iovs: i32, n: i32, at: i64, out: i32| {
            charge_buffers(&mut c, iovs, n)?;
            with_wasi(&mut c, |w, m| {
                in_tokio(p1::fd_pread(w, m, fd, iovs, n, at, out))
            })
        },
    )?;
    linker.func_wrap(
        P1,
        "fd_pwrite",
        |mut c: C<'_>, fd: i32, iovs: i32, n: i32, at: i64, out: i32| {
            let bytes = charge_buffers(&mut c, iovs, n)?;
            count_write(&mut c, bytes)?;
            with_wasi(&mut c, |w, m| {
                in_tokio(p1::fd_pwrite(w, m, fd, iovs, n, at, out))
            })
        },
    )?;
    // No listing: the order and the inode numbers are the node's file system's, and
    // each call reads the whole directory whatever its buffer. A verified job's inputs
    // are named by its spec.
    linker.func_wrap(
        P1,
        "fd_readdir",
        |_fd: i32, _buf: i32, _len: i32, _cookie: i64, _used: i32| -> i32 { ENOTSUP },
    )?;
    // Nothing to flush: the run's files are packed by the node, not kept.
    linker.func_wrap(P1, "fd_sync", |_fd: i32| -> i32 { 0 })?;
    linker.func_wrap(P1, "fd_datasync", |_fd: i32| -> i32 { 0 })?;
    linker.func_wrap(P1, "fd_filestat_get", |mut c: C<'_>, fd: i32, buf: i32| {
        let errno = with_wasi(&mut c, |w, m| in_tokio(p1::fd_filestat_get(w, m, fd, buf)))?;
        if errno == 0 {
            zero_node_stat(&mut c, buf);
        }
        Ok(errno)
    })?;
    linker.func_wrap(
        P1,
        "path_filestat_get",
        |mut c: C<'_>, fd: i32, flags: i32, path: i32, len: i32, buf: i32| {
            charge(&mut c, u64::from(len as u32))?;
            let errno = with_wasi(&mut c, |w, m| {
                in_tokio(p1::path_filestat_get(w, m, fd, flags, path, len, buf))
            })?;
            if errno == 0 {
                zero_node_stat(&mut c, buf);
            }
            Ok(errno)
        },
    )?;
    linker.func_wrap(P1, "random_get", |mut c: C<'_>, buf: i32, len: i32| {
        charge(&mut c, u64::from(len as u32))?;
        with_wasi(&mut c, |w, m| p1::random_get(w, m, buf, len))
    })?;
    Ok(())
}

/// Runs one of WASI's calls on the module's memory, as WASI's own linking does.
fn with_wasi(
    caller: &mut wasmtime::Caller<'_, JobState>,
    call: impl FnOnce(&mut WasiP1Ctx, &mut wiggle::GuestMemory<'_>) -> wasmtime::Result<i32>,
) -> wasmtime::Result<i32> {
    let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") else {
        return Err(wasmtime::Error::msg("missing required memory export"));
    };
    let (bytes, state) = memory.data_and_store_mut(&mut *caller);
    // What WASI's own linking sets before each call: the bytes the call may take from the
    // module (its buffers, paid in fuel above; the store's own figure is the deterministic
    // mode's smaller cap for the calls that are not shadowed).
    WasiSnapshotPreview1::set_hostcall_fuel(&mut state.wasi, SHADOWED_CALL_BYTES);
    call(&mut state.wasi, &mut wiggle::GuestMemory::Unshared(bytes))
}

/// Bytes one shadowed call may take from the module (wasmtime's default per call).
const SHADOWED_CALL_BYTES: usize = 128 << 20;
/// Bytes any other host call of a deterministic run may take from the module (its path
/// strings): a call's host work is then bounded by what its flat fuel pays for.
const UNSHADOWED_CALL_BYTES: usize = 64 << 10;

/// A `filestat`'s bytes that say which node staged the file and when: `dev`, `ino`
/// (0..16), `atim`, `mtim`, `ctim` (40..64). Zeroed in deterministic runs.
const NODE_STAT_BYTES: [std::ops::Range<usize>; 2] = [0..16, 40..64];

/// Zeroes the node-dependent fields of the `filestat` at `buf` in the module's memory.
fn zero_node_stat(caller: &mut wasmtime::Caller<'_, JobState>, buf: i32) {
    let Some(memory) = caller
        .get_export("memory")
        .and_then(wasmtime::Extern::into_memory)
    else {
        return;
    };
    let start = buf as u32 as usize;
    if let Some(stat) = memory
        .data_mut(&mut *caller)
        .get_mut(start..start.saturating_add(64))
    {
        for range in NODE_STAT_BYTES {
            stat[range].fill(0);
        }
    }
}

/// Takes `fuel` from the run's, or ends it as out of fuel.
fn charge(store: &mut impl wasmtime::AsContextMut, fuel: u64) -> wasmtime::Result<()> {
    let mut store = store.as_context_mut();
    let left = store.get_fuel()?;
    if left < fuel {
        store.set_fuel(0)?;
        return Err(Trap::OutOfFuel.into());
    }
    store.set_fuel(left - fuel)
}

/// Charges a call's list of `count` buffers at `list`: its own bytes, then the bytes of
/// every buffer it names (what the call may move), which it returns. A list out of bounds
/// costs its size only: WASI refuses it.
fn charge_buffers(
    caller: &mut wasmtime::Caller<'_, JobState>,
    list: i32,
    count: i32,
) -> wasmtime::Result<u64> {
    let count = u64::from(count as u32);
    charge(caller, count.saturating_mul(8))?;
    let Some(memory) = caller
        .get_export("memory")
        .and_then(wasmtime::Extern::into_memory)
    else {
        return Ok(0);
    };
    let data = memory.data(&*caller);
    let start = u64::from(list as u32);
    let mut bytes = 0u64;
    for i in 0..count {
        let at = usize::try_from(start + i * 8).unwrap_or(usize::MAX);
        let Some(entry) = data.get(at..at.saturating_add(8)) else {
            break;
        };
        let len = u32::from_le_bytes(entry[4..8].try_into().expect("four bytes"));
        bytes = bytes.saturating_add(u64::from(len));
    }
    charge(caller, bytes)?;
    Ok(bytes)
}

/// WASI's `ENOTSUP`.
const ENOTSUP: i32 = 58;

/// The module's WASI view: its directories, arguments, environment, output lines and, in
/// deterministic mode, its fixed clocks and seeded randomness.
fn wasi_context(
    plan: &WasmPlan,
    lines: &mpsc::Sender<OutputLine>,
) -> Result<(WasiP1Ctx, Arc<Printed>), Failure> {
    let printed = Arc::new(Printed {
        bytes: AtomicU64::new(0),
        limit: plan.max_log_bytes,
        flooded: AtomicBool::new(false),
    });
    let mut builder = WasiCtxBuilder::new();
    builder
        .allow_blocking_current_thread(true)
        .arg(ARGV0)
        .args(&plan.args)
        .envs(&plan.env)
        .stdout(LineSink::new(
            LogStream::Stdout,
            lines.clone(),
            printed.clone(),
        ))
        .stderr(LineSink::new(
            LogStream::Stderr,
            lines.clone(),
            printed.clone(),
        ));
    if let Some(determinism) = plan.deterministic {
        use rand_wasi::SeedableRng;
        builder
            .wall_clock(FixedWallClock)
            .monotonic_clock(SteppingClock(AtomicU64::new(0)))
            .secure_random(rand_wasi::rngs::StdRng::seed_from_u64(determinism.seed))
            .insecure_random(rand_wasi::rngs::StdRng::seed_from_u64(
                determinism.seed.rotate_left(32),
            ))
            .insecure_random_seed(u128::from(determinism.seed));
    }
    let node = |e: wasmtime::Error| Failure::node(format!("wasm: preopening: {}", one_line(&e)));
    builder
        .preopened_dir(
            &plan.inputs_dir,
            gantry_protocol::spec::INPUTS_DIR,
            FsPerms::ReadOnly,
        )
        .map_err(node)?;
    builder
        .preopened_dir(
            &plan.outputs_dir,
            gantry_protocol::spec::OUTPUTS_DIR,
            FsPerms::ReadWrite,
        )
        .map_err(node)?;
    builder
        .preopened_dir(
            &plan.checkpoints_dir,
            gantry_protocol::spec::CHECKPOINTS_DIR,
            FsPerms::ReadWrite,
        )
        .map_err(node)?;
    builder
        .preopened_dir(&plan.tmp_dir, "/tmp", FsPerms::ReadWrite)
        .map_err(node)?;
    Ok((builder.build_p1(), printed))
}

/// One run's own pieces, moved to its thread.
struct Run {
    wasi: WasiP1Ctx,
    printed: Arc<Printed>,
    stop: Arc<AtomicBool>,
    deadline: Instant,
    running: oneshot::Sender<()>,
}

/// How a call ended, before it is told as a [`RunOutcome`].
#[derive(Debug)]
enum Ended {
    Exited(i32),
    /// The wall clock's deadline, or the stop token.
    Interrupted,
    OutOfFuel,
    OutOfMemory,
    Flooded,
    Trapped(String),
}

/// Instantiates the module and calls its entry, on a blocking thread (WASI's host calls
/// block on the runtime from there). Errors are the module's: it could not be linked or
/// its entry is missing.
fn call(mode: &Mode, module: &Module, plan: &WasmPlan, run: Run) -> Result<Ended, Failure> {
    let Run {
        wasi,
        printed,
        stop,
        deadline,
        running,
    } = run;
    let memory = usize::try_from(plan.memory_bytes).unwrap_or(usize::MAX);
    let (engine, linker) = (&mode.engine, &mode.linker);
    let mut store = Store::new(
        engine,
        JobState {
            wasi,
            limiter: MemoryLimiter { limit: memory },
            writes: plan.write_limit.map(|limit| (0, limit)),
        },
    );
    store.limiter(|state| &mut state.limiter);
    if let Some(determinism) = plan.deterministic.filter(|_| mode.deterministic) {
        store
            .set_fuel(determinism.fuel)
            .map_err(|e| Failure::node(format!("wasm: fuel: {}", one_line(&e))))?;
        store.set_hostcall_fuel(UNSHADOWED_CALL_BYTES);
        // Every host call costs its fixed fuel (its bytes are charged by its shadow).
        store.call_hook(|mut store, hook| {
            if matches!(hook, wasmtime::CallHook::CallingHost) {
                charge(&mut store, VERIFIED_HOST_CALL_FUEL)?;
            }
            Ok(())
        });
    }
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        if stop.load(Ordering::Relaxed) || Instant::now() >= deadline {
            Ok(UpdateDeadline::Interrupt)
        } else {
            Ok(UpdateDeadline::Continue(1))
        }
    });
    let instance = linker
        .instantiate(&mut store, module)
        .map_err(|e| Failure::job(format!("the module cannot run here: {}", one_line(&e))))?;
    let entry = instance
        .get_typed_func::<(), ()>(&mut store, &plan.entry)
        .map_err(|e| {
            Failure::job(format!(
                "the module has no entry point {:?} taking and returning nothing: {}",
                plan.entry,
                one_line(&e)
            ))
        })?;
    let _ = running.send(());
    let called = entry.call(&mut store, ());
    let flooded = printed.flooded.load(Ordering::Relaxed);
    Ok(match called {
        Ok(()) => Ended::Exited(0),
        Err(e) => ended(&e, flooded),
    })
}

/// What an error out of the call means.
fn ended(error: &wasmtime::Error, flooded: bool) -> Ended {
    if flooded || error.downcast_ref::<Flood>().is_some() {
        return Ended::Flooded;
    }
    if let Some(exit) = error.downcast_ref::<I32Exit>() {
        return Ended::Exited(exit.0);
    }
    if error.downcast_ref::<WriteLimitExceeded>().is_some() {
        return Ended::Trapped(WRITE_LIMIT.into());
    }
    if error.downcast_ref::<MemoryLimitExceeded>().is_some() {
        return Ended::OutOfMemory;
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => Ended::Interrupted,
        Some(Trap::OutOfFuel) => Ended::OutOfFuel,
        Some(trap) => Ended::Trapped(trap.to_string()),
        // A host call the module made wrong (a misaligned pointer, a bad exit status).
        None => Ended::Trapped(error.root_cause().to_string()),
    }
}

/// The run as the pipeline tells it: an exit code, or the reason it was stopped.
fn outcome(ended: Ended, stopped: bool, plan: &WasmPlan, elapsed: Duration) -> RunOutcome {
    let mut outcome = RunOutcome {
        exit_code: 0,
        oom_killed: false,
        timed_out: false,
        stopped: false,
        flooded: None,
        elapsed,
        reason: None,
    };
    match ended {
        Ended::Exited(code) => outcome.exit_code = i64::from(code),
        Ended::Interrupted if stopped => {
            outcome.stopped = true;
            outcome.exit_code = -1;
        }
        Ended::Interrupted => {
            outcome.timed_out = true;
            outcome.exit_code = -1;
        }
        Ended::OutOfFuel => {
            outcome.exit_code = -1;
            outcome.reason = Some(format!(
                "timeout: ran out of fuel ({} instructions, its deterministic limit)",
                plan.deterministic.map_or(0, |d| d.fuel)
            ));
        }
        Ended::OutOfMemory => {
            outcome.exit_code = -1;
            outcome.oom_killed = true;
        }
        Ended::Flooded => {
            outcome.exit_code = -1;
            outcome.flooded = Some(plan.max_log_bytes);
        }
        Ended::Trapped(why) => {
            outcome.exit_code = -1;
            outcome.reason = Some(format!("trapped: {why}"));
        }
    }
    outcome
}

/// An error on one line (wasmtime's carry their causes and a backtrace).
fn one_line(error: &wasmtime::Error) -> String {
    let text = format!("{error:#}");
    text.split('\n')
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
        .chars()
        .take(400)
        .collect()
}

/// The memory limit: growing past it traps with [`MemoryLimitExceeded`].
struct MemoryLimiter {
    limit: usize,
}

#[derive(Debug, thiserror::Error)]
#[error("memory limit exceeded")]
struct MemoryLimitExceeded;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.limit {
            return Err(wasmtime::Error::new(MemoryLimitExceeded));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 1 << 20)
    }

    fn instances(&self) -> usize {
        1
    }

    fn tables(&self) -> usize {
        4
    }

    fn memories(&self) -> usize {
        1
    }
}

/// Output printed by one run, both streams together.
#[derive(Debug)]
struct Printed {
    bytes: AtomicU64,
    limit: u64,
    flooded: AtomicBool,
}

#[derive(Debug, thiserror::Error)]
#[error("printed more than the log limit")]
struct Flood;

/// One of a module's output streams, split into lines for the job's watcher. Lines longer
/// than [`MAX_LINE`] are cut; past the plan's limit (both streams together) the write
/// traps with [`Flood`] and the run ends.
#[derive(Clone)]
struct LineSink {
    stream: LogStream,
    lines: mpsc::Sender<OutputLine>,
    printed: Arc<Printed>,
    line: Arc<Mutex<Vec<u8>>>,
}

impl LineSink {
    fn new(stream: LogStream, lines: mpsc::Sender<OutputLine>, printed: Arc<Printed>) -> Self {
        Self {
            stream,
            lines,
            printed,
            line: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn push(&self, bytes: &[u8]) -> StreamResult<()> {
        let total = self
            .printed
            .bytes
            .fetch_add(bytes.len() as u64, Ordering::Relaxed)
            .saturating_add(bytes.len() as u64);
        if total > self.printed.limit {
            self.printed.flooded.store(true, Ordering::Relaxed);
            return Err(StreamError::Trap(wasmtime::Error::new(Flood)));
        }
        let mut line = self.line.lock().expect("never poisoned");
        for &byte in bytes {
            if byte == b'\n' {
                self.emit(&mut line);
            } else if line.len() < MAX_LINE {
                line.push(byte);
            }
        }
        Ok(())
    }

    /// Hands a line to the watcher, waiting while its queue is full (this runs on the
    /// run's blocking thread, inside WASI's own `block_on`: no async send here).
    fn emit(&self, line: &mut Vec<u8>) {
        let mut out = OutputLine {
            stream: self.stream,
            line: String::from_utf8_lossy(line).into_owned(),
        };
        line.clear();
        loop {
            match self.lines.try_send(out) {
                Ok(()) | Err(mpsc::error::TrySendError::Closed(_)) => return,
                Err(mpsc::error::TrySendError::Full(back)) => {
                    out = back;
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    }
}

impl Drop for LineSink {
    fn drop(&mut self) {
        // The last clone forwards what is left of an unfinished line.
        if Arc::strong_count(&self.line) == 1 {
            let mut line = self.line.lock().expect("never poisoned");
            if !line.is_empty() {
                let out = OutputLine {
                    stream: self.stream,
                    line: String::from_utf8_lossy(&line).into_owned(),
                };
                line.clear();
                let _ = self.lines.try_send(out);
            }
        }
    }
}

impl IsTerminal for LineSink {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LineSink {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for LineSink {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.push(&bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for LineSink {
    async fn ready(&mut self) {}
}

impl tokio::io::AsyncWrite for LineSink {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::task::Poll::Ready(
            self.push(buf)
                .map(|()| buf.len())
                .map_err(|_| std::io::Error::other("printed more than the log limit")),
        )
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// A deterministic run's wall clock: always [`FIXED_WALL_CLOCK`].
struct FixedWallClock;

impl wasmtime_wasi::HostWallClock for FixedWallClock {
    fn resolution(&self) -> Duration {
        Duration::from_secs(1)
    }

    fn now(&self) -> Duration {
        FIXED_WALL_CLOCK
    }
}

/// A deterministic run's monotonic clock: [`MONOTONIC_STEP_NS`] later at every read, so
/// that a loop waiting for time to pass ends (its fuel decides when).
struct SteppingClock(AtomicU64);

impl wasmtime_wasi::HostMonotonicClock for SteppingClock {
    fn resolution(&self) -> u64 {
        MONOTONIC_STEP_NS
    }

    fn now(&self) -> u64 {
        self.0.fetch_add(MONOTONIC_STEP_NS, Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A job's directories and a module, as the pipeline gives them.
    struct Job {
        _dir: tempfile::TempDir,
        plan: WasmPlan,
    }

    fn job(module: &str, deterministic: bool) -> Job {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for sub in ["inputs", "outputs", "checkpoints", "tmp"] {
            std::fs::create_dir(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("module.wat"), module).unwrap();
        let plan = WasmPlan {
            module_path: root.join("module.wat"),
            sha256: format!("{:064x}", hash(module)),
            entry: "_start".into(),
            args: vec![],
            env: vec![],
            inputs_dir: root.join("inputs"),
            outputs_dir: root.join("outputs"),
            checkpoints_dir: root.join("checkpoints"),
            tmp_dir: root.join("tmp"),
            memory_bytes: 16 << 20,
            max_log_bytes: 1 << 20,
            deterministic: deterministic.then(|| Determinism::of(&[7; 32], 10)),
            write_limit: None,
        };
        Job { _dir: dir, plan }
    }

    fn hash(text: &str) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::hash::DefaultHasher::new();
        text.hash(&mut hasher);
        hasher.finish()
    }

    fn ending(timeout: Duration, stop: &CancellationToken) -> Ending<impl FnOnce() -> Duration> {
        Ending {
            timeout,
            stop: stop.clone(),
            grace: || Duration::ZERO,
        }
    }

    /// Runs the plan; its outcome and the lines it printed.
    async fn run(
        engine: &WasmEngine,
        plan: &WasmPlan,
        timeout: Duration,
    ) -> (Result<RunOutcome, Failure>, Vec<OutputLine>) {
        let (tx, mut rx) = mpsc::channel(16);
        let collect = tokio::spawn(async move {
            let mut lines = Vec::new();
            while let Some(line) = rx.recv().await {
                lines.push(line);
            }
            lines
        });
        let stop = CancellationToken::new();
        let outcome = engine.run(plan, ending(timeout, &stop), tx, |_| {}).await;
        (outcome, collect.await.unwrap())
    }

    const WASI: &str = r#"
        (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
        (import "wasi_snapshot_preview1" "path_open" (func $path_open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
        (import "wasi_snapshot_preview1" "clock_time_get" (func $clock_time_get (param i32 i64 i32) (result i32)))
        (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
        (memory (export "memory") 1)
    "#;

    fn module(body: &str) -> String {
        format!("(module {WASI} {body})")
    }

    fn text(lines: &[OutputLine]) -> Vec<&str> {
        lines.iter().map(|l| l.line.as_str()).collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_demo_module_reads_its_input_prints_progress_and_writes_its_result() {
        let engine = WasmEngine::new().unwrap();
        let demo = include_str!("../../deploy/demo/summary.wat");
        let job = job(demo, false);
        std::fs::write(
            job.plan.inputs_dir.join("data.csv"),
            "x1,x2,y\n1,2,3\n4,5,6\n",
        )
        .unwrap();
        let (outcome, lines) = run(&engine, &job.plan, Duration::from_secs(10)).await;
        let outcome = outcome.unwrap();
        assert_eq!(
            outcome.failure(16 << 20, Duration::from_secs(10)),
            None,
            "{outcome:?}"
        );
        let summary = std::fs::read_to_string(job.plan.outputs_dir.join("summary.json")).unwrap();
        assert_eq!(
            summary,
            format!(
                "{{\"lines\":3,\"bytes\":20,\"fnv1a\":\"{:08x}\"}}\n",
                fnv1a(b"x1,x2,y\n1,2,3\n4,5,6\n")
            )
        );
        let printed = text(&lines);
        assert_eq!(
            printed,
            [
                "##gantry {\"progress\":0.000}",
                "##gantry {\"progress\":0.500}",
                summary.trim_end(),
                "##gantry {\"progress\":1}",
            ],
        );
        // Compiled once: the second run takes it from memory.
        assert_eq!(engine.modules.lock().unwrap().compiled.len(), 1);
        let (again, _) = run(&engine, &job.plan, Duration::from_secs(10)).await;
        assert_eq!(again.unwrap().exit_code, 0);
        assert_eq!(engine.modules.lock().unwrap().compiled.len(), 1);
    }

    fn fnv1a(bytes: &[u8]) -> u32 {
        bytes.iter().fold(0x811c_9dc5_u32, |hash, &b| {
            (hash ^ u32::from(b)).wrapping_mul(16_777_619)
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn hostile_modules_end_as_the_job_s_fault_with_their_reason() {
        let engine = WasmEngine::new().unwrap();
        let limit = Duration::from_millis(500);
        let reason = |outcome: &RunOutcome| {
            outcome
                .failure(16 << 20, limit)
                .map(|f| (f.class, f.reason))
                .unwrap()
        };
        use crate::fault::FaultClass::Job as JobFault;

        // An endless loop: stopped at its time.
        let spin = job(
            &module(r#"(func (export "_start") (loop $l (br $l)))"#),
            false,
        );
        let started = Instant::now();
        let (outcome, _) = run(&engine, &spin.plan, limit).await;
        let outcome = outcome.unwrap();
        assert!(outcome.timed_out, "{outcome:?}");
        assert!(started.elapsed() < limit + Duration::from_secs(2));
        assert!(reason(&outcome).1.starts_with("timeout"));

        // Growing memory without end: stopped at its limit (16 MiB = 256 pages).
        let grow = job(
            &module(
                r#"(func (export "_start")
                    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))))"#,
            ),
            false,
        );
        let (outcome, _) = run(&engine, &grow.plan, limit).await;
        let outcome = outcome.unwrap();
        assert!(outcome.oom_killed, "{outcome:?}");
        assert_eq!(
            reason(&outcome),
            (JobFault, "out of memory: killed at the 16 MiB limit".into())
        );

        // A trap.
        let trap = job(&module(r#"(func (export "_start") unreachable)"#), false);
        let (outcome, _) = run(&engine, &trap.plan, limit).await;
        let (class, why) = reason(&outcome.unwrap());
        assert_eq!(class, JobFault);
        assert!(
            why.starts_with("trapped: ") && why.contains("unreachable"),
            "{why}"
        );

        // Printing without end: stopped at the log limit.
        let flood = job(
            &module(
                r#"(data (i32.const 16) "spam spam spam\0a")
                (func (export "_start")
                    (i32.store (i32.const 0) (i32.const 16))
                    (i32.store (i32.const 4) (i32.const 15))
                    (loop $l (drop (call $fd_write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8))) (br $l)))"#,
            ),
            false,
        );
        let mut flood = flood;
        flood.plan.max_log_bytes = 64 << 10;
        let (outcome, lines) = run(&engine, &flood.plan, Duration::from_secs(60)).await;
        let outcome = outcome.unwrap();
        assert_eq!(outcome.flooded, Some(64 << 10), "{outcome:?}");
        assert!(!outcome.timed_out);
        assert!(reason(&outcome).1.starts_with("log limit"));
        assert!(lines.len() <= (64 << 10) / 15 + 1);

        // Reading outside /inputs: WASI refuses the path (the module exits with the errno
        // as its code); nothing of the host is reachable.
        let escape = job(
            &module(
                r#"(data (i32.const 64) "../../../../etc/passwd")
                (func (export "_start")
                    (call $proc_exit (call $path_open (i32.const 3) (i32.const 1) (i32.const 64) (i32.const 22)
                        (i32.const 0) (i64.const 2) (i64.const 0) (i32.const 0) (i32.const 32))))"#,
            ),
            false,
        );
        let (outcome, _) = run(&engine, &escape.plan, limit).await;
        let outcome = outcome.unwrap();
        assert_ne!(outcome.exit_code, 0, "{outcome:?}");
        assert!(reason(&outcome).1.starts_with("exited with code"));

        // Its own exit code.
        let exit = job(
            &module(r#"(func (export "_start") (call $proc_exit (i32.const 3)))"#),
            false,
        );
        let (outcome, _) = run(&engine, &exit.plan, limit).await;
        assert_eq!(
            reason(&outcome.unwrap()),
            (JobFault, "exited with code 3".into())
        );

        // Not a module, no entry point, an import nobody provides: refused before it runs.
        for (text, expected) in [
            ("this is not wasm", "invalid module"),
            (r#"(module (memory (export "memory") 1))"#, "no entry point"),
            (
                r#"(module (import "env" "gpu" (func)) (func (export "_start")))"#,
                "cannot run here",
            ),
        ] {
            let bad = job(text, false);
            let (outcome, _) = run(&engine, &bad.plan, limit).await;
            let failure = outcome.unwrap_err();
            assert_eq!(failure.class, JobFault, "{failure:?}");
            assert!(failure.reason.contains(expected), "{failure:?}");
        }

        // The engine is fine afterwards.
        let ok = job(&module(r#"(func (export "_start"))"#), false);
        let (outcome, _) = run(&engine, &ok.plan, limit).await;
        assert_eq!(outcome.unwrap().exit_code, 0);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stopped_run_ends_at_the_next_tick() {
        let engine = WasmEngine::new().unwrap();
        let spin = job(
            &module(r#"(func (export "_start") (loop $l (br $l)))"#),
            false,
        );
        let stop = CancellationToken::new();
        let (tx, _rx) = mpsc::channel(16);
        let stopping = {
            let stop = stop.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(200)).await;
                stop.cancel();
            })
        };
        let outcome = engine
            .run(
                &spin.plan,
                ending(Duration::from_secs(60), &stop),
                tx,
                |_| {},
            )
            .await
            .unwrap();
        stopping.await.unwrap();
        assert!(outcome.stopped && !outcome.timed_out, "{outcome:?}");
        assert!(outcome.elapsed < Duration::from_secs(5));
    }

    /// Writes the wall clock, the monotonic clock twice and 16 random bytes to
    /// /outputs/seen.
    const OBSERVER: &str = include_str!("../tests/modules/observer.wat");

    async fn observe(engine: &WasmEngine, deterministic: bool) -> Vec<u8> {
        let job = job(OBSERVER, deterministic);
        let (outcome, _) = run(engine, &job.plan, Duration::from_secs(10)).await;
        let outcome = outcome.unwrap();
        assert_eq!(outcome.exit_code, 0, "{outcome:?}");
        std::fs::read(job.plan.outputs_dir.join("seen")).unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_reads_fixed_clocks_and_seeded_randomness() {
        // Two engines: two nodes.
        let (a, b) = (WasmEngine::new().unwrap(), WasmEngine::new().unwrap());
        let seen = observe(&a, true).await;
        assert_eq!(seen, observe(&b, true).await, "the same on every node");
        let word = |at: usize| u64::from_le_bytes(seen[at..at + 8].try_into().unwrap());
        assert_eq!(word(0), FIXED_WALL_CLOCK.as_nanos() as u64);
        assert_eq!(word(16) - word(8), MONOTONIC_STEP_NS);
        assert_ne!(&seen[24..40], &[0; 16]);
        // Free-running, the clock is the host's and the randomness fresh.
        let free = observe(&a, false).await;
        assert_ne!(free[24..40], seen[24..40]);
        assert!(u64::from_le_bytes(free[0..8].try_into().unwrap()) > word(0));
    }

    /// A host call that moves bytes pays a unit of fuel per byte it may move (and
    /// its fixed cost): a run that re-reads its inputs in a loop runs out of fuel as a
    /// loop over its memory would, never outrunning its fuel on the wall clock.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_pays_fuel_for_the_bytes_its_host_calls_move() {
        let engine = WasmEngine::new().unwrap();
        let reads = r#"(module
          (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
          (memory (export "memory") 32)
          (func (export "_start")
            (if (call $random (i32.const 1024) (i32.const 1000000)) (then (call $exit (i32.const 7))))
            ;; stdin (closed) into one buffer of 1,000,000 bytes: nothing read, all charged
            (i32.store (i32.const 0) (i32.const 1024))
            (i32.store (i32.const 4) (i32.const 1000000))
            (if (call $read (i32.const 0) (i32.const 0) (i32.const 1) (i32.const 8))
              (then (call $exit (i32.const 8))))))"#;
        let with_fuel = |fuel| {
            let mut run = job(reads, true);
            run.plan.deterministic = Some(Determinism { fuel, seed: 1 });
            run
        };
        let enough = with_fuel(2_100_000);
        let (outcome, _) = run(&engine, &enough.plan, Duration::from_secs(30)).await;
        let outcome = outcome.unwrap();
        assert_eq!((outcome.exit_code, outcome.reason), (0, None));
        let short = with_fuel(1_990_000);
        let (outcome, _) = run(&engine, &short.plan, Duration::from_secs(30)).await;
        let reason = outcome.unwrap().reason.unwrap();
        assert!(reason.contains("ran out of fuel"), "{reason}");
        // The probe a node measures itself with runs, and says something.
        assert!(engine.fuel_rate(1 << 20, 10_000_000).unwrap() > 0);
    }

    /// What a file's status says about the node (device, inode, times) reads as 0 in a
    /// deterministic run, and a directory cannot be listed (its order is the node's file
    /// system's): each node staged the inputs at its own time, on its own disk.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_reads_no_node_in_its_files() {
        let engine = WasmEngine::new().unwrap();
        let stat = r#"(module
          (import "wasi_snapshot_preview1" "path_filestat_get" (func $stat (param i32 i32 i32 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_readdir" (func $readdir (param i32 i32 i32 i64 i32) (result i32)))
          (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
          (memory (export "memory") 1)
          (data (i32.const 0) "data")
          (func (export "_start") (local $e i32)
            (local.set $e (call $stat (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 64)))
            (if (local.get $e) (then (call $exit (i32.const 10))))
            ;; size (at 96) is the file's: 5 bytes
            (if (i64.ne (i64.load (i32.const 96)) (i64.const 5)) (then (call $exit (i32.const 11))))
            (if (i64.ne (i64.or (i64.or (i64.load (i32.const 64)) (i64.load (i32.const 72)))
                                (i64.or (i64.load (i32.const 104))
                                        (i64.or (i64.load (i32.const 112)) (i64.load (i32.const 120)))))
                        (i64.const 0))
              (then (call $exit (i32.const 12))))
            ;; listing /inputs: refused (ENOTSUP, 58)
            (call $exit (call $readdir (i32.const 3) (i32.const 256) (i32.const 512) (i64.const 0) (i32.const 8)))))"#;
        for (deterministic, code) in [(true, 58), (false, 12)] {
            let run_ = job(stat, deterministic);
            std::fs::write(run_.plan.inputs_dir.join("data"), b"12345").unwrap();
            let (outcome, _) = run(&engine, &run_.plan, Duration::from_secs(30)).await;
            let outcome = outcome.unwrap();
            assert_eq!(
                (outcome.exit_code, outcome.reason),
                (code, None),
                "deterministic {deterministic}"
            );
        }
    }

    /// A deterministic run that asks to write more than its write limit ends with
    /// [`WRITE_LIMIT`], counted on what it asks (the same on every node), before any node's
    /// disk could fill; every descriptor counts (a file can be renumbered onto stdout).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_that_asks_to_write_too_much_ends_at_its_write_limit() {
        let engine = WasmEngine::new().unwrap();
        let writes = r#"(module
          (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
          (memory (export "memory") 1)
          (func (export "_start")
            (i32.store (i32.const 0) (i32.const 64))
            (i32.store (i32.const 4) (i32.const 2000))
            ;; 2,000 bytes to stdout (the log), then 2,000 to another descriptor: 4,000 asked
            (drop (call $write (i32.const 1) (i32.const 0) (i32.const 1) (i32.const 8)))
            (drop (call $write (i32.const 4) (i32.const 0) (i32.const 1) (i32.const 8)))))"#;
        for (limit, reason) in [
            (1_000, Some(format!("trapped: {WRITE_LIMIT}"))),
            (3_000, Some(format!("trapped: {WRITE_LIMIT}"))),
            (5_000, None),
        ] {
            let mut run_ = job(writes, true);
            run_.plan.write_limit = Some(limit);
            let (outcome, _) = run(&engine, &run_.plan, Duration::from_secs(30)).await;
            assert_eq!(outcome.unwrap().reason, reason, "limit {limit}");
        }
    }

    /// Deterministic runs are compiled for the architecture's baseline (no CPU feature of
    /// the node's): a module using SIMD still runs.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_of_a_simd_module_runs_on_the_baseline_target() {
        let engine = WasmEngine::new().unwrap();
        let simd = r#"(module
          (memory (export "memory") 1)
          (func (export "_start")
            (v128.store (i32.const 0)
              (f32x4.mul (f32x4.splat (f32.const 1.5)) (f32x4.splat (f32.const 2.0))))
            (if (f32.ne (f32.load (i32.const 12)) (f32.const 3.0)) (then unreachable))))"#;
        let run_ = job(simd, true);
        let (outcome, _) = run(&engine, &run_.plan, Duration::from_secs(30)).await;
        let outcome = outcome.unwrap();
        assert_eq!((outcome.exit_code, outcome.reason), (0, None));
    }

    /// The metered calls are WASI's own once paid for: a deterministic run reads its
    /// input through them as a free-running one does.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_reads_its_inputs_through_the_metered_calls() {
        let engine = WasmEngine::new().unwrap();
        let read = r#"(module
          (import "wasi_snapshot_preview1" "path_open" (func $open (param i32 i32 i32 i32 i32 i64 i64 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_pread" (func $pread (param i32 i32 i32 i64 i32) (result i32)))
          (import "wasi_snapshot_preview1" "fd_read" (func $read (param i32 i32 i32 i32) (result i32)))
          (import "wasi_snapshot_preview1" "proc_exit" (func $exit (param i32)))
          (memory (export "memory") 1)
          (data (i32.const 0) "data")
          (func (export "_start")
            (if (call $open (i32.const 3) (i32.const 0) (i32.const 0) (i32.const 4) (i32.const 0) (i64.const 6) (i64.const 0) (i32.const 0) (i32.const 16))
              (then (call $exit (i32.const 10))))
            ;; one buffer of 64 bytes at 128
            (i32.store (i32.const 32) (i32.const 128))
            (i32.store (i32.const 36) (i32.const 64))
            (if (call $read (i32.load (i32.const 16)) (i32.const 32) (i32.const 1) (i32.const 40))
              (then (call $exit (i32.const 11))))
            (if (i32.ne (i32.load (i32.const 40)) (i32.const 5)) (then (call $exit (i32.const 12))))
            (if (i32.ne (i32.load8_u (i32.const 132)) (i32.const 53)) (then (call $exit (i32.const 13))))
            (if (call $pread (i32.load (i32.const 16)) (i32.const 32) (i32.const 1) (i64.const 3) (i32.const 40))
              (then (call $exit (i32.const 14))))
            (if (i32.ne (i32.load (i32.const 40)) (i32.const 2)) (then (call $exit (i32.const 15))))))"#;
        for deterministic in [true, false] {
            let run_ = job(read, deterministic);
            std::fs::write(run_.plan.inputs_dir.join("data"), b"12345").unwrap();
            let (outcome, _) = run(&engine, &run_.plan, Duration::from_secs(30)).await;
            let outcome = outcome.unwrap();
            assert_eq!(
                (outcome.exit_code, outcome.reason),
                (0, None),
                "deterministic {deterministic}"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_deterministic_run_ends_when_its_fuel_does_whatever_the_clock_says() {
        let engine = WasmEngine::new().unwrap();
        let mut spin = job(
            &module(r#"(func (export "_start") (loop $l (br $l)))"#),
            true,
        );
        spin.plan.deterministic = Some(Determinism {
            fuel: 50_000_000,
            seed: 1,
        });
        let (outcome, _) = run(&engine, &spin.plan, Duration::from_secs(60)).await;
        let outcome = outcome.unwrap();
        assert!(!outcome.timed_out, "{outcome:?}");
        let failure = outcome.failure(16 << 20, Duration::from_secs(60)).unwrap();
        assert!(failure.reason.contains("ran out of fuel"), "{failure:?}");
        assert!(Path::new(&spin.plan.module_path).exists());
    }
}
