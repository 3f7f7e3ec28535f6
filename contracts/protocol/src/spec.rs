//! The job spec: what a submitter wants run, posted on-chain as JSON bytes in
//! `JobMarket.postJob(.., spec)` and emitted in `JobPosted`. The chain checks only the
//! `JobRequirements`; everything the worker needs to run the job is here.
//!
//! ```json
//! {"version":1,"kind":"training","image":"ghcr.io/acme/train:v1",
//!  "command":["python","train.py"],"env":{"SEED":"42"},
//!  "inputs":[{"uri":"https://…/data.tar","sha256":"…","path":"/inputs/data.tar","maxBytes":1073741824}],
//!  "outputs":{"path":"/outputs","maxBytes":104857600},
//!  "resources":{"cpuThreads":8,"gpuMemoryPercent":80},"timeoutSecs":7200}
//! ```
//!
//! Version 2 adds the engine: `"engine":"docker"` (the default, and what every version 1
//! spec is) or `"engine":"wasm"`, a WebAssembly module run by the worker's embedded
//! runtime (WASI preview 1, CPU only) instead of an image; `command` is then the module's
//! arguments:
//!
//! ```json
//! {"version":2,"engine":"wasm","command":["--epochs","3"],"env":{"SEED":"42"},
//!  "wasm":{"module":{"uri":"https://…/train.wasm","sha256":"…"},"entry":"_start",
//!          "memoryMib":256,"deterministic":true},
//!  "inputs":[…],"outputs":{"path":"/outputs"},"timeoutSecs":600}
//! ```
//!
//! The container sees its inputs read-only under [`INPUTS_DIR`], writes its results under
//! [`OUTPUTS_DIR`] and its checkpoints under [`CHECKPOINTS_DIR`] (restored when the job
//! resumes on another node). Input URIs: `https://`, `http://`, `ipfs://<cid>[/path]`
//! (through the worker's gateway), `nats://<bucket>/<key>` (NATS object store),
//! `s3://<bucket>/<key>` and `file:///<path>` (inside the worker's configured local root).

use std::collections::BTreeMap;

use alloy::primitives::{B256, keccak256};
use serde::{Deserialize, Serialize};

/// The newest spec version this crate reads and writes. A Docker spec may still be
/// written as version 1 (what it was before engines existed); a WASM spec needs 2, an
/// encrypted one 3.
pub const SPEC_VERSION: u32 = 3;
/// The oldest spec version this crate reads.
pub const FIRST_SPEC_VERSION: u32 = 1;
/// The entry point a WASM job runs unless its spec names another: WASI's command entry.
pub const WASM_ENTRY: &str = "_start";
/// Largest memory a WASM job may ask for, MiB: all of a 32-bit linear memory.
pub const MAX_WASM_MEMORY_MIB: u32 = 4096;
/// Largest module a worker fetches, bytes (a spec's `maxBytes` may only lower it):
/// compiling is not on the job's clock nor under its memory limit, so its cost is bounded
/// by the module's size.
pub const MAX_WASM_MODULE_BYTES: u64 = 32 << 20;
/// Largest spec the market accepts (`JobMarket.MAX_SPEC_BYTES`).
pub const MAX_SPEC_BYTES: usize = 16_384;
/// Where the inputs are mounted, read-only.
pub const INPUTS_DIR: &str = "/inputs";
/// Where the job writes its results; [`OutputSpec::path`] is this or a directory below it.
pub const OUTPUTS_DIR: &str = "/outputs";
/// Where the job writes checkpoints; restored here when the job resumes.
pub const CHECKPOINTS_DIR: &str = "/checkpoints";
/// What an attempt's on-chain `maxRuntime` leaves beyond the job's own `timeoutSecs`,
/// seconds: a minute for the node to fetch the inputs and start the container, and a
/// minute to answer on chain before the attempt ends (the worker's default answer margin).
/// A job that runs to its own timeout is then reported as the job's fault in time, never
/// reclaimed as the node's.
pub const SETUP_ALLOWANCE_SECS: u64 = 120;

/// The shortest `maxRuntime` for a job whose `timeoutSecs` is `timeout_secs`.
pub fn runtime_for(timeout_secs: u64) -> u64 {
    timeout_secs.saturating_add(SETUP_ALLOWANCE_SECS)
}

/// Fuel a deterministic WASM run gets per second of its `timeoutSecs` (a unit is about one
/// WebAssembly instruction; bulk memory operations cost one per byte, host calls
/// [`VERIFIED_HOST_CALL_FUEL`] and one per byte they move): every node stops the run at the
/// same instruction. A nominal rate: the wall clock a run takes is the node's.
pub const FUEL_PER_SECOND: u64 = 500_000_000;
/// The slowest node that takes verified seats, fuel per CPU second on the adversarial
/// probe (a dependent chain of random loads over 256 MiB, which misses every cache and, on
/// 4 KiB pages, the TLB): a node that measures less declines every seat, at no cost. The
/// page size decides it: this kind of machine (2 shared cores of a cloud VM, Debian's
/// transparent huge pages on `madvise`, so the runs' memory on 4 KiB pages) measures
/// 55–66 M, alone or three probes at once; with huge pages `always`, 121–128 M (159 M
/// alone on the machine first measured). 40 M keeps every such node in, with a margin.
pub const VERIFIED_NODE_FUEL_RATE: u64 = 40_000_000;
/// The rate the fit rule counts on: half the slowest node's, for what the probe does not
/// reach (larger memories, the node's other jobs).
pub const VERIFIED_FUEL_RATE: u64 = VERIFIED_NODE_FUEL_RATE / 2;
/// What a verified run's time leaves beyond its fuel and its declared bytes' download,
/// seconds: a minute to stage, compile and pack, and the minute the worker keeps to
/// answer before the seat's run ends (its default `answer_margin`).
pub const VERIFIED_RUN_MARGIN_SECS: u64 = 120;
/// The download rate the fit rule counts on for a verified run's module and inputs.
pub const VERIFIED_FETCH_BYTES_PER_SEC: u64 = 16 << 20;
/// The size counted for an input that declares no `maxBytes`.
pub const VERIFIED_UNDECLARED_INPUT_BYTES: u64 = 1 << 30;
/// Linear memory the fit rule counts one second of first-touch page faults for.
pub const VERIFIED_MEMORY_BYTES_PER_SEC: u64 = 256 << 20;
/// Fuel every host call of a deterministic run costs, beside one unit per byte it moves:
/// a loop of system calls must not outrun its fuel on the wall clock.
pub const VERIFIED_HOST_CALL_FUEL: u64 = 10_000;
/// The most a verified run writes to its files (`/outputs`, `/tmp`, `/checkpoints`), and
/// so the most its outcome holds, unless its spec's `outputs.maxBytes` says less: a run
/// that asks to write more ends as `write-limit` on every node, never as a node's full disk.
pub const VERIFIED_OUTPUT_BYTES: u64 = 1 << 30;
/// The WebAssembly stack a deterministic run gets, bytes: a protocol constant, so that the
/// depth at which a recursion overflows is the same on every node of the same wasmtime
/// build (frame sizes are the compiler's: the verified profile also names the build).
pub const VERIFIED_STACK_BYTES: usize = 1 << 20;
/// Output a verified run may print before it ends as `log-limit`, bytes: a protocol
/// constant, so that a node's own log limit never decides a result.
pub const VERIFIED_MAX_LOG_BYTES: u64 = 1 << 20;

/// A verified Docker run's memory when its requirements name none (`minRamMiB` 0), MiB:
/// a protocol constant, so that a node's default never decides where a run runs out.
pub const VERIFIED_DOCKER_MEMORY_MIB: u32 = 2048;
/// A verified Docker run's process limit: a protocol constant, as its memory.
pub const VERIFIED_DOCKER_PIDS_LIMIT: i64 = 1024;

/// URI schemes an input may use.
pub const INPUT_SCHEMES: [&str; 6] = [
    "https://", "http://", "ipfs://", "nats://", "s3://", "file://",
];

/// A job spec, version 1 or 2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSpec {
    /// [`FIRST_SPEC_VERSION`] to [`SPEC_VERSION`]; a reader refuses versions it does not
    /// know.
    pub version: u32,
    /// Training or inference; a provider may take only one kind.
    #[serde(default)]
    pub kind: JobKind,
    /// What runs the job (version 2; a version 1 spec is always Docker's).
    #[serde(default, skip_serializing_if = "Engine::is_docker")]
    pub engine: Engine,
    /// Container image, ideally pinned by digest (`name@sha256:…`); Docker jobs only.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// Docker: command and arguments (empty runs the image's entrypoint). WASM: the
    /// module's arguments (after its name, which is `argv[0]`).
    #[serde(default)]
    pub command: Vec<String>,
    /// Environment variables for the container.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Files to download before the job starts.
    #[serde(default)]
    pub inputs: Vec<InputSpec>,
    /// Where the job leaves its results.
    pub outputs: OutputSpec,
    /// Per-job resource settings; the worker's defaults apply where absent.
    #[serde(default, skip_serializing_if = "Resources::is_default")]
    pub resources: Resources,
    /// Wall-clock limit of one run, seconds (at most the on-chain `maxRuntime`).
    pub timeout_secs: u64,
    /// The module and how to run it; WASM jobs only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wasm: Option<WasmSpec>,
    /// End-to-end encryption of the job's payloads (version 3; design 19, §3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encryption: Option<Encryption>,
}

/// Whom a job's payloads are encrypted to (`crate::encryption`): its result, failure
/// report and checkpoints to the submitter's `recipient`; its `encrypted` inputs, and its
/// checkpoints as well, to the job key, whose identity the submitter releases to each
/// attempt's node after the assignment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Encryption {
    /// The submitter's age recipient (`age1…`).
    pub recipient: String,
    /// The job key's recipient (`age1…`); required by encrypted inputs, and by a
    /// checkpointed job that is to resume on another node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_key: Option<String>,
    /// The salt the submitter's tools derived the job key with (32 hex digits), so that
    /// they release it from the submitter's identity alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_salt: Option<String>,
}

impl Encryption {
    /// The submitter's recipient, and the job key's when there is one.
    pub fn recipients(&self) -> Vec<crate::encryption::AgeRecipient> {
        [Some(&self.recipient), self.job_key.as_ref()]
            .into_iter()
            .flatten()
            .filter_map(|text| crate::encryption::recipient(text).ok())
            .collect()
    }
}

/// Whether `image` names its bytes: `name@sha256:<64 hex>` (a registry's manifest digest)
/// or `sha256:<64 hex>` (an image id, the hash of its configuration). A tag can name
/// other bytes on another node, or tomorrow.
pub fn is_pinned_image(image: &str) -> bool {
    let digest = match image.split_once('@') {
        Some((name, digest)) if !name.is_empty() => digest,
        Some(_) => return false,
        None => image,
    };
    digest
        .strip_prefix("sha256:")
        .is_some_and(|hex| hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// What runs a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// A container on the node's Docker engine (GPUs through the NVIDIA runtime).
    #[default]
    Docker,
    /// A WebAssembly module (WASI preview 1) in the worker's embedded runtime: CPU only,
    /// no network, and deterministic on request.
    Wasm,
}

impl Engine {
    /// Every engine, by its code.
    pub const ALL: [Engine; 2] = [Engine::Docker, Engine::Wasm];

    pub fn is_docker(&self) -> bool {
        *self == Self::Docker
    }

    /// Its code on chain (`ENGINE_DOCKER`, `ENGINE_WASM`): `JobRequirements.engine`, and
    /// the bit `1 << code` of `NodeCapabilities.engines`.
    pub const fn code(self) -> u8 {
        self as u8
    }

    /// The engine of an on-chain code; `None` for one this build does not know.
    pub fn from_code(code: u8) -> Option<Self> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The name used in specs, metrics and the API.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Docker => "docker",
            Self::Wasm => "wasm",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "docker" => Ok(Self::Docker),
            "wasm" => Ok(Self::Wasm),
            other => Err(format!("unknown engine {other:?}: docker or wasm")),
        }
    }
}

/// How a WASM job runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WasmSpec {
    /// The module (binary `.wasm` or text `.wat`), fetched and checked like an input.
    pub module: ModuleSpec,
    /// The exported function to run, taking and returning nothing (default
    /// [`WASM_ENTRY`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub entry: Option<String>,
    /// Most linear memory the module may grow to, MiB (default: the worker's, at most
    /// the job's `minRamMiB` requirement when it sets one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_mib: Option<u32>,
    /// Run bit-for-bit reproducibly: the same module and inputs give the same result on
    /// any node (fuel instead of wall-clock interruption, canonical NaNs, fixed clocks, a
    /// seeded random source).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deterministic: bool,
}

impl WasmSpec {
    /// The entry point to call.
    pub fn entry(&self) -> &str {
        self.entry.as_deref().unwrap_or(WASM_ENTRY)
    }
}

/// Where a WASM job's module comes from. Its hash is required: the module is the job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ModuleSpec {
    /// Where to fetch it (one of [`INPUT_SCHEMES`]).
    pub uri: String,
    /// Hex SHA-256 of the module's bytes.
    pub sha256: String,
    /// Largest size accepted, bytes (default and most: [`MAX_WASM_MODULE_BYTES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl ModuleSpec {
    /// The module as an input the worker's fetcher (and its content-addressed cache)
    /// understands; it is never mounted.
    pub fn as_input(&self) -> InputSpec {
        InputSpec {
            encrypted: false,
            uri: self.uri.clone(),
            sha256: Some(self.sha256.clone()),
            path: format!("{INPUTS_DIR}/.module.wasm"),
            max_bytes: self.max_bytes,
        }
    }
}

/// What a job does, for providers who take only one kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    #[default]
    Training,
    Inference,
}

/// Resource settings inside the node's on-chain limits. GPUs, host memory and CPU cores
/// come from the job's `JobRequirements`; these refine how the worker applies them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Resources {
    /// CPU threads the container may use (default: the worker's `default_cpu_threads`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_threads: Option<u16>,
    /// Share of each GPU's memory the job may use, 1–100 (default: the worker's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_memory_percent: Option<u8>,
}

impl Resources {
    fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// One input file of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputSpec {
    /// Where to fetch it (one of [`INPUT_SCHEMES`]).
    pub uri: String,
    /// Hex SHA-256 of the content; the worker refuses a mismatch. With it, the worker's
    /// content-addressed cache can skip the download.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Where the file appears in the container: a path below [`INPUTS_DIR`].
    pub path: String,
    /// Largest size accepted, bytes; the download stops beyond it (default: the worker's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
    /// Encrypted to the job key (`encryption.jobKey`; version 3): `sha256` is the
    /// ciphertext's; the node decrypts it into the job's directory once the key is
    /// released to it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub encrypted: bool,
}

/// Where a job's results are collected from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputSpec {
    /// The directory collected as the result: [`OUTPUTS_DIR`] or a directory below it.
    #[serde(default = "default_outputs_path")]
    pub path: String,
    /// Largest result accepted (the tar of `path`), bytes (default: the worker's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<u64>,
}

impl Default for OutputSpec {
    fn default() -> Self {
        Self {
            path: default_outputs_path(),
            max_bytes: None,
        }
    }
}

fn default_outputs_path() -> String {
    OUTPUTS_DIR.into()
}

/// Whether `path` is `dir` itself or a normal absolute path below it (no `..`, `.` or
/// empty components), so that a mount cannot escape its directory.
pub fn is_within(path: &str, dir: &str) -> bool {
    let Some(rest) = path.strip_prefix(dir) else {
        return false;
    };
    if rest.is_empty() {
        return true;
    }
    let Some(rest) = rest.strip_prefix('/') else {
        return false;
    };
    rest.split('/')
        .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains('\0'))
}

/// Why a spec was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("spec is {0} bytes, more than the {MAX_SPEC_BYTES} the market accepts")]
    TooLarge(usize),
    #[error("spec is not valid job-spec JSON: {0}")]
    Malformed(String),
    #[error(
        "spec version {0} is not supported (this build knows versions {FIRST_SPEC_VERSION} to {SPEC_VERSION})"
    )]
    UnsupportedVersion(u32),
    #[error("spec field {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

impl JobSpec {
    /// Parses and validates spec bytes as found in `JobPosted.spec`.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, SpecError> {
        if bytes.len() > MAX_SPEC_BYTES {
            return Err(SpecError::TooLarge(bytes.len()));
        }
        // Read the version first so that a newer spec is reported as such, not as a
        // field this version does not know.
        #[derive(Deserialize)]
        struct Versioned {
            version: u32,
        }
        let versioned: Versioned =
            serde_json::from_slice(bytes).map_err(|e| SpecError::Malformed(e.to_string()))?;
        if !(FIRST_SPEC_VERSION..=SPEC_VERSION).contains(&versioned.version) {
            return Err(SpecError::UnsupportedVersion(versioned.version));
        }
        let spec: Self =
            serde_json::from_slice(bytes).map_err(|e| SpecError::Malformed(e.to_string()))?;
        spec.validate()?;
        Ok(spec)
    }

    /// The bytes to post on-chain: compact JSON, fields in a fixed order.
    pub fn to_vec(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a job spec always serializes")
    }

    /// Checks what serde cannot: the values make sense.
    pub fn validate(&self) -> Result<(), SpecError> {
        if !(FIRST_SPEC_VERSION..=SPEC_VERSION).contains(&self.version) {
            return Err(SpecError::UnsupportedVersion(self.version));
        }
        match self.engine {
            Engine::Docker => self.validate_docker()?,
            Engine::Wasm => self.validate_wasm()?,
        }
        if self.command.iter().any(|arg| arg.contains('\0')) {
            return invalid("command", "arguments may not contain a NUL byte");
        }
        if self.timeout_secs == 0 {
            return invalid("timeoutSecs", "must be positive");
        }
        if !is_within(&self.outputs.path, OUTPUTS_DIR) {
            return invalid("outputs.path", "must be /outputs or a directory below it");
        }
        if self.outputs.max_bytes == Some(0) {
            return invalid("outputs.maxBytes", "must be positive");
        }
        if let Some(percent) = self.resources.gpu_memory_percent
            && !(1..=100).contains(&percent)
        {
            return invalid("resources.gpuMemoryPercent", "must be 1 to 100");
        }
        if self.resources.cpu_threads == Some(0) {
            return invalid("resources.cpuThreads", "must be positive");
        }
        let mut paths = std::collections::BTreeSet::new();
        for input in &self.inputs {
            check_uri("inputs.uri", &input.uri)?;
            if input.path == INPUTS_DIR || !is_within(&input.path, INPUTS_DIR) {
                return invalid("inputs.path", "must be a file path below /inputs");
            }
            if !paths.insert(input.path.as_str()) {
                return invalid("inputs.path", "two inputs share a path");
            }
            if input.max_bytes == Some(0) {
                return invalid("inputs.maxBytes", "must be positive");
            }
            if let Some(hash) = &input.sha256 {
                check_sha256("inputs.sha256", hash)?;
            }
        }
        self.validate_encryption()?;
        if self
            .env
            .keys()
            .any(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return invalid(
                "env",
                "names must be non-empty and contain no '=' or NUL byte",
            );
        }
        if self.env.values().any(|v| v.contains('\0')) {
            return invalid("env", "values may not contain a NUL byte");
        }
        Ok(())
    }

    fn validate_encryption(&self) -> Result<(), SpecError> {
        let encrypted_inputs = self.inputs.iter().any(|i| i.encrypted);
        let Some(encryption) = &self.encryption else {
            if encrypted_inputs {
                return invalid("inputs.encrypted", "an encrypted input needs `encryption`");
            }
            return Ok(());
        };
        if self.version < 3 {
            return invalid("encryption", "needs spec version 3");
        }
        if crate::encryption::recipient(&encryption.recipient).is_err() {
            return invalid(
                "encryption.recipient",
                "must be an age X25519 recipient (age1…)",
            );
        }
        match &encryption.job_key {
            Some(key) if crate::encryption::recipient(key).is_err() => {
                return invalid(
                    "encryption.jobKey",
                    "must be an age X25519 recipient (age1…)",
                );
            }
            None if encrypted_inputs => {
                return invalid(
                    "encryption.jobKey",
                    "encrypted inputs need the job key's recipient",
                );
            }
            _ => {}
        }
        if let Some(salt) = &encryption.key_salt
            && (salt.len() != 32 || !salt.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            return invalid("encryption.keySalt", "must be 32 hex digits");
        }
        if self
            .inputs
            .iter()
            .any(|i| i.encrypted && i.sha256.is_none())
        {
            // The node keeps the ciphertext it checked, nothing unchecked reaches the job.
            return invalid(
                "inputs.sha256",
                "an encrypted input names its ciphertext's SHA-256",
            );
        }
        Ok(())
    }

    /// Whether a node needs the job key before the job starts: it has encrypted inputs.
    pub fn needs_job_key(&self) -> bool {
        self.inputs.iter().any(|i| i.encrypted)
    }

    fn validate_docker(&self) -> Result<(), SpecError> {
        if self.wasm.is_some() {
            return invalid("wasm", "only a WASM job (\"engine\":\"wasm\") has a module");
        }
        if !image_reference_accepted(&self.image) {
            return invalid(
                "image",
                "must be an image reference Docker accepts: [registry/]lower-case/path[:tag]\
                 [@sha256:<64 hex digits>]",
            );
        }
        Ok(())
    }

    fn validate_wasm(&self) -> Result<(), SpecError> {
        if self.version < 2 {
            return invalid("engine", "needs spec version 2");
        }
        if !self.image.is_empty() {
            return invalid("image", "a WASM job runs a module, not an image");
        }
        if self.resources.gpu_memory_percent.is_some() {
            return invalid(
                "resources.gpuMemoryPercent",
                "a WASM job runs on the CPU only",
            );
        }
        let Some(wasm) = &self.wasm else {
            return invalid("wasm", "a WASM job names its module");
        };
        check_uri("wasm.module.uri", &wasm.module.uri)?;
        check_sha256("wasm.module.sha256", &wasm.module.sha256)?;
        if wasm.module.max_bytes == Some(0) {
            return invalid("wasm.module.maxBytes", "must be positive");
        }
        if let Some(entry) = &wasm.entry
            && (entry.is_empty() || entry.len() > 256 || entry.contains('\0'))
        {
            return invalid(
                "wasm.entry",
                "must be an export name of 1 to 256 bytes without NUL",
            );
        }
        if let Some(mib) = wasm.memory_mib
            && !(1..=MAX_WASM_MEMORY_MIB).contains(&mib)
        {
            return invalid("wasm.memoryMib", "must be 1 to 4096");
        }
        if wasm.deterministic && wasm.memory_mib.is_none() {
            // A node's default would make the limit, and so the result, the node's.
            return invalid(
                "wasm.memoryMib",
                "a deterministic job names its memory limit",
            );
        }
        Ok(())
    }

    /// Design 18's fit rule: whether every node that takes verified seats finishes this
    /// job's deterministic run, fuel and all, within a seat's `max_runtime` seconds. Its
    /// fuel ([`FUEL_PER_SECOND`] × `timeoutSecs`) must fit [`VERIFIED_FUEL_RATE`] × what is
    /// left of the run after [`VERIFIED_RUN_MARGIN_SECS`], the declared bytes' download
    /// and the memory's first touch. Every node computes the same answer: a job that does
    /// not fit is declined by all, free, and refunded; one that fits is finished by any
    /// node at least [`VERIFIED_NODE_FUEL_RATE`] fast, so the wall clock never decides a
    /// verified result. `Err` says why it does not fit.
    pub fn verified_fit(&self, max_runtime: u64) -> Result<(), String> {
        let least = self.verified_runtime()?;
        if max_runtime >= least {
            return Ok(());
        }
        let margin = self.verified_margin();
        if self.engine == Engine::Docker {
            return Err(format!(
                "timeoutSecs {} does not fit a verified seat of maxRuntime {max_runtime} s: it \
                 needs {least} s ({margin} s to stage its declared bytes, then its timeout)",
                self.timeout_secs,
            ));
        }
        Err(format!(
            "timeoutSecs {} does not fit a verified seat of maxRuntime {max_runtime} s: it \
             needs {least} s ({margin} s to stage its declared bytes and memory, then its fuel \
             at the {} M a second a verified run counts on, against the {} M a second its \
             timeout buys)",
            self.timeout_secs,
            VERIFIED_FUEL_RATE / 1_000_000,
            FUEL_PER_SECOND / 1_000_000,
        ))
    }

    /// The shortest seat (`maxRuntime`, seconds) this job fits ([`JobSpec::verified_fit`]);
    /// `Err` for a job no seat runs. Deterministic WASM, or a Docker job (deterministic by
    /// its submitter's word: the worker's sandbox removes what it can, design 18, §1)
    /// whose image is pinned by digest.
    pub fn verified_runtime(&self) -> Result<u64, String> {
        let fuel = match self.engine {
            Engine::Wasm => {
                let Some(wasm) = self.wasm.as_ref().filter(|w| w.deterministic) else {
                    return Err("a verified WASM job runs in deterministic mode".into());
                };
                // Every node fetches the same bytes from the same place (design 18, §1):
                // a submitter serving nodes differently could make honest ones disagree.
                if !wasm.module.uri.starts_with("nats://") {
                    return Err(
                        "a verified job's module comes from the network's nats:// inputs".into(),
                    );
                }
                Some(self.timeout_secs.saturating_mul(FUEL_PER_SECOND))
            }
            Engine::Docker => {
                if !is_pinned_image(&self.image) {
                    return Err(format!(
                        "a verified Docker job names its image by digest (name@sha256:<64 hex> \
                         or sha256:<64 hex>), so that every node runs the same bytes: {:?} \
                         does not",
                        self.image
                    ));
                }
                None
            }
        };
        if let Some(input) = self.inputs.iter().find(|input| {
            !input.uri.starts_with("nats://") || input.sha256.is_none() || input.max_bytes.is_none()
        }) {
            return Err(format!(
                "a verified job's inputs come from the network's nats:// inputs, each with its \
                 sha256 and maxBytes: {} does not",
                input.path
            ));
        }
        let run = match fuel {
            Some(fuel) => fuel.div_ceil(VERIFIED_FUEL_RATE),
            // A container's own clock: its timeout.
            None => self.timeout_secs,
        };
        Ok(self.verified_margin().saturating_add(run))
    }

    /// The most a verified run of this spec writes to its files ([`VERIFIED_OUTPUT_BYTES`]
    /// or its `outputs.maxBytes`, whichever is less).
    pub fn verified_output_bytes(&self) -> u64 {
        self.outputs
            .max_bytes
            .map_or(VERIFIED_OUTPUT_BYTES, |most| {
                most.min(VERIFIED_OUTPUT_BYTES)
            })
    }

    /// What a verified seat's run leaves before the fuel: [`VERIFIED_RUN_MARGIN_SECS`],
    /// the declared bytes' download and the memory's first touch, seconds.
    fn verified_margin(&self) -> u64 {
        let (module, memory_mib) = match (&self.engine, self.wasm.as_ref()) {
            (Engine::Wasm, wasm) => (
                wasm.and_then(|w| w.module.max_bytes)
                    .unwrap_or(MAX_WASM_MODULE_BYTES),
                wasm.and_then(|w| w.memory_mib)
                    .unwrap_or(MAX_WASM_MEMORY_MIB),
            ),
            // A container's image is the node's to have (pulled at admission, within the
            // grace), and its memory is not touched ahead.
            (Engine::Docker, _) => (0, 0),
        };
        let bytes = self
            .inputs
            .iter()
            .map(|input| input.max_bytes.unwrap_or(VERIFIED_UNDECLARED_INPUT_BYTES))
            .fold(module, u64::saturating_add);
        VERIFIED_RUN_MARGIN_SECS
            .saturating_add(bytes.div_ceil(VERIFIED_FETCH_BYTES_PER_SEC))
            .saturating_add((u64::from(memory_mib) << 20).div_ceil(VERIFIED_MEMORY_BYTES_PER_SEC))
    }

    /// The bytes to post, refused if the spec is invalid or they are over the market's
    /// limit. (The limit applies to the bytes posted, which [`JobSpec::from_slice`]
    /// measures as they are: a spec is never measured by a re-serialisation of it.)
    pub fn to_posted(&self) -> Result<Vec<u8>, SpecError> {
        self.validate()?;
        let bytes = self.to_vec();
        if bytes.len() > MAX_SPEC_BYTES {
            return Err(SpecError::TooLarge(bytes.len()));
        }
        Ok(bytes)
    }

    /// Compiles the image-reference grammar the validator uses (a large regular
    /// expression: ~0.4 s in a debug build, once per process), so that a service that
    /// validates specs on its hot path pays it at start, not on the first job.
    pub fn prepare_validator() {
        let _ = <oci_spec::distribution::Reference as std::str::FromStr>::from_str("busybox");
    }

    /// The hash the market stores (`JobPosted.specHash`): keccak-256 of the posted bytes.
    pub fn hash_bytes(bytes: &[u8]) -> B256 {
        keccak256(bytes)
    }
}

/// Whether Docker accepts `image` as a reference (`oci-spec`'s grammar). Its regular
/// expression runs as a PikeVM search, a tenth of a projection's time when every posting
/// is checked; a market's postings name few images (a sweep posts one many times), so
/// each thread keeps the last answers, by the reference (at most `KEPT` of up to
/// `LONGEST` bytes: a hostile stream of long references costs its checks, not memory).
fn image_reference_accepted(image: &str) -> bool {
    const KEPT: usize = 1024;
    const LONGEST: usize = 512;
    thread_local! {
        static ANSWERS: std::cell::RefCell<std::collections::HashMap<String, bool>> =
            std::cell::RefCell::default();
    }
    if let Some(answer) = ANSWERS.with_borrow(|answers| answers.get(image).copied()) {
        return answer;
    }
    let answer = <oci_spec::distribution::Reference as std::str::FromStr>::from_str(image).is_ok();
    if image.len() > LONGEST {
        return answer;
    }
    ANSWERS.with_borrow_mut(|answers| {
        if answers.len() >= KEPT {
            answers.clear();
        }
        answers.insert(image.to_owned(), answer);
    });
    answer
}

fn invalid(field: &'static str, reason: &str) -> Result<(), SpecError> {
    Err(SpecError::Invalid {
        field,
        reason: reason.into(),
    })
}

/// A URI a worker can fetch: one of [`INPUT_SCHEMES`], no spaces or control characters.
fn check_uri(field: &'static str, uri: &str) -> Result<(), SpecError> {
    if !INPUT_SCHEMES.iter().any(|scheme| uri.starts_with(scheme))
        || uri.contains(|c: char| c.is_whitespace() || c.is_control())
    {
        return invalid(
            field,
            "must be an https, http, ipfs, nats, s3 or file URI without spaces",
        );
    }
    Ok(())
}

fn check_sha256(field: &'static str, hash: &str) -> Result<(), SpecError> {
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return invalid(field, "must be 64 hex digits");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> JobSpec {
        JobSpec {
            encryption: None,
            version: 1,
            kind: JobKind::Training,
            image: format!("ghcr.io/acme/train@sha256:{}", "9f".repeat(32)),
            command: vec!["python".into(), "train.py".into()],
            env: BTreeMap::from([("SEED".into(), "42".into())]),
            inputs: vec![InputSpec {
                encrypted: false,
                uri: "https://data.example.org/x.tar".into(),
                sha256: Some("ab".repeat(32)),
                path: "/inputs/x.tar".into(),
                max_bytes: Some(1 << 30),
            }],
            outputs: OutputSpec::default(),
            resources: Resources::default(),
            timeout_secs: 3600,
            engine: Engine::Docker,
            wasm: None,
        }
    }

    fn wasm_example() -> JobSpec {
        JobSpec {
            version: 2,
            engine: Engine::Wasm,
            image: String::new(),
            command: vec!["--epochs".into(), "3".into()],
            wasm: Some(WasmSpec {
                module: ModuleSpec {
                    uri: "https://data.example.org/train.wasm".into(),
                    sha256: "cd".repeat(32),
                    max_bytes: None,
                },
                entry: None,
                memory_mib: Some(256),
                deterministic: true,
            }),
            ..example()
        }
    }

    #[test]
    fn round_trips_through_bytes() {
        let spec = example();
        assert_eq!(JobSpec::from_slice(&spec.to_vec()).unwrap(), spec);
    }

    #[test]
    fn reads_a_minimal_spec_with_defaults() {
        let json = br#"{"version":1,"image":"acme/train:v1","command":["python","train.py"],"inputs":[{"uri":"https://data.example.org/cifar10.tar","sha256":"3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a","path":"/inputs/cifar10.tar"}],"outputs":{},"timeoutSecs":7200}"#;
        let spec = JobSpec::from_slice(json).unwrap();
        assert_eq!(spec.timeout_secs, 7200);
        assert_eq!(spec.kind, JobKind::Training);
        assert_eq!(spec.outputs.path, OUTPUTS_DIR);
        assert_eq!(spec.resources, Resources::default());
    }

    #[test]
    fn paths_stay_inside_their_directory() {
        assert!(is_within("/outputs", "/outputs"));
        assert!(is_within("/outputs/model", "/outputs"));
        for bad in [
            "/outputsx",
            "/outputs/",
            "/outputs/../etc",
            "/outputs//a",
            "/outputs/./a",
            "/outputs/a\0b",
            "/etc",
        ] {
            assert!(!is_within(bad, "/outputs"), "{bad}");
        }
    }

    #[test]
    fn refuses_bad_specs_with_the_field_named() {
        type Mutation = fn(&mut JobSpec);
        let cases: [(Mutation, &str); 20] = [
            (|s| s.image = String::new(), "image"),
            // What Docker answers 400 to: upper case in the path, emoji, markup, a short
            // digest, spaces.
            (|s| s.image = "ghcr.io/Acme/Train:v1".into(), "image"),
            (|s| s.image = "acme/train\u{1F600}".into(), "image"),
            (|s| s.image = "<b>train</b>".into(), "image"),
            (|s| s.image = "acme/train@sha256:9f2c".into(), "image"),
            (|s| s.image = "acme/train v1".into(), "image"),
            (|s| s.command.push("a\0b".into()), "command"),
            (|s| _ = s.env.insert("A".into(), "x\0y".into()), "env"),
            (|s| _ = s.env.insert("A\0".into(), "1".into()), "env"),
            (
                |s| s.inputs[0].uri = "https://host/a b".into(),
                "inputs.uri",
            ),
            (|s| s.timeout_secs = 0, "timeoutSecs"),
            (|s| s.outputs.path = "/data/out".into(), "outputs.path"),
            (|s| s.outputs.max_bytes = Some(0), "outputs.maxBytes"),
            (|s| s.inputs[0].uri = "ftp://host/x".into(), "inputs.uri"),
            (
                |s| s.inputs[0].path = "/inputs/../etc/x".into(),
                "inputs.path",
            ),
            (|s| s.inputs[0].path = "/inputs".into(), "inputs.path"),
            (|s| s.inputs.push(s.inputs[0].clone()), "inputs.path"),
            (
                |s| s.resources.gpu_memory_percent = Some(101),
                "resources.gpuMemoryPercent",
            ),
            (|s| s.inputs[0].sha256 = Some("xyz".into()), "inputs.sha256"),
            (|s| _ = s.env.insert("A=B".into(), "1".into()), "env"),
        ];
        for (mutate, expected) in cases {
            let mut spec = example();
            mutate(&mut spec);
            match JobSpec::from_slice(&serde_json::to_vec(&spec).unwrap()) {
                Err(SpecError::Invalid { field, .. }) => assert_eq!(field, expected),
                other => panic!("{expected}: expected Invalid, got {other:?}"),
            }
        }
        let mut newer = example();
        newer.version = SPEC_VERSION + 1;
        assert_eq!(
            JobSpec::from_slice(&serde_json::to_vec(&newer).unwrap()),
            Err(SpecError::UnsupportedVersion(SPEC_VERSION + 1))
        );
    }

    #[test]
    fn a_version_1_spec_reads_as_before_and_writes_the_same_bytes() {
        // Posted before engines existed: its bytes, hash and meaning are unchanged.
        let v1 = br#"{"version":1,"kind":"training","image":"acme/train:v1","command":["python","train.py"],"env":{},"inputs":[],"outputs":{"path":"/outputs"},"timeoutSecs":60}"#;
        let spec = JobSpec::from_slice(v1).unwrap();
        assert_eq!(spec.engine, Engine::Docker);
        assert_eq!(spec.wasm, None);
        assert_eq!(spec.to_vec(), v1.to_vec());
        // A Docker spec reads the same as version 2.
        let v2 = String::from_utf8(v1.to_vec())
            .unwrap()
            .replace(r#""version":1"#, r#""version":2,"engine":"docker""#);
        assert_eq!(
            JobSpec::from_slice(v2.as_bytes()).unwrap(),
            JobSpec { version: 2, ..spec }
        );
    }

    #[test]
    fn a_wasm_spec_round_trips_and_names_its_module() {
        let spec = wasm_example();
        let bytes = spec.to_vec();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(r#""engine":"wasm""#), "{text}");
        assert!(!text.contains("image"), "{text}");
        assert_eq!(JobSpec::from_slice(&bytes).unwrap(), spec);
        let wasm = spec.wasm.as_ref().unwrap();
        assert_eq!(wasm.entry(), WASM_ENTRY);
        assert_eq!(
            wasm.module.as_input().sha256.as_deref(),
            Some(wasm.module.sha256.as_str())
        );
        let minimal = br#"{"version":2,"engine":"wasm","wasm":{"module":{"uri":"nats://gantry-inputs/m","sha256":"0000000000000000000000000000000000000000000000000000000000000000"}},"outputs":{},"timeoutSecs":5}"#;
        let minimal = JobSpec::from_slice(minimal).unwrap();
        let wasm = minimal.wasm.unwrap();
        assert_eq!(
            (wasm.entry(), wasm.memory_mib, wasm.deterministic),
            ("_start", None, false)
        );
    }

    #[test]
    fn refuses_bad_wasm_specs_with_the_field_named() {
        type Mutation = fn(&mut JobSpec);
        let cases: [(Mutation, &str); 12] = [
            (|s| s.version = 1, "engine"),
            (
                |s| s.wasm.as_mut().unwrap().memory_mib = None,
                "wasm.memoryMib",
            ),
            (|s| s.image = "busybox".into(), "image"),
            (|s| s.wasm = None, "wasm"),
            (
                |s| s.resources.gpu_memory_percent = Some(50),
                "resources.gpuMemoryPercent",
            ),
            (
                |s| s.wasm.as_mut().unwrap().module.uri = "ftp://x/m.wasm".into(),
                "wasm.module.uri",
            ),
            (
                |s| s.wasm.as_mut().unwrap().module.sha256 = "abc".into(),
                "wasm.module.sha256",
            ),
            (
                |s| s.wasm.as_mut().unwrap().module.max_bytes = Some(0),
                "wasm.module.maxBytes",
            ),
            (
                |s| s.wasm.as_mut().unwrap().entry = Some(String::new()),
                "wasm.entry",
            ),
            (
                |s| s.wasm.as_mut().unwrap().entry = Some("a\0b".into()),
                "wasm.entry",
            ),
            (
                |s| s.wasm.as_mut().unwrap().memory_mib = Some(4097),
                "wasm.memoryMib",
            ),
            (|s| s.command.push("a\0b".into()), "command"),
        ];
        for (mutate, expected) in cases {
            let mut spec = wasm_example();
            mutate(&mut spec);
            match JobSpec::from_slice(&serde_json::to_vec(&spec).unwrap()) {
                Err(SpecError::Invalid { field, .. }) => assert_eq!(field, expected),
                other => panic!("{expected}: expected Invalid, got {other:?}"),
            }
        }
        // A Docker job has no module.
        let mut docker = example();
        docker.wasm = wasm_example().wasm;
        assert!(matches!(
            docker.validate(),
            Err(SpecError::Invalid { field: "wasm", .. })
        ));
        // An engine nobody runs is not a spec.
        let unknown = serde_json::to_string(&wasm_example())
            .unwrap()
            .replace(r#""engine":"wasm""#, r#""engine":"jvm""#);
        assert!(matches!(
            JobSpec::from_slice(unknown.as_bytes()),
            Err(SpecError::Malformed(_))
        ));
    }

    #[test]
    fn accepts_the_image_references_docker_accepts() {
        for image in [
            "busybox",
            "gantry-test/busybox:1",
            "ghcr.io/acme/train:v1",
            "localhost:5000/a/b:tag",
            "ubuntu:22.04",
        ] {
            let spec = JobSpec {
                image: image.into(),
                ..example()
            };
            assert_eq!(spec.validate(), Ok(()), "{image}");
        }
    }

    #[test]
    fn a_remembered_image_answer_is_the_grammar_s() {
        // Asked twice (the second answer from the memo), and past the memo's size.
        let long = format!("ghcr.io/acme/{}", "a".repeat(600));
        for _ in 0..2 {
            for (image, accepted) in [
                ("busybox", true),
                ("ghcr.io/acme/train:v1", true),
                ("Upper/Case", false),
                ("a b", false),
                ("", false),
                // Longer than a name may be (255), and than the memo keeps.
                (long.as_str(), false),
                ("registry:5000/x@sha256:short", false),
            ] {
                assert_eq!(image_reference_accepted(image), accepted, "{image}");
            }
        }
        for n in 0..1100 {
            assert!(image_reference_accepted(&format!("acme/train:{n}")));
        }
        assert!(!image_reference_accepted("Upper/Case"));
    }

    #[test]
    fn the_size_limit_is_the_posted_bytes_not_a_reserialisation() {
        // A minimal spec whose posted bytes are exactly at the limit: re-serialised with
        // its defaults (kind, command, env, inputs) it would be longer.
        let head = r#"{"version":1,"image":"busybox","outputs":{},"timeoutSecs":60,"env":{"PAD":""#;
        let tail = r#""}}"#;
        let pad = "x".repeat(MAX_SPEC_BYTES - head.len() - tail.len());
        let posted = format!("{head}{pad}{tail}");
        assert_eq!(posted.len(), MAX_SPEC_BYTES);
        let spec = JobSpec::from_slice(posted.as_bytes()).expect("a spec at the limit");
        assert!(spec.to_vec().len() > MAX_SPEC_BYTES);
        assert!(matches!(spec.to_posted(), Err(SpecError::TooLarge(_))));
        let over = format!("{head}x{pad}{tail}");
        assert_eq!(
            JobSpec::from_slice(over.as_bytes()),
            Err(SpecError::TooLarge(MAX_SPEC_BYTES + 1))
        );
    }

    #[test]
    fn refuses_unknown_fields_and_oversized_specs() {
        let mut json = serde_json::to_value(example()).unwrap();
        json["gpu"] = "lots".into();
        assert!(matches!(
            JobSpec::from_slice(&serde_json::to_vec(&json).unwrap()),
            Err(SpecError::Malformed(_))
        ));
        let big = vec![b' '; MAX_SPEC_BYTES + 1];
        assert_eq!(
            JobSpec::from_slice(&big),
            Err(SpecError::TooLarge(MAX_SPEC_BYTES + 1))
        );
    }

    #[test]
    fn a_verified_job_fits_only_a_seat_whose_runtime_holds_its_fuel_at_the_verified_rate() {
        let mut spec = wasm_example();
        spec.wasm.as_mut().unwrap().module.uri = "nats://gantry_1_inputs/train.wasm".into();
        spec.inputs[0].uri = "nats://gantry_1_inputs/x.tar".into();
        // 120 s, the 1 GiB input and the 32 MiB module at 16 MiB/s (64 + 2 s), 256 MiB of
        // memory (1 s); then 3600 s of fuel at the verified rate.
        let least = 120 + 64 + 2 + 1 + 3600 * FUEL_PER_SECOND / VERIFIED_FUEL_RATE;
        assert_eq!(spec.verified_fit(least), Ok(()));
        let short = spec.verified_fit(least - 1).unwrap_err();
        assert!(short.contains("187 s to stage"), "{short}");
        assert_eq!(spec.verified_runtime(), Ok(least));
        let mut free = spec.clone();
        free.wasm.as_mut().unwrap().deterministic = false;
        assert!(free.verified_fit(u64::MAX).is_err(), "not deterministic");
        // Every node must fetch the same bytes: nats:// only, hashed and sized.
        for broken in [
            |s: &mut JobSpec| s.inputs[0].uri = "https://data.example.org/x.tar".into(),
            |s: &mut JobSpec| s.inputs[0].sha256 = None,
            |s: &mut JobSpec| s.inputs[0].max_bytes = None,
            |s: &mut JobSpec| s.wasm.as_mut().unwrap().module.uri = "ipfs://bafy/m.wasm".into(),
        ] {
            let mut unfit = spec.clone();
            broken(&mut unfit);
            let why = unfit.verified_fit(u64::MAX).unwrap_err();
            assert!(why.contains("nats://"), "{why}");
        }
        assert_eq!(spec.verified_output_bytes(), VERIFIED_OUTPUT_BYTES);
    }

    /// A Docker job is verified by its submitter's word that it is deterministic: its
    /// image pinned by digest, its inputs as a WASM job's, and its own timeout as the run.
    #[test]
    fn a_verified_docker_job_names_its_image_by_digest_and_fits_its_timeout() {
        let mut spec = example();
        spec.inputs[0].uri = "nats://gantry_1_inputs/x.tar".into();
        // 120 s and the 1 GiB input at 16 MiB/s (64 s); then the 3600 s timeout.
        let least = 120 + 64 + 3600;
        assert_eq!(spec.verified_runtime(), Ok(least));
        assert_eq!(spec.verified_fit(least), Ok(()));
        let short = spec.verified_fit(least - 1).unwrap_err();
        assert!(short.contains("184 s to stage"), "{short}");
        let mut by_id = spec.clone();
        by_id.image = format!("sha256:{}", "0a".repeat(32));
        assert_eq!(by_id.verified_runtime(), Ok(least));
        for tagged in [
            "ghcr.io/acme/train:1",
            "ghcr.io/acme/train",
            "@sha256:0a0a",
            "sha256:0a",
            &format!("acme@sha256:{}", "zz".repeat(32)),
            &format!("acme@sha512:{}", "0a".repeat(32)),
        ] {
            let mut unpinned = spec.clone();
            unpinned.image = tagged.into();
            let why = unpinned.verified_runtime().unwrap_err();
            assert!(why.contains("by digest"), "{tagged}: {why}");
        }
        let mut fetched = spec.clone();
        fetched.inputs[0].uri = "https://data.example.org/x.tar".into();
        assert!(fetched.verified_runtime().unwrap_err().contains("nats://"));
    }
}
