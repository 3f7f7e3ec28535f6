//! The job spec: what a submitter wants run, posted on-chain as JSON bytes in
//! `JobMarket.postJob(.., spec)` and emitted in `JobPosted`. The chain checks only the
//! `JobRequirements`; everything the worker needs to run the job is here.
//!
//! ```json
//! {"version":1,"image":"ghcr.io/acme/train@sha256:…","command":["python","train.py"],
//!  "env":{"SEED":"42"},"inputs":[{"uri":"https://…/data.tar","sha256":"…","path":"/data/in"}],
//!  "outputs":{"path":"/data/out"},"timeoutSecs":7200}
//! ```

use std::collections::BTreeMap;

use alloy::primitives::{B256, keccak256};
use serde::{Deserialize, Serialize};

/// The spec version this crate writes and reads.
pub const SPEC_VERSION: u32 = 1;
/// Largest spec the market accepts (`JobMarket.MAX_SPEC_BYTES`).
pub const MAX_SPEC_BYTES: usize = 16_384;

/// A job spec, version 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobSpec {
    /// Always [`SPEC_VERSION`]; a reader refuses versions it does not know.
    pub version: u32,
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
    /// Wall-clock limit of one run, seconds (at most the on-chain `maxRuntime`).
    pub timeout_secs: u64,
}

/// One input file of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InputSpec {
    /// Where to fetch it (`https://`, `http://`, `ipfs://`).
    pub uri: String,
    /// Hex SHA-256 of the content; the worker refuses a mismatch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Absolute path inside the container.
    pub path: String,
}

/// Where a job's results are collected from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OutputSpec {
    /// Absolute directory inside the container.
    pub path: String,
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
        if self.image.trim().is_empty() || self.image.chars().any(char::is_whitespace) {
            return invalid(
                "image",
                "must be a non-empty image reference without spaces",
            );
        }
        if self.timeout_secs == 0 {
            return invalid("timeoutSecs", "must be positive");
        }
        if !self.outputs.path.starts_with('/') {
            return invalid("outputs.path", "must be an absolute path");
        }
        for input in &self.inputs {
            if !["https://", "http://", "ipfs://"]
                .iter()
                .any(|scheme| input.uri.starts_with(scheme))
            {
                return invalid("inputs.uri", "must be an http(s):// or ipfs:// URI");
            }
            if !input.path.starts_with('/') {
                return invalid("inputs.path", "must be an absolute path");
            }
            if let Some(hash) = &input.sha256
                && (hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return invalid("inputs.sha256", "must be 64 hex digits");
            }
        }
        if self.env.keys().any(|k| k.is_empty() || k.contains('=')) {
            return invalid("env", "names must be non-empty and contain no '='");
        }
        let size = self.to_vec().len();
        if size > MAX_SPEC_BYTES {
            return Err(SpecError::TooLarge(size));
        }
        Ok(())
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
            image: "ghcr.io/acme/train@sha256:9f2c".into(),
            command: vec!["python".into(), "train.py".into()],
            env: BTreeMap::from([("SEED".into(), "42".into())]),
            inputs: vec![InputSpec {
                uri: "https://data.example.org/x.tar".into(),
                sha256: Some("ab".repeat(32)),
                path: "/data/in".into(),
            }],
            outputs: OutputSpec {
                path: "/data/out".into(),
            },
            timeout_secs: 3600,
        }
    }

    #[test]
    fn round_trips_through_bytes() {
        let spec = example();
        assert_eq!(JobSpec::from_slice(&spec.to_vec()).unwrap(), spec);
    }

    #[test]
    fn reads_the_solidity_test_fixture_spec() {
        // The ~400-byte spec of contracts/test/Base.t.sol, as a submitter would post it.
        let json = br#"{"version":1,"image":"ghcr.io/acme/train@sha256:9f2c4e1b7a0d3c5e8f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d0e2f4a6b8c0d2e","command":["python","train.py","--epochs","3","--batch-size","64"],"env":{"WANDB_MODE":"offline","SEED":"42"},"inputs":[{"uri":"https://data.example.org/cifar10.tar","sha256":"3f1c6a0e5b7d9f2a4c6e8b0d2f4a6c8e0b2d4f6a8c0e2b4d6f8a0c2e4b6d8f0a","path":"/data/in"}],"outputs":{"path":"/data/out"},"timeoutSecs":7200}"#;
        let spec = JobSpec::from_slice(json).unwrap();
        assert_eq!(spec.timeout_secs, 7200);
        assert_eq!(spec.inputs[0].path, "/data/in");
    }

    #[test]
    fn refuses_bad_specs_with_the_field_named() {
        type Mutation = fn(&mut JobSpec);
        let cases: [(Mutation, &str); 7] = [
            (|s| s.image = String::new(), "image"),
            (|s| s.timeout_secs = 0, "timeoutSecs"),
            (|s| s.outputs.path = "out".into(), "outputs.path"),
            (
                |s| s.inputs[0].uri = "file:///etc/passwd".into(),
                "inputs.uri",
            ),
            (|s| s.inputs[0].path = "in".into(), "inputs.path"),
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
