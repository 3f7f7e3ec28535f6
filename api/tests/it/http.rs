//! Every endpoint against a projection of a real chain: the happy path, bad parameters,
//! pagination bounds, unknown ids.

use gantry_protocol::names;
use std::time::Duration;

use gantry_api::http::{AppState, HttpConfig, router};
use gantry_api::project::Progress;
use reqwest::StatusCode;

use gantry_protocol::api::{
    AccountRow, AttemptFault, AttemptOutcome, ChargeCause, JobBrief, JobDetail, JobRow, JobSummary,
    NodeDetail, NodeRow, NodeView, Page, RequirementsRow, StateWords, Stats, TermsWords,
};
use gantry_protocol::bindings::{JobMarket, NodeRegistry};
use gantry_protocol::jobs::{CompletionReport, CompletionStatus, LogLine, ProgressUpdate};
use gantry_protocol::status::NodeStatus;
use gantry_testkit::accounts::{MATCHER, NODES, OTHER, SUBMITTER};
use gantry_testkit::{GUSD, TestNet, confirm_receipt};

use crate::harness::{
    JOB_DISPUTE_LOST, JOB_DISPUTED, JOB_PAID, JOB_REJECTED, NODE_DISPUTED, NODE_EXITING,
    chain_with_market, register_h100, stdout_line,
};
use crate::projection::project_to_head;

/// Three log lines, three progress updates, a hostile line and a completion report for
/// job 1.
pub(crate) fn worker_reports(chain_id: u64) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for i in 1..=3u32 {
        let line = stdout_line(1, 1, format!("line {i}"), u64::from(i));
        out.push(report(names::logs_subject(chain_id, 1, 1), &line));
        let update = ProgressUpdate {
            v: 1,
            job_id: 1,
            node_id: 1,
            attempt: 1,
            progress: Some(f64::from(i) / 3.0),
            epoch: Some(i),
            epochs: Some(3),
            metrics: [("loss".to_string(), 1.0 / f64::from(i))].into(),
            gpu_utilization: None,
            gpu_memory_used_mib: None,
            elapsed_secs: u64::from(i),
            eta_secs: None,
            at_ms: u64::from(i),
        };
        out.push(report(names::progress_subject(chain_id, 1, 1), &update));
    }
    // A hostile worker's line from beyond any clock (beyond SQL's BIGINT): skipped, and
    // the projection goes on (the logs below end at "line 3").
    let far = stdout_line(1, 1, "from the far future", u64::MAX);
    out.push(report(names::logs_subject(chain_id, 1, 1), &far));
    let completion = CompletionReport {
        v: 1,
        job_id: 1,
        node_id: 1,
        attempt: 1,
        status: CompletionStatus::Submitted,
        result_hash: None,
        result_uri: None,
        output_bytes: Some(10),
        compute_secs: 3,
        gpu_secs: 0,
        avg_gpu_utilization: None,
        error: None,
        at_ms: 4,
    };
    out.push(report(
        names::completion_subject(chain_id, 1, 1),
        &completion,
    ));
    // Job 4's node answered with the worker's failure report as its result: the job
    // failed by itself.
    let failed = CompletionReport {
        job_id: JOB_DISPUTED,
        node_id: NODE_DISPUTED,
        status: CompletionStatus::JobFault,
        error: Some(FAILED_BY_ITSELF.into()),
        ..completion
    };
    out.push(report(
        names::completion_subject(chain_id, NODE_DISPUTED, JOB_DISPUTED),
        &failed,
    ));
    out
}

/// The chain projection's progress, as far as it goes (the store is projected to the
/// chain's head before the reports are).
pub(crate) fn caught_up() -> tokio::sync::watch::Receiver<gantry_api::project::Progress> {
    let progress = gantry_api::project::Progress {
        checkpoint: u64::MAX,
        ..Default::default()
    };
    tokio::sync::watch::channel(progress).1
}

/// Why job 4 failed, as its worker's failure report says.
pub(crate) const FAILED_BY_ITSELF: &str = "the job exited with code 1";

/// One report as a worker publishes it: its subject and JSON body.
fn report(subject: String, body: &impl serde::Serialize) -> (String, Vec<u8>) {
    (subject, serde_json::to_vec(body).unwrap())
}

/// The body of a successful GET of `path`.
async fn fetch<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    base: &str,
    path: &str,
) -> T {
    let response = http.get(format!("{base}{path}")).send().await.unwrap();
    response.json().await.unwrap()
}

/// The ids of a page of jobs, in order.
fn job_ids(page: &Page<JobSummary>) -> Vec<u64> {
    page.items.iter().map(|j| j.job.job_id).collect()
}

/// Serves `store`, which keeps no documents: the tests here project with other stores on
/// the same database (`project_to_head`), and a store forgets documents only for the
/// commits it makes or sees (the API's own projection runs on the store it serves).
async fn serve(store: gantry_api::store::Store) -> String {
    let store = store.with_document_cache(0);
    let (_tx, progress) = tokio::sync::watch::channel(Progress {
        checkpoint: store.checkpoint().await.unwrap(),
        block: store.last_block().await.unwrap(),
        read: 0,
        idle: true,
        stalled: None,
    });
    let app = router(
        AppState::new(store, progress, gantry_api::live::Live::default()),
        HttpConfig {
            request_timeout: Duration::from_secs(5),
            cors: tower_http::cors::CorsLayer::permissive(),
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// The API's terms words as the contracts take them.
fn terms_of(words: &TermsWords) -> JobMarket::JobTerms {
    JobMarket::JobTerms {
        party: words.party.parse().unwrap(),
        specHash: words.spec_hash.parse().unwrap(),
        gpuModel: words.gpu_model.parse().unwrap(),
        limits: words.limits.parse().unwrap(),
        maxPricePerGpuHour: words.max_price_per_gpu_hour.parse().unwrap(),
    }
}

/// The API's state words as the contracts take them.
fn state_of(words: &StateWords) -> JobMarket::JobState {
    JobMarket::JobState {
        terms: words.terms.parse().unwrap(),
        fields: words.fields.parse().unwrap(),
    }
}

async fn error_of(response: reqwest::Response) -> (StatusCode, String) {
    let status = response.status();
    let body: serde_json::Value = response.json().await.unwrap();
    (
        status,
        body["error"].as_str().unwrap_or_default().to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_read_api_answers_and_refuses_bad_input_by_name() {
    let chain = chain_with_market().await;
    let dir = tempfile::tempdir().unwrap();
    let database = format!("sqlite://{}", dir.path().join("api.db").display());
    let store = project_to_head(&chain, &database).await;
    // What a worker would have published for job 1.
    let chain_id = chain.devnet.deployment.chain_id;
    let js = chain.jetstream().await;
    chain.create_jobs_stream().await;
    let mut last = 0;
    for (subject, payload) in worker_reports(chain_id) {
        last = chain.publish(subject, payload).await;
    }
    let (tx, mut rx) = tokio::sync::watch::channel(0);
    let stop = tokio_util::sync::CancellationToken::new();
    let reporter = tokio::spawn(gantry_api::reports::run(
        js,
        chain_id,
        store.clone(),
        tx,
        caught_up(),
        gantry_api::live::Live::default(),
        stop.clone(),
    ));
    tokio::time::timeout(Duration::from_secs(30), rx.wait_for(|seq| *seq >= last))
        .await
        .expect("the reports are projected")
        .unwrap();
    stop.cancel();
    reporter.await.unwrap().unwrap();
    let base = serve(store).await;
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{base}{path}")).send();

    // Lists, newest first, with cursor pages.
    let page: Page<JobSummary> = fetch(&http, &base, "/v1/jobs").await;
    assert_eq!(job_ids(&page), [5, 4, 3, 2, 1]);
    assert_eq!(page.next_cursor, None);
    let first: Page<JobSummary> = fetch(&http, &base, "/v1/jobs?limit=2").await;
    assert_eq!(job_ids(&first), [5, 4]);
    let cursor = first.next_cursor.expect("a next page");
    let second: Page<JobSummary> =
        fetch(&http, &base, &format!("/v1/jobs?limit=2&cursor={cursor}")).await;
    assert_eq!(job_ids(&second), [3, 2]);
    let cursor = second.next_cursor.expect("a last page");
    let last: Page<JobSummary> =
        fetch(&http, &base, &format!("/v1/jobs?limit=2&cursor={cursor}")).await;
    assert_eq!(job_ids(&last), [1]);
    assert_eq!(last.next_cursor, None);
    for (status, ids) in [
        ("completed", vec![1]),
        ("open", vec![3]),
        ("disputed", vec![4]),
        ("failed", vec![5]),
        ("cancelled", vec![2]),
    ] {
        let page: Page<JobSummary> =
            fetch(&http, &base, &format!("/v1/jobs?status={status}")).await;
        assert_eq!(job_ids(&page), ids, "{status}");
    }
    let submitter = format!("{:#x}", chain.address(SUBMITTER));
    let mine: Page<JobSummary> =
        fetch(&http, &base, &format!("/v1/jobs?submitter={submitter}")).await;
    assert_eq!(mine.items.len(), 5);
    let on_node: Page<JobSummary> = fetch(&http, &base, "/v1/jobs?node=2").await;
    assert_eq!(job_ids(&on_node), [5, 4]);

    // One job, with its timeline.
    let job: JobDetail = fetch(&http, &base, &format!("/v1/jobs/{JOB_PAID}")).await;
    assert_eq!(job.job.status.as_str(), "completed");
    // A list's entry is the job's row in brief, with the same latest progress.
    let listed = page
        .items
        .iter()
        .find(|j| j.job.job_id == JOB_PAID)
        .unwrap();
    assert_eq!(listed.job, JobBrief::from(&job.job));
    assert_eq!(listed.progress, job.progress);
    assert!(
        listed.progress.is_some(),
        "job {JOB_PAID} reported progress"
    );
    assert_eq!(
        listed.job.runs.as_deref(),
        job.job.spec.as_ref().unwrap().to_value()["image"].as_str()
    );
    let payout = job.job.payout.clone().expect("paid");
    assert_eq!(job.timeline.first().unwrap().name, "JobPosted");
    assert_eq!(job.timeline.last().unwrap().name, "JobCompleted");
    let progress = job.progress.expect("the latest progress");
    assert_eq!((progress.epoch, progress.epochs), (Some(3), Some(3)));
    assert_eq!(job.completions.len(), 1);
    // Both sides of the market in the rows: the node barred from the job it gave back,
    // and charged; the bond and exposure of a dispute with its deadline; the refund of a
    // lost one.
    let rejected: JobDetail = fetch(&http, &base, &format!("/v1/jobs/{JOB_REJECTED}")).await;
    assert_eq!(rejected.job.barred_nodes, [NODE_EXITING]);
    assert_eq!(rejected.job.charges[0].cause, ChargeCause::Reject);
    assert!(rejected.timeline.iter().any(|e| e.name == "JobRejected"));
    let disputed: JobDetail = fetch(&http, &base, &format!("/v1/jobs/{JOB_DISPUTED}")).await;
    let dispute = disputed.job.dispute.expect("the dispute");
    assert_eq!(
        (dispute.bond.as_str(), dispute.exposure.as_str()),
        ("10000000", "10000000")
    );
    assert_eq!(disputed.job.until, Some(dispute.deadline));
    let lost: JobRow = fetch::<JobDetail>(&http, &base, &format!("/v1/jobs/{JOB_DISPUTE_LOST}"))
        .await
        .job;
    assert_eq!(lost.refund, Some((50 * GUSD).to_string()));
    assert_eq!(lost.charges[0].amount, (9 * GUSD).to_string());

    // The spec and requirements are objects; the terms and state are the words the
    // market's calls take: the submitter's cancel of the open job simulates with them.
    let open: JobRow = fetch::<JobDetail>(&http, &base, &format!("/v1/jobs/{JOB_REJECTED}"))
        .await
        .job;
    assert_eq!(open.status.as_str(), "open");
    assert_eq!(
        open.spec.as_ref().expect("a JSON spec").to_value()["version"],
        1
    );
    let posted = chain.job(JOB_REJECTED).await;
    assert_eq!(
        open.requirements,
        RequirementsRow::new(&posted.terms.requirements)
    );
    assert_eq!(
        open.requirements.max_price_per_gpu_hour,
        posted.terms.requirements.max_price_per_gpu_hour.to_string()
    );
    let terms = terms_of(&open.terms);
    let state = state_of(open.state.as_ref().expect("an open job's state"));
    let market = JobMarket::new(chain.devnet.deployment.market, chain.provider(SUBMITTER));
    market
        .cancel(JOB_REJECTED, terms.clone(), state.clone())
        .call()
        .await
        .expect("the submitter's cancel with the API's terms and state simulates");
    let stale = JobMarket::JobState {
        fields: state.fields ^ alloy::primitives::U256::from(1),
        ..state
    };
    assert!(
        market
            .cancel(JOB_REJECTED, terms, stale)
            .call()
            .await
            .is_err(),
        "a wrong state is refused"
    );
    assert_eq!(lost.state, None, "a settled job has no state");
    let raw: serde_json::Value = fetch(&http, &base, &format!("/v1/jobs/{JOB_REJECTED}")).await;
    assert!(
        raw["requirements"].is_object() && raw["spec"].is_object(),
        "{raw}"
    );

    let lines: Vec<LogLine> = fetch(&http, &base, "/v1/jobs/1/logs?tail=2").await;
    assert_eq!(
        lines.iter().map(|l| l.line.as_str()).collect::<Vec<_>>(),
        ["line 2", "line 3"],
        "the last two lines, oldest first"
    );
    let (status, message) = error_of(get("/v1/jobs/1/logs?tail=0").await.unwrap()).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message.contains("tail"), "{message}");

    // Nodes: the provider's money and its slashes with their jobs.
    let nodes: Page<NodeRow> = fetch(&http, &base, "/v1/nodes").await;
    assert_eq!(nodes.items.len(), 2);
    let node: NodeDetail = fetch(&http, &base, &format!("/v1/nodes/{NODE_EXITING}")).await;
    assert_eq!(node.node.node.completed_jobs, 1);
    assert_eq!(node.node.node.earnings_withdrawn, payout);
    let node: NodeDetail = fetch(&http, &base, &format!("/v1/nodes/{NODE_DISPUTED}")).await;
    assert_eq!(node.node.node.status, NodeStatus::Inactive);
    assert_eq!(node.node.node.locked_stake, dispute.exposure);
    assert_eq!(
        node.jobs.iter().map(|j| j.job_id).collect::<Vec<_>>(),
        [JOB_DISPUTED],
        "its disputed job runs on"
    );
    assert_eq!(
        node.slashes.iter().map(|s| s.job_id).collect::<Vec<_>>(),
        [JOB_DISPUTE_LOST]
    );

    // The submitter's credits: the market's, with every flow.
    let account: AccountRow = fetch(&http, &base, &format!("/v1/accounts/{submitter}")).await;
    let market = JobMarket::new(chain.deployment().market, chain.devnet.admin.clone());
    let credits = market
        .creditOf(chain.address(SUBMITTER))
        .call()
        .await
        .unwrap();
    assert_eq!(account.credits, credits.to_string());
    assert_eq!(account.refunded, (100 * GUSD).to_string());
    // Any spelling of the address names the same account.
    let checksummed: AccountRow = fetch(
        &http,
        &base,
        &format!("/v1/accounts/{}", chain.address(SUBMITTER)),
    )
    .await;
    assert_eq!(checksummed, account);

    // Network figures.
    let stats: Stats = fetch(&http, &base, "/v1/stats").await;
    for status in ["completed", "cancelled", "open", "disputed", "failed"] {
        assert_eq!(stats.jobs_by_status.get(status), Some(&1), "{status}");
    }
    assert_eq!(stats.nodes_by_status.get("exiting"), Some(&1));
    assert_eq!(stats.nodes_by_status.get("inactive"), Some(&1));
    assert_eq!(stats.active_gpus, 0, "no node is active");
    assert_eq!(stats.paid_to_providers, payout);
    assert_eq!(stats.fees, job.job.fee.clone().unwrap());
    assert_eq!(stats.refunded, (100 * GUSD).to_string());
    assert_eq!(stats.locked_stake, dispute.exposure);
    assert_eq!(
        stats.treasury,
        market.treasuryBalance().call().await.unwrap().to_string()
    );
    assert_eq!((stats.policy_version, stats.paused), (1, false));

    // Why each node takes no work, from the chain's facts: node 1 exits, node 2 was
    // slashed below the market's minimum (a top-up would bring it back).
    let nodes: Page<NodeView> = fetch(&http, &base, "/v1/nodes").await;
    let no_work = |id: u64| {
        let node = nodes.items.iter().find(|n| n.node.node_id == id).unwrap();
        node.takes_no_work.clone().map(|n| n.reason)
    };
    assert_eq!(no_work(NODE_EXITING).as_deref(), Some("exiting"));
    assert_eq!(
        no_work(NODE_DISPUTED).as_deref(),
        Some("stake_below_minimum")
    );
    let detail: NodeDetail = fetch(&http, &base, &format!("/v1/nodes/{NODE_DISPUTED}")).await;
    let why = detail.node.takes_no_work.expect("node 2 takes no work").why;
    assert!(
        why.contains("below the market's minimum 100000000"),
        "{why}"
    );
    assert!(why.contains("gantry node topup"), "{why}");

    // The payment token, as amounts are shown: the dev token unless configured.
    let token: gantry_protocol::api::TokenInfo = fetch(&http, &base, "/v1/token").await;
    assert_eq!((token.symbol.as_str(), token.decimals), ("gUSD", 6));

    // Health and readiness.
    assert_eq!(get("/healthz").await.unwrap().status(), StatusCode::OK);
    assert_eq!(get("/readyz").await.unwrap().status(), StatusCode::OK);

    // Bad input names the parameter; unknown ids are 404; nothing internal leaks.
    for (path, name) in [
        ("/v1/jobs?limit=0", "limit"),
        ("/v1/jobs?limit=201", "limit"),
        ("/v1/jobs?limit=ten", "limit"),
        ("/v1/jobs?status=sleeping", "status"),
        ("/v1/jobs?submitter=alice", "submitter"),
        ("/v1/jobs?node=-1", "node"),
        ("/v1/jobs?cursor=x", "cursor"),
        ("/v1/jobs?colour=red", "colour"),
        ("/v1/nodes?status=asleep", "status"),
        ("/v1/nodes?limit=201", "limit"),
        ("/v1/nodes?cursor=-3", "cursor"),
        ("/v1/jobs/abc", "id"),
        ("/v1/jobs/9223372036854775808", "id"),
        ("/v1/jobs/9007199254740992", "id"),
        ("/v1/jobs?since=9007199254740992", "since"),
        ("/v1/nodes?cursor=9007199254740992", "cursor"),
        ("/v1/nodes/18446744073709551615", "id"),
        ("/v1/events?job=-1", "job"),
        ("/v1/events?job=four", "job"),
        ("/v1/events?node=1", "node"),
        ("/v1/accounts/alice", "address"),
    ] {
        let (status, message) = error_of(get(path).await.unwrap()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert!(message.contains(name), "{path}: {message}");
    }
    // The OpenAPI document gives each query its real type (the handlers read text, to
    // name a bad value).
    let doc: serde_json::Value = fetch(&http, &base, "/openapi.json").await;
    let param = |path: &str, name: &str| {
        doc["paths"][path]["get"]["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == name))
            .map(|p| p["schema"].clone())
            .unwrap_or_else(|| panic!("{path} has {name}"))
    };
    for (path, name, kind) in [
        ("/v1/jobs", "limit", "integer"),
        ("/v1/jobs", "node", "integer"),
        ("/v1/jobs", "since", "integer"),
        ("/v1/jobs", "cursor", "integer"),
        ("/v1/jobs", "status", "string"),
        ("/v1/jobs/{id}/logs", "tail", "integer"),
        ("/v1/jobs/{id}/logs", "follow", "boolean"),
        ("/v1/jobs/{id}/progress", "limit", "integer"),
        ("/v1/nodes", "cursor", "integer"),
        ("/v1/events", "job", "integer"),
        ("/v1/stats/history", "minutes", "integer"),
    ] {
        let schema = param(path, name);
        let types = schema["type"].clone();
        assert!(
            types == kind || types.as_array().is_some_and(|t| t.contains(&kind.into())),
            "{path} {name}: {schema}"
        );
    }
    assert_eq!(
        param("/v1/jobs", "since")["maximum"].as_f64(),
        Some(gantry_api::http::MAX_ID as f64),
        "the largest id the handlers take"
    );
    let limit = param("/v1/jobs", "limit");
    assert_eq!(
        (limit["minimum"].as_f64(), limit["maximum"].as_f64()),
        (Some(1.0), Some(200.0))
    );
    assert!(
        param("/v1/jobs", "status")["pattern"]
            .as_str()
            .unwrap()
            .contains("running")
    );

    // A result is served only from this network's results bucket; job 1's is on IPFS.
    let (status, message) = error_of(get("/v1/jobs/1/result").await.unwrap()).await;
    assert_eq!(
        (status, message.as_str()),
        (
            StatusCode::NOT_FOUND,
            "job 1's result is not stored on this network: fetch it from ipfs://out"
        )
    );
    let (status, message) = error_of(get("/v1/jobs/2/result").await.unwrap()).await;
    assert_eq!(
        (status, message.as_str()),
        (StatusCode::NOT_FOUND, "job 2's result not found")
    );

    let (status, message) = error_of(get("/v1/jobs/999").await.unwrap()).await;
    assert_eq!(
        (status, message.as_str()),
        (StatusCode::NOT_FOUND, "job 999 not found")
    );
    let (status, _) = error_of(get("/v1/nodes/7").await.unwrap()).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    for unknown in ["/v1/nope", "/v2/jobs", "/v1/jobs/1/nothing"] {
        let (status, message) = error_of(get(unknown).await.unwrap()).await;
        assert_eq!(
            (status, message.as_str()),
            (StatusCode::NOT_FOUND, "route not found"),
            "{unknown}: the documented error body"
        );
    }
    let stranger = format!("{:#x}", alloy::primitives::Address::repeat_byte(0x99));
    let (status, message) = error_of(get(&format!("/v1/accounts/{stranger}")).await.unwrap()).await;
    assert_eq!(
        (status, message),
        (
            StatusCode::NOT_FOUND,
            format!("account {stranger} not found")
        )
    );

    // Per attempt, who failed, why, what was slashed and where it went, and the refund.
    let treasury = market.params().call().await.unwrap().treasury.to_string();
    // Job 4: its result was the worker's failure report.
    let failed: JobDetail = fetch(&http, &base, &format!("/v1/jobs/{JOB_DISPUTED}")).await;
    let attempt = &failed.job.attempt_rows[0];
    assert_eq!(
        (
            attempt.node_id,
            attempt.outcome,
            attempt.fault,
            attempt.reason.as_deref()
        ),
        (
            NODE_DISPUTED,
            AttemptOutcome::FailedByItself,
            AttemptFault::Job,
            Some(FAILED_BY_ITSELF)
        )
    );
    assert_eq!(
        (attempt.slashed.as_str(), attempt.slashed_to.as_deref()),
        ("0", None)
    );
    // Job 5: the dispute lost, the exposure slashed to the treasury.
    let decided: JobDetail = fetch(&http, &base, &format!("/v1/jobs/{JOB_DISPUTE_LOST}")).await;
    let attempt = &decided.job.attempt_rows[0];
    assert_eq!(
        (attempt.outcome, attempt.fault, attempt.slashed.clone()),
        (
            AttemptOutcome::DisputeLost,
            AttemptFault::Node,
            slash(&chain, NODE_DISPUTED, JOB_DISPUTE_LOST).await
        )
    );
    assert_eq!(attempt.slashed_to.as_deref(), Some(treasury.as_str()));
    // Job 3, given back by node 1 for the job's fault ("image not found"), is assigned to
    // a third node whose agent then takes it offline: reclaimed for the node's fault and
    // slashed. The submitter cancels it: the whole bounty back, the slashes not.
    let third = register_h100(&chain, NODES[2]).await;
    let job = chain.job(JOB_REJECTED).await;
    let matcher = chain.market(MATCHER);
    let assign = matcher.assign(JOB_REJECTED, third, job.terms.pack(), job.state.pack());
    confirm_receipt("assign", assign.send().await)
        .await
        .unwrap();
    let agent = chain.registry(NODES[2]);
    let offline = agent.markInactive(third);
    confirm_receipt("markInactive", offline.send().await)
        .await
        .unwrap();
    // Marked inactive by its agent, its stake whole: its next heartbeat would revive it.
    project_to_head(&chain, &database).await;
    let offline: NodeDetail = fetch(&http, &base, &format!("/v1/nodes/{third}")).await;
    let no_work = offline
        .node
        .takes_no_work
        .expect("an inactive node takes no work");
    assert_eq!(no_work.reason, "inactive");
    assert_eq!(no_work.since, offline.node.node.inactive_since);
    assert!(no_work.since.is_some());
    let job = chain.job(JOB_REJECTED).await;
    let anyone = chain.market(OTHER);
    let reclaim = anyone.reclaim(JOB_REJECTED, job.terms.pack(), job.state.pack());
    confirm_receipt("reclaim", reclaim.send().await)
        .await
        .unwrap();
    let job = chain.job(JOB_REJECTED).await;
    let poster = chain.market(SUBMITTER);
    let cancel = poster.cancel(JOB_REJECTED, job.terms.pack(), job.state.pack());
    confirm_receipt("cancel", cancel.send().await)
        .await
        .unwrap();
    project_to_head(&chain, &database).await;
    let given_back: JobDetail = fetch(&http, &base, &format!("/v1/jobs/{JOB_REJECTED}")).await;
    let [first, second] = &given_back.job.attempt_rows[..] else {
        panic!("two attempts: {:?}", given_back.job.attempt_rows);
    };
    assert_eq!(
        (
            first.attempt,
            first.node_id,
            first.claimed,
            first.outcome,
            first.fault,
            first.reason.as_deref()
        ),
        (
            1,
            NODE_EXITING,
            true,
            AttemptOutcome::Rejected,
            AttemptFault::Job,
            Some("image not found")
        )
    );
    // Charged by the time it held the job: nothing if given back within the second.
    assert_eq!(
        first.slashed,
        slash(&chain, NODE_EXITING, JOB_REJECTED).await
    );
    assert_eq!(
        first.slashed_to,
        (first.slashed != "0").then(|| treasury.clone())
    );
    assert_eq!(
        (
            second.attempt,
            second.node_id,
            second.claimed,
            second.outcome,
            second.fault,
            second.reason.as_deref()
        ),
        (
            2,
            third,
            false,
            AttemptOutcome::ReclaimedNodeInactive,
            AttemptFault::Node,
            Some("the node was marked inactive")
        )
    );
    assert!(second.ended_at >= Some(second.assigned_at));
    // A tenth of its 100 gUSD stake, to the treasury.
    assert_eq!(second.slashed, slash(&chain, third, JOB_REJECTED).await);
    assert_eq!(second.slashed, (10 * GUSD).to_string());
    assert_eq!(second.slashed_to.as_deref(), Some(treasury.as_str()));
    let cancelled = chain
        .devnet
        .job_events::<JobMarket::JobCancelled>(JOB_REJECTED)
        .await
        .unwrap();
    let refund = cancelled[0].0.refund.to_string();
    assert_eq!(given_back.job.refund.as_ref(), Some(&refund));
    assert_eq!(refund, given_back.job.bounty, "the whole bounty");
    // Slashed a tenth of its minimum stake: below it now, until its operator tops it up.
    let slashed: NodeDetail = fetch(&http, &base, &format!("/v1/nodes/{third}")).await;
    let no_work = slashed
        .node
        .takes_no_work
        .expect("a slashed node takes no work");
    assert_eq!(no_work.reason, "stake_below_minimum");
}

/// What `node`'s stake lost on `job`, as the chain's `NodeSlashed` says ("0" for none).
async fn slash(chain: &TestNet, node: u64, job: u64) -> String {
    let slashes = chain
        .devnet
        .job_events::<NodeRegistry::NodeSlashed>(node)
        .await
        .unwrap();
    let taken: u128 = slashes
        .iter()
        .filter(|(e, _)| e.jobId == job)
        .map(|(e, _)| e.amount.to::<u128>())
        .sum();
    taken.to_string()
}
