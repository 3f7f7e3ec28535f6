//! Schemathesis (`deploy/setup.sh` installs it in `.tools/venv`) against the API's own
//! `/openapi.json`, served over a projection of the harness's market: every operation
//! with valid and invalid parameters, each answer checked against the document (status,
//! content type, headers, body schema; valid input accepted, invalid input refused, never
//! a 5xx), then chains of calls along the links it infers (a list's ids into the
//! detail routes). A fixed seed, one worker and a bound on the examples keep it
//! repeatable (but for which id of a list a chain follows) and well under two minutes.
//!
//! Left out: `/v1/events`, an SSE feed that never ends, and the logs' `follow=true` mode
//! (pinned to `false` by the configuration below), which streams until the job ends.

use std::process::Stdio;
use std::time::{Duration, Instant};

use gantry_testkit::Tools;
use gantry_testkit::accounts::SUBMITTER;
use tokio_util::sync::CancellationToken;

use crate::harness::{Api, chain_with_market, indexed, sqlite};

/// What the command line has no flag for: the submitter's address, which generated
/// addresses would not find, as one value of `/v1/accounts/{address}` in two; the logs'
/// `follow` pinned to `false`; and a 400 from `/v1/nodes/{id}` not held against a
/// "valid" id, because Schemathesis 4.32.5 itself sends a bad one there: following its
/// inferred link from a job list's `nodeId`s it picks one at random, a `null` included,
/// and sends `/v1/nodes/None` (its pick comes after the check that drops `null`s). The
/// check cannot simply be turned off for the operation: `--checks all` wins over that.
fn config(submitter: &str) -> String {
    format!(
        r#"
parameters = {{ "path.address" = {{ dictionary = "accounts", probability = 0.5 }} }}

[dictionaries.accounts]
values = ["{submitter}"]

[[operations]]
include-path = "/v1/jobs/{{id}}/logs"
parameters = {{ "query.follow" = "false" }}

[[operations]]
include-path = "/v1/nodes/{{id}}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]
"#
    )
}

/// The whole run, over which the test gives up.
const LIMIT: Duration = Duration::from_secs(170);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_answers_as_its_openapi_document_says() {
    let schemathesis = Tools::locate().bin_dir().join("schemathesis");
    assert!(
        schemathesis.is_file(),
        "schemathesis is not installed at {}: run deploy/setup.sh (or make test)",
        schemathesis.display()
    );
    let chain = chain_with_market().await;
    indexed(&chain).await;
    let stop = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let api = Api::start(
        &chain,
        &sqlite(dir.path()),
        &stop,
        Some(crate::live::metrics()),
    )
    .await;
    api.caught_up(&chain, 0).await;

    let config_file = dir.path().join("schemathesis.toml");
    let submitter = format!("{:#x}", chain.address(SUBMITTER));
    std::fs::write(&config_file, config(&submitter)).unwrap();
    let schema = format!("{}/openapi.json", api.base);
    let args = [
        "--config-file",
        config_file.to_str().unwrap(),
        "run",
        &schema,
        "--checks",
        "all",
        "--exclude-path",
        "/v1/events",
        "--seed",
        "20",
        "--max-examples",
        "100",
        "--continue-on-failure",
        "--request-timeout",
        "10",
        "--workers",
        "1",
        "--no-color",
    ];
    let started = Instant::now();
    let run = tokio::process::Command::new(&schemathesis)
        .args(args)
        // Nothing of its own (a `.hypothesis/` folder, reports) lands in the crate.
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(LIMIT, run)
        .await
        .unwrap_or_else(|_| panic!("schemathesis ran over {LIMIT:?}"))
        .expect("running schemathesis (deploy/setup.sh installs it)");
    let said = format!(
        "schemathesis {} ({:.0?}):\n{}\n{}",
        args.join(" "),
        started.elapsed(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "{said}");
    println!("{said}");

    stop.cancel();
    api.stopped().await;
}
