//! The shared job-spec corpus (`spec_corpus.json`) against the protocol's validator.
//!
//! Each case is a spec and the outcome `JobSpec::from_slice` gives it: `"ok"`, the field
//! and reason of `SpecError::Invalid`, or `{"error": …}` for a spec refused before its
//! values are checked (`malformed`: serde's message is not part of the contract;
//! `too-large` and `unsupported-version` with their whole message). A `spec` that is a
//! JSON string is the spec's text as posted (for what a JSON value cannot hold: duplicate
//! keys, `60.0`, broken syntax); any other value is serialised first.
//!
//! The web app's mirror of these rules (`api/assets/validate.js`) is held to the same
//! corpus by `api/tests/validate/corpus.test.mjs`: a rule changed here without its case
//! fails this test, a rule that drifts there fails that one.

use gantry_protocol::spec::{JobSpec, SpecError};
use serde_json::{Value, json};

#[test]
fn every_corpus_case_gets_the_outcome_the_corpus_names() {
    let corpus: Vec<Value> = serde_json::from_str(include_str!("spec_corpus.json"))
        .expect("spec_corpus.json is a JSON array of cases");
    assert!(corpus.len() >= 60, "only {} cases", corpus.len());
    let mut names = std::collections::BTreeSet::new();
    let mut wrong = Vec::new();
    for case in &corpus {
        let name = case["name"].as_str().expect("every case has a name");
        assert!(names.insert(name), "two cases are named {name:?}");
        let bytes = match &case["spec"] {
            Value::String(text) => text.clone().into_bytes(),
            value => serde_json::to_vec(value).unwrap(),
        };
        let outcome = outcome(JobSpec::from_slice(&bytes));
        if outcome != case["expect"] {
            wrong.push(format!(
                "{name}:\n  expected {}\n  got      {outcome}",
                case["expect"]
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases disagree with the validator:\n{}",
        wrong.len(),
        corpus.len(),
        wrong.join("\n")
    );
}

/// A validator's answer in the corpus's terms.
fn outcome(result: Result<JobSpec, SpecError>) -> Value {
    match result {
        Ok(_) => json!("ok"),
        Err(SpecError::Invalid { field, reason }) => json!({"field": field, "reason": reason}),
        Err(SpecError::Malformed(_)) => json!({"error": "malformed"}),
        Err(error @ SpecError::TooLarge(_)) => {
            json!({"error": "too-large", "message": error.to_string()})
        }
        Err(error @ SpecError::UnsupportedVersion(_)) => {
            json!({"error": "unsupported-version", "message": error.to_string()})
        }
    }
}
