//! The API live against a running chain: the projection and the reports consumer follow
//! the streams while the server answers. Server-Sent Events (`/v1/events`, logs with
//! `follow=true`) deliver what is committed, the matcher's explanation shows on an open
//! job, and the operational endpoints (`/readyz`, `/metrics`, `/openapi.json`) answer.

use gantry_protocol::names;
use std::sync::OnceLock;
use std::time::Duration;

use eventsource_stream::{Event as SseEvent, Eventsource};
use futures::{Stream, StreamExt};
use gantry_protocol::api::{History, JobDetail, JobSummary, Minute, Page, Stats};
use gantry_protocol::jobs::{LogLine, ProgressUpdate};
use gantry_protocol::pending::Constraint;
use gantry_protocol::pending::{PENDING_VERSION, PendingExplanation};
use gantry_testkit::accounts::SUBMITTER;
use gantry_testkit::{GUSD, confirm_receipt};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use reqwest::StatusCode;
use tokio_util::sync::CancellationToken;

use crate::harness::{
    Api, JOB_DISPUTE_LOST, JOB_PAID, JOB_REJECTED, NODE_DISPUTED, chain_with_market, indexed,
    now_ms, post_job, sqlite, stdout_line,
};

const WAIT: Duration = Duration::from_secs(30);

/// One process-wide recorder for the tests of this binary.
pub(crate) fn metrics() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| PrometheusBuilder::new().install_recorder().unwrap())
        .clone()
}

type Events = std::pin::Pin<Box<dyn Stream<Item = SseEvent> + Send>>;

/// An SSE stream (keep-alive comments skipped) that must deliver within [`WAIT`].
struct Sse(Events);

impl Sse {
    /// Opens `url`, which must answer a 200 `text/event-stream`.
    async fn open(url: &str) -> Self {
        let response = reqwest::get(url).await.unwrap();
        assert_eq!(response.status(), StatusCode::OK, "{url}");
        let content_type = &response.headers()[reqwest::header::CONTENT_TYPE];
        assert!(
            content_type.as_bytes().starts_with(b"text/event-stream"),
            "{url}: {content_type:?}"
        );
        let events = response
            .bytes_stream()
            .eventsource()
            .map(|event| event.expect("a well-formed event stream"));
        Self(Box::pin(events))
    }

    /// The next event; `None` once the server ends the stream.
    async fn next(&mut self) -> Option<SseEvent> {
        tokio::time::timeout(WAIT, self.0.next())
            .await
            .expect("an event within the wait")
    }

    /// The next event named `name` whose data satisfies `matches`.
    async fn until(
        &mut self,
        name: &str,
        matches: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        loop {
            let event = self.next().await.expect("the stream goes on");
            if event.event == name {
                let data: serde_json::Value = serde_json::from_str(&event.data).unwrap();
                if matches(&data) {
                    return data;
                }
            }
        }
    }
}

/// A line of job 3's first attempt, which node 1 held (a report on an attempt the chain
/// never gave the node is dropped: `forged`).
fn log_line(job_id: u64, line: &str) -> LogLine {
    stdout_line(job_id, 1, line, now_ms())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_and_logs_stream_live_and_the_operational_endpoints_answer() {
    let chain = chain_with_market().await;
    let chain_id = chain.devnet.deployment.chain_id;
    let js = chain.jetstream().await;
    chain.create_jobs_stream().await;
    indexed(&chain).await;
    // A line stored before anyone follows job 3 (requeued open after its rejection).
    let stored_seq = chain
        .publish(
            names::logs_subject(chain_id, 1, JOB_REJECTED),
            serde_json::to_vec(&log_line(JOB_REJECTED, "stored")).unwrap(),
        )
        .await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let api = Api::start(&chain, &sqlite(dir.path()), &shutdown, Some(metrics())).await;
    api.caught_up(&chain, stored_seq).await;
    let base = api.base.clone();
    let http = reqwest::Client::new();
    let get = |path: &str| http.get(format!("{base}{path}")).send();

    // Followers: the feed, and job 3's logs (the stored tail first, then live lines).
    let mut feed = Sse::open(&format!("{base}/v1/events")).await;
    // And a feed of the job posted below alone.
    let new_job = JOB_DISPUTE_LOST + 1;
    let mut new_job_feed = Sse::open(&format!("{base}/v1/events?job={new_job}")).await;
    let mut logs = Sse::open(&format!("{base}/v1/jobs/{JOB_REJECTED}/logs?follow=true")).await;
    let first = logs.next().await.unwrap();
    assert_eq!(first.event, "log");
    let stored: LogLine = serde_json::from_str(&first.data).unwrap();
    assert_eq!(stored.line, "stored");
    let stored_seq: u64 = first.id.parse().expect("lines carry their sequence");

    // A worker's progress and a new line arrive on the open streams.
    let update = ProgressUpdate {
        v: 1,
        job_id: JOB_REJECTED,
        node_id: 1,
        attempt: 1,
        progress: Some(0.5),
        epoch: Some(5),
        epochs: Some(10),
        metrics: [("loss".to_string(), 0.25)].into(),
        gpu_utilization: Some(87.5),
        gpu_memory_used_mib: Some(1024),
        elapsed_secs: 60,
        eta_secs: Some(60),
        at_ms: now_ms(),
    };
    chain
        .publish(
            names::progress_subject(chain_id, 1, JOB_REJECTED),
            serde_json::to_vec(&update).unwrap(),
        )
        .await;
    chain
        .publish(
            names::logs_subject(chain_id, 1, JOB_REJECTED),
            serde_json::to_vec(&log_line(JOB_REJECTED, "live")).unwrap(),
        )
        .await;
    let progressed = feed.until("progress", |d| d["jobId"] == JOB_REJECTED).await;
    assert_eq!(progressed["epoch"], 5);
    assert_eq!(progressed["metrics"]["loss"], 0.25);
    let next = logs.next().await.unwrap();
    assert_eq!(next.event, "log");
    assert_eq!(
        serde_json::from_str::<LogLine>(&next.data).unwrap().line,
        "live"
    );
    assert!(next.id.parse::<u64>().unwrap() > stored_seq);

    // A job posted on chain shows on the feed once its block is committed, its credits
    // with it (the submitter's refunds pay for it).
    assert_eq!(post_job(&chain, 20 * GUSD).await, new_job);
    let posted = feed.until("job", |d| d["jobId"] == new_job).await;
    assert_eq!(posted["status"], "open");
    assert_eq!(posted["bounty"], "20000000");
    assert_eq!(posted["fromCredits"], "20000000");
    assert_eq!(posted["policyVersion"], 1);
    feed.until("block", |_| true).await;
    // Job 3's progress, its log line and the block before came first on the whole feed;
    // the new job's feed starts with it.
    let first_of_new_job = new_job_feed.next().await.expect("an event");
    assert_eq!(first_of_new_job.event, "job");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&first_of_new_job.data).unwrap(),
        posted
    );

    // Why the new job waits: the matcher's explanation from the KV bucket.
    let bucket = js
        .create_key_value(async_nats::jetstream::kv::Config {
            bucket: gantry_protocol::names::pending_bucket(chain_id),
            history: 1,
            ..Default::default()
        })
        .await
        .unwrap();
    let explanation = PendingExplanation {
        v: PENDING_VERSION,
        job_id: new_job,
        summary: "0 of 2 nodes are active".into(),
        nodes: 2,
        rejected: [(Constraint::NotActive, 2)].into(),
        best: vec![],
        block: 1,
    };
    bucket
        .put(
            new_job.to_string(),
            serde_json::to_vec(&explanation).unwrap().into(),
        )
        .await
        .unwrap();
    let job: JobDetail = json(get(&format!("/v1/jobs/{new_job}"))).await;
    assert_eq!(job.pending, Some(explanation));
    let job: JobDetail = json(get(&format!("/v1/jobs/{JOB_PAID}"))).await;
    assert_eq!(job.pending, None, "only open jobs wait");

    // Job 3 is cancelled: its log stream says so and ends, and the refund shows. (Its
    // document, read once before, is kept ready: the cancel must replace it.)
    let before: JobDetail = json(get(&format!("/v1/jobs/{JOB_REJECTED}"))).await;
    assert_ne!(before.job.status.as_str(), "cancelled");
    let listed = |page: &Page<JobSummary>| {
        page.items
            .iter()
            .find(|j| j.job.job_id == JOB_REJECTED)
            .map(|j| j.job.status.as_str())
    };
    let all: Page<JobSummary> = json(get("/v1/jobs")).await;
    assert_eq!(listed(&all), Some(before.job.status.as_str()));
    let job = chain.job(JOB_REJECTED).await;
    let submitter = chain.market(SUBMITTER);
    let cancel = submitter.cancel(JOB_REJECTED, job.terms.pack(), job.state.pack());
    confirm_receipt("cancel", cancel.send().await)
        .await
        .unwrap();
    let end = logs.next().await.expect("an end event");
    assert_eq!(end.event, "end");
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&end.data).unwrap()["status"],
        "cancelled"
    );
    assert!(logs.next().await.is_none(), "the stream ends with the job");
    let cancelled = feed
        .until("job", |d| {
            d["jobId"] == JOB_REJECTED && d["status"] == "cancelled"
        })
        .await;
    assert_eq!(cancelled["refund"], (50 * GUSD).to_string());
    let after: JobDetail = json(get(&format!("/v1/jobs/{JOB_REJECTED}"))).await;
    assert_eq!(
        after.job.status.as_str(),
        "cancelled",
        "the document kept is forgotten"
    );
    assert_eq!(after.job.refund, Some((50 * GUSD).to_string()));
    assert_eq!(after.timeline.len(), before.timeline.len() + 1);
    // So must the summaries lists show.
    let all: Page<JobSummary> = json(get("/v1/jobs")).await;
    assert_eq!(listed(&all), Some("cancelled"));
    let cancelled: Page<JobSummary> = json(get("/v1/jobs?status=cancelled")).await;
    assert_eq!(listed(&cancelled), Some("cancelled"));
    let open: Page<JobSummary> = json(get(&format!(
        "/v1/jobs?status={}",
        before.job.status.as_str()
    )))
    .await;
    assert_eq!(listed(&open), None);
    // A settled job's follow sends its tail and ends at once.
    let mut settled = Sse::open(&format!(
        "{base}/v1/jobs/{JOB_REJECTED}/logs?follow=true&tail=1"
    ))
    .await;
    assert_eq!(settled.next().await.unwrap().event, "log");
    assert_eq!(settled.next().await.unwrap().event, "end");
    assert!(settled.next().await.is_none());

    // Progress history, per-minute history, nodes with reputation and heartbeat age.
    let history: Vec<ProgressUpdate> =
        json(get(&format!("/v1/jobs/{JOB_REJECTED}/progress"))).await;
    assert_eq!(history, [update]);
    let minutes: History = json(get("/v1/stats/history?minutes=10")).await;
    assert_eq!(minutes.buckets.len(), 10);
    let sum = |f: fn(&Minute) -> u64| minutes.buckets.iter().map(f).sum::<u64>();
    assert_eq!(sum(|m| m.posted), 6, "the scripted five and the new one");
    assert_eq!(sum(|m| m.completed), 1);
    assert_eq!(sum(|m| m.failed), 1, "job 5's lost dispute");
    assert_eq!(
        sum(|m| m.gpus_in_use),
        1,
        "job 3's one GPU reported in one minute"
    );
    assert!(
        minutes
            .buckets
            .iter()
            .any(|m| m.gpu_utilization == Some(87.5))
    );
    let node: serde_json::Value = json(get("/v1/nodes/1")).await;
    assert_eq!(node["completedJobs"], 1);
    let reputation = node["reputation"].as_f64().unwrap();
    assert!((reputation - 2.0 / 3.0).abs() < 1e-9, "{reputation}");
    assert!(node["heartbeatAgeSecs"].as_i64().unwrap() >= 0);
    assert_eq!(node["jobs"], serde_json::json!([]), "the node runs nothing");
    let stats: Stats = json(get("/v1/stats")).await;
    assert_eq!(
        stats.volume,
        ((3 * 50 + 20 + 50 + 20) * GUSD).to_string(),
        "bounties posted"
    );

    // Bad parameters of the new endpoints name themselves; unknown jobs are 404.
    for (path, name) in [
        ("/v1/jobs/3/logs?follow=maybe", "follow"),
        ("/v1/jobs/3/progress?limit=0", "limit"),
        ("/v1/stats/history?minutes=0", "minutes"),
        ("/v1/stats/history?minutes=1441", "minutes"),
    ] {
        let response = get(path).await.unwrap();
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        let body: serde_json::Value = response.json().await.unwrap();
        assert!(
            body["error"].as_str().unwrap().contains(name),
            "{path}: {body}"
        );
    }
    for path in ["/v1/jobs/99/progress", "/v1/jobs/99/logs?follow=true"] {
        assert_eq!(
            get(path).await.unwrap().status(),
            StatusCode::NOT_FOUND,
            "{path}"
        );
    }

    // Readiness measures the projection against the stream.
    api.caught_up(&chain, 0).await;
    let ready = get("/readyz").await.unwrap();
    assert_eq!(ready.status(), StatusCode::OK);
    let ready: serde_json::Value = ready.json().await.unwrap();
    assert!(ready["lag"].as_u64().unwrap() <= gantry_api::http::DEFAULT_MAX_LAG);
    assert!(ready["streamLast"].as_u64().unwrap() >= ready["checkpoint"].as_u64().unwrap());

    // The chain and contracts, as the web app's wallet transactions need them.
    let network: gantry_protocol::api::NetworkInfo = json(get("/v1/network")).await;
    let deployment = &chain.devnet.deployment;
    assert_eq!(
        (network.chain_id, network.market, network.token),
        (
            deployment.chain_id,
            Some(deployment.market.to_checksum(None)),
            Some(deployment.token.to_checksum(None))
        )
    );
    assert_eq!(network.start_block, deployment.start_block);

    // The OpenAPI description and the metrics.
    let openapi: serde_json::Value = json(get("/openapi.json")).await;
    for path in [
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/jobs/{id}/logs",
        "/v1/jobs/{id}/progress",
        "/v1/nodes/{id}",
        "/v1/accounts/{address}",
        "/v1/stats/history",
        "/v1/network",
        "/v1/events",
        "/readyz",
    ] {
        assert!(openapi["paths"][path]["get"].is_object(), "{path}");
    }
    for schema in [
        "JobRow",
        "JobDetail",
        "DisputeRow",
        "ChargeRow",
        "NodeView",
        "SlashRow",
        "AccountRow",
        "ProgressUpdate",
        "ErrorBody",
        "NetworkInfo",
        "RequirementsRow",
        "TermsWords",
        "StateWords",
    ] {
        assert!(
            openapi["components"]["schemas"][schema].is_object(),
            "{schema}"
        );
    }
    let text = get("/metrics").await.unwrap().text().await.unwrap();
    assert!(
        text.contains(r#"gantry_api_http_requests_total{route="/v1/jobs/{id}",status="200"}"#),
        "{text}"
    );
    assert!(text.contains("gantry_api_events_projected_total"));

    // A verified job waits in its draw and its phases: the keeper's explanation shows as
    // an open job's does.
    chain.wasm_pool().await;
    let verified = chain.post_replicated().await;
    feed.until("job", |d| d["jobId"] == verified).await;
    let waiting = PendingExplanation {
        v: PENDING_VERSION,
        job_id: verified,
        summary: "replicated: 0 of 3 replica seats filled; round 1 draws at block 30 from \
                  the verification pool"
            .into(),
        nodes: 0,
        rejected: Default::default(),
        best: vec![],
        block: 0,
    };
    bucket
        .put(
            verified.to_string(),
            serde_json::to_vec(&waiting).unwrap().into(),
        )
        .await
        .unwrap();
    let job: JobDetail = json(get(&format!("/v1/jobs/{verified}"))).await;
    assert_eq!(
        job.job.status,
        gantry_protocol::status::JobStatus::Committing
    );
    assert_eq!(job.pending, Some(waiting));

    // Shutdown ends the open event stream, so the server stops.
    shutdown.cancel();
    while feed.next().await.is_some() {}
    api.stopped().await;
}

/// The JSON body of a successful request's answer.
async fn json<T: serde::de::DeserializeOwned>(
    response: impl Future<Output = reqwest::Result<reqwest::Response>>,
) -> T {
    response.await.unwrap().json().await.unwrap()
}

/// Design 19, §2: a report comes on its node's subject, and only the node the chain gave
/// that attempt is heard. Node 2 (registered, a worker with NATS access) reports on job 3,
/// whose first attempt node 1 held, and on a job that does not exist: nothing of it
/// reaches the store, the feed or the job's log stream; node 1's reports, sent after,
/// do; the drops are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_a_forged_progress_report_for_another_nodes_job_never_reaches_the_api() {
    let chain = chain_with_market().await;
    let chain_id = chain.chain_id();
    chain.create_jobs_stream().await;
    indexed(&chain).await;
    let dir = tempfile::tempdir().unwrap();
    let shutdown = CancellationToken::new();
    let api = Api::start(&chain, &sqlite(dir.path()), &shutdown, Some(metrics())).await;
    let stored = chain
        .publish(
            names::logs_subject(chain_id, 1, JOB_REJECTED),
            serde_json::to_vec(&log_line(JOB_REJECTED, "stored")).unwrap(),
        )
        .await;
    api.caught_up(&chain, stored).await;
    let base = api.base.clone();
    let mut feed = Sse::open(&format!("{base}/v1/events")).await;
    let mut logs = Sse::open(&format!("{base}/v1/jobs/{JOB_REJECTED}/logs?follow=true")).await;
    let tail = logs.next().await.unwrap();
    assert_eq!(
        serde_json::from_str::<LogLine>(&tail.data).unwrap().line,
        "stored"
    );

    let update = |node_id: u64, job_id: u64, epoch: u32| ProgressUpdate {
        v: 1,
        job_id,
        node_id,
        attempt: 1,
        progress: Some(f64::from(epoch) / 10.0),
        epoch: Some(epoch),
        epochs: Some(10),
        metrics: Default::default(),
        gpu_utilization: None,
        gpu_memory_used_mib: None,
        elapsed_secs: 1,
        eta_secs: None,
        at_ms: now_ms(),
    };
    let forged = [
        (
            names::progress_subject(chain_id, NODE_DISPUTED, JOB_REJECTED),
            serde_json::to_vec(&update(NODE_DISPUTED, JOB_REJECTED, 9)).unwrap(),
        ),
        (
            names::logs_subject(chain_id, NODE_DISPUTED, JOB_REJECTED),
            serde_json::to_vec(&log_line(JOB_REJECTED, "forged")).unwrap(),
        ),
        (
            names::progress_subject(chain_id, NODE_DISPUTED, 99),
            serde_json::to_vec(&update(NODE_DISPUTED, 99, 9)).unwrap(),
        ),
        // Node 1's payload on node 2's subject: not node 1's report.
        (
            names::progress_subject(chain_id, NODE_DISPUTED, JOB_REJECTED),
            serde_json::to_vec(&update(1, JOB_REJECTED, 8)).unwrap(),
        ),
    ];
    for (subject, payload) in forged {
        chain.publish(subject, payload).await;
    }
    chain
        .publish(
            names::progress_subject(chain_id, 1, JOB_REJECTED),
            serde_json::to_vec(&update(1, JOB_REJECTED, 5)).unwrap(),
        )
        .await;
    let last = chain
        .publish(
            names::logs_subject(chain_id, 1, JOB_REJECTED),
            serde_json::to_vec(&log_line(JOB_REJECTED, "genuine")).unwrap(),
        )
        .await;
    api.caught_up(&chain, last).await;

    let first = feed.until("progress", |_| true).await;
    assert_eq!(
        (first["jobId"].as_u64(), first["epoch"].as_u64()),
        (Some(JOB_REJECTED), Some(5))
    );
    let line = logs.next().await.unwrap();
    assert_eq!(
        serde_json::from_str::<LogLine>(&line.data).unwrap().line,
        "genuine"
    );
    let samples: Vec<ProgressUpdate> =
        reqwest::get(format!("{base}/v1/jobs/{JOB_REJECTED}/progress"))
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
    assert_eq!(samples.len(), 1, "{samples:?}");
    assert_eq!(samples[0].node_id, 1);
    let text = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let dropped = |reason: &str| -> u64 {
        let key = format!("gantry_api_reports_dropped_total{{reason=\"{reason}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(&key))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    assert!(dropped("not_the_attempts_node") >= 3, "{text}");
    assert!(dropped("malformed") >= 1, "{text}");
    shutdown.cancel();
    api.stopped().await;
}
