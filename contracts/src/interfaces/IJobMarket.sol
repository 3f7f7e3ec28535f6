// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {
    Assignment,
    CompletionKind,
    FailureKind,
    JobPolicy,
    JobRequirements,
    JobState,
    JobStatus,
    JobTerms,
    MarketParams,
    NodeStatus,
    ReclaimKind
} from "../types/Types.sol";

/// @title Gantry job market
/// @notice Submitters post jobs whose bounty is escrowed; jobs are assigned to eligible
/// nodes (by a MATCHER, or claimed by the node's agent) only when an attempt fits before the
/// deadline; the node's agent submits a result hash before the attempt's runtime ends;
/// after the challenge window the bounty is credited to the node (minus the protocol fee).
///
/// A job is stored as one word: the hash of its `JobState`, which holds the hash of its
/// `JobTerms`. Calls pass the current state (and the terms where a rule needs them), folded
/// from the job's events; the market checks them against the stored hash. Every credit and
/// debit of every account appears in an event with its exact amount.
///
/// Faults are never paid to a party that can provoke them: slashes and reject charges go
/// to the treasury; a submitter gets back its own bounty, never more.
interface IJobMarket {
    // ---------------------------------------------------------------- events

    /// @notice A job was posted and its bounty escrowed: `fromCredits` of it taken from the
    /// submitter's credits, the rest pulled from its token balance. `spec` is the full
    /// job-spec JSON. The job's first state is `Open` with the terms' hash and the copies of
    /// bounty, fee and challenge window (see `JobState`).
    event JobPosted(uint64 indexed jobId, address indexed submitter, JobTerms terms, uint96 fromCredits, bytes spec);
    /// @notice `account` deposited `amount` of tokens into its credits (to post jobs from).
    event Deposited(address indexed account, uint256 amount);
    /// @notice The job's next attempt went to the node (`claimed` when its agent pulled it);
    /// it must answer by `until` (assignment time + max runtime).
    event JobAssigned(uint64 indexed jobId, uint64 indexed nodeId, bool claimed, uint40 until);
    /// @notice The assigned node submitted its result (the job's state does not keep it: this
    /// event is its record); the challenge window runs until `until`.
    event ResultSubmitted(uint64 indexed jobId, bytes32 resultHash, string resultURI, uint40 until);
    /// @notice The job was paid: `payout` credited to the node's earnings; `fee` is owed to
    /// the treasury, held in the node's record until swept (`FeesSwept`).
    event JobCompleted(uint64 indexed jobId, uint64 indexed nodeId, uint96 payout, uint96 fee, CompletionKind kind);
    /// @notice The submitter disputed the result, posting `bond`; `exposure` of the node's
    /// stake is held until the dispute ends, which the arbiter must decide by `until`.
    event JobDisputed(uint64 indexed jobId, uint64 indexed nodeId, uint96 bond, uint96 exposure, uint40 until);
    /// @notice The dispute ended: decided by the arbiter, or `lapsed` (the arbiter's time ran
    /// out: the result stands). The bond went to the provider's earnings (`bondToProvider`,
    /// it won) or back to the submitter's credits (`bondToSubmitter`: it won, with the refund
    /// in `JobFailed`, or the dispute lapsed).
    event DisputeResolved(
        uint64 indexed jobId,
        uint64 indexed nodeId,
        bool providerWon,
        bool lapsed,
        uint96 bondToSubmitter,
        uint96 bondToProvider,
        address by
    );
    /// @notice The assignment was taken back from the node for its fault (it is slashed, see
    /// `NodeSlashed`, and barred from the job).
    event JobReclaimed(uint64 indexed jobId, uint64 indexed nodeId, ReclaimKind kind, address by);
    /// @notice The node's agent gave the job back; the node is barred from it and was charged
    /// for the time it held it (see `NodeSlashed`).
    event JobRejected(uint64 indexed jobId, uint64 indexed nodeId, string reason);
    /// @notice The job is Open again for its next attempt.
    event JobRequeued(uint64 indexed jobId, uint8 faults, uint8 barred);
    /// @notice The job failed; `refund` (the bounty) was credited to the submitter.
    event JobFailed(uint64 indexed jobId, FailureKind kind, uint96 refund);
    /// @notice The submitter cancelled the Open job; the bounty was credited back.
    event JobCancelled(uint64 indexed jobId, uint96 refund);
    /// @notice No attempt of the Open job can fit before its deadline any more; the bounty
    /// was credited back to the submitter.
    event JobExpired(uint64 indexed jobId, uint96 refund);
    /// @notice `account` withdrew its credits.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice The treasury's balance was paid to it.
    event TreasuryWithdrawn(address indexed treasury, uint256 amount);
    /// @notice The admin changed the market parameters (jobs already posted keep theirs).
    event MarketParamsUpdated(MarketParams params, uint32 policyVersion);
    /// @notice The pauser stopped (or resumed) new jobs and new nodes.
    event PausedSet(bool paused, address by);

    // ---------------------------------------------------------------- errors

    error JobMarket_ZeroAddress();
    error JobMarket_RegistryMismatch();
    error JobMarket_InvalidParams();
    error JobMarket_InvalidRequirements();
    error JobMarket_ZeroBounty();
    error JobMarket_ZeroAmount();
    error JobMarket_DeadlineTooSoon(uint40 deadline, uint256 earliest);
    error JobMarket_EmptySpec();
    error JobMarket_SpecTooLarge(uint256 length, uint256 max);
    error JobMarket_Paused();
    error JobMarket_StaleState(uint64 jobId);
    error JobMarket_WrongTerms(uint64 jobId);
    error JobMarket_WrongStatus(uint64 jobId, JobStatus status);
    error JobMarket_NotSubmitter(uint64 jobId, address caller);
    error JobMarket_NotAssignedAgent(uint64 jobId, address caller);
    error JobMarket_NotNodeAgent(uint64 nodeId, address caller);
    error JobMarket_DoesNotFit(uint64 jobId, uint256 endsAt, uint40 deadline);
    error JobMarket_RuntimeOver(uint64 jobId, uint40 until);
    error JobMarket_Barred(uint64 jobId, uint64 nodeId);
    error JobMarket_NodeNotActive(uint64 nodeId, NodeStatus status);
    error JobMarket_ChallengeWindowOpen(uint64 jobId, uint40 until);
    error JobMarket_ChallengeWindowClosed(uint64 jobId, uint40 until);
    error JobMarket_DisputeOpen(uint64 jobId, uint40 until);
    error JobMarket_DisputeLapsed(uint64 jobId, uint40 until);
    error JobMarket_NotReclaimable(uint64 jobId);
    error JobMarket_MustBeReclaimed(uint64 jobId);
    error JobMarket_NotExpired(uint64 jobId);
    error JobMarket_EngineNotServed(uint8 engine);
    error JobMarket_GpuModelMismatch(bytes32 required);
    error JobMarket_InsufficientGpus(uint16 required, uint16 offered);
    error JobMarket_InsufficientVram(uint32 required, uint32 offered);
    error JobMarket_InsufficientCpu(uint16 required, uint16 offered);
    error JobMarket_InsufficientRam(uint32 required, uint32 offered);
    error JobMarket_PriceTooHigh(uint256 maxPrice, uint96 price);
    error JobMarket_NothingToWithdraw();
    error JobMarket_LengthMismatch();

    // ---------------------------------------------------------------- submitter

    /// @notice Posts a job, escrowing `bounty`: from the caller's credits as far as they go
    /// (a deposit, or refunds), the rest pulled from its tokens. The market policy in force
    /// now becomes part of the job's terms.
    /// @param deadline Chain time by which a result must be in; at least one max runtime
    /// from now (an attempt must fit).
    /// @param spec The job-spec JSON (versioned, see the protocol crate); emitted, hashed.
    function postJob(JobRequirements calldata requirements, uint96 bounty, uint40 deadline, bytes calldata spec)
        external
        returns (uint64 jobId);

    /// @notice `postJob` with an EIP-2612 permit for the bounty, in one transaction.
    function postJobWithPermit(
        JobRequirements calldata requirements,
        uint96 bounty,
        uint40 deadline,
        bytes calldata spec,
        uint256 permitDeadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external returns (uint64 jobId);

    /// @notice Adds `amount` of the caller's tokens to its credits, which `postJob` spends
    /// first (a job posted from credits makes no token call) and `withdraw` pays back.
    function deposit(uint256 amount) external;

    /// @notice Accepts the submitted result at once: pays the provider.
    function accept(uint64 jobId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice Disputes the submitted result inside the challenge window, posting the bond.
    function dispute(uint64 jobId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice Cancels an Open job; refunds the bounty.
    function cancel(uint64 jobId, JobTerms calldata terms, JobState calldata state) external;

    // ---------------------------------------------------------------- matcher, agent

    /// @notice Assigns an Open job to an eligible, Active node, when the attempt fits
    /// before the deadline. MATCHER only. The node's concurrent jobs are not counted on
    /// chain: the matcher respects the node's `maxConcurrentJobs`, and a worker given more
    /// rejects the extra job at once, within the reject's grace (free).
    function assign(uint64 jobId, uint64 nodeId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice `assign` for many jobs in one transaction; all or nothing. MATCHER only.
    function assignBatch(Assignment[] calldata assignments) external;

    /// @notice The node's agent pulls an Open job it is eligible for.
    function claim(uint64 jobId, uint64 nodeId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice The assigned node's agent submits the result before the attempt's runtime
    /// ends (`state.until`). A job that failed by itself (its own timeout, a non-zero exit)
    /// is answered with a result too: the node did the work.
    function submitResult(uint64 jobId, JobState calldata state, bytes32 resultHash, string calldata resultURI) external;

    /// @notice The assigned node's agent gives the job back before its runtime ends (a job it
    /// cannot run, or a shutdown). The node is barred from the job and charged for the time
    /// it held the job past `REJECT_GRACE` (at most a tenth of the max runtime): that
    /// share of one slash, a whole slash at the runtime's end (to the treasury); the job is
    /// requeued without using an attempt. Refused once the node was marked Inactive
    /// during the attempt or its runtime is over: that is a fault, reclaimed with the slash.
    function reject(uint64 jobId, JobTerms calldata terms, JobState calldata state, string calldata reason) external;

    // ---------------------------------------------------------------- anyone

    /// @notice Pays the provider after the challenge window.
    function finalize(uint64 jobId, JobState calldata state) external;

    /// @notice `finalize` for many jobs in one transaction; all or nothing.
    function finalizeBatch(uint64[] calldata jobIds, JobState[] calldata states) external;

    /// @notice Takes the job back from a node that was marked Inactive during the attempt or
    /// ran past the max runtime: slashes it (to the treasury), bars it from the job, and
    /// requeues the job, or fails and refunds it when out of attempts or time.
    function reclaim(uint64 jobId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice Refunds an Open job once no attempt can fit before its deadline.
    function expire(uint64 jobId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice Applies a dispute's default outcome once the arbiter's time ran out: the
    /// result stands (the provider is paid), the bond goes back to the submitter.
    function settleDispute(uint64 jobId, JobTerms calldata terms, JobState calldata state) external;

    /// @notice Pays the caller's credits.
    function withdraw() external;

    /// @notice Pays the treasury's balance to the treasury.
    function withdrawTreasury() external;

    // ---------------------------------------------------------------- arbiter, admin

    /// @notice Decides a dispute before its deadline. ARBITER only. For the provider: it is
    /// paid and wins the bond. For the submitter: bounty and bond are refunded and the held
    /// exposure of the node's stake is slashed to the treasury.
    function resolve(uint64 jobId, JobTerms calldata terms, JobState calldata state, bool providerWins) external;

    /// @notice Changes the market parameters for jobs posted from now on. Admin only (a
    /// timelock in production).
    function setParams(MarketParams calldata params) external;

    /// @notice Stops or resumes new jobs and new nodes. PAUSER only; money always leaves.
    function setPaused(bool paused) external;

    // ---------------------------------------------------------------- views

    /// @notice The stored hash of the job's state; 0 for an unknown or settled job.
    function jobHash(uint64 jobId) external view returns (bytes32);
    function hashTerms(JobTerms calldata terms) external pure returns (bytes32);
    function hashState(JobState calldata state) external pure returns (bytes32);
    function isBarred(uint64 jobId, uint64 nodeId) external view returns (bool);
    function params() external view returns (MarketParams memory);
    /// @notice The rules of jobs posted under policy `version`.
    function policy(uint32 version) external view returns (JobPolicy memory);
    /// @notice The policy version new jobs get.
    function policyVersion() external view returns (uint32);
    function paused() external view returns (bool);
    function jobCount() external view returns (uint64);
    function creditOf(address account) external view returns (uint256);
    function treasuryBalance() external view returns (uint256);
}
