//! The shared requirements corpus (`requirements_corpus.json`) against the protocol's
//! mirror of the market's posting rules (`market::requirements_refusal`, the contract's
//! `_checkRequirements`). Each case is a job's requirements as the API shows them
//! (`RequirementsRow`) and `"ok"` or the field and reason of the refusal. The web app's
//! `validateRequirements` (`api/assets/validate.js`) is held to the same file by
//! `api/tests/validate/corpus.test.mjs`.

use gantry_protocol::api::RequirementsRow;
use gantry_protocol::market::requirements_refusal;
use serde_json::{Value, json};

#[test]
fn every_requirements_case_gets_the_outcome_the_corpus_names() {
    let corpus: Vec<Value> = serde_json::from_str(include_str!("requirements_corpus.json"))
        .expect("requirements_corpus.json is a JSON array of cases");
    assert!(corpus.len() >= 20, "only {} cases", corpus.len());
    let mut wrong = Vec::new();
    for case in &corpus {
        let name = case["name"].as_str().expect("every case has a name");
        let row: RequirementsRow = serde_json::from_value(case["requirements"].clone())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let requirements = row
            .to_sol()
            .unwrap_or_else(|| panic!("{name}: out of range"));
        let outcome = match requirements_refusal(&requirements) {
            None => json!("ok"),
            Some((field, reason)) => json!({"field": field, "reason": reason}),
        };
        if outcome != case["expect"] {
            wrong.push(format!(
                "{name}: expected {}, got {outcome}",
                case["expect"]
            ));
        }
    }
    assert!(wrong.is_empty(), "cases disagree:\n{}", wrong.join("\n"));
}
