//! The projection against a real chain (anvil), nats-server and the indexer.
//!
//! - `projection`: the projection of a scripted lifecycle equals `getJob`/`getNode` on
//!   SQLite and on PostgreSQL (and the two are identical, the job document the database
//!   builds for `/v1/jobs/{id}` included), a restart changes nothing, a rebuild into an
//!   empty database gives the same rows, an `anvil_reorg` of the last blocks is undone;
//!   two replicas projecting into one PostgreSQL apply each block once and both feed
//!   their live streams.
//! - `crash`: a crash in the middle of a block's transaction (the binary SIGKILLed while
//!   its PostgreSQL transaction waits on a lock; a SQLite transaction aborted by a
//!   trigger) stores nothing of it, and the restarted binary equals the chain.
//! - `http`: every endpoint's happy path, cursor pages, bad parameters named in 400s,
//!   404s.
//! - `live`: SSE: the feed delivers a worker's progress and a job posted on chain, a log
//!   follow gets its stored tail, then new lines, then `end` when the job is cancelled;
//!   the matcher's explanation from KV, readiness by stream lag, `/metrics`,
//!   `/openapi.json`, and shutdown ending open streams.
//! - `dashboard`: the dashboard in headless Chromium (playwright-core): the jobs table, a
//!   running job's page with its charts and logs, then a job posted on chain and a
//!   worker's report appearing on the open pages without a reload, the nodes and network
//!   pages; screenshots in `target/tmp/dashboard/`.

mod crash;
mod dashboard;
mod harness;
mod http;
mod live;
mod projection;
