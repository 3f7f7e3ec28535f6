//! `gantry-matcher` and `gantry-liveness`: stateless services that consume the chain's
//! stream and submit transactions — assignments; markInactive, reclaim, expire, finalize.
//!
//! ```text
//!   GANTRY_<chain> stream ──▶ decide(state, event) -> actions ──▶ JobMarket / NodeRegistry txs
//! ```
//!
//! Not built yet: a later issue fills this crate.
