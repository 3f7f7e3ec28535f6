// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @notice What a node offers. Set at registration, changeable by the operator.
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
    /// Longest an attempt may run, seconds, counted from its assignment.
    uint32 maxRuntime;
    /// Scheduling priority, 1 (lowest) to 10 (highest); used by the matcher.
    uint8 priority;
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
///   Assigned -> Open (requeue by reclaim, abandon or reject) or Failed (out of attempts or time),
///   Submitted -> Disputed -> Completed | Failed,
///   Open -> Cancelled, Open|Assigned -> Expired.
/// Completed, Failed, Cancelled and Expired are terminal: the bounty has been paid or refunded.
enum JobStatus {
    None,
    Open,
    Assigned,
    Submitted,
    Disputed,
    Completed,
    Failed,
    Cancelled,
    Expired
}

/// @notice How a job's bounty reached the provider.
enum CompletionKind {
    Accepted,
    Finalized,
    DisputeWon
}

/// @notice Why a job ended without payment to a provider.
enum FailureKind {
    OutOfAttempts,
    PastDeadline,
    DisputeLost
}

/// @notice Why an assignment was taken back from a node.
enum ReclaimKind {
    NodeInactive,
    RuntimeExceeded,
    /// The node's agent gave the job back (node fault or shutdown).
    Abandoned
}

/// @notice How a node's job slot is released by the market.
enum Release {
    /// The job was paid: counts as completed.
    Completed,
    /// The node is not at fault (the job itself was bad): no counter changes.
    NoFault,
    /// The node failed the job: counts as failed and slashes its stake.
    Faulted
}

/// @notice Node registry parameters, changeable by the admin.
struct RegistryParams {
    /// Smallest stake a node may register with, token units.
    uint96 minStake;
    /// A node whose last heartbeat is older than this (seconds) may be marked inactive.
    uint32 heartbeatTimeout;
    /// Time between `beginExit` and `withdrawStake`, seconds.
    uint32 unbondingPeriod;
    /// Share of the current stake taken per fault, basis points (0..10000).
    uint16 slashBps;
}

/// @notice Job market parameters, changeable by the admin.
struct MarketParams {
    /// Receives the protocol fee.
    address feeRecipient;
    /// Time after a result during which the submitter may dispute, seconds.
    uint32 challengeWindow;
    /// Protocol fee on each payout, basis points (0..1000).
    uint16 protocolFeeBps;
    /// Assignments a job gets before it fails (1..255).
    uint8 maxAttempts;
    /// Bond the submitter posts to dispute a result, token units.
    uint96 disputeBond;
}

/// @notice A node, as `NodeRegistry.getNode` returns it.
struct NodeInfo {
    address operator;
    address agent;
    NodeStatus status;
    uint8 activeJobs;
    uint16 settlingJobs;
    uint32 lastHeartbeat;
    uint96 stake;
    uint32 completedJobs;
    uint32 failedJobs;
    uint96 totalSlashed;
    uint40 unbondingEndsAt;
    NodeCapabilities capabilities;
}

/// @notice A job, as `JobMarket.getJob` returns it.
struct JobInfo {
    address submitter;
    JobStatus status;
    /// Assignments so far (1 while the first attempt runs).
    uint8 attempts;
    uint40 deadline;
    uint96 bounty;
    bytes32 specHash;
    JobRequirements requirements;
    /// The assigned node while Assigned, Submitted or Disputed; the last one after.
    uint64 nodeId;
    uint40 assignedAt;
    uint40 challengeEndsAt;
    bytes32 resultHash;
    /// Protocol fee rate fixed when the job was posted, basis points.
    uint16 protocolFeeBps;
}
