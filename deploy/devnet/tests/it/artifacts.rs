use gantry_devnet::{Tools, check_artifacts};

/// The bindings are generated from committed artifacts; they must be what the committed
/// Solidity compiles to, or every service talks to a contract that does not exist.
#[test]
fn committed_artifacts_match_a_fresh_forge_build() {
    check_artifacts(&Tools::locate()).expect("artifacts are current");
}
