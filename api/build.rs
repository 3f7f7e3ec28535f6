//! Puts into `OUT_DIR` the dashboard assets that do not live in `assets/` (see
//! `src/dashboard.rs`):
//!
//! - `ethers.min.js`: ethers' one-file ES module, from the npm install that
//!   `deploy/setup.sh` makes under `.tools/` (or from `GANTRY_ETHERS_JS`, which the Docker
//!   build sets). Without it the build still succeeds, with a stub module that throws
//!   "ethers is not installed", and a warning: a clone without set-up and `cargo build`
//!   must keep working.
//! - `abi/<Contract>.json`: `{"abi": …}` of the contracts the web app calls, cut from the
//!   committed artifacts (the browser needs no bytecode).

use std::path::{Path, PathBuf};
use std::{env, fs};

/// Where `deploy/setup.sh` installs ethers, relative to this crate.
const ETHERS_INSTALLED: &str = "../.tools/npm/node_modules/ethers/dist/ethers.min.js";
/// An ethers.min.js to embed instead (the Docker image's build stage).
const ETHERS_ENV: &str = "GANTRY_ETHERS_JS";
/// Contracts whose ABI the dashboard serves as `/assets/abi/<name>.json`.
const ABIS: [&str; 3] = ["JobMarket", "NodeRegistry", "GantryTestToken"];

const ETHERS_STUB: &str = "// ethers was not installed when this gantry-api was built.\n\
    throw new Error(\"ethers is not installed: run deploy/setup.sh (or make dev)\");\n";

fn main() {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("set by cargo"));
    ethers(&manifest, &out);
    abis(&manifest, &out);
}

fn ethers(manifest: &Path, out: &Path) {
    println!("cargo:rerun-if-env-changed={ETHERS_ENV}");
    let source = match env::var_os(ETHERS_ENV) {
        Some(path) => PathBuf::from(path),
        None => manifest.join(ETHERS_INSTALLED),
    };
    // Watched even while absent: cargo reruns this script once it appears.
    println!("cargo:rerun-if-changed={}", source.display());
    let target = out.join("ethers.min.js");
    if source.is_file() {
        fs::copy(&source, &target).unwrap_or_else(|e| panic!("copying {}: {e}", source.display()));
    } else {
        // While the file is missing cargo reruns this script at every build; once it is
        // there, cargo compares its mtime with the last run, so a file that comes back with
        // an older one (a folder renamed back, an archive's times) would keep the stub.
        // The folder it comes back into changes then, and a watched folder is watched
        // whole.
        if let Some(folder) = source.ancestors().skip(1).take(3).find(|dir| dir.is_dir()) {
            println!("cargo:rerun-if-changed={}", folder.display());
        }
        println!(
            "cargo:warning=ethers is not installed ({} is missing): the dashboard's \
             /assets/vendor/ethers.min.js is a stub that throws; run deploy/setup.sh (or make dev)",
            source.display()
        );
        fs::write(&target, ETHERS_STUB).expect("writing the ethers stub");
    }
}

fn abis(manifest: &Path, out: &Path) {
    let dir = out.join("abi");
    fs::create_dir_all(&dir).expect("creating OUT_DIR/abi");
    for name in ABIS {
        let artifact = manifest.join(format!("../contracts/protocol/artifacts/{name}.json"));
        println!("cargo:rerun-if-changed={}", artifact.display());
        let text = fs::read_to_string(&artifact)
            .unwrap_or_else(|e| panic!("reading {}: {e}", artifact.display()));
        let mut json: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("parsing {}: {e}", artifact.display()));
        let abi = json
            .get_mut("abi")
            .map(serde_json::Value::take)
            .unwrap_or_else(|| panic!("{} has no abi", artifact.display()));
        let body = serde_json::json!({ "abi": abi }).to_string();
        fs::write(dir.join(format!("{name}.json")), body).expect("writing an ABI");
    }
}
