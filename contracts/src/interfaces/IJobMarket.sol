// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {
    CompletionKind,
    FailureKind,
    JobInfo,
    JobRequirements,
    JobStatus,
    MarketParams,
    ReclaimKind
} from "../types/Types.sol";

/// @title Gantry job market
/// @notice Submitters post jobs whose bounty is escrowed until the deadline; jobs are
/// assigned to eligible nodes (by a MATCHER or claimed by the node's agent); the node's
/// agent submits a result hash; after the challenge window the bounty is credited to the
/// node's operator minus the protocol fee. Every payment is a credit withdrawn with
/// `withdraw`. Every state change emits an event with all a consumer needs to rebuild the
/// state without calling the chain.
interface IJobMarket {
    // ---------------------------------------------------------------- events

    /// @notice A job was posted and its bounty escrowed. `spec` is the full job-spec JSON.
    event JobPosted(
        uint64 indexed jobId,
        address indexed submitter,
        JobRequirements requirements,
        uint96 bounty,
        uint40 deadline,
        bytes32 specHash,
        bytes spec
    );
    /// @notice The job was assigned to a node (`claimed` when its agent pulled it).
    event JobAssigned(
        uint64 indexed jobId,
        uint64 indexed nodeId,
        address indexed agent,
        uint8 attempt,
        bool claimed,
        uint40 assignedAt
    );
    /// @notice The node submitted its result; the challenge window runs until `challengeEndsAt`.
    event ResultSubmitted(
        uint64 indexed jobId, uint64 indexed nodeId, bytes32 resultHash, string resultURI, uint40 challengeEndsAt
    );
    /// @notice The job was paid: `payout` credited to `operator`, `fee` to the fee recipient.
    event JobCompleted(
        uint64 indexed jobId,
        uint64 indexed nodeId,
        address indexed operator,
        uint96 payout,
        uint96 fee,
        CompletionKind kind
    );
    /// @notice The submitter disputed the result, posting `bond`.
    event JobDisputed(uint64 indexed jobId, uint64 indexed nodeId, uint96 bond);
    /// @notice The arbiter resolved the dispute. The bond went to the winner.
    event DisputeResolved(uint64 indexed jobId, uint64 indexed nodeId, bool providerWon, address indexed arbiter);
    /// @notice The assignment was taken back from the node, or given back by its agent
    /// (`Abandoned`); the node was slashed `slashed`, credited to the submitter.
    event JobReclaimed(uint64 indexed jobId, uint64 indexed nodeId, ReclaimKind kind, uint96 slashed, address by);
    /// @notice The node's agent refused the job as unusable (no slash).
    event JobRejected(uint64 indexed jobId, uint64 indexed nodeId, string reason);
    /// @notice The job is Open again for its next attempt.
    event JobRequeued(uint64 indexed jobId, uint8 attemptsUsed);
    /// @notice The job failed; `refund` was credited to the submitter with this event: the
    /// bounty, plus the bond and the slashed stake when a dispute was lost.
    event JobFailed(uint64 indexed jobId, FailureKind kind, uint256 refund);
    /// @notice The submitter cancelled the unassigned job; the bounty was credited back.
    event JobCancelled(uint64 indexed jobId, uint96 refund);
    /// @notice The deadline passed before a result; `refund` (bounty plus any slashed stake
    /// of node `nodeId`, 0 if none was assigned) was credited to the submitter.
    event JobExpired(uint64 indexed jobId, uint64 indexed nodeId, uint256 refund, uint96 slashed);
    /// @notice `account` withdrew its credits.
    event Withdrawn(address indexed account, uint256 amount);
    /// @notice The admin changed the market parameters.
    event MarketParamsUpdated(MarketParams params);

    // ---------------------------------------------------------------- errors

    error JobMarket_ZeroAddress();
    error JobMarket_InvalidParams();
    error JobMarket_InvalidRequirements();
    error JobMarket_ZeroBounty();
    error JobMarket_DeadlineInPast(uint40 deadline);
    error JobMarket_EmptySpec();
    error JobMarket_SpecTooLarge(uint256 length, uint256 max);
    error JobMarket_UnknownJob(uint64 jobId);
    error JobMarket_WrongStatus(uint64 jobId, JobStatus status);
    error JobMarket_NotSubmitter(uint64 jobId, address caller);
    error JobMarket_NotAssignedAgent(uint64 jobId, address caller);
    error JobMarket_PastDeadline(uint64 jobId, uint40 deadline);
    error JobMarket_DeadlineNotPassed(uint64 jobId, uint40 deadline);
    error JobMarket_ChallengeWindowOpen(uint64 jobId, uint40 challengeEndsAt);
    error JobMarket_ChallengeWindowClosed(uint64 jobId, uint40 challengeEndsAt);
    error JobMarket_NotReclaimable(uint64 jobId);
    error JobMarket_MustBeReclaimed(uint64 jobId);
    error JobMarket_NoAttemptsLeft(uint64 jobId, uint8 attempts);
    error JobMarket_GpuModelMismatch(bytes32 required, bytes32 offered);
    error JobMarket_InsufficientGpus(uint16 required, uint16 offered);
    error JobMarket_InsufficientVram(uint32 required, uint32 offered);
    error JobMarket_InsufficientCpu(uint16 required, uint16 offered);
    error JobMarket_InsufficientRam(uint32 required, uint32 offered);
    error JobMarket_PriceTooHigh(uint96 maxPrice, uint96 price);
    error JobMarket_NotNodeAgent(uint64 nodeId, address caller);
    error JobMarket_NothingToWithdraw();

    // ---------------------------------------------------------------- submitter

    /// @notice Posts a job, pulling `bounty` from the caller into escrow.
    /// @param deadline Chain time by which a result must be submitted; after it the
    /// bounty is refundable.
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

    /// @notice Accepts the submitted result at once: pays the provider.
    function accept(uint64 jobId) external;

    /// @notice Disputes the submitted result inside the challenge window, posting the bond.
    function dispute(uint64 jobId) external;

    /// @notice Cancels an Open job; refunds the bounty.
    function cancel(uint64 jobId) external;

    // ---------------------------------------------------------------- matcher, agent

    /// @notice Assigns an Open job to an eligible node. MATCHER only.
    function assign(uint64 jobId, uint64 nodeId) external;

    /// @notice The node's agent pulls an Open job it is eligible for.
    function claim(uint64 jobId, uint64 nodeId) external;

    /// @notice The assigned node's agent submits the result before the deadline.
    function submitResult(uint64 jobId, bytes32 resultHash, string calldata resultURI) external;

    /// @notice The assigned node's agent refuses an unusable job (bad image or input):
    /// requeued without slash, or failed and refunded when out of attempts. Refused once
    /// the node is at fault (Inactive, past the max runtime or the deadline): that job is
    /// reclaimed or expired, with the slash.
    function reject(uint64 jobId, string calldata reason) external;

    /// @notice The assigned node's agent gives back a job it cannot finish for a reason of
    /// its own (node fault, shutdown): the node is slashed as for a reclaim, the slash is
    /// credited to the submitter, and the job is requeued, or failed and refunded when out
    /// of attempts. Refused past the deadline: that job is expired, with the slash.
    function abandon(uint64 jobId) external;

    // ---------------------------------------------------------------- anyone

    /// @notice Pays the provider after the challenge window.
    function finalize(uint64 jobId) external;

    /// @notice Takes the job back from an Inactive node or one past the max runtime:
    /// slashes it and requeues the job, or fails it when out of attempts or time.
    function reclaim(uint64 jobId) external;

    /// @notice After the deadline, refunds an Open or Assigned job (slashing the node).
    function expire(uint64 jobId) external;

    /// @notice Pays the caller's credits.
    function withdraw() external;

    // ---------------------------------------------------------------- arbiter, admin

    /// @notice Resolves a dispute. ARBITER only.
    function resolve(uint64 jobId, bool providerWins) external;

    function setParams(MarketParams calldata params) external;

    // ---------------------------------------------------------------- views

    function getJob(uint64 jobId) external view returns (JobInfo memory);
    function params() external view returns (MarketParams memory);
    function jobCount() external view returns (uint64);
    function creditOf(address account) external view returns (uint256);
}
