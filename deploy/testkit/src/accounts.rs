//! Who signs as which of anvil's ten dev accounts: one numbering for every test, bench and
//! the dev network (`gantry-devnet up`).
//!
//! | account | constant | signs as |
//! | --- | --- | --- |
//! | 0 | [`ADMIN`], [`MATCHER`] | the deployer: admin, matcher, arbiter, pauser, fee recipient; mints the test token |
//! | 1 | [`OPERATOR`], `NODES[0]` | the operator of the node [`AGENT`] serves; else a node of its own |
//! | 2 | [`AGENT`] | the agent (hot key) of [`OPERATOR`]'s node |
//! | 3 | [`SUBMITTER`] | posts jobs |
//! | 4, 5, 6 | `NODES[1..]` | nodes each served by its own operator, as a worker registers its node |
//! | 7 | [`OTHER`] | no role: someone else, a stranger to a job |
//! | 8 | [`KEEPER`] | the liveness keeper |
//! | 9 | [`SECOND_MATCHER`], [`STANDBY_KEEPER`] | a second replica: a matcher that is not the admin, or the standby keeper |
//!
//! A test uses the accounts its roles name, and derives any address or index its
//! assertions mention from these constants.

/// The deployer: admin of both contracts, matcher, arbiter and pauser, and the market's fee
/// recipient; it mints the test token.
pub const ADMIN: usize = 0;
/// The matcher of the dev network and of tests that run one matcher beside no other
/// admin traffic: the admin, which the deployment makes a matcher.
pub const MATCHER: usize = ADMIN;
/// The operator of a node whose agent is [`AGENT`] (it stakes and is paid); where a test
/// has one node served by its operator's own key, that node's account (`NODES[0]`).
pub const OPERATOR: usize = 1;
/// The agent of [`OPERATOR`]'s node: heartbeats, claims, submits results.
pub const AGENT: usize = 2;
/// The account that posts jobs.
pub const SUBMITTER: usize = 3;
/// Nodes served by their operator's own key, as a worker registers its node: each
/// account is its node's operator and agent. The dev network's workers, in order.
pub const NODES: [usize; 4] = [OPERATOR, 4, 5, 6];
/// An account with no role: someone other than the submitter, a stranger to a job.
pub const OTHER: usize = 7;
/// The liveness keeper.
pub const KEEPER: usize = 8;
/// A matcher that is not the admin (a [`crate::TestNet`] grants it the role): the
/// second replica, or the one matcher where the admin's transactions must not queue
/// behind its own.
pub const SECOND_MATCHER: usize = 9;
/// The standby keeper replica (the keeper needs no role; no test runs it beside a second
/// matcher).
pub const STANDBY_KEEPER: usize = SECOND_MATCHER;
