//! `gantry-matcher` and `gantry-liveness`: stateless services that consume the stream and
//! submit transactions — assignments; markInactive, reclaim, expire, finalize.
//!
//! ```text
//!   GANTRY_<chain> stream ──▶ View (nodes, open jobs) ──▶ decide::Planner ──▶ assign txs
//!                                                     └─▶ Explanation per unplaceable job
//! ```
//!
//! In progress: the pure decision core ([`decide`]) over the matcher's [`view`], and the
//! [`project`]ion that builds the view from the stream's messages, are built; the stream
//! consumer, the transaction sender and the liveness service come next.

pub mod decide;
pub mod liveness;
pub mod project;
pub mod view;
