//! The contract artifacts the protocol crate's bindings are generated from.
//!
//! Forge's artifacts carry source maps and metadata that change with unrelated edits; the
//! committed ones keep what the bindings need: the ABI and the creation and runtime
//! bytecode. Bytecode is reproducible because `foundry.toml` turns the metadata hash off.

use std::path::{Path, PathBuf};
use std::process::Command;

use gantry_testkit::{DevnetError, Tools, workspace_root};
use serde_json::{Value, json};

/// Contracts whose artifacts are committed, as `(source file, contract name)`.
pub const ARTIFACT_CONTRACTS: &[(&str, &str)] = &[
    ("JobMarket.sol", "JobMarket"),
    ("NodeRegistry.sol", "NodeRegistry"),
    ("Verification.sol", "Verification"),
    ("Referees.sol", "Referees"),
    ("GantryTestToken.sol", "GantryTestToken"),
    ("EventBatcher.sol", "EventBatcher"),
];

/// Where the committed artifacts live.
pub fn committed_dir() -> PathBuf {
    workspace_root().join("contracts/protocol/artifacts")
}

/// Runs `forge build` of `contracts/src` into `out` (its cache beside it), with the `ir`
/// profile the deployed contracts are built with.
pub fn forge_build(tools: &Tools, out: &Path) -> Result<(), DevnetError> {
    let contracts = workspace_root().join("contracts");
    let path = std::env::join_paths(std::iter::once(tools.bin_dir().to_path_buf()).chain(
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
    ))
    .map_err(|e| DevnetError::Io(std::io::Error::other(e)))?;
    let output = Command::new(tools.forge()?)
        .current_dir(&contracts)
        .env("PATH", path)
        // The deployed bytecode goes through the IR pipeline (foundry.toml, `profile.ir`).
        .env("FOUNDRY_PROFILE", "ir")
        .args(["build", "--skip", "test", "--skip", "script", "--out"])
        .arg(out)
        .arg("--cache-path")
        .arg(out.join("cache"))
        .output()?;
    if !output.status.success() {
        return Err(DevnetError::CommandFailed {
            command: "forge build".into(),
            status: output.status,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        });
    }
    Ok(())
}

/// Reduces one forge artifact to `{abi, bytecode, deployedBytecode}`.
pub fn extract_artifact(forge_artifact: &Path) -> Result<Value, DevnetError> {
    let bad = |reason: &str| DevnetError::BadArtifact {
        path: forge_artifact.into(),
        reason: reason.into(),
    };
    let full: Value = serde_json::from_slice(&std::fs::read(forge_artifact)?)?;
    let abi = full.get("abi").ok_or_else(|| bad("no abi"))?;
    let bytecode = full
        .pointer("/bytecode/object")
        .ok_or_else(|| bad("no bytecode"))?;
    let deployed = full
        .pointer("/deployedBytecode/object")
        .ok_or_else(|| bad("no deployedBytecode"))?;
    Ok(json!({ "abi": abi, "bytecode": bytecode, "deployedBytecode": deployed }))
}

fn render(artifact: &Value) -> Result<String, DevnetError> {
    Ok(serde_json::to_string_pretty(artifact)? + "\n")
}

/// Builds the contracts and writes the committed artifacts.
pub fn write_artifacts(tools: &Tools) -> Result<Vec<PathBuf>, DevnetError> {
    let build = tempfile::tempdir()?;
    let out = build.path();
    forge_build(tools, out)?;
    let dir = committed_dir();
    std::fs::create_dir_all(&dir)?;
    let mut written = Vec::new();
    for (file, name) in ARTIFACT_CONTRACTS {
        let artifact = extract_artifact(&out.join(file).join(format!("{name}.json")))?;
        let target = dir.join(format!("{name}.json"));
        std::fs::write(&target, render(&artifact)?)?;
        written.push(target);
    }
    Ok(written)
}

/// Builds the contracts afresh and fails with the names of the committed artifacts that
/// differ from the build.
pub fn check_artifacts(tools: &Tools) -> Result<(), DevnetError> {
    let build = tempfile::tempdir()?;
    let out = build.path();
    forge_build(tools, out)?;
    let mut stale = Vec::new();
    for (file, name) in ARTIFACT_CONTRACTS {
        let fresh = render(&extract_artifact(
            &out.join(file).join(format!("{name}.json")),
        )?)?;
        let committed = std::fs::read_to_string(committed_dir().join(format!("{name}.json")))
            .unwrap_or_default();
        if fresh != committed {
            stale.push((*name).to_string());
        }
    }
    if stale.is_empty() {
        Ok(())
    } else {
        Err(DevnetError::ArtifactsStale(stale))
    }
}
