// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

// The engine a job runs on (`JobRequirements.engine`); a node runs a set of them
// (`NodeCapabilities.engines`, bit `1 << engine`). Docker runs an image, on GPUs or not;
// WASM runs a WebAssembly module on the CPU, embedded in the worker. `ENGINE_COUNT`: how
// many there are; a node's set has no bit at or above it.
uint8 constant ENGINE_DOCKER = 0;
uint8 constant ENGINE_WASM = 1;
uint8 constant ENGINE_COUNT = 2;
// A node's opt-in to verified Docker jobs, bit `1 << DETERMINISTIC_DOCKER` of its `engines`
// beside the Docker bit: it runs a replicated job's CPU container in the worker's
// deterministic sandbox (design 18, §1). Seats of a replicated Docker job are drawn only
// from such nodes. Not an engine: no job names it.
uint8 constant DETERMINISTIC_DOCKER = 7;

// A job's verification tier (`Verification.tier`, in its terms): `VERIFY_NONE` is the
// optimistic challenge window of `IJobMarket`; the other two are `IVerification`'s:
// replicated execution with commit-reveal, and a provider whose disputed result is
// re-executed by drawn referees.
uint8 constant VERIFY_NONE = 0;
uint8 constant VERIFY_REPLICATED = 1;
uint8 constant VERIFY_REFEREED = 2;

/// @notice What a node offers. Set at registration, changeable by the operator; the market
/// keeps what it checks in the node's first slot (the model as a 6-byte tag).
struct NodeCapabilities {
    /// GPU model id (e.g. `bytes32("NVIDIA-H100-80GB")`); zero means the node has no GPU.
    bytes32 gpuModel;
    uint16 gpuCount;
    /// Memory per GPU, MiB.
    uint32 vramMiB;
    uint16 cpuCores;
    /// Host memory, MiB.
    uint32 ramMiB;
    /// Price per GPU-hour in payment-token units.
    uint96 pricePerGpuHour;
    /// How many jobs the node runs at once (1..255).
    uint8 maxConcurrentJobs;
    /// The engines the node runs, a set: bit `1 << engine` (`ENGINE_DOCKER`,
    /// `ENGINE_WASM`); at least one. Bit `1 << DETERMINISTIC_DOCKER`, beside the Docker
    /// bit, opts into verified Docker seats.
    uint8 engines;
}

/// @notice What the chain can check about a job before it is assigned.
struct JobRequirements {
    /// Required GPU model id; zero accepts any model.
    bytes32 gpuModel;
    uint16 minGpuCount;
    uint32 minVramMiB;
    uint16 minCpuCores;
    uint32 minRamMiB;
    /// Highest node price per GPU-hour the submitter accepts.
    uint96 maxPricePerGpuHour;
    /// Longest an attempt may run, seconds, counted from its assignment (the one clock).
    uint32 maxRuntime;
    /// Scheduling priority, 1 (lowest) to 10 (highest); used by the matcher.
    uint8 priority;
    /// The engine the job runs on (`ENGINE_DOCKER`, `ENGINE_WASM`); its spec names the same
    /// one. A WASM job runs on the CPU: it requires no GPU.
    uint8 engine;
}

/// @notice Everything a job was posted with, fixed for its whole life: the submitter's
/// choices and the market policy in force when it was posted. Never stored: its hash is in
/// the job's state, and calls that need a field pass the terms (as `JobPosted` emitted
/// them) for the market to check against that hash. Packed into five words to keep
/// calldata and logs small; `JobCodec` reads and writes them, and
/// `gantry_protocol::market::Terms` mirrors it.
struct JobTerms {
    /// submitter (high 160 bits) | bounty (low 96 bits).
    uint256 party;
    /// keccak256 of the job spec emitted in `JobPosted`.
    bytes32 specHash;
    /// Required GPU model id; zero accepts any model.
    bytes32 gpuModel;
    /// From the high bits: engine 8 | deadline 40 | maxRuntime 32 | minGpuCount 16 |
    /// minVramMiB 32 | minCpuCores 16 | minRamMiB 32 | priority 8 | policy 32 (216 bits,
    /// low-aligned).
    uint256 limits;
    /// Highest node price per GPU-hour the submitter accepts.
    uint256 maxPricePerGpuHour;
}

/// @notice The market's rules for a job: the version in force when a job is posted stays
/// the job's (`JobMarket.policy(version)`); a parameter change adds a version.
struct JobPolicy {
    /// Protocol fee on the payout, basis points.
    uint16 feeBps;
    /// Time after a result during which the submitter may dispute, seconds.
    uint32 challengeWindow;
    /// Smallest dispute bond, token units; a job's bond is the larger of this and
    /// `MIN_BOND_BPS` of its bounty.
    uint96 disputeBond;
    /// Time the arbiter has to resolve a dispute before its default outcome applies.
    uint32 disputePeriod;
    /// Share of a node's stake taken per fault, basis points.
    uint16 slashBps;
    /// Faulted attempts after which the job fails and is refunded.
    uint8 maxAttempts;
}

/// @notice A verified job's policy, posted with it and kept in its terms (`limits`' high
/// 40 bits).
struct VerifyPolicy {
    /// `VERIFY_REPLICATED` or `VERIFY_REFEREED`.
    uint8 tier;
    /// Replicated: n, the nodes that run the job (3..5). Refereed: r, the referees a
    /// dispute draws (3 or 5).
    uint8 size;
    /// Replicated: k, the reveals of one digest that decide (2k > n, k <= n - 1).
    /// Refereed: 0 (the majority of r decides).
    uint8 quorum;
    /// Seconds between the end of the commit phase and the end of the reveal phase; at
    /// least the policy's `minRevealWindow`.
    uint16 revealWindow;
}

/// @notice The verification rules of a market policy version (`IVerification.verifyParams`).
/// All amounts in token units.
struct VerifyParams {
    /// Free stake (stake - locked) a node needs to be in the verification pool: the price
    /// of one ticket in the draw. Zero: verified jobs are not offered.
    uint96 poolFloor;
    /// Smallest seat stake (<= poolFloor).
    uint96 seatFloor;
    /// A seat stake is at least this multiple of the bounty, basis points.
    uint32 seatBps;
    /// Smallest bounty of a verified job.
    uint96 minVerifiedBounty;
    /// Smallest reveal window, seconds: well above finality and congestion.
    uint32 minRevealWindow;
    /// A draw from a smaller pool seats nobody.
    uint16 minPool;
}

/// @notice A verified job's mutable state (five words; a tier-none job's `JobState` is two,
/// so no `JobMarket` call can act on a verified job: its hash never matches).
struct VerifiedState {
    /// keccak256(abi.encode(JobTerms)).
    bytes32 terms;
    /// `JobState.fields`' layout (status, faults, barred, nodeId, until, bounty, feeBps,
    /// challengeWindow). `until`: the end of the commit phase while Committing.
    uint256 fields;
    /// Seat i's node id at bits [48i, 48i + 47], i < 5; 0: the seat is empty.
    uint256 seats;
    /// drawBlock 40 @0 | rounds 8 @40 | commitEnd 40 @48 | seatStake 96 @88 | paid 8 @184
    /// (Arbitrating: the referees paid from the prepay, whom a lost arbitration repays).
    uint256 draw;
    /// Refereed: the provider's result hash once submitted; otherwise 0.
    bytes32 result;
}

/// @notice One seat of a verified job (`_seats[job][i]` holds its hash; 0: empty).
struct Seat {
    /// phase 8 @248 (1 Seated, 2 Committed, 3 Revealed) | nodeId 48 @200 | seatedAt 40 @160
    /// | until 40 @120 | locked 96 @0 (the seat stake locked from the node: the job's seat
    /// stake, held until the seat is freed or the job decided).
    uint256 fields;
    /// keccak256(abi.encode(chainid, market, jobId, seat, nodeId, digest, salt)); 0 until
    /// committed.
    bytes32 seal;
    /// The revealed result digest; 0 until revealed.
    bytes32 digest;
}

/// @notice A job's mutable state. The market stores only its hash (one word per job);
/// every call that changes a job passes the current state, which any consumer folds from
/// the job's events (`gantry_protocol::market::State`). A stale state is refused.
struct JobState {
    /// keccak256(abi.encode(JobTerms)).
    bytes32 terms;
    /// From the high bits: status 8 | faults 8 | barred 8 | nodeId 48 | until 40 |
    /// bounty 96 | feeBps 16 | challengeWindow 32 (see `JobCodec`).
    ///   faults: attempts that ended in the node's fault (reclaimed);
    ///   barred: nodes that gave the job back or faulted on it (each is barred from it);
    ///   nodeId: the node of the current attempt (0 when Open);
    ///   until: Assigned, end of the attempt's runtime; Submitted, end of the challenge
    ///     window; Disputed, the arbiter's deadline; Open, 0;
    ///   bounty, feeBps, challengeWindow: copies of the terms and policy the hot path needs.
    uint256 fields;
}

/// @notice Lifecycle of a node.
/// None -> Active <-> Inactive; Active|Inactive -> Exiting -> Exited.
enum NodeStatus {
    None,
    Active,
    Inactive,
    Exiting,
    Exited
}

/// @notice Lifecycle of a job.
/// Open -> Assigned -> Submitted -> Completed, with
///   Assigned -> Open (requeued after a reject or a reclaim) or Failed (out of attempts or time),
///   Submitted -> Disputed -> Completed | Failed,
///   Open -> Cancelled | Expired.
/// A verified job (`IVerification`) also passes through Committing (seats drawn, results
/// committed), Revealing (commitments opened) and Arbitrating (a refereed dispute the
/// referees did not settle).
/// Completed, Failed, Cancelled and Expired are terminal: the bounty has been paid or refunded
/// and the job's storage word is cleared.
enum JobStatus {
    None,
    Open,
    Assigned,
    Submitted,
    Disputed,
    Completed,
    Failed,
    Cancelled,
    Expired,
    Committing,
    Revealing,
    Arbitrating
}

/// @notice How a job's bounty reached the provider.
enum CompletionKind {
    /// The submitter accepted the result.
    Accepted,
    /// The challenge window ended without a dispute.
    Finalized,
    /// The arbiter decided for the provider; the bond went to the provider.
    DisputeWon,
    /// The arbiter did not decide in time: the result stands, the bond went back.
    DisputeLapsed,
    /// A refereed job's referees revealed the provider's result by a majority: the bond
    /// went to the provider.
    RefereesUpheld
}

/// @notice Why a job ended without payment to a provider.
enum FailureKind {
    OutOfAttempts,
    PastDeadline,
    DisputeLost,
    /// A replicated job's reveals did not reach its quorum (`IVerification.decide`): seats
    /// whose digest matched another's were paid, the rest of the escrow refunded.
    NoQuorum,
    /// A refereed job's referees revealed another result by a majority: the provider's
    /// seat stake was slashed, the submitter got back all it put in.
    RefereesOverturned
}

/// @notice Why an assignment was taken back from a node (always the node's fault).
enum ReclaimKind {
    /// The node was marked Inactive after the job was assigned to it.
    NodeInactive,
    /// The attempt ran past the job's max runtime.
    RuntimeExceeded
}

/// @notice Market parameters, changeable by the admin (a timelock). Jobs keep the values
/// in force when they were posted.
struct MarketParams {
    /// Receives fees, slashes and reject charges.
    address treasury;
    /// Time after a result during which the submitter may dispute, seconds (> 0).
    uint32 challengeWindow;
    /// Protocol fee on each payout, basis points (0..1000).
    uint16 protocolFeeBps;
    /// Faulted attempts a job gets before it fails (1..255).
    uint8 maxAttempts;
    /// Smallest bond a dispute takes, token units (> 0); a job's bond is the larger of
    /// this and a tenth of its bounty.
    uint96 disputeBond;
    /// Time the arbiter has to resolve a dispute, seconds (> 0).
    uint32 disputePeriod;
    /// Share of a node's stake taken per fault, basis points (0..10000).
    uint16 slashBps;
    /// Smallest stake a node registers with; a node slashed below it is made Inactive.
    uint96 minStake;
    /// A node whose last heartbeat is older than this (seconds) may be marked Inactive.
    uint32 heartbeatTimeout;
    /// Time between `beginExit` and `withdrawStake`, seconds.
    uint32 unbondingPeriod;
}

/// @notice A node, as `JobMarket.getNode` returns it.
struct NodeInfo {
    address operator;
    address agent;
    NodeStatus status;
    uint32 lastHeartbeat;
    uint96 stake;
    /// Stake held for open disputes (their exposure).
    uint96 lockedStake;
    /// Pay credited and not yet withdrawn.
    uint96 earnings;
    /// Protocol fees of this node's paid jobs, owed to the treasury until swept (at the
    /// operator's next withdrawal, or by anyone with `sweepFees`).
    uint96 feesOwed;
    uint40 registeredAt;
    /// The first 6 bytes of keccak256(abi.encode(gpuModel)) (0 for none): the market
    /// compares tags, the events carry the model itself.
    bytes6 gpuModelTag;
    /// The engines the node runs (`NodeCapabilities.engines`).
    uint8 engines;
    uint40 inactiveSince;
    uint40 unbondingEndsAt;
    /// The node's 1-based position in the verification pool; 0: not a member.
    uint32 poolIndex;
}

/// @notice One assignment of a batch.
struct Assignment {
    uint64 jobId;
    uint64 nodeId;
    JobTerms terms;
    JobState state;
}
