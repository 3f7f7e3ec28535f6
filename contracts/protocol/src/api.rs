//! The read API's JSON answers (`gantry-api` serves them under `/v1`, the `gantry` CLI
//! reads them): jobs and nodes as rows, lists as pages, a job's and a node's detail,
//! network statistics, and the error body.
//!
//! ```text
//!   GET /v1/jobs           Page<JobSummary>  JobBrief + latest ProgressUpdate
//!   GET /v1/jobs/{id}      JobDetail         JobRow + timeline, progress, completions, pending
//!   GET /v1/nodes          Page<NodeView>    NodeRow + reputation, heartbeat age
//!   GET /v1/nodes/{id}     NodeDetail        NodeView + its running jobs, its slashes
//!   GET /v1/accounts/{a}   AccountRow        an account's credits and their flows
//!   GET /v1/stats          Stats
//!   GET /v1/stats/history  History           Minute by minute
//!   GET /v1/token          TokenInfo         how amounts are shown
//!   GET /v1/network        NetworkInfo       the chain and contracts, for wallets
//!   GET /v1/events (SSE)   job: JobRow, node: NodeView, progress: ProgressUpdate
//!   a 400, 404 or 500      ErrorBody
//! ```
//!
//! Field names are camelCase; integers are `u64` (ids, blocks, times, counts: never
//! negative; the API converts its SQL BIGINTs once, in its store) and amounts are decimal
//! strings of token base units (uint96/uint256 do not fit).
//! Unknown fields are ignored on reading, so the API may add fields.
//!
//! The rows follow market v2: a job's `until` is what it waits for by status (the
//! attempt's end, the challenge window's end, the arbiter's deadline), `faults` and
//! `barred`/`barredNodes` count its failed attempts, `dispute` holds the bond and the
//! node's exposure, `charges` what nodes paid on it, `attemptRows` each attempt (its
//! node, how it ended, whose fault, why, what was slashed and to whom), `stateHash` the
//! word the market stores for it; a node's row has its locked stake, earnings, fees owed and slashes; an
//! [`AccountRow`] holds an account's credits.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::jobs::{CompletionReport, ProgressUpdate};
use crate::pending::PendingExplanation;
use crate::status::{JobStatus, NodeStatus};

/// The names of the Server-Sent Events the API sends (`/v1/events`,
/// `/v1/jobs/{id}/logs?follow=true`); their data is the type named beside each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LiveEventName {
    /// A [`JobRow`] changed.
    Job,
    /// A [`NodeView`] changed.
    Node,
    /// A worker's `ProgressUpdate`.
    Progress,
    /// A `LogLine` (its `id` the line's stream sequence).
    Log,
    /// A block was applied: `{number, timestamp}`.
    Block,
    /// Blocks after `commonAncestor` were orphaned: refetch.
    Reorg,
    /// The client fell behind and missed events: refetch.
    Lagged,
    /// The followed job settled: the log stream ends.
    End,
}

impl LiveEventName {
    pub const ALL: [LiveEventName; 8] = [
        LiveEventName::Job,
        LiveEventName::Node,
        LiveEventName::Progress,
        LiveEventName::Log,
        LiveEventName::Block,
        LiveEventName::Reorg,
        LiveEventName::Lagged,
        LiveEventName::End,
    ];

    /// The `event:` field on the wire.
    pub const fn as_str(self) -> &'static str {
        match self {
            LiveEventName::Job => "job",
            LiveEventName::Node => "node",
            LiveEventName::Progress => "progress",
            LiveEventName::Log => "log",
            LiveEventName::Block => "block",
            LiveEventName::Reorg => "reorg",
            LiveEventName::Lagged => "lagged",
            LiveEventName::End => "end",
        }
    }

    /// The name of an `event:` field; `None` for one this version does not know (a newer
    /// API's), which clients skip.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.as_str() == name)
    }
}

fn docker() -> String {
    crate::spec::Engine::Docker.to_string()
}

/// A job as the API shows it: its terms (fixed at posting), its state as the market
/// holds it, and every amount its events moved.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobRow {
    pub job_id: u64,
    pub submitter: String,
    pub status: JobStatus,
    /// Attempts so far (assignments). Every earlier attempt ended with its node barred, so
    /// while the job runs this is the attempt number its worker reports.
    pub attempts: u64,
    /// Attempts that ended in the node's fault (reclaimed); the job fails when they reach
    /// its policy's `maxAttempts`.
    pub faults: u64,
    /// Nodes barred from the job: they gave it back or faulted on it.
    pub barred: u64,
    /// Those nodes, in the order they were barred.
    pub barred_nodes: Vec<u64>,
    pub bounty: String,
    /// The part of the bounty taken from the submitter's credits (the rest came from its
    /// tokens).
    pub from_credits: String,
    /// Chain time by which a result must be in.
    pub deadline: u64,
    /// Longest an attempt may run, seconds, from its assignment.
    pub max_runtime: u64,
    pub spec_hash: String,
    /// The spec as posted, when it is one workers run (`JobSpec::from_slice` takes it: an
    /// object, no key given twice); none otherwise. Its JSON text (see [`SpecJson`]);
    /// `specHash` is over the posted bytes (in the job's `JobPosted`).
    #[cfg_attr(feature = "openapi", schema(value_type = Option<Object>))]
    pub spec: Option<SpecJson>,
    /// The posted bytes as text (invalid UTF-8 and NUL replaced), only when they are not
    /// a spec.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_text: Option<String>,
    pub requirements: RequirementsRow,
    /// The job's terms as the market's calls take them (`cancel`, `accept`, `dispute`).
    #[serde(default)]
    pub terms: TermsWords,
    /// The job's state as the market's calls take them, while the market stores its hash
    /// (`stateHash`); none once settled, with the policy unknown, or for a verified job
    /// (whose calls take its `VerifiedState`).
    #[serde(default)]
    pub state: Option<StateWords>,
    /// What runs it (`docker`, `wasm`), as its terms say; `engine N` for a code this
    /// build does not know.
    #[serde(default = "docker")]
    pub engine: String,
    pub priority: u64,
    /// The market policy in force at posting: the job's rules for its whole life.
    pub policy_version: u64,
    /// That policy, as `MarketParamsUpdated` announced it (none if the API never saw it).
    pub policy: Option<JobPolicy>,
    /// The node of the current attempt (once settled: of the last one); none while open.
    pub node_id: Option<u64>,
    /// Whether the node's agent claimed the current attempt (else the matcher assigned it).
    pub claimed: bool,
    /// When the current (or last) attempt was assigned.
    pub assigned_at: Option<u64>,
    /// What the job waits for, by status: assigned, the attempt's end; submitted, the
    /// challenge window's end; disputed, the arbiter's deadline; otherwise none.
    pub until: Option<u64>,
    /// The answer's `resultHash`: the result's hash, or, for a refereed job, the seal of
    /// its digest (the digest itself is revealed only in a dispute).
    pub result_hash: Option<String>,
    pub result_uri: Option<String>,
    /// The submitter's dispute of the result, if any.
    pub dispute: Option<DisputeRow>,
    /// What nodes were charged on this job (rejects, reclaims, a lost dispute), in order.
    pub charges: Vec<ChargeRow>,
    /// Every attempt, in order: its node, how it ended, whose fault that was and why,
    /// what was slashed and where it went. In a list or a live event the chain's view;
    /// the job's document (`GET /v1/jobs/{id}`) adds the workers' failure reports (an
    /// attempt answered with one [`AttemptOutcome::FailedByItself`]).
    #[serde(default)]
    pub attempt_rows: Vec<AttemptRow>,
    /// Credited to the node's earnings on completion.
    pub payout: Option<String>,
    /// The protocol fee taken from the bounty on completion.
    pub fee: Option<String>,
    pub completion: Option<Completion>,
    /// Credited back to the submitter (failed, cancelled or expired).
    pub refund: Option<String>,
    pub failure: Option<Failure>,
    /// Why the last attempt ended early (a reject's reason, a reclaim's cause), or why the
    /// job failed.
    pub reason: Option<String>,
    /// keccak256 of the job's terms, as its state holds it.
    pub terms_hash: String,
    /// keccak256 of the job's state, as the market stores it (`jobHash`) while the job is
    /// unsettled; none once settled (the market clears it) or with the policy unknown.
    pub state_hash: Option<String>,
    pub posted_block: u64,
    pub posted_at: u64,
    pub updated_block: u64,
    pub updated_at: u64,
    /// GPUs the job asks for (`minGpuCount`).
    pub gpus: u64,
    /// GPU-seconds its attempts ran on nodes (assignment to submission, reclaim or
    /// rejection, times `gpus`).
    pub gpu_seconds: u64,
    /// A verified job's policy and draw; none for a tier-none job.
    #[serde(default)]
    pub verification: Option<VerificationRow>,
}

impl JobRow {
    /// The spec's text: as posted when it was not a spec, else the spec as JSON (the same value;
    /// the posted bytes, to check against `specHash`, are in the job's `JobPosted`).
    pub fn spec_text(&self) -> String {
        match (&self.spec, &self.spec_text) {
            (Some(spec), _) => spec.get().to_owned(),
            (None, Some(text)) => text.clone(),
            (None, None) => String::new(),
        }
    }
}

/// A job's spec as JSON text rather than a parsed tree: the API stores it inside the
/// job's row as posted (its keys in the posted order) and serves it as it is, so a row is
/// written, read and cloned without a tree of the spec's every key. (A document
/// PostgreSQL builds shows it as `jsonb` writes it: keys in its own order.)
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct SpecJson(Box<serde_json::value::RawValue>);

/// Read as `serde_json` reads a raw value, its text taken as it lies (a row read from
/// JSON text, or from a `serde_json::Value`), and also where serde buffers the value
/// first (a row inside a `#[serde(flatten)]`, as [`JobDetail`] holds it), which a raw
/// value's own reading refuses: there the value is read as a tree and written back.
impl<'de> Deserialize<'de> for SpecJson {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, MapAccess, Visitor};
        /// `serde_json`'s name for its raw values: a deserializer that keeps text asks
        /// the visitor to take a map of this one key, the text its value.
        const RAW: &str = "$serde_json::private::RawValue";
        struct Raw;
        impl<'de> Visitor<'de> for Raw {
            type Value = SpecJson;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any JSON value")
            }

            fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<SpecJson, M::Error> {
                match map.next_key::<String>()?.as_deref() {
                    Some(RAW) => {}
                    _ => return Err(M::Error::custom("a spec's JSON text")),
                }
                let text: String = map.next_value()?;
                serde_json::value::RawValue::from_string(text)
                    .map(SpecJson)
                    .map_err(M::Error::custom)
            }

            fn visit_newtype_struct<D: serde::Deserializer<'de>>(
                self,
                deserializer: D,
            ) -> Result<SpecJson, D::Error> {
                let value = serde_json::Value::deserialize(deserializer)?;
                serde_json::value::to_raw_value(&value)
                    .map(SpecJson)
                    .map_err(D::Error::custom)
            }
        }
        deserializer.deserialize_newtype_struct(RAW, Raw)
    }
}

impl SpecJson {
    /// The posted bytes, when they are one JSON value (as UTF-8 text).
    pub fn from_posted(bytes: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(bytes).ok()?;
        serde_json::value::RawValue::from_string(text.to_owned())
            .ok()
            .map(Self)
    }

    /// The JSON text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// The spec as a JSON tree; `Null` for text nested deeper than `serde_json` reads a
    /// tree (128 levels: a raw value is checked without that limit; no spec is so deep).
    pub fn to_value(&self) -> serde_json::Value {
        self.tree().unwrap_or_default()
    }

    fn tree(&self) -> Option<serde_json::Value> {
        serde_json::from_str(self.get()).ok()
    }

    /// What runs the job as its `engine` says: the image, or the WASM module's URI (when
    /// it is a string).
    fn runs(&self, engine: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Runs {
            image: Option<serde_json::Value>,
            wasm: Option<Wasm>,
        }
        #[derive(Deserialize)]
        struct Wasm {
            module: Option<Module>,
        }
        #[derive(Deserialize)]
        struct Module {
            uri: Option<serde_json::Value>,
        }
        let runs: Runs = serde_json::from_str(self.get()).ok()?;
        let text = match engine {
            "wasm" => runs.wasm?.module?.uri?,
            _ => runs.image?,
        };
        text.as_str().map(str::to_owned)
    }
}

/// The same JSON value, whatever the keys' order and the whitespace (a database's JSON
/// type may write it back in its own order).
impl PartialEq for SpecJson {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
            || matches!((self.tree(), other.tree()), (Some(a), Some(b)) if a == b)
    }
}

impl Eq for SpecJson {}

/// What a job asks of its node (`JobRequirements`), as posted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RequirementsRow {
    /// The GPU model id (bytes32, `0x…`: the model's name, spaces as dashes, zero-padded);
    /// zero accepts any model.
    pub gpu_model: String,
    pub min_gpu_count: u64,
    #[serde(rename = "minVramMiB")]
    pub min_vram_mib: u64,
    pub min_cpu_cores: u64,
    #[serde(rename = "minRamMiB")]
    pub min_ram_mib: u64,
    /// Highest node price per GPU-hour accepted, base units; `ANY_PRICE` (2^96 − 1) is
    /// any price.
    pub max_price_per_gpu_hour: String,
    /// Longest an attempt may run, seconds.
    pub max_runtime: u64,
    pub priority: u64,
    /// The engine's code: 0 Docker, 1 WASM.
    pub engine: u64,
}

/// 2^96 − 1: the price limit of a job that accepts any price.
pub const ANY_PRICE: &str = "79228162514264337593543950335";

impl RequirementsRow {
    pub fn new(r: &crate::eligibility::Requirements) -> Self {
        Self {
            gpu_model: format!("{:#x}", r.gpu_model),
            min_gpu_count: u64::from(r.min_gpu_count),
            min_vram_mib: u64::from(r.min_vram_mib),
            min_cpu_cores: u64::from(r.min_cpu_cores),
            min_ram_mib: u64::from(r.min_ram_mib),
            max_price_per_gpu_hour: r.max_price_per_gpu_hour.to_string(),
            max_runtime: u64::from(r.max_runtime),
            priority: u64::from(r.priority),
            engine: u64::from(r.engine),
        }
    }

    /// The requirements as the contracts take them; none when a field is out of its
    /// range (a row not made by [`RequirementsRow::new`]).
    pub fn to_sol(&self) -> Option<crate::bindings::JobMarket::JobRequirements> {
        use alloy::primitives::aliases::U96;
        Some(crate::bindings::JobMarket::JobRequirements {
            gpuModel: self.gpu_model.parse().ok()?,
            minGpuCount: self.min_gpu_count.try_into().ok()?,
            minVramMiB: self.min_vram_mib.try_into().ok()?,
            minCpuCores: self.min_cpu_cores.try_into().ok()?,
            minRamMiB: self.min_ram_mib.try_into().ok()?,
            maxPricePerGpuHour: self.max_price_per_gpu_hour.parse::<U96>().ok()?,
            maxRuntime: self.max_runtime.try_into().ok()?,
            priority: self.priority.try_into().ok()?,
            engine: self.engine.try_into().ok()?,
        })
    }
}

/// `JobTerms`, the five words as `JobPosted` emitted them (`0x…`, 32 bytes each).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TermsWords {
    pub party: String,
    pub spec_hash: String,
    pub gpu_model: String,
    pub limits: String,
    pub max_price_per_gpu_hour: String,
}

impl TermsWords {
    pub fn new(t: &crate::bindings::JobMarket::JobTerms) -> Self {
        Self {
            party: word(t.party.into()),
            spec_hash: word(t.specHash),
            gpu_model: word(t.gpuModel),
            limits: word(t.limits.into()),
            max_price_per_gpu_hour: word(t.maxPricePerGpuHour.into()),
        }
    }
}

/// `JobState`, its two words (`0x…`, 32 bytes each).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct StateWords {
    pub terms: String,
    pub fields: String,
}

impl StateWords {
    pub fn new(s: &crate::bindings::JobMarket::JobState) -> Self {
        Self {
            terms: word(s.terms),
            fields: word(s.fields.into()),
        }
    }
}

fn word(w: alloy::primitives::B256) -> String {
    format!("{w:#x}")
}

/// A verified job's policy (its terms) and the further words of its state
/// (`VerifiedState`), as the market keeps them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct VerificationRow {
    /// `replicated` or `refereed`.
    pub tier: String,
    /// Replicated: n, the nodes that run the job; refereed: r, the referees of a dispute.
    pub size: u64,
    /// Replicated: k, the equal reveals that decide; refereed: 0.
    pub quorum: u64,
    /// Seconds from the end of the commit phase to the end of the reveal phase.
    pub reveal_window: u64,
    /// What the submitter escrowed: n bounties replicated, one refereed.
    pub escrow: String,
    /// What each seat locks of its node's stake.
    pub seat_stake: String,
    /// A replicated job's end of the commit phase; none for a refereed job before a
    /// dispute.
    pub commit_end: Option<u64>,
    /// The first block the next draw round may be drawn in; none while no round is armed.
    pub draw_block: Option<u64>,
    /// Draw rounds used.
    pub rounds: u64,
    /// The seats' node ids, packed (`VerifiedState.seats`, 0x-hex).
    pub seats: String,
    /// A refereed provider's result hash (`VerifiedState.result`), once submitted.
    pub result: Option<String>,
    /// A refereed job with the arbiter: the referees paid from the prepay.
    #[serde(default)]
    pub paid_referees: u64,
    /// Every seat as its nodes held it, in the order they were drawn (a seat refilled
    /// after a decline or a reclaim has a row per holder): who committed, revealed and
    /// agreed.
    #[serde(default)]
    pub seat_rows: Vec<SeatRow>,
    /// Replicated, decided with a quorum: the digest the quorum revealed, and how many
    /// seats revealed it (`JobVerified`).
    #[serde(default)]
    pub verified_digest: Option<String>,
    #[serde(default)]
    pub agreed: Option<u64>,
    /// Refereed, disputed: the dispute and the referees' decision.
    #[serde(default)]
    pub referees: Option<RefereesRow>,
}

/// One holder of one seat of a verified job (a replica, or a referee of a dispute).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SeatRow {
    /// The seat's number (0 to n − 1).
    pub seat: u64,
    pub node_id: u64,
    /// `replica` or `referee`.
    pub role: String,
    pub seated_at: u64,
    /// Its commit is due by then.
    pub until: u64,
    /// What it locked of its node's stake.
    pub locked: String,
    pub committed_at: Option<u64>,
    /// The committed seal (its digest stays hidden until revealed).
    pub seal: Option<String>,
    pub revealed_at: Option<u64>,
    pub digest: Option<String>,
    /// `seated`, `committed`, `revealed` (not decided yet), `declined` (given back),
    /// `reclaimed` (its node went inactive), `paid`, `unpaid` (released, neither paid nor
    /// slashed), `parted` (a Docker job's seat that revealed and is not paid: neither paid
    /// nor slashed, its share to the treasury) or `slashed`.
    pub outcome: String,
    /// Paid: its pay, less the fee.
    pub payout: Option<String>,
    /// Declined or reclaimed: what it was charged; decided: what it was slashed.
    pub charged: Option<String>,
}

/// A refereed job's dispute (`RefereesRequested`) and the referees' decision
/// (`RefereesDecided`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RefereesRow {
    /// The dispute bond and the referees' prepaid pay, escrowed by the submitter.
    pub bond: String,
    pub prepay: String,
    pub requested_at: u64,
    /// The referees commit by then.
    pub commit_end: u64,
    /// The provider's digest, once it opened its seal.
    pub provider_digest: Option<String>,
    /// `upheld`, `overturned`, `notRevealed` (the provider never opened its seal: it
    /// lost) or `arbiter` (no majority); none while undecided.
    pub outcome: Option<String>,
    /// The digest the most referees revealed.
    pub digest: Option<String>,
    /// Referees paid from the prepay.
    pub paid: u64,
    pub to_submitter: Option<String>,
    pub to_provider: Option<String>,
}

/// A market policy version: the rules of the jobs posted under it (`JobPolicy`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobPolicy {
    pub version: u64,
    /// Protocol fee on the payout, basis points.
    pub fee_bps: u64,
    /// Seconds after a result during which the submitter may dispute it.
    pub challenge_window: u64,
    /// Smallest dispute bond; a job's bond is the larger of it and a tenth of the bounty.
    pub dispute_bond: String,
    /// Seconds the arbiter has to decide a dispute.
    pub dispute_period: u64,
    /// Share of a node's free stake taken per fault, basis points.
    pub slash_bps: u64,
    /// Faulted attempts after which a job fails.
    pub max_attempts: u64,
}

/// A dispute of a job's result (`JobDisputed`, then `DisputeResolved`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DisputeRow {
    /// Posted by the submitter.
    pub bond: String,
    /// The node's stake held until the dispute ends (slashed if the submitter wins).
    pub exposure: String,
    pub disputed_at: u64,
    /// The arbiter decides by then; after it the result stands.
    pub deadline: u64,
    /// How it ended; none while open.
    pub outcome: Option<DisputeOutcome>,
}

/// How a dispute ended (`DisputeResolved`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DisputeOutcome {
    pub provider_won: bool,
    /// The arbiter's time ran out: the result stands, the bond went back.
    pub lapsed: bool,
    /// The bond credited back to the submitter.
    pub bond_to_submitter: String,
    /// The bond credited to the node's earnings.
    pub bond_to_provider: String,
    /// Who ended it: the arbiter, or whoever settled the lapsed dispute.
    pub by: String,
    pub at: u64,
}

/// A node's charge on a job: the share of a slash a reject costs, the slash of a reclaim,
/// the exposure of a lost dispute (all to the treasury).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChargeRow {
    pub node_id: u64,
    pub cause: ChargeCause,
    /// Taken from the node's stake (`NodeSlashed`); "0" for a reject given back at once.
    pub amount: String,
    pub at: u64,
}

/// One attempt of a job: from its assignment (`JobAssigned`) to its answer (a result,
/// a reject, a reclaim) and, for a result, a lost dispute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AttemptRow {
    /// 1 for the first assignment: the attempt number its worker reports.
    pub attempt: u64,
    pub node_id: u64,
    /// Whether the node's agent claimed it (else the matcher assigned it).
    pub claimed: bool,
    pub assigned_at: u64,
    /// When its node answered (result, reject) or it was reclaimed; none while it runs.
    pub ended_at: Option<u64>,
    pub outcome: AttemptOutcome,
    /// Whose fault the attempt's end was.
    pub fault: AttemptFault,
    /// Why: a reject's reason as the worker sent it, a reclaim's cause or a lost
    /// dispute in words, a failure report's reason.
    pub reason: Option<String>,
    /// Taken from the node's stake on this attempt (`NodeSlashed`), "0" if nothing.
    pub slashed: String,
    /// Where the slash went: the market's treasury account when it was taken (none when
    /// nothing was).
    pub slashed_to: Option<String>,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum AttemptOutcome {
    /// Assigned, not answered yet.
    #[default]
    Running,
    /// Its node submitted a result.
    Submitted,
    /// The job failed by itself (non-zero exit, out of memory, its time or output
    /// limit): its node answered with the worker's failure report as the result.
    FailedByItself,
    /// Its node gave the job back (`JobRejected`) with a reason.
    Rejected,
    /// Reclaimed: the node was marked inactive during the attempt.
    ReclaimedNodeInactive,
    /// Reclaimed: the attempt ran past its runtime.
    ReclaimedRuntimeExceeded,
    /// Its result was disputed and the arbiter decided for the submitter.
    DisputeLost,
}

/// Whose fault an attempt's end was.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum AttemptFault {
    /// No one's: it runs, or its result stands.
    #[default]
    None,
    /// The job's: its spec, image, inputs or its own run (the submitter's to fix).
    Job,
    /// The node's: reclaimed, a lost dispute, or given back for the node's own trouble.
    Node,
}

impl AttemptFault {
    /// How a worker's reject reason starts when the node, not the job, is at fault (the
    /// worker's `GiveBack` reasons); any other reason is the job's.
    pub const NODE_REASONS: [&'static str; 5] = [
        "node fault",
        "node unhealthy",
        "over capacity",
        "the node is shutting down",
        "no time left",
    ];

    /// Whose fault a reject with `reason` is, as its worker tells it: the chain does not
    /// check a reject's reason (a reject costs the node the same either way), so this is
    /// the provider's word, shown as such.
    pub fn of_reject(reason: &str) -> Self {
        if Self::NODE_REASONS.iter().any(|p| reason.starts_with(p)) {
            Self::Node
        } else {
            Self::Job
        }
    }
}

/// Why a node was charged on a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum ChargeCause {
    /// Its agent gave the job back (`JobRejected`): charged by the time held past the market's grace.
    #[default]
    Reject,
    /// Reclaimed: the node was marked inactive during the attempt.
    NodeInactive,
    /// Reclaimed: the attempt ran past its runtime.
    RuntimeExceeded,
    /// The arbiter decided the dispute for the submitter: the exposure is slashed.
    DisputeLost,
}

/// How a job's bounty reached its node (`CompletionKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum Completion {
    /// The submitter accepted the result.
    Accepted,
    /// The challenge window ended without a dispute.
    Finalized,
    /// The arbiter decided for the provider, who won the bond too.
    DisputeWon,
    /// The arbiter did not decide in time: the result stands.
    DisputeLapsed,
    /// A refereed job's referees upheld the provider's result by a majority.
    RefereesUpheld,
    /// A replicated job's quorum revealed one digest (`JobVerified`): the seats that
    /// revealed it were paid (not a `CompletionKind`: no `JobCompleted` is emitted).
    Verified,
}

/// Why a job ended without paying a node (`FailureKind`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub enum Failure {
    OutOfAttempts,
    PastDeadline,
    DisputeLost,
    /// A replicated job's reveals reached no quorum.
    NoQuorum,
    /// A refereed job's referees overturned the provider's result by a majority.
    RefereesOverturned,
}

impl Completion {
    /// `CompletionKind` by its value in the contract; `None` for a value it does not
    /// define.
    pub fn from_kind(kind: u8) -> Option<Self> {
        [
            Self::Accepted,
            Self::Finalized,
            Self::DisputeWon,
            Self::DisputeLapsed,
            Self::RefereesUpheld,
        ]
        .get(usize::from(kind))
        .copied()
    }
}

impl Failure {
    /// `FailureKind` by its value in the contract; `None` for a value it does not define.
    pub fn from_kind(kind: u8) -> Option<Self> {
        [
            Self::OutOfAttempts,
            Self::PastDeadline,
            Self::DisputeLost,
            Self::NoQuorum,
            Self::RefereesOverturned,
        ]
        .get(usize::from(kind))
        .copied()
    }
}

impl ChargeCause {
    /// The cause of a reclaim of `ReclaimKind` `kind`; `None` for a value the contract
    /// does not define.
    pub fn of_reclaim(kind: u8) -> Option<Self> {
        [Self::NodeInactive, Self::RuntimeExceeded]
            .get(usize::from(kind))
            .copied()
    }
}

/// A node as the API shows it: capabilities, status, and its money in the market.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeRow {
    pub node_id: u64,
    pub operator: String,
    pub agent: String,
    pub status: NodeStatus,
    pub gpu_model: String,
    pub gpu_count: u64,
    pub vram_mib: u64,
    pub cpu_cores: u64,
    pub ram_mib: u64,
    pub price_per_gpu_hour: String,
    pub max_concurrent_jobs: u64,
    /// The engines it runs (`docker`, `wasm`).
    #[serde(default)]
    pub engines: Vec<String>,
    /// Whether it is in the verification pool, which verified jobs' seats are drawn from.
    #[serde(default)]
    pub in_pool: bool,
    pub metadata_uri: String,
    /// Its stake, as the market holds it (after slashes and withdrawals).
    pub stake: String,
    /// The part of the stake held for open disputes of its results (their exposure).
    pub locked_stake: String,
    /// Those disputes: the job and the exposure held for it.
    pub disputes: Vec<HeldStake>,
    /// Taken from its stake to the treasury, in all (see `NodeDetail::slashes`).
    pub slashed: String,
    /// Pay credited (payouts and bonds won) and not yet withdrawn.
    pub earnings: String,
    /// Earnings its operator withdrew.
    pub earnings_withdrawn: String,
    /// Protocol fees of its paid jobs, owed to the treasury until swept.
    pub fees_owed: String,
    /// Fees swept into the treasury.
    pub fees_swept: String,
    /// Stake its operator withdrew after exiting.
    pub stake_withdrawn: String,
    /// Jobs assigned to it and not yet answered (its taken slots).
    pub active_jobs: u64,
    pub completed_jobs: u64,
    /// Reclaimed attempts and lost disputes: the failures its reputation counts.
    pub failed_jobs: u64,
    /// Jobs its agent gave back.
    pub rejected_jobs: u64,
    pub last_heartbeat: u64,
    pub registered_at: u64,
    /// When it was last marked inactive (by its agent or for a missed heartbeat; a slash
    /// below the minimum stake stops its new work without it): jobs assigned before then
    /// are reclaimable.
    pub inactive_since: Option<u64>,
    /// Exiting: when its stake may be withdrawn.
    pub unbonding_ends_at: Option<u64>,
    pub updated_block: u64,
}

/// Stake held for an open dispute.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct HeldStake {
    pub job_id: u64,
    pub exposure: String,
}

/// One slash of a node's stake (`NodeSlashed`): on which job, how much, what was left.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SlashRow {
    pub job_id: u64,
    pub amount: String,
    /// The stake left.
    pub stake: String,
    pub block: u64,
    pub at: u64,
    pub tx: String,
}

/// An account's credits in the market (a submitter's, or anyone's who deposited): what
/// it can post jobs from and withdraw, and every flow in and out of them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AccountRow {
    /// Lowercase 0x address.
    pub account: String,
    /// Its credits now (`creditOf`).
    pub credits: String,
    /// Deposited into credits.
    pub deposited: String,
    /// Credits withdrawn.
    pub withdrawn: String,
    /// Bounties of jobs it posted, in all (escrowed from credits first, then tokens).
    pub bounties: String,
    /// The part of those bounties taken from credits.
    pub from_credits: String,
    /// Bounties credited back (failed, cancelled and expired jobs).
    pub refunded: String,
    /// Dispute bonds it posted (from its tokens).
    pub bonds_posted: String,
    /// Dispute bonds credited back.
    pub bonds_returned: String,
    pub jobs_posted: u64,
    pub updated_block: u64,
}

/// A node as listed: its row, its reputation and how long ago it last beat.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    #[serde(flatten)]
    pub node: NodeRow,
    /// Smoothed success rate, 0 to 1 (a new node: 0.5), as the matcher scores it.
    pub reputation: f64,
    /// Seconds since its last heartbeat, by the later of this clock and the chain's.
    pub heartbeat_age_secs: u64,
    /// Why it takes no new work, from the chain's facts; `null` while it takes work.
    pub takes_no_work: Option<NoWork>,
}

impl NodeView {
    /// The node as listed at `now` (unix seconds), with the market's minimum stake (base
    /// units, as its last `MarketParamsUpdated` said; `None`: not known).
    pub fn new(node: NodeRow, now: u64, min_stake: Option<&str>) -> Self {
        Self {
            reputation: crate::reputation::reputation(node.completed_jobs, node.failed_jobs),
            heartbeat_age_secs: now.saturating_sub(node.last_heartbeat),
            takes_no_work: NoWork::of(&node, min_stake),
            node,
        }
    }
}

/// Why a node takes no new work: `reason` is one of `exited`, `exiting`,
/// `stake_below_minimum` (slashed below the market's minimum: inactive until its operator
/// tops it up) and `inactive` (marked inactive for a missed heartbeat or by its agent; its
/// next heartbeat makes it active again), the first that applies.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NoWork {
    pub reason: String,
    /// Since when, unix seconds, where the chain says (inactive: when it was marked).
    pub since: Option<u64>,
    /// The reason as a sentence.
    pub why: String,
}

impl NoWork {
    /// Why `node` takes no new work, if it does not, given the market's minimum stake.
    pub fn of(node: &NodeRow, min_stake: Option<&str>) -> Option<Self> {
        let no_work = |reason: &str, since: Option<u64>, why: String| {
            Some(Self {
                reason: reason.into(),
                since,
                why,
            })
        };
        let amount = |text: &str| text.parse::<alloy::primitives::U256>().ok();
        let below_minimum = match (amount(&node.stake), min_stake.and_then(amount)) {
            (Some(stake), Some(min)) => (stake < min).then_some(min),
            _ => None,
        };
        match node.status {
            NodeStatus::Exited => no_work("exited", None, "exited: its stake was withdrawn".into()),
            NodeStatus::Exiting => no_work(
                "exiting",
                None,
                "exiting: it takes no new jobs while its stake unbonds".into(),
            ),
            _ if below_minimum.is_some() => no_work(
                "stake_below_minimum",
                node.inactive_since,
                format!(
                    "its stake {} is below the market's minimum {}: no new jobs until its \
                     operator tops it up (gantry node topup)",
                    node.stake,
                    below_minimum.unwrap_or_default()
                ),
            ),
            NodeStatus::Inactive => no_work(
                "inactive",
                node.inactive_since,
                "inactive: marked for a missed heartbeat or by its agent; its worker's next \
                 heartbeat makes it active again"
                    .into(),
            ),
            _ => None,
        }
    }
}

/// One event of a job's timeline.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TimelineEntry {
    pub block: u64,
    pub log_index: u64,
    pub at: u64,
    pub tx: String,
    pub name: String,
    pub data: serde_json::Value,
}

/// A page of a list; `nextCursor` fetches the next one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub items: Vec<T>,
    pub next_cursor: Option<String>,
}

/// A job in a list: what a table of jobs shows, and the latest progress its worker
/// reported. The whole row is the job's document (`GET /v1/jobs/{id}`) and the live feed's
/// `job` events.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    #[serde(flatten)]
    pub job: JobBrief,
    pub progress: Option<ProgressUpdate>,
}

/// A job in brief: the fields of its row a list shows (the API keeps it ready, as JSON,
/// beside the row; a list page is those texts put together).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobBrief {
    pub job_id: u64,
    pub submitter: String,
    pub status: JobStatus,
    /// `docker`, `wasm` (as the row's `engine`).
    pub engine: String,
    /// What it runs: a Docker job's image, a WASM job's module URI, as its spec names them
    /// (none when the posted bytes are not a spec workers run).
    pub runs: Option<String>,
    pub priority: u64,
    pub bounty: String,
    pub deadline: u64,
    pub max_runtime: u64,
    pub gpus: u64,
    pub attempts: u64,
    pub node_id: Option<u64>,
    pub assigned_at: Option<u64>,
    pub until: Option<u64>,
    pub posted_at: u64,
    pub updated_at: u64,
}

impl From<&JobRow> for JobBrief {
    fn from(row: &JobRow) -> Self {
        // As the terms say what runs it (the list's engine column).
        let runs = row.spec.as_ref().and_then(|spec| spec.runs(&row.engine));
        Self {
            job_id: row.job_id,
            submitter: row.submitter.clone(),
            status: row.status,
            engine: row.engine.clone(),
            runs,
            priority: row.priority,
            bounty: row.bounty.clone(),
            deadline: row.deadline,
            max_runtime: row.max_runtime,
            gpus: row.gpus,
            attempts: row.attempts,
            node_id: row.node_id,
            assigned_at: row.assigned_at,
            until: row.until,
            posted_at: row.posted_at,
            updated_at: row.updated_at,
        }
    }
}

/// `GET /v1/jobs/{id}`: the row, its timeline, what its workers reported, and why it
/// waits while it is open. The answer is built by the database (gantry-api's
/// `Store::job_document`); this type describes it (OpenAPI) and reads it back (tests,
/// clients).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct JobDetail {
    #[serde(flatten)]
    pub job: JobRow,
    pub timeline: Vec<TimelineEntry>,
    /// The latest progress the worker reported.
    pub progress: Option<ProgressUpdate>,
    /// The workers' completion reports, by attempt.
    pub completions: Vec<CompletionReport>,
    /// While the job is open: the matcher's explanation of why it is not placed; while a
    /// verified job is in its draw, commit, reveal or arbitration: the keeper's of what
    /// it waits for.
    pub pending: Option<PendingExplanation>,
}

/// `GET /v1/nodes/{id}`: the node, the jobs it is running and its slashes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NodeDetail {
    #[serde(flatten)]
    pub node: NodeView,
    /// Its assigned, submitted and disputed jobs, newest first.
    pub jobs: Vec<JobRow>,
    /// Its slashes with their jobs, newest first (the last 100).
    pub slashes: Vec<SlashRow>,
}

/// `GET /v1/stats`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    pub jobs_by_status: BTreeMap<String, u64>,
    pub nodes_by_status: BTreeMap<String, u64>,
    pub active_nodes: u64,
    /// GPUs on active nodes.
    pub active_gpus: u64,
    /// GPU-hours the network's nodes ran jobs for.
    pub gpu_hours: f64,
    /// Bounties posted (token base units).
    pub volume: String,
    /// Paid to providers (token base units).
    pub paid_to_providers: String,
    /// Protocol fees taken from payouts.
    pub fees: String,
    /// Bounties credited back to submitters.
    pub refunded: String,
    /// Taken from nodes' stakes to the treasury (rejects, reclaims, lost disputes).
    pub slashed: String,
    /// The treasury's balance in the market: swept fees and slashes, less what it
    /// withdrew (`treasuryBalance`).
    pub treasury: String,
    /// Stake of every node, and the part of it held for open disputes.
    pub stake: String,
    pub locked_stake: String,
    /// The policy version new jobs get (0 before the market announced one).
    pub policy_version: u64,
    /// Whether the market takes no new jobs and nodes (`PausedSet`).
    pub paused: bool,
}

/// `GET /v1/stats/history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct History {
    /// Every minute of the window, oldest first.
    pub buckets: Vec<Minute>,
}

/// One minute of `GET /v1/stats/history`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Minute {
    /// Unix seconds of the minute's start.
    pub at: u64,
    pub posted: u64,
    pub completed: u64,
    /// Failed or expired.
    pub failed: u64,
    /// GPUs of the jobs that reported progress in the minute.
    pub gpus_in_use: u64,
    /// Their mean GPU utilisation, percent.
    pub gpu_utilization: Option<f64>,
}

/// `GET /v1/token`: the payment token, for showing amounts (base units as decimal
/// strings everywhere else).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TokenInfo {
    pub symbol: String,
    /// Base units per token: 10^decimals.
    pub decimals: u8,
}

/// `GET /v1/network`: the chain and contracts the API projects, for a browser that sends
/// transactions through its wallet (the market serves the node calls too).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct NetworkInfo {
    pub chain_id: u64,
    /// The market's address; none when the API was not told (`--market`).
    pub market: Option<String>,
    /// The payment token's address; none when the API was not told (`--token`).
    pub token: Option<String>,
    /// The block the market was deployed in (where its logs start).
    pub start_block: u64,
    /// A JSON-RPC endpoint a wallet may add for this chain; none when not public.
    pub rpc_url: Option<String>,
    /// The NATS servers workers join (by the handshake); none when not public.
    pub nats_url: Option<String>,
    pub token_symbol: String,
    pub token_decimals: u8,
}

impl Default for TokenInfo {
    /// The dev network's token.
    fn default() -> Self {
        Self {
            symbol: "gUSD".into(),
            decimals: 6,
        }
    }
}

/// The body of every error answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ErrorBody {
    pub error: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_view_flattens_its_row_and_scores_it() {
        let row = NodeRow {
            node_id: 2,
            completed_jobs: 8,
            last_heartbeat: 100,
            ..NodeRow::default()
        };
        let view = NodeView::new(row, 130, None);
        assert_eq!(view.reputation, 0.9);
        assert_eq!(view.heartbeat_age_secs, 30);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["nodeId"], 2);
        assert_eq!(json["heartbeatAgeSecs"], 30);
        assert_eq!(serde_json::from_value::<NodeView>(json).unwrap(), view);
        // A heartbeat ahead of this clock is no negative age.
        let ahead = NodeRow {
            last_heartbeat: 135,
            ..NodeRow::default()
        };
        assert_eq!(NodeView::new(ahead, 130, None).heartbeat_age_secs, 0);
    }

    #[test]
    fn a_node_says_why_it_takes_no_work_from_the_chain_s_facts() {
        let node = |status, stake: &str, inactive_since| NodeRow {
            status,
            stake: stake.into(),
            inactive_since,
            ..NodeRow::default()
        };
        let check = |row: NodeRow, min: Option<&str>, expected: Option<(&str, Option<u64>)>| {
            let no_work = NodeView::new(row, 0, min).takes_no_work;
            assert_eq!(
                no_work.as_ref().map(|n| (n.reason.as_str(), n.since)),
                expected,
                "{no_work:?}"
            );
        };
        let min = Some("100000000");
        check(node(NodeStatus::Active, "150000000", None), min, None);
        check(
            node(NodeStatus::Inactive, "150000000", Some(40)),
            min,
            Some(("inactive", Some(40))),
        );
        check(
            node(NodeStatus::Inactive, "90000000", None),
            min,
            Some(("stake_below_minimum", None)),
        );
        // The minimum not known: only the status speaks.
        check(
            node(NodeStatus::Inactive, "90000000", None),
            None,
            Some(("inactive", None)),
        );
        check(
            node(NodeStatus::Exiting, "90000000", None),
            min,
            Some(("exiting", None)),
        );
        check(
            node(NodeStatus::Exited, "0", None),
            min,
            Some(("exited", None)),
        );
        let view = NodeView::new(node(NodeStatus::Inactive, "90000000", None), 0, min);
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(json["takesNoWork"]["reason"], "stake_below_minimum");
        assert!(
            json["takesNoWork"]["why"]
                .as_str()
                .unwrap()
                .contains("gantry node topup"),
            "{json}"
        );
    }

    #[test]
    fn a_spec_is_kept_as_posted_and_read_back_from_text_a_tree_and_a_flattened_row() {
        let posted = br#" {"version":1,"image":"busybox","env":{"B":"2","A":"1"}} "#;
        let spec = SpecJson::from_posted(posted).expect("JSON");
        // The posted text, its keys in the posted order, trimmed.
        assert_eq!(
            spec.get(),
            r#"{"version":1,"image":"busybox","env":{"B":"2","A":"1"}}"#
        );
        // Equal as JSON values, whatever the order of their keys.
        let reordered = br#"{"env":{"A":"1","B":"2"},"image":"busybox","version":1}"#;
        assert_eq!(SpecJson::from_posted(reordered).as_ref(), Some(&spec));
        let other = br#"{"env":{"A":"1","B":"3"},"image":"busybox","version":1}"#;
        assert_ne!(SpecJson::from_posted(other).as_ref(), Some(&spec));
        assert!(SpecJson::from_posted(b"{\"a\":").is_none());
        // Deeper than a tree is read: kept as text, no panic, unequal to another.
        let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let deep = SpecJson::from_posted(deep.as_bytes()).expect("a raw value");
        assert_eq!(deep.to_value(), serde_json::Value::Null);
        assert_ne!(Some(&deep), SpecJson::from_posted(b"[1]").as_ref());
        assert!(SpecJson::from_posted(b"\xff").is_none());
        let row = JobRow {
            spec: Some(spec.clone()),
            engine: "docker".into(),
            ..JobRow::default()
        };
        let text = serde_json::to_string(&row).unwrap();
        assert!(text.contains(r#""spec":{"version":1,"image":"busybox","env":{"B":"2","A":"1"}}"#));
        // From JSON text (how the API reads its rows): the same text.
        let read: JobRow = serde_json::from_str(&text).unwrap();
        assert_eq!(read, row);
        // From a tree, and inside a detail (flattened: serde buffers it): the same value.
        let tree: JobRow = serde_json::from_value(serde_json::to_value(&row).unwrap()).unwrap();
        assert_eq!(tree.spec.unwrap().to_value(), spec.to_value());
        let detail = JobDetail {
            job: row.clone(),
            ..JobDetail::default()
        };
        let again: JobDetail =
            serde_json::from_str(&serde_json::to_string(&detail).unwrap()).unwrap();
        assert_eq!(again.job.spec.unwrap().to_value(), spec.to_value());
        // What runs it, for the list.
        assert_eq!(JobBrief::from(&row).runs.as_deref(), Some("busybox"));
        let wasm = JobRow {
            spec: SpecJson::from_posted(br#"{"wasm":{"module":{"uri":"ipfs://m"}},"image":""}"#),
            engine: "wasm".into(),
            ..JobRow::default()
        };
        assert_eq!(JobBrief::from(&wasm).runs.as_deref(), Some("ipfs://m"));
        let odd = JobRow {
            spec: SpecJson::from_posted(br#"{"image":7}"#),
            engine: "docker".into(),
            ..JobRow::default()
        };
        assert_eq!(JobBrief::from(&odd).runs, None);
    }

    #[test]
    fn a_job_detail_reads_the_document_the_database_builds_and_ignores_unknown_fields() {
        // As the database builds it: JSON text.
        let detail: JobDetail = serde_json::from_str(
            r#"{
            "jobId": 3, "submitter": "0x1", "status": "disputed", "attempts": 1, "faults": 0,
            "barred": 0, "barredNodes": [], "bounty": "12500000", "fromCredits": "0",
            "deadline": 100, "maxRuntime": 60, "specHash": "0x2", "spec": {},
            "requirements": {"gpuModel": "0x0", "minGpuCount": 0, "minVramMiB": 0,
                "minCpuCores": 1, "minRamMiB": 0, "maxPricePerGpuHour": "1", "maxRuntime": 60,
                "priority": 1, "engine": 0}, "priority": 1, "policyVersion": 1,
            "policy": {"version": 1, "feeBps": 250, "challengeWindow": 30,
                "disputeBond": "10000000", "disputePeriod": 300, "slashBps": 1000,
                "maxAttempts": 3},
            "nodeId": 2, "claimed": false, "assignedAt": 50, "until": 400,
            "resultHash": "0x4", "resultUri": "ipfs://out",
            "dispute": {"bond": "10000000", "exposure": "40000000", "disputedAt": 100,
                "deadline": 400, "outcome": null},
            "charges": [{"nodeId": 1, "cause": "reject", "amount": "0", "at": 45}],
            "attemptRows": [{"attempt": 1, "nodeId": 1, "claimed": true, "assignedAt": 41,
                "endedAt": 45, "outcome": "rejected", "fault": "job",
                "reason": "invalid spec: no image", "slashed": "0", "slashedTo": null},
                {"attempt": 2, "nodeId": 2, "claimed": false, "assignedAt": 50,
                "endedAt": 60, "outcome": "submitted", "fault": "none", "reason": null,
                "slashed": "0", "slashedTo": null}],
            "payout": null, "fee": null, "completion": null, "refund": null, "failure": null,
            "reason": null, "termsHash": "0x5", "stateHash": "0x6", "postedBlock": 4,
            "postedAt": 40, "updatedBlock": 5, "updatedAt": 50, "gpus": 1, "gpuSeconds": 0,
            "timeline": [{"block": 5, "logIndex": 0, "at": 50, "tx": "0x3",
                "name": "JobAssigned", "data": {"jobId": 3}}],
            "progress": null, "completions": [], "pending": null, "addedLater": true
        }"#,
        )
        .unwrap();
        assert_eq!(detail.job.job_id, 3);
        assert_eq!(detail.job.node_id, Some(2));
        let dispute = detail.job.dispute.as_ref().expect("the dispute");
        assert_eq!(
            (dispute.bond.as_str(), dispute.exposure.as_str()),
            ("10000000", "40000000")
        );
        assert_eq!(detail.job.charges[0].cause, ChargeCause::Reject);
        let first = &detail.job.attempt_rows[0];
        assert_eq!(
            (first.outcome, first.fault, first.reason.as_deref()),
            (
                AttemptOutcome::Rejected,
                AttemptFault::Job,
                Some("invalid spec: no image")
            )
        );
        assert_eq!(detail.timeline[0].name, "JobAssigned");
        let again = serde_json::to_value(&detail).unwrap();
        assert_eq!(serde_json::from_value::<JobDetail>(again).unwrap(), detail);
    }

    #[test]
    fn a_reject_is_the_nodes_fault_only_for_the_nodes_own_reasons() {
        for (reason, fault) in [
            ("node fault: disk full", AttemptFault::Node),
            (
                "node unhealthy: docker engine unreachable",
                AttemptFault::Node,
            ),
            (
                "over capacity: the node runs 2 job(s) at once",
                AttemptFault::Node,
            ),
            ("the node is shutting down", AttemptFault::Node),
            (
                "no time left to run the job before its attempt ends",
                AttemptFault::Node,
            ),
            ("invalid spec: no image", AttemptFault::Job),
            ("sha256 mismatch for input data", AttemptFault::Job),
            ("image not found", AttemptFault::Job),
            // Only at the start: a job's reason quoting the words is still the job's.
            ("invalid spec: command says node fault", AttemptFault::Job),
        ] {
            assert_eq!(AttemptFault::of_reject(reason), fault, "{reason}");
        }
        assert_eq!(
            serde_json::to_value(AttemptOutcome::ReclaimedNodeInactive).unwrap(),
            serde_json::json!("reclaimedNodeInactive")
        );
        // A row from before attempts were kept reads with none.
        let old: JobRow = serde_json::from_value(serde_json::json!({
            "jobId": 1, "submitter": "0x1", "status": "open", "attempts": 0, "faults": 0,
            "barred": 0, "barredNodes": [], "bounty": "1", "fromCredits": "0", "deadline": 9,
            "maxRuntime": 1, "specHash": "0x2", "spec": {}, "requirements": {"gpuModel": "0x0", "minGpuCount": 0, "minVramMiB": 0,
                "minCpuCores": 1, "minRamMiB": 0, "maxPricePerGpuHour": "1", "maxRuntime": 60,
                "priority": 1, "engine": 0},
            "priority": 0, "policyVersion": 1, "policy": null, "nodeId": null,
            "claimed": false, "assignedAt": null, "until": null, "resultHash": null,
            "resultUri": null, "dispute": null, "charges": [], "payout": null, "fee": null,
            "completion": null, "refund": null, "failure": null, "reason": null,
            "termsHash": "0x3", "stateHash": null, "postedBlock": 1, "postedAt": 1,
            "updatedBlock": 1, "updatedAt": 1, "gpus": 1, "gpuSeconds": 0
        }))
        .unwrap();
        assert!(old.attempt_rows.is_empty());
    }

    #[test]
    fn contract_kinds_read_as_names_and_unknown_values_as_none() {
        assert_eq!(Completion::from_kind(3), Some(Completion::DisputeLapsed));
        assert_eq!(Completion::from_kind(4), Some(Completion::RefereesUpheld));
        assert_eq!(Completion::from_kind(5), None);
        assert_eq!(Failure::from_kind(2), Some(Failure::DisputeLost));
        assert_eq!(Failure::from_kind(3), Some(Failure::NoQuorum));
        assert_eq!(Failure::from_kind(4), Some(Failure::RefereesOverturned));
        assert_eq!(Failure::from_kind(5), None);
        assert_eq!(
            ChargeCause::of_reclaim(1),
            Some(ChargeCause::RuntimeExceeded)
        );
        assert_eq!(ChargeCause::of_reclaim(2), None);
        assert_eq!(
            serde_json::to_value(Completion::DisputeWon).unwrap(),
            serde_json::json!("disputeWon")
        );
    }
}
