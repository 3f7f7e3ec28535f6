//! The projection against a real chain (anvil), nats-server and the indexer. Every test
//! projects the same market activity (`harness`): the kit's scripted lifecycle (job 1
//! paid, job 2 cancelled, job 3 given back by node 1, node 1 withdrawing its earnings and
//! exiting), then node 2 with the minimum stake runs jobs 4 and 5, the submitter (after a
//! deposit) disputes both, and the arbiter decides job 5 for the submitter.
//!
//! - `projection`: the projection equals the market on SQLite and on PostgreSQL: every
//!   job's state hash is `jobHash` (and its state the kit's fold of the logs), its barred
//!   nodes `isBarred`; every node is `getNode` (stake, locked stake, earnings, fees owed,
//!   inactivity, unbonding); every account's credits are `creditOf`; the treasury, policy
//!   and pause are the market's. The rows say what the events said: the rejected job
//!   shows node 1 barred and its charge, the open dispute its bond, exposure and deadline,
//!   the lost one its refund, returned bond and the exposure slashed (node 2 then
//!   inactive without `inactiveSince`), node 1 its withdrawn earnings and swept fee, the
//!   submitter its deposits, refunds and bonds. SQLite and PostgreSQL give the same rows,
//!   stats, slashes and job documents (`/v1/jobs/{id}`, a worker's failure report making
//!   its attempt `failedByItself` on both); a restart changes nothing, a
//!   rebuild into an empty database gives the same rows; an `anvil_reorg` of the disputes
//!   is undone (jobs, node 2 and the credits refolded); two replicas projecting into one
//!   PostgreSQL apply each block once and both feed their live streams; a stored event
//!   reads back as published (a `JobPosted`'s spec kept as bytes; on SQLite byte for byte).
//! - `crash`: a crash in the middle of a block's transaction (the binary SIGKILLed while
//!   its PostgreSQL transaction waits on a lock; a SQLite transaction aborted by a
//!   trigger) stores nothing of it, and the restarted binary equals the chain.
//! - `http`: every endpoint's happy path (lists by status, submitter and node, cursor
//!   pages; a job's detail with its bar, charge, dispute and refund; its attempts: a
//!   worker's failure report as the result (the job's fault), a lost dispute's slash to
//!   the treasury, and job 3 given back by node 1 for the job's fault, then reclaimed from
//!   a third node gone inactive (the node's fault, slashed a tenth of its stake to the
//!   treasury) and cancelled (the whole bounty back); a node's locked stake,
//!   running jobs and slashes with their jobs; why each node takes no work
//!   (`takesNoWork`: node 1 exiting, node 2 below the minimum stake, the third node
//!   inactive since its agent's `markInactive`, then below the minimum once slashed); an account's credits against `creditOf`;
//!   the stats' money against the market), bad parameters named in 400s, 404s.
//! - `live`: SSE: the feed delivers a worker's progress and a job posted on chain (from
//!   credits), a log follow gets its stored tail, then new lines, then `end` when the job
//!   is cancelled (its refund on the feed); the matcher's explanation from KV, readiness
//!   by stream lag, `/metrics`, `/openapi.json`, and shutdown ending open streams.
//! - `stall`: a chain stream written by hand with a block whose event was lost and a
//!   message that does not decode: the projection does not exit, stays at the last good
//!   block (rows, checkpoint), `/readyz` says 503 naming the missing block and the
//!   `gantry_chain_stream_*` metrics count it; once the block is published again whole it
//!   catches up by itself.
//! - `dashboard`: the dashboard in headless Chromium (playwright-core): the jobs table, a
//!   running job's page with its charts, logs, the node it barred and its attempts (a
//!   give-back for the job's fault, the one running), then a job posted on
//!   chain and a worker's report appearing on the open pages without a reload; both sides
//!   of the market: node 2's locked stake and its slash with its job, job 4's dispute
//!   (bond, exposure, deadline), job 5's refund (the bounty; the slash went to the
//!   treasury), charge and attempt (the dispute lost, slashed), the submitter's credits and
//!   their flows, the network's money; screenshots in `target/tmp/dashboard/`.
//! - `verification`: a replicated 3/2 job decided with one liar, on a chain of its own:
//!   `/v1/jobs/{id}` and the dashboard's verification card show each seat's node,
//!   commit, reveal and digest, the two paid and the liar slashed, and the digest the
//!   quorum agreed on.
//! - `assets`: the web app's chain assets from the dashboard's routes alone: ethers as one
//!   ES module (`text/javascript`), and the ABIs of JobMarket, NodeRegistry and the token
//!   as `{"abi": …}` (the artifact's whole ABI, no bytecode), revalidated by ETag.
//! - `schemathesis`: Schemathesis against `/openapi.json` (every check, fixed seed,
//!   bounded examples; `/v1/events` and log following left out) must find nothing.
//! - `validate`: the web app's job-spec validator (`assets/validate.js`, under `node
//!   --test`) gives every case of the protocol's spec corpus
//!   (`contracts/protocol/tests/spec_corpus.json`) the outcome spec.rs gives it: ok, or the
//!   same field and reason.

mod assets;
mod crash;
mod dashboard;
mod harness;
mod http;
mod live;
mod projection;
mod schemathesis;
mod stall;
mod validate;
mod verification;
