//! The `gantry` binary as a process against a real chain (anvil, the market deployed), and
//! where it reads, nats-server, the indexer and the API in-process.
//!
//! - `submit`: a submit from flags posts exactly the requirements, bounty, deadline and
//!   spec asked for (with a permit, nothing left approved); a spec file is posted in
//!   canonical form with an existing allowance left alone, after an over-balance bounty
//!   (exit 4), a deadline with no room for the runtime (exit 4) and bad flags (exit 2)
//!   sent nothing.
//! - `money`: a cancel's refund shows in `balance` and `withdraw` pays it out, reverts
//!   read as sentences (exit 3 and 4); a dispute approves exactly the bond (the policy's
//!   floor or a tenth of the bounty) and `accept` pays the provider; a deposit becomes
//!   credits that jobs are posted from first, the wallet paying only the rest.
//! - `node`: registering a node served by another key needs that agent's consent
//!   (`node consent`; none, or one given to another operator, is refused and nothing
//!   moves), an operator registers two nodes, `--gpu A100` resolves by VRAM or is refused
//!   as ambiguous, `node status` through the API, exit, a withdrawal refused while
//!   unbonding and paid after it.
//! - `reads`: one job followed through the API: `watch --json` from open to completed
//!   (exit 0) and another to cancelled (exit 5), status and list JSON, the log tail and a
//!   follower that ends with the job, and a result uploaded to the object store and
//!   submitted by the node's agent, unpacked when it matches and refused (exit 6, nothing
//!   written) once its bytes are tampered with.

mod harness;
mod money;
mod node;
mod reads;
mod submit;
