//! `gantry-api`: the read-only HTTP API and dashboard, projecting the chain's stream into
//! SQLite (default) or PostgreSQL.
//!
//! ```text
//!   GANTRY_<chain> stream ──▶ projection (sqlx) ──▶ axum routes ──▶ dashboard
//! ```
//!
//! Not built yet: a later issue fills this crate.
