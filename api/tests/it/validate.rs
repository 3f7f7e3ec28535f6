//! The web app's job-spec validator against the protocol's: `node --test` runs every case
//! of the shared corpora (`contracts/protocol/tests/spec_corpus.json` and
//! `requirements_corpus.json`, which `gantry-protocol`'s `spec_corpus` and
//! `requirements_corpus` tests hold spec.rs and market.rs to) through `assets/validate.js`.

use std::process::Command;

#[test]
fn the_browser_validator_agrees_with_the_protocol_on_every_corpus_case() {
    let api = env!("CARGO_MANIFEST_DIR");
    let output = Command::new("node")
        .args([
            "--test",
            "--test-reporter=tap",
            "tests/validate/corpus.test.mjs",
        ])
        .current_dir(api)
        .output()
        .expect("running node (deploy/setup.sh installs it)");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "node --test failed:\n{report}");
    // Every case ran: a test file that found no cases would pass as well.
    let cases = |file: &str| {
        serde_json::from_str::<Vec<serde_json::Value>>(
            &std::fs::read_to_string(format!("{api}/../contracts/protocol/tests/{file}")).unwrap(),
        )
        .unwrap()
        .len()
    };
    let total = cases("spec_corpus.json") + cases("requirements_corpus.json");
    let passed = report
        .lines()
        .find_map(|line| line.strip_prefix("# pass "))
        .and_then(|count| count.trim().parse::<usize>().ok());
    assert_eq!(
        passed,
        Some(total + 1),
        "every case and the corpus's own check pass:\n{report}"
    );
}
