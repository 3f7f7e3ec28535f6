//! `gantry-api`: the read-only HTTP API and dashboard, projecting the chain's stream into
//! SQLite (default) or PostgreSQL.
//!
//! ```text
//!   GANTRY_<chain> stream ──▶ project (buffer a block, apply at its commit) ──▶ store (sqlx)
//!                                                                              ──▶ HTTP API, dashboard
//! ```
//!
//! - [`service`]: [`run`]`(config, shutdown)`: the three tasks below under one token
//!   ([`config`]: the flags).
//! - [`model`]: the pure folds of the market's events into job, node and account rows
//!   (a job's state by `gantry_protocol::market::State::apply`).
//! - [`store`]: the SQL side (sqlx `Any`): one transaction per block with the checkpoint,
//!   and the reads, some built as JSON by the database.
//! - [`project`]: the stream consumers (chain stream, and [`reports`]: the workers'
//!   progress, logs and completion reports).
//! - [`live`]: the in-process feed behind the SSE endpoints.
//! - [`http`]: the `/v1` routes, SSE, health, metrics and OpenAPI; [`dashboard`]: the
//!   embedded web pages.

pub mod config;
pub mod dashboard;
pub mod http;
pub mod live;
pub mod metrics;
pub mod model;
pub mod project;
pub mod reports;
pub mod service;
pub mod store;

pub use config::Config;
pub use service::{Api, run, start};
