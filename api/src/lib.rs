//! `gantry-api`: the read-only HTTP API and dashboard, projecting the chain's stream into
//! SQLite (default) or PostgreSQL.
//!
//! ```text
//!   GANTRY_<chain> stream ──▶ project (buffer a block, apply at its commit) ──▶ store (sqlx)
//!                                                                              ──▶ HTTP API, dashboard
//! ```
//!
//! In progress: [`model`] (the pure folds of jobs and nodes), [`store`] (the SQL side,
//! one transaction per block with the checkpoint) and [`project`] (the stream consumer)
//! are built; the HTTP API and the dashboard follow.

pub mod dashboard;
pub mod http;
pub mod live;
pub mod model;
pub mod project;
pub mod reports;
pub mod store;
