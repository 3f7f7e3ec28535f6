//! The read-only HTTP API (axum, JSON, under `/v1`). Bad query parameters are a 400 naming
//! the parameter, an unknown id a 404; errors never carry internals (they are logged).

use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use sqlx::Row;
use tower_http::compression::CompressionLayer;
use tower_http::cors::CorsLayer;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

use crate::model::{JOB_STATUS, JobRow, NodeRow};
use crate::project::Progress;
use crate::store::{Store, TimelineEntry};

/// Largest page of a list.
pub const MAX_LIMIT: u32 = 200;
const DEFAULT_LIMIT: u32 = 50;

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Store,
    pub progress: tokio::sync::watch::Receiver<Progress>,
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
            Json(serde_json::json!({ "error": self.message })),
        )
            .into_response()
    }
}

/// The router with every route and layer.
pub fn router(state: AppState, config: HttpConfig) -> Router {
    Router::new()
        .route("/v1/jobs", get(list_jobs))
        .route("/v1/jobs/{id}", get(get_job))
        .route("/v1/jobs/{id}/logs", get(job_logs))
        .route("/v1/nodes", get(list_nodes))
        .route("/v1/nodes/{id}", get(get_node))
        .route("/v1/stats", get(stats))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .with_state(state)
        .merge(crate::dashboard::routes())
        .layer(CompressionLayer::new())
        .layer(RequestBodyLimitLayer::new(16 * 1024))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            config.request_timeout,
        ))
        .layer(config.cors)
}

/// Query of `GET /v1/jobs`; everything is text so that a bad value is reported by name.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobsQuery {
    status: Option<String>,
    submitter: Option<String>,
    node: Option<String>,
    since: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

/// A page of a list; `nextCursor` fetches the next one.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// A page from rows whose first column is the item's JSON, fetched one past `limit`; the
/// cursor is the last item's id when there is more.
fn page<T: serde::de::DeserializeOwned>(
    rows: &[sqlx::any::AnyRow],
    limit: u32,
    id_of: impl Fn(&T) -> i64,
) -> Result<Page<T>, ApiError> {
    let more = rows.len() > limit as usize;
    let items = rows
        .iter()
        .take(limit as usize)
        .map(|row| serde_json::from_str(&row.get::<String, _>(0)))
        .collect::<Result<Vec<T>, _>>()
        .map_err(crate::store::StoreError::from)?;
    let next_cursor = more
        .then(|| items.last().map(|item| id_of(item).to_string()))
        .flatten();
    Ok(Page { items, next_cursor })
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

/// A non-negative integer that fits SQL's BIGINT.
fn non_negative(name: &str, value: &Option<String>) -> Result<Option<i64>, ApiError> {
    match number::<i64>(name, value)? {
        Some(n) if n < 0 => Err(ApiError::bad_parameter(
            name,
            "must be a non-negative integer",
        )),
        other => Ok(other),
    }
}

fn limit(value: &Option<String>) -> Result<u32, ApiError> {
    let limit = number::<u32>("limit", value)?.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_parameter("limit", "must be 1 to 200"));
    }
    Ok(limit)
}

async fn list_jobs(
    State(state): State<AppState>,
    query: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<JobRow>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: e.body_text(),
    })?;
    let limit = limit(&q.limit)?;
    if let Some(status) = &q.status
        && !JOB_STATUS[1..].contains(&status.as_str())
    {
        return Err(ApiError::bad_parameter(
            "status",
            "must be one of open, assigned, submitted, disputed, completed, failed, cancelled, expired",
        ));
    }
    if let Some(submitter) = &q.submitter
        && submitter.parse::<alloy::primitives::Address>().is_err()
    {
        return Err(ApiError::bad_parameter("submitter", "must be a 0x address"));
    }
    let node = non_negative("node", &q.node)?;
    let since = non_negative("since", &q.since)?;
    // The cursor is the last job id of the previous page (newest first).
    let cursor = non_negative("cursor", &q.cursor)?;
    let rows = sqlx::query(
        "SELECT body, job_id FROM jobs WHERE ($1 IS NULL OR status = $1) \
         AND ($2 IS NULL OR submitter = $2) AND ($3 IS NULL OR node_id = $3) \
         AND ($4 IS NULL OR posted_at >= $4) AND ($5 IS NULL OR job_id < $5) \
         ORDER BY job_id DESC LIMIT $6",
    )
    .bind(q.status.clone())
    .bind(q.submitter.as_ref().map(|s| s.to_lowercase()))
    .bind(node)
    .bind(since)
    .bind(cursor)
    .bind(i64::from(limit) + 1)
    .fetch_all(state.store.pool())
    .await?;
    page(&rows, limit, |j: &JobRow| j.job_id).map(Json)
}

/// `GET /v1/jobs/{id}`: the row and its timeline.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: JobRow,
    pub timeline: Vec<TimelineEntry>,
    /// The latest progress the worker reported.
    pub progress: Option<gantry_protocol::jobs::ProgressUpdate>,
    /// The workers' completion reports, by attempt.
    pub completions: Vec<gantry_protocol::jobs::CompletionReport>,
}

fn id(raw: &str, what: &str) -> Result<u64, ApiError> {
    raw.parse().map_err(|_| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: format!("path parameter `id`: {what} ids are non-negative integers"),
    })
}

async fn get_job(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<JobDetail>, ApiError> {
    let job_id = id(&raw, "job")?;
    let job = state
        .store
        .job(job_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("job {job_id}")))?;
    let timeline = state.store.timeline(job_id).await?;
    let progress = state.store.progress(job_id).await?;
    let completions = state.store.completions(job_id).await?;
    Ok(Json(JobDetail {
        job,
        timeline,
        progress,
        completions,
    }))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsQuery {
    tail: Option<String>,
}

/// Largest `tail` of `GET /v1/jobs/{id}/logs`.
pub const MAX_TAIL: u32 = 10_000;

async fn job_logs(
    State(state): State<AppState>,
    Path(raw): Path<String>,
    query: Result<Query<LogsQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<gantry_protocol::jobs::LogLine>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: e.body_text(),
    })?;
    let job_id = id(&raw, "job")?;
    let tail = number::<u32>("tail", &q.tail)?.unwrap_or(200);
    if !(1..=MAX_TAIL).contains(&tail) {
        return Err(ApiError::bad_parameter("tail", "must be 1 to 10000"));
    }
    if state.store.job(job_id).await?.is_none() {
        return Err(ApiError::not_found(format!("job {job_id}")));
    }
    Ok(Json(state.store.logs(job_id, tail).await?))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodesQuery {
    status: Option<String>,
    cursor: Option<String>,
    limit: Option<String>,
}

async fn list_nodes(
    State(state): State<AppState>,
    query: Result<Query<NodesQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Page<NodeRow>>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError {
        status: StatusCode::BAD_REQUEST,
        message: e.body_text(),
    })?;
    let limit = limit(&q.limit)?;
    if let Some(status) = &q.status
        && !crate::model::NODE_STATUS[1..].contains(&status.as_str())
    {
        return Err(ApiError::bad_parameter(
            "status",
            "must be one of active, inactive, exiting, exited",
        ));
    }
    let cursor = non_negative("cursor", &q.cursor)?;
    let rows = sqlx::query(
        "SELECT body FROM nodes WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR node_id > $2) \
         ORDER BY node_id LIMIT $3",
    )
    .bind(q.status.clone())
    .bind(cursor)
    .bind(i64::from(limit) + 1)
    .fetch_all(state.store.pool())
    .await?;
    page(&rows, limit, |n: &NodeRow| n.node_id).map(Json)
}

async fn get_node(
    State(state): State<AppState>,
    Path(raw): Path<String>,
) -> Result<Json<NodeRow>, ApiError> {
    let node_id = id(&raw, "node")?;
    state
        .store
        .node(node_id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("node {node_id}")))
}

async fn stats(State(state): State<AppState>) -> Result<Json<crate::store::Stats>, ApiError> {
    Ok(Json(state.store.stats().await?))
}

/// Ready once the projection has applied something; reports where it is.
async fn ready(State(state): State<AppState>) -> Response {
    let progress = *state.progress.borrow();
    let body = Json(serde_json::json!({
        "checkpoint": progress.checkpoint,
        "block": progress.block,
    }));
    if progress.checkpoint > 0 {
        (StatusCode::OK, body).into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, body).into_response()
    }
}
