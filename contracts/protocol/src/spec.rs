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
//! The container sees its inputs read-only under [`INPUTS_DIR`], writes its results under
//! [`OUTPUTS_DIR`] and its checkpoints under [`CHECKPOINTS_DIR`] (restored when the job
//! resumes on another node). Input URIs: `https://`, `http://`, `ipfs://<cid>[/path]`
//! (through the worker's gateway), `nats://<bucket>/<key>` (NATS object store),
//! `s3://<bucket>/<key>` and `file:///<path>` (inside the worker's configured local root).

use std::collections::BTreeMap;

use alloy::primitives::{B256, keccak256};
use serde::{Deserialize, Serialize};

/// The spec version this crate writes and reads.
pub const SPEC_VERSION: u32 = 1;
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

/// URI schemes an input may use.
pub const INPUT_SCHEMES: [&str; 6] = [
    "https://", "http://", "ipfs://", "nats://", "s3://", "file://",
];

/// A job spec, version 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSpec {
    /// Always [`SPEC_VERSION`]; a reader refuses versions it does not know.
    pub version: u32,
    /// Training or inference; a provider may take only one kind.
    #[serde(default)]
    pub kind: JobKind,
    /// Container image, ideally pinned by digest (`name@sha256:…`).
    pub image: String,
    /// Command and arguments; empty runs the image's entrypoint.
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
        .all(|part| !part.is_empty() && part != "." && part != "..")
}

/// Why a spec was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    #[error("spec is {0} bytes, more than the {MAX_SPEC_BYTES} the market accepts")]
    TooLarge(usize),
    #[error("spec is not valid job-spec JSON: {0}")]
    Malformed(String),
    #[error("spec version {0} is not supported (this build knows version {SPEC_VERSION})")]
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
        if versioned.version != SPEC_VERSION {
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
        let invalid = |field, reason: &str| {
            Err(SpecError::Invalid {
                field,
                reason: reason.into(),
            })
        };
        if self.version != SPEC_VERSION {
            return Err(SpecError::UnsupportedVersion(self.version));
        }
        if <oci_spec::distribution::Reference as std::str::FromStr>::from_str(&self.image).is_err()
        {
            return invalid(
                "image",
                "must be an image reference Docker accepts: [registry/]lower-case/path[:tag]\
                 [@sha256:<64 hex digits>]",
            );
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
            if !INPUT_SCHEMES
                .iter()
                .any(|scheme| input.uri.starts_with(scheme))
                || input
                    .uri
                    .contains(|c: char| c.is_whitespace() || c.is_control())
            {
                return invalid(
                    "inputs.uri",
                    "must be an https, http, ipfs, nats, s3 or file URI without spaces",
                );
            }
            if input.path == INPUTS_DIR || !is_within(&input.path, INPUTS_DIR) {
                return invalid("inputs.path", "must be a file path below /inputs");
            }
            if !paths.insert(input.path.as_str()) {
                return invalid("inputs.path", "two inputs share a path");
            }
            if input.max_bytes == Some(0) {
                return invalid("inputs.maxBytes", "must be positive");
            }
            if let Some(hash) = &input.sha256
                && (hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return invalid("inputs.sha256", "must be 64 hex digits");
            }
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> JobSpec {
        JobSpec {
            version: 1,
            kind: JobKind::Training,
            image: format!("ghcr.io/acme/train@sha256:{}", "9f".repeat(32)),
            command: vec!["python".into(), "train.py".into()],
            env: BTreeMap::from([("SEED".into(), "42".into())]),
            inputs: vec![InputSpec {
                uri: "https://data.example.org/x.tar".into(),
                sha256: Some("ab".repeat(32)),
                path: "/inputs/x.tar".into(),
                max_bytes: Some(1 << 30),
            }],
            outputs: OutputSpec::default(),
            resources: Resources::default(),
            timeout_secs: 3600,
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
        newer.version = 2;
        assert_eq!(
            JobSpec::from_slice(&serde_json::to_vec(&newer).unwrap()),
            Err(SpecError::UnsupportedVersion(2))
        );
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
}
