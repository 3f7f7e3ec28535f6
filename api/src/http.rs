//! The read-only HTTP API (axum, JSON, under `/v1`). Bad query parameters are a 400 naming
//! the parameter, an unknown id a 404; errors never carry internals (they are logged).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, kv};
use axum::extract::{MatchedPath, Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use futures::{Stream, StreamExt as _};
use gantry_protocol::api::LiveEventName;
use gantry_protocol::api::{
    AccountRow, ErrorBody, History, JobDetail, JobRow, JobSummary, NetworkInfo, NodeDetail,
    NodeView, Page, Stats, TokenInfo,
};
use gantry_protocol::jobs::{CompletionReport, LogLine, ProgressUpdate};
use gantry_protocol::pending::PendingExplanation;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast::error::RecvError;
use tower_http::compression::CompressionLayer;
use tower_http::compression::predicate::{DefaultPredicate, NotForContentType, Predicate};
use tower_http::cors::CorsLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use utoipa::{IntoParams, OpenApi, ToSchema};

use crate::live::{Live, LiveEvent};
use crate::model::{JobStatus, NodeStatus};
use crate::project::Progress;

use crate::store::{JobFilter, Store, StoreError};

/// Largest page of a list.
pub const MAX_LIMIT: u32 = 200;
const DEFAULT_LIMIT: u32 = 50;
/// Largest `tail` of `GET /v1/jobs/{id}/logs`.
pub const MAX_TAIL: u32 = 10_000;
/// Stream messages the projection may trail by and still be ready.
pub const DEFAULT_MAX_LAG: u64 = 100;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Store,
    pub progress: tokio::sync::watch::Receiver<Progress>,
    pub live: Live,
    /// Where the pending explanations and the stream's length come from (none in tests
    /// that serve a store without NATS: no explanations, readiness by checkpoint alone).
    pub nats: Option<NatsView>,
    pub metrics: Option<PrometheusHandle>,
    /// `/readyz` fails while the projection trails the stream by more messages.
    pub max_lag: u64,
    /// The payment token, as `/v1/token` names it.
    pub token: TokenInfo,
    /// The chain and contracts, as `/v1/network` names them.
    pub network: NetworkInfo,
    /// Places for results being downloaded ([`RESULT_DOWNLOADS`]).
    pub result_downloads: Arc<tokio::sync::Semaphore>,
}

impl AppState {
    pub fn new(store: Store, progress: tokio::sync::watch::Receiver<Progress>, live: Live) -> Self {
        Self {
            store,
            progress,
            live,
            nats: None,
            metrics: None,
            max_lag: DEFAULT_MAX_LAG,
            token: TokenInfo::default(),
            network: NetworkInfo::default(),
            result_downloads: Arc::new(tokio::sync::Semaphore::new(RESULT_DOWNLOADS)),
        }
    }

    pub fn with_nats(mut self, js: jetstream::Context, chain_id: u64) -> Self {
        self.nats = Some(NatsView {
            js,
            chain_id,
            pending: Arc::default(),
        });
        self
    }

    pub fn with_metrics(mut self, handle: PrometheusHandle) -> Self {
        self.metrics = Some(handle);
        self
    }
}

/// The API's reads from NATS: the matcher's explanations (KV) and the chain stream's
/// length.
#[derive(Debug, Clone)]
pub struct NatsView {
    js: jetstream::Context,
    chain_id: u64,
    pending: Arc<tokio::sync::OnceCell<kv::Store>>,
}

impl NatsView {
    /// Why an open job waits, as the matcher last said; `None` when it has not said
    /// (or NATS does not answer: the explanation is an extra, not worth failing for).
    async fn pending(&self, job_id: u64) -> Option<PendingExplanation> {
        let bucket = gantry_protocol::names::pending_bucket(self.chain_id);
        let kv = self
            .pending
            .get_or_try_init(|| self.js.get_key_value(bucket))
            .await
            .ok()?;
        match kv.get(job_id.to_string()).await {
            Ok(Some(value)) => serde_json::from_slice(&value).ok(),
            Ok(None) => None,
            Err(error) => {
                tracing::warn!(%error, job_id, "reading the pending explanation");
                None
            }
        }
    }

    /// The chain stream's last sequence.
    async fn stream_last(&self) -> Result<u64, String> {
        let stream = self
            .js
            .get_stream(gantry_protocol::names::stream_name(self.chain_id))
            .await
            .map_err(|e| e.to_string())?;
        Ok(stream.cached_info().state.last_sequence)
    }
}

/// HTTP settings.
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub request_timeout: Duration,
    pub cors: CorsLayer,
}

/// An error answer: status and a message safe to show.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn bad_parameter(name: &str, why: &str) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: format!("query parameter `{name}`: {why}"),
        }
    }

    fn bad_query(rejection: axum::extract::rejection::QueryRejection) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: rejection.body_text(),
        }
    }

    fn not_found(what: String) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: format!("{what} not found"),
        }
    }
}

impl From<crate::store::StoreError> for ApiError {
    fn from(error: crate::store::StoreError) -> Self {
        tracing::error!(%error, "store");
        Self {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            message: "internal error".into(),
        }
    }
}

impl From<sqlx::Error> for ApiError {
    fn from(error: sqlx::Error) -> Self {
        crate::store::StoreError::from(error).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorBody {
                error: self.message,
            }),
        )
            .into_response()
    }
}

/// The OpenAPI description of the API, generated from the handlers and types.
#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Gantry API",
        description = "Read-only view of the Gantry network: jobs, nodes, statistics, live events."
    ),
    paths(
        list_jobs,
        get_job,
        job_progress,
        job_logs,
        job_result,
        list_nodes,
        get_node,
        get_account,
        stats,
        stats_history,
        token,
        network,
        events,
        healthz,
        ready
    ),
    components(schemas(LogLine, ProgressUpdate, CompletionReport, PendingExplanation))
)]
pub struct ApiDoc;

/// The router with every route and layer.
pub fn router(state: AppState, config: HttpConfig) -> Router {
    Router::new()
        .route("/v1/jobs", get(list_jobs))
        .route("/v1/jobs/{id}", get(get_job))
        .route("/v1/jobs/{id}/progress", get(job_progress))
        .route("/v1/jobs/{id}/logs", get(job_logs))
        .route("/v1/jobs/{id}/result", get(job_result))
        .route("/v1/nodes", get(list_nodes))
        .route("/v1/nodes/{id}", get(get_node))
        .route("/v1/accounts/{address}", get(get_account))
        .route("/v1/stats", get(stats))
        .route("/v1/stats/history", get(stats_history))
        .route("/v1/token", get(token))
        .route("/v1/network", get(network))
        .route("/v1/events", get(events))
        .route("/healthz", get(healthz))
        .route("/readyz", get(ready))
        .route("/metrics", get(prometheus))
        .route("/openapi.json", get(|| async { Json(ApiDoc::openapi()) }))
        .route_layer(middleware::from_fn(track))
        .with_state(state)
        .merge(crate::dashboard::routes())
        // Any other path: the documented error body, not an empty 404.
        .fallback(|| async { ApiError::not_found("route".into()) })
        // Not a stored result: its bytes are streamed as stored (compressing them would cost
        // the server a core per download and hide their length).
        .layer(CompressionLayer::new().compress_when(
            DefaultPredicate::new().and(NotForContentType::const_new("application/octet-stream")),
        ))
        .layer(RequestBodyLimitLayer::new(16 * 1024))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(config.cors)
}

/// Counts and times requests by route and status.
async fn track(matched: Option<MatchedPath>, request: Request, next: Next) -> Response {
    let route = matched.map_or_else(|| "other".to_owned(), |m| m.as_str().to_owned());
    let start = Instant::now();
    let response = next.run(request).await;
    crate::metrics::request(route, response.status().as_str(), start.elapsed());
    response
}

/// Query of `GET /v1/jobs`. Every query is read as text so that a bad value is reported
/// by name (a 400 naming the parameter); the OpenAPI document gives each its real type.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobsQuery {
    /// open, assigned (or running), submitted, disputed, completed, failed, cancelled,
    /// expired.
    #[param(value_type = Option<String>, pattern = "^(open|assigned|running|submitted|disputed|completed|failed|cancelled|expired)$")]
    status: Option<String>,
    /// The submitter's 0x address.
    #[param(value_type = Option<String>, pattern = "^0x[0-9a-fA-F]{40}$")]
    submitter: Option<String>,
    /// The assigned node's id.
    #[param(value_type = Option<u64>, maximum = 9007199254740991.0)]
    node: Option<String>,
    /// Jobs posted at or after this unix time (seconds).
    #[param(value_type = Option<u64>, maximum = 9007199254740991.0)]
    since: Option<String>,
    /// `nextCursor` of the previous page.
    #[param(value_type = Option<u64>, maximum = 9007199254740991.0)]
    cursor: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
}

/// A page from items fetched one past `limit`; the cursor is the last item's id when
/// there is more.
fn page<T>(mut items: Vec<T>, limit: u32, id_of: impl Fn(&T) -> u64) -> Page<T> {
    let more = items.len() > limit as usize;
    items.truncate(limit as usize);
    let next_cursor = more
        .then(|| items.last().map(|item| id_of(item).to_string()))
        .flatten();
    Page { items, next_cursor }
}

fn number<T: std::str::FromStr>(name: &str, value: &Option<String>) -> Result<Option<T>, ApiError> {
    value
        .as_deref()
        .map(|v| {
            v.parse()
                .map_err(|_| ApiError::bad_parameter(name, "must be a non-negative integer"))
        })
        .transpose()
}

/// The largest id or time a query or path takes: 2^53 − 1, what a JavaScript number
/// holds exactly (and within SQL's BIGINT), as the OpenAPI document says.
pub const MAX_ID: u64 = (1 << 53) - 1;

/// A non-negative integer up to [`MAX_ID`].
fn non_negative(name: &str, value: &Option<String>) -> Result<Option<u64>, ApiError> {
    number::<i64>(name, value)?
        .map(|n| {
            u64::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_ID)
                .ok_or_else(|| {
                    ApiError::bad_parameter(name, &format!("must be an integer, 0 to {MAX_ID}"))
                })
        })
        .transpose()
}

/// An integer parameter within `range`, `default` when absent.
fn bounded(
    name: &str,
    value: &Option<String>,
    range: std::ops::RangeInclusive<u32>,
    default: u32,
) -> Result<u32, ApiError> {
    let n = number::<u32>(name, value)?.unwrap_or(default);
    if !range.contains(&n) {
        return Err(ApiError::bad_parameter(
            name,
            &format!("must be {} to {}", range.start(), range.end()),
        ));
    }
    Ok(n)
}

fn limit(value: &Option<String>) -> Result<u32, ApiError> {
    bounded("limit", value, 1..=MAX_LIMIT, DEFAULT_LIMIT)
}

/// Jobs, newest first, filtered.
#[utoipa::path(get, path = "/v1/jobs", params(JobsQuery), responses(
    (status = 200, body = Page<JobSummary>),
    (status = 400, description = "a bad query parameter, named", body = ErrorBody)
))]
async fn list_jobs(
    State(state): State<AppState>,
    query: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(ApiError::bad_query)?;
    let limit = limit(&q.limit)?;
    let status = match q.status.as_deref() {
        // What a user calls a running job is one assigned to a node.
        Some("running") => Some(JobStatus::Assigned),
        Some(status) => match status.parse::<JobStatus>() {
            Ok(status) if status != JobStatus::None => Some(status),
            _ => {
                return Err(ApiError::bad_parameter(
                    "status",
                    "must be one of open, assigned (or running), submitted, disputed, \
                     completed, failed, cancelled, expired",
                ));
            }
        },
        None => None,
    };
    if let Some(submitter) = &q.submitter
        && submitter.parse::<alloy::primitives::Address>().is_err()
    {
        return Err(ApiError::bad_parameter("submitter", "must be a 0x address"));
    }
    let node = non_negative("node", &q.node)?;
    let since = non_negative("since", &q.since)?;
    // The cursor is the last job id of the previous page (newest first).
    let cursor = non_negative("cursor", &q.cursor)?;
    let filter = JobFilter {
        status,
        submitter: q.submitter.as_ref().map(|s| s.to_lowercase()),
        node,
        since,
        before: cursor,
        limit: limit + 1,
    };
    let read = state.store.list_jobs(&filter).await?;
    // The page is the ids the indexes gave (a job gone or out of the filter since is left
    // out, the next page still starts after the last id); the summaries come as JSON
    // texts, and the page is put together around them.
    let Page {
        items: ids,
        next_cursor,
    } = page(read.ids, limit, |id| *id);
    let last = ids.last().copied().unwrap_or(0);
    let items: Vec<_> = read
        .items
        .into_iter()
        .filter(|(id, _)| *id >= last)
        .collect();
    let mut json = Vec::with_capacity(items.iter().map(|(_, j)| j.len() + 1).sum::<usize>() + 64);
    json.extend_from_slice(b"{\"items\":[");
    for (n, (_, job)) in items.iter().enumerate() {
        if n > 0 {
            json.push(b',');
        }
        json.extend_from_slice(job);
    }
    json.extend_from_slice(b"],\"nextCursor\":");
    match next_cursor {
        Some(cursor) => json.extend_from_slice(format!("\"{cursor}\"").as_bytes()),
        None => json.extend_from_slice(b"null"),
    }
    json.push(b'}');
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

/// A path id: a non-negative integer up to [`MAX_ID`].
fn id(raw: &str, what: &str) -> Result<u64, ApiError> {
    raw.parse::<i64>()
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .filter(|n| *n <= MAX_ID)
        .ok_or_else(|| ApiError {
            status: StatusCode::BAD_REQUEST,
            message: format!("path parameter `id`: {what} ids are non-negative integers"),
        })
}

async fn job_or_404(state: &AppState, job_id: u64) -> Result<JobRow, ApiError> {
    state
        .store
        .job(job_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {job_id}")))
}

/// One job in full.
#[utoipa::path(get, path = "/v1/jobs/{id}", params(("id" = u64, Path, description = "job id", maximum = 9007199254740991.0)),
    responses(
        (status = 200, body = JobDetail),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)
))]
async fn get_job(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    let job_id = id(&raw, "job")?;
    let document = state
        .store
        .job_document(job_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {job_id}")))?;
    // The database built the document (a `JobDetail` with `pending: null`); only a waiting
    // job's explanation is added here: an open job's (the matcher's), or a verified job's
    // in its draw, commit, reveal or arbitration (the keeper's).
    let waiting = matches!(
        document.status,
        JobStatus::Open | JobStatus::Committing | JobStatus::Revealing | JobStatus::Arbitrating
    );
    let pending = match (&state.nats, waiting) {
        (Some(nats), true) => nats.pending(job_id).await,
        _ => None,
    };
    let json = match pending {
        None => document.json,
        Some(pending) => {
            let mut detail: serde_json::Map<String, serde_json::Value> =
                serde_json::from_slice(&document.json).map_err(StoreError::from)?;
            detail.insert(
                "pending".into(),
                serde_json::to_value(pending).map_err(StoreError::from)?,
            );
            serde_json::to_string(&detail)
                .map_err(StoreError::from)?
                .into()
        }
    };
    Ok(([(header::CONTENT_TYPE, "application/json")], json).into_response())
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ProgressQuery {
    /// The newest this many updates, 1 to 2000 (default 2000).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 2000)]
    limit: Option<String>,
}

/// A job's progress updates, oldest first (the charts' history).
#[utoipa::path(get, path = "/v1/jobs/{id}/progress",
    params(("id" = u64, Path, description = "job id", maximum = 9007199254740991.0), ProgressQuery),
    responses(
        (status = 200, body = Vec<ProgressUpdate>),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)
))]
async fn job_progress(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    query: Result<Query<ProgressQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<ProgressUpdate>>, ApiError> {
    let Query(q) = query.map_err(ApiError::bad_query)?;
    let job_id = id(&raw, "job")?;
    let kept = crate::reports::PROGRESS_SAMPLES_KEPT as u32;
    let limit = bounded("limit", &q.limit, 1..=kept, kept)?;
    job_or_404(&state, job_id).await?;
    Ok(Json(state.store.progress_history(job_id, limit).await?))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct LogsQuery {
    /// The newest this many lines, 1 to 10000 (default 200).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 10000)]
    tail: Option<String>,
    /// `true`: Server-Sent Events, the tail then each new line (`event: log`, `id` the
    /// line's sequence) until the job settles (`event: end`).
    #[param(value_type = Option<bool>)]
    follow: Option<String>,
}

/// A job's log lines (JSON), or with `follow=true` a live stream of them (SSE).
#[utoipa::path(get, path = "/v1/jobs/{id}/logs",
    params(("id" = u64, Path, description = "job id", maximum = 9007199254740991.0), LogsQuery),
    responses(
        (status = 200, description = "JSON lines, or `text/event-stream` with follow=true",
            content(
                (Vec<LogLine> = "application/json"),
                (String = "text/event-stream")
            )),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)
))]
async fn job_logs(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    headers: HeaderMap,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(ApiError::bad_query)?;
    let job_id = id(&raw, "job")?;
    let tail = bounded("tail", &q.tail, 1..=MAX_TAIL, 200)?;
    let follow = match q.follow.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(_) => return Err(ApiError::bad_parameter("follow", "must be true or false")),
    };
    if !follow {
        job_or_404(&state, job_id).await?;
        let lines = state.store.logs(job_id, 0, tail).await?;
        return Ok(Json(lines.into_iter().map(|(_, l)| l).collect::<Vec<_>>()).into_response());
    }
    // Subscribe before reading the stored tail so that no line falls between the two;
    // lines at or below the tail's last sequence are the tail's.
    let receiver = state.live.subscribe();
    let job = job_or_404(&state, job_id).await?;
    // A reconnecting EventSource names the last line it got.
    let resume = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let lines = state.store.logs(job_id, resume.unwrap_or(0), tail).await?;
    let after = lines.last().map_or(resume.unwrap_or(0), |(seq, _)| *seq);
    let stored = futures::stream::iter(
        lines
            .into_iter()
            .map(|(seq, line)| Ok(log_event(seq, &line))),
    );
    let live: std::pin::Pin<Box<dyn Stream<Item = Result<Event, Infallible>> + Send>> = if job
        .status
        .is_settled()
    {
        Box::pin(futures::stream::iter([Ok(end_event(&job))]))
    } else {
        Box::pin(futures::stream::unfold(
            Some(receiver),
            move |receiver| async move {
                let mut receiver = receiver?;
                loop {
                    let event = match receiver.recv().await {
                        Ok(event) => event,
                        Err(RecvError::Lagged(missed)) => {
                            return Some((Ok(lagged_event(missed)), Some(receiver)));
                        }
                        Err(RecvError::Closed) => return None,
                    };
                    match &*event {
                        LiveEvent::Log { seq, line } if line.job_id == job_id && *seq > after => {
                            return Some((Ok(log_event(*seq, line)), Some(receiver)));
                        }
                        LiveEvent::Job(row) if row.job_id == job_id && row.status.is_settled() => {
                            return Some((Ok(end_event(row)), None));
                        }
                        _ => {}
                    }
                }
            },
        ))
    };
    let stream = futures::StreamExt::take_until(
        futures::StreamExt::chain(stored, live),
        state.live.closed(),
    );
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn log_event(seq: u64, line: &LogLine) -> Event {
    Event::default()
        .event(LiveEventName::Log.as_str())
        .id(seq.to_string())
        .data(serde_json::to_string(line).expect("log lines serialize"))
}

fn end_event(job: &JobRow) -> Event {
    Event::default()
        .event(LiveEventName::End.as_str())
        .data(serde_json::json!({ "jobId": job.job_id, "status": job.status }).to_string())
}

fn lagged_event(missed: u64) -> Event {
    Event::default()
        .event(LiveEventName::Lagged.as_str())
        .data(serde_json::json!({ "missed": missed }).to_string())
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only this job's `job` and `progress` events (and `reorg`, `lagged`).
    #[param(value_type = Option<u64>, maximum = 9007199254740991.0)]
    job: Option<String>,
}

/// Whether the feed filtered to `job` (all when `None`) carries `event`. Log lines have
/// their own stream per job.
fn feeds(event: &LiveEvent, job: Option<u64>) -> bool {
    match (event, job) {
        (LiveEvent::Log { .. }, _) => false,
        (LiveEvent::Reorg { .. }, _) | (_, None) => true,
        (LiveEvent::Job(row), Some(job)) => row.job_id == job,
        (LiveEvent::Progress(update), Some(job)) => update.job_id == job,
        (LiveEvent::Node(_) | LiveEvent::Block(_), Some(_)) => false,
    }
}

/// The live feed: `job`, `node`, `progress`, `block` and `reorg` events as the
/// projection commits them (`lagged`: events were missed, refetch); with `job=<id>`, only
/// that job's.
#[utoipa::path(get, path = "/v1/events", params(EventsQuery), responses(
    (status = 200, description = "`text/event-stream`; each event's data is the JSON of a \
        job (JobRow), node (NodeRow), progress (ProgressUpdate), block ({number, timestamp}) \
        or reorg ({commonAncestor})"),
    (status = 400, body = ErrorBody)
))]
async fn events(
    State(state): State<AppState>,
    query: Result<Query<EventsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(ApiError::bad_query)?;
    let job = non_negative("job", &q.job)?;
    let receiver = state.live.subscribe();
    let stream = futures::stream::unfold(receiver, move |mut receiver| async move {
        loop {
            let event = match receiver.recv().await {
                Ok(event) => event,
                Err(RecvError::Lagged(missed)) => {
                    return Some((Ok::<_, Infallible>(lagged_event(missed)), receiver));
                }
                Err(RecvError::Closed) => return None,
            };
            if !feeds(&event, job) {
                continue;
            }
            let data = serde_json::to_string(&*event).expect("live events serialize");
            return Some((
                Ok(Event::default().event(event.name()).data(data)),
                receiver,
            ));
        }
    });
    Ok(
        Sse::new(futures::StreamExt::take_until(stream, state.live.closed()))
            .keep_alive(KeepAlive::default())
            .into_response(),
    )
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct NodesQuery {
    /// active, inactive, exiting, exited.
    #[param(value_type = Option<String>, pattern = "^(active|inactive|exiting|exited)$")]
    status: Option<String>,
    /// `nextCursor` of the previous page.
    #[param(value_type = Option<u64>, maximum = 9007199254740991.0)]
    cursor: Option<String>,
    /// Page size, 1 to 200 (default 50).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 200)]
    limit: Option<String>,
}

/// Now, unix seconds, by the later of this machine's clock and the newest block's time.
async fn now(state: &AppState) -> Result<u64, ApiError> {
    Ok(crate::model::now(state.store.head_time().await?))
}

/// Nodes by id.
#[utoipa::path(get, path = "/v1/nodes", params(NodesQuery), responses(
    (status = 200, body = Page<NodeView>),
    (status = 400, body = ErrorBody)
))]
async fn list_nodes(
    State(state): State<AppState>,
    query: Result<Query<NodesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<NodeView>>, ApiError> {
    let Query(q) = query.map_err(ApiError::bad_query)?;
    let limit = limit(&q.limit)?;
    if let Some(status) = &q.status
        && !matches!(status.parse::<NodeStatus>(), Ok(s) if s != NodeStatus::None)
    {
        return Err(ApiError::bad_parameter(
            "status",
            "must be one of active, inactive, exiting, exited",
        ));
    }
    let status = q
        .status
        .as_deref()
        .map(|s| s.parse::<NodeStatus>())
        .transpose();
    let status = status.map_err(|_| {
        ApiError::bad_parameter("status", "must be one of active, inactive, exiting, exited")
    })?;
    let cursor = non_negative("cursor", &q.cursor)?;
    let nodes = state.store.list_nodes(status, cursor, limit + 1).await?;
    let now = now(&state).await?;
    let min_stake = state.store.min_stake().await?;
    let views = nodes
        .into_iter()
        .map(|n| NodeView::new(n, now, min_stake.as_deref()))
        .collect();
    Ok(Json(page(views, limit, |n| n.node.node_id)))
}

/// A job's result as its node stored it in this network's results bucket, for a browser
/// to check against the job's `resultHash` (an encrypted job's is ciphertext: its
/// `resultUri` names the ciphertext's SHA-256). The bytes are streamed as stored; the
/// API checks nothing a reader should not check itself. A result stored elsewhere is
/// not served (a 404 saying so): fetch it from its `resultUri`.
#[utoipa::path(get, path = "/v1/jobs/{id}/result",
    params(("id" = u64, Path, description = "job id", maximum = 9007199254740991.0)),
    responses(
        (status = 200, description = "the stored bytes", content_type = "application/octet-stream",
            body = Vec<u8>),
        (status = 400, body = ErrorBody),
        (status = 404, description = "no such job, no result yet, or not stored here",
            body = ErrorBody)
))]
async fn job_result(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Response, ApiError> {
    let job_id = id(&raw, "job")?;
    let job = job_or_404(&state, job_id).await?;
    let uri = job
        .result_uri
        .ok_or_else(|| ApiError::not_found(format!("job {job_id}'s result")))?;
    let elsewhere = || ApiError {
        status: StatusCode::NOT_FOUND,
        message: format!(
            "job {job_id}'s result is not stored on this network: fetch it from {uri}"
        ),
    };
    let nats = state.nats.as_ref().ok_or_else(elsewhere)?;
    let bucket = gantry_protocol::names::results_bucket(nats.chain_id);
    let (node, key) = stored_result(&uri, &bucket, job_id, job.node_id).ok_or_else(elsewhere)?;
    let permit = state
        .result_downloads
        .clone()
        .try_acquire_owned()
        .map_err(|_| ApiError {
            status: StatusCode::SERVICE_UNAVAILABLE,
            message: "too many results are being downloaded: try again shortly".into(),
        })?;
    let object = gantry_runtime::objects::get(&nats.js, &bucket, node, key)
        .await
        .map_err(|error| {
            tracing::warn!(%error, job_id, "reading a result");
            ApiError {
                status: StatusCode::BAD_GATEWAY,
                message: format!("job {job_id}'s result could not be read from the store"),
            }
        })?
        .ok_or_else(|| ApiError::not_found(format!("job {job_id}'s stored result")))?;
    let size = object.info.size as u64;
    // Copied by a task of its own, which holds the place and the store's consumer for at
    // most RESULT_DEADLINE: a client that stops reading keeps neither. No length is sent:
    // a body cut short (an object that fails its size or SHA-256, the deadline) ends
    // without its last chunk, which clients read as incomplete.
    let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<axum::body::Bytes>>(4);
    tokio::spawn(async move {
        let _place = permit;
        let copy = async {
            let mut chunks = std::pin::pin!(object.bytes(size));
            while let Some(chunk) = chunks.next().await {
                if tx.send(chunk).await.is_err() {
                    return;
                }
            }
        };
        if tokio::time::timeout(RESULT_DEADLINE, copy).await.is_err() {
            let _ = tx.try_send(Err(std::io::Error::other("the download took too long")));
        }
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|chunk| (chunk, rx))
    })
    .fuse();
    Ok((
        [
            (header::CONTENT_TYPE, "application/octet-stream".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"job-{job_id}-result\""),
            ),
            (
                header::HeaderName::from_static("x-gantry-result-bytes"),
                size.to_string(),
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            (header::CONTENT_SECURITY_POLICY, "sandbox".to_owned()),
        ],
        axum::body::Body::from_stream(body),
    )
        .into_response())
}

/// Results being downloaded at once (a further request is a 503).
pub const RESULT_DOWNLOADS: usize = 8;
/// Longest one result download may take.
const RESULT_DEADLINE: Duration = Duration::from_secs(600);

/// Where job `job_id`'s result is in the results `bucket`, when its URI names an object
/// its node (`node_id`, the job's last) stored for it:
/// `nats://<bucket>/<node>/<job>-<suffix>`, a fragment ignored. None otherwise: another
/// bucket, another node's object, another job's key.
pub fn stored_result<'a>(
    uri: &'a str,
    bucket: &str,
    job_id: u64,
    node_id: Option<u64>,
) -> Option<(u64, &'a str)> {
    let path = uri
        .strip_prefix("nats://")?
        .strip_prefix(bucket)?
        .strip_prefix('/')?;
    let path = path.split_once('#').map_or(path, |(path, _)| path);
    let (node, key) = path.split_once('/')?;
    let node = node.parse::<u64>().ok()?;
    let suffix = key.strip_prefix(&format!("{job_id}-"))?;
    (Some(node) == node_id && !suffix.is_empty() && !key.contains('/')).then_some((node, key))
}

/// One node, with its active jobs and its slashes (with their jobs).
#[utoipa::path(get, path = "/v1/nodes/{id}", params(("id" = u64, Path, description = "node id", maximum = 9007199254740991.0)),
    responses(
        (status = 200, body = NodeDetail),
        (status = 400, body = ErrorBody),
        (status = 404, body = ErrorBody)
))]
async fn get_node(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<NodeDetail>, ApiError> {
    let node_id = id(&raw, "node")?;
    let node = state
        .store
        .node(node_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("node {node_id}")))?;
    let jobs = state.store.node_jobs(node_id).await?;
    let slashes = state.store.slashes(node_id).await?;
    let min_stake = state.store.min_stake().await?;
    Ok(Json(NodeDetail {
        node: NodeView::new(node, now(&state).await?, min_stake.as_deref()),
        jobs,
        slashes,
    }))
}

/// An account's credits in the market (what it can post from and withdraw) and their
/// flows: deposits, withdrawals, bounties escrowed, refunds, dispute bonds.
#[utoipa::path(get, path = "/v1/accounts/{address}",
    params(("address" = String, Path, description = "0x address", pattern = "^0x[0-9a-fA-F]{40}$")),
    responses(
        (status = 200, body = AccountRow),
        (status = 400, body = ErrorBody),
        (status = 404, description = "no event names the account", body = ErrorBody)
))]
async fn get_account(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<AccountRow>, ApiError> {
    let address = raw
        .parse::<alloy::primitives::Address>()
        .map_err(|_| ApiError {
            status: StatusCode::BAD_REQUEST,
            message: "path parameter `address`: must be a 0x address".into(),
        })?;
    let account = format!("{address:#x}");
    let row = state
        .store
        .account(&account)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("account {account}")))?;
    Ok(Json(row))
}

/// The chain and the contracts: what a browser's wallet sends transactions to.
#[utoipa::path(get, path = "/v1/network", responses((status = 200, body = NetworkInfo)))]
async fn network(State(state): State<AppState>) -> Json<NetworkInfo> {
    Json(state.network.clone())
}

/// The payment token: its symbol, and the decimals by which base units are shown.
#[utoipa::path(get, path = "/v1/token", responses((status = 200, body = TokenInfo)))]
async fn token(State(state): State<AppState>) -> Json<TokenInfo> {
    Json(state.token.clone())
}

/// Network totals.
#[utoipa::path(get, path = "/v1/stats", responses((status = 200, body = Stats)))]
async fn stats(State(state): State<AppState>) -> Result<Json<Stats>, ApiError> {
    Ok(Json(state.store.stats().await?))
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct HistoryQuery {
    /// Minutes back from now, 1 to 1440 (default 60).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1440)]
    minutes: Option<String>,
}

/// The network minute by minute: jobs posted, completed and failed, GPUs in use and their
/// utilisation.
#[utoipa::path(get, path = "/v1/stats/history", params(HistoryQuery), responses(
    (status = 200, body = History),
    (status = 400, body = ErrorBody)
))]
async fn stats_history(
    State(state): State<AppState>,
    query: Result<Query<HistoryQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<History>, ApiError> {
    let Query(q) = query.map_err(ApiError::bad_query)?;
    let minutes = bounded("minutes", &q.minutes, 1..=1440, 60)?;
    let now = now(&state).await?;
    Ok(Json(History {
        buckets: state.store.history(minutes, now).await?,
    }))
}

/// Alive.
#[utoipa::path(get, path = "/healthz", responses((status = 200, description = "ok")))]
async fn healthz() -> &'static str {
    "ok"
}

/// Readiness: where the projection is, and how far it trails the chain stream.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Readiness {
    pub ready: bool,
    /// Stream sequence stored.
    pub checkpoint: u64,
    /// Last block applied.
    pub block: u64,
    /// The chain stream's last sequence (absent when NATS did not answer).
    pub stream_last: Option<u64>,
    /// Messages not yet projected.
    pub lag: Option<u64>,
    /// While the chain stream is damaged: the block the projection waits for (it stays at
    /// `block` until that block is published again whole).
    pub stalled: Option<u64>,
}

/// Ready once the projection has applied something, trails the stream by at most
/// `max_lag` messages and is not stalled on a damaged block.
#[utoipa::path(get, path = "/readyz", responses(
    (status = 200, body = Readiness),
    (status = 503, description = "not ready", body = Readiness)
))]
async fn ready(State(state): State<AppState>) -> Response {
    let progress = *state.progress.borrow();
    let stream_last = match &state.nats {
        Some(nats) => match nats.stream_last().await {
            Ok(last) => Some(last),
            Err(error) => {
                tracing::warn!(%error, "reading the chain stream's length");
                None
            }
        },
        None => Some(progress.checkpoint),
    };
    let lag = stream_last.map(|last| last.saturating_sub(progress.checkpoint));
    if let Some(lag) = lag {
        crate::metrics::projection_lag(lag);
    }
    let ready = progress.checkpoint > 0
        && lag.is_some_and(|lag| lag <= state.max_lag)
        && progress.stalled.is_none();
    let body = Json(Readiness {
        ready,
        checkpoint: progress.checkpoint,
        block: progress.block,
        stream_last,
        lag,
        stalled: progress.stalled,
    });
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body).into_response()
}

/// Prometheus metrics (404 when this process has no recorder installed).
async fn prometheus(State(state): State<AppState>) -> Response {
    match &state.metrics {
        Some(handle) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            handle.render(),
        )
            .into_response(),
        None => ApiError::not_found("metrics".into()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_served_only_from_its_own_node_and_job_in_this_networks_bucket() {
        let bucket = "gantry_31337_results";
        let uri = "nats://gantry_31337_results/2/7-1";
        assert_eq!(stored_result(uri, bucket, 7, Some(2)), Some((2, "7-1")));
        // The ciphertext's hash after the key is no part of it.
        let sealed = format!("{uri}#ciphertext-sha256={}", "ab".repeat(32));
        assert_eq!(stored_result(&sealed, bucket, 7, Some(2)), Some((2, "7-1")));
        for (uri, job, node) in [
            ("nats://gantry_31337_results/3/7-1", 7, Some(2)), // another node's object
            ("nats://gantry_31337_results/2/8-1", 7, Some(2)), // another job's
            ("nats://gantry_31337_results/2/7-", 7, Some(2)),
            ("nats://gantry_31337_results/2/70-1", 7, Some(2)),
            ("nats://gantry_31337_results/2/7-1/x", 7, Some(2)),
            ("nats://gantry_31337_resultsX/2/7-1", 7, Some(2)), // another bucket
            ("nats://gantry_1_results/2/7-1", 7, Some(2)),
            ("nats://gantry_31337_sealed/2/7-1", 7, Some(2)),
            ("https://example.org/2/7-1", 7, Some(2)),
            ("nats://gantry_31337_results/x/7-1", 7, Some(2)),
            (uri, 7, None), // no node
        ] {
            assert_eq!(stored_result(uri, bucket, job, node), None, "{uri}");
        }
    }
}
