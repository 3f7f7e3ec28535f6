// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {AccessControl} from "@openzeppelin/contracts/access/AccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {INodeRegistry} from "./interfaces/INodeRegistry.sol";
import {
    CompletionKind,
    FailureKind,
    JobInfo,
    JobRequirements,
    JobStatus,
    MarketParams,
    NodeCapabilities,
    NodeStatus,
    ReclaimKind,
    Release
} from "./types/Types.sol";

/// @title JobMarket
/// @notice Escrowed GPU jobs: post, assign or claim, submit, challenge, settle. Node
/// liveness, slots, reputation and stake live in the NodeRegistry, which this market
/// drives through its MARKET_ROLE. Money only leaves through `withdraw` (pull payments).
contract JobMarket is IJobMarket, AccessControl, Pausable, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    bytes32 public constant MATCHER_ROLE = keccak256("MATCHER_ROLE");
    bytes32 public constant ARBITER_ROLE = keccak256("ARBITER_ROLE");
    bytes32 public constant PAUSER_ROLE = keccak256("PAUSER_ROLE");

    /// @notice Largest job spec accepted, bytes. It is emitted in full in JobPosted.
    uint256 public constant MAX_SPEC_BYTES = 16_384;
    uint16 internal constant BPS = 10_000;
    uint16 internal constant MAX_FEE_BPS = 1_000;
    uint8 internal constant MAX_PRIORITY = 10;

    /// @dev Storage layout: a job is written in five slots at post time and one more (the
    /// result hash) at submission; later transitions rewrite the first slot and the one
    /// holding nodeId..protocolFeeBps.
    struct JobHead {
        address submitter;
        JobStatus status;
        uint8 attempts;
        uint8 priority;
        uint40 deadline;
        uint16 minGpuCount;
        uint16 minCpuCores;
    }

    struct JobRecord {
        JobHead head;
        uint96 bounty;
        uint96 maxPricePerGpuHour;
        uint32 minVramMiB;
        uint32 minRamMiB;
        bytes32 gpuModel;
        bytes32 specHash;
        uint64 nodeId;
        uint32 maxRuntime;
        uint40 assignedAt;
        uint40 challengeEndsAt;
        uint16 protocolFeeBps;
        bytes32 resultHash;
    }

    /// @notice The payment token (also the registry's staking token).
    IERC20 public immutable token;
    INodeRegistry public immutable registry;

    MarketParams internal _params;
    /// @dev Starts at 1 so that the first post does not pay for a zero-to-nonzero write.
    uint64 internal _nextJobId = 1;
    mapping(uint64 jobId => JobRecord) internal _jobs;
    mapping(uint64 jobId => uint96) internal _bonds;
    mapping(address account => uint256) internal _credits;

    constructor(IERC20 token_, INodeRegistry registry_, address admin, MarketParams memory params_) {
        if (address(token_) == address(0) || address(registry_) == address(0) || admin == address(0)) {
            revert JobMarket_ZeroAddress();
        }
        token = token_;
        registry = registry_;
        _grantRole(DEFAULT_ADMIN_ROLE, admin);
        _setParams(params_);
    }

    // ================================================================ submitter

    /// @inheritdoc IJobMarket
    function postJob(JobRequirements calldata requirements, uint96 bounty, uint40 deadline, bytes calldata spec)
        external
        whenNotPaused
        nonReentrant
        returns (uint64 jobId)
    {
        jobId = _post(requirements, bounty, deadline, spec);
    }

    /// @inheritdoc IJobMarket
    function postJobWithPermit(
        JobRequirements calldata requirements,
        uint96 bounty,
        uint40 deadline,
        bytes calldata spec,
        uint256 permitDeadline,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external whenNotPaused nonReentrant returns (uint64 jobId) {
        // A permit seen in the mempool can be front-run; if that consumed it, the allowance
        // is there anyway and the transfer below decides.
        try IERC20Permit(address(token)).permit(msg.sender, address(this), bounty, permitDeadline, v, r, s) {} catch {}
        jobId = _post(requirements, bounty, deadline, spec);
    }

    /// @inheritdoc IJobMarket
    function accept(uint64 jobId) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Submitted);
        if (msg.sender != head.submitter) revert JobMarket_NotSubmitter(jobId, msg.sender);
        _pay(jobId, job, 0, CompletionKind.Accepted);
    }

    /// @inheritdoc IJobMarket
    function dispute(uint64 jobId) external nonReentrant {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Submitted);
        if (msg.sender != head.submitter) revert JobMarket_NotSubmitter(jobId, msg.sender);
        uint40 endsAt = job.challengeEndsAt;
        if (block.timestamp >= endsAt) revert JobMarket_ChallengeWindowClosed(jobId, endsAt);

        uint96 bond = _params.disputeBond;
        job.head.status = JobStatus.Disputed;
        _bonds[jobId] = bond;
        emit JobDisputed(jobId, job.nodeId, bond);

        if (bond != 0) token.safeTransferFrom(msg.sender, address(this), bond);
    }

    /// @inheritdoc IJobMarket
    function cancel(uint64 jobId) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Open);
        if (msg.sender != head.submitter) revert JobMarket_NotSubmitter(jobId, msg.sender);
        uint96 refund = job.bounty;
        job.head.status = JobStatus.Cancelled;
        _credits[head.submitter] += refund;
        emit JobCancelled(jobId, refund);
    }

    // ================================================================ matcher, agent

    /// @inheritdoc IJobMarket
    function assign(uint64 jobId, uint64 nodeId) external whenNotPaused onlyRole(MATCHER_ROLE) {
        _assign(jobId, nodeId, false);
    }

    /// @inheritdoc IJobMarket
    function claim(uint64 jobId, uint64 nodeId) external whenNotPaused {
        _assign(jobId, nodeId, true);
    }

    /// @inheritdoc IJobMarket
    function submitResult(uint64 jobId, bytes32 resultHash, string calldata resultURI) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Assigned);
        if (block.timestamp >= head.deadline) revert JobMarket_PastDeadline(jobId, head.deadline);
        uint64 nodeId = job.nodeId;
        // The registry moves the slot to settling and names the agent; a wrong caller
        // reverts the whole call, the registry's change included.
        if (registry.markSettling(nodeId) != msg.sender) revert JobMarket_NotAssignedAgent(jobId, msg.sender);

        uint40 endsAt = uint40(block.timestamp) + _params.challengeWindow;
        job.head.status = JobStatus.Submitted;
        job.challengeEndsAt = endsAt;
        job.resultHash = resultHash;
        emit ResultSubmitted(jobId, nodeId, resultHash, resultURI, endsAt);
    }

    /// @inheritdoc IJobMarket
    function reject(uint64 jobId, string calldata reason) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Assigned);
        uint64 nodeId = job.nodeId;
        if (registry.agentOf(nodeId) != msg.sender) revert JobMarket_NotAssignedAgent(jobId, msg.sender);
        // A node already at fault cannot walk away without the slash by rejecting.
        if (block.timestamp >= head.deadline) revert JobMarket_PastDeadline(jobId, head.deadline);
        if (
            block.timestamp > uint256(job.assignedAt) + job.maxRuntime
                || registry.statusOf(nodeId) == NodeStatus.Inactive
        ) revert JobMarket_MustBeReclaimed(jobId);

        registry.release(nodeId, false, Release.NoFault);
        emit JobRejected(jobId, nodeId, reason);
        _requeueOrFail(jobId, job, head);
    }

    /// @inheritdoc IJobMarket
    function abandon(uint64 jobId) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Assigned);
        uint64 nodeId = job.nodeId;
        if (registry.agentOf(nodeId) != msg.sender) revert JobMarket_NotAssignedAgent(jobId, msg.sender);
        // A late job has one way out, as for `reject`: expire, which slashes the same.
        if (block.timestamp >= head.deadline) revert JobMarket_PastDeadline(jobId, head.deadline);

        (, uint96 slashed) = registry.release(nodeId, false, Release.Faulted);
        _credits[head.submitter] += slashed;
        emit JobReclaimed(jobId, nodeId, ReclaimKind.Abandoned, slashed, msg.sender);
        _requeueOrFail(jobId, job, head);
    }

    // ================================================================ anyone

    /// @inheritdoc IJobMarket
    function finalize(uint64 jobId) external {
        JobRecord storage job = _jobs[jobId];
        _head(job, jobId, JobStatus.Submitted);
        uint40 endsAt = job.challengeEndsAt;
        if (block.timestamp < endsAt) revert JobMarket_ChallengeWindowOpen(jobId, endsAt);
        _pay(jobId, job, 0, CompletionKind.Finalized);
    }

    /// @inheritdoc IJobMarket
    function reclaim(uint64 jobId) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Assigned);
        uint64 nodeId = job.nodeId;
        ReclaimKind kind;
        if (registry.statusOf(nodeId) == NodeStatus.Inactive) {
            kind = ReclaimKind.NodeInactive;
        } else if (block.timestamp > uint256(job.assignedAt) + job.maxRuntime) {
            kind = ReclaimKind.RuntimeExceeded;
        } else {
            revert JobMarket_NotReclaimable(jobId);
        }

        (, uint96 slashed) = registry.release(nodeId, false, Release.Faulted);
        _credits[head.submitter] += slashed;
        emit JobReclaimed(jobId, nodeId, kind, slashed, msg.sender);
        _requeueOrFail(jobId, job, head);
    }

    /// @inheritdoc IJobMarket
    function expire(uint64 jobId) external {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = job.head;
        if (head.status == JobStatus.None) revert JobMarket_UnknownJob(jobId);
        if (head.status != JobStatus.Open && head.status != JobStatus.Assigned) {
            revert JobMarket_WrongStatus(jobId, head.status);
        }
        if (block.timestamp < head.deadline) revert JobMarket_DeadlineNotPassed(jobId, head.deadline);

        uint64 nodeId;
        uint96 slashed;
        if (head.status == JobStatus.Assigned) {
            nodeId = job.nodeId;
            (, slashed) = registry.release(nodeId, false, Release.Faulted);
        }
        uint256 refund = uint256(job.bounty) + slashed;
        job.head.status = JobStatus.Expired;
        _credits[head.submitter] += refund;
        emit JobExpired(jobId, nodeId, refund, slashed);
    }

    /// @inheritdoc IJobMarket
    function withdraw() external nonReentrant {
        uint256 amount = _credits[msg.sender];
        if (amount == 0) revert JobMarket_NothingToWithdraw();
        _credits[msg.sender] = 0;
        emit Withdrawn(msg.sender, amount);

        token.safeTransfer(msg.sender, amount);
    }

    // ================================================================ arbiter, admin

    /// @inheritdoc IJobMarket
    function resolve(uint64 jobId, bool providerWins) external onlyRole(ARBITER_ROLE) {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Disputed);
        uint64 nodeId = job.nodeId;
        uint96 bond = _bonds[jobId];
        delete _bonds[jobId];
        emit DisputeResolved(jobId, nodeId, providerWins, msg.sender);

        if (providerWins) {
            _pay(jobId, job, bond, CompletionKind.DisputeWon);
            return;
        }
        (, uint96 slashed) = registry.release(nodeId, true, Release.Faulted);
        uint256 refund = uint256(job.bounty) + bond + slashed;
        job.head.status = JobStatus.Failed;
        _credits[head.submitter] += refund;
        emit JobFailed(jobId, FailureKind.DisputeLost, refund);
    }

    /// @inheritdoc IJobMarket
    function setParams(MarketParams calldata params_) external onlyRole(DEFAULT_ADMIN_ROLE) {
        _setParams(params_);
    }

    function pause() external onlyRole(PAUSER_ROLE) {
        _pause();
    }

    function unpause() external onlyRole(PAUSER_ROLE) {
        _unpause();
    }

    // ================================================================ views

    /// @inheritdoc IJobMarket
    function getJob(uint64 jobId) external view returns (JobInfo memory) {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = job.head;
        return JobInfo({
            submitter: head.submitter,
            status: head.status,
            attempts: head.attempts,
            deadline: head.deadline,
            bounty: job.bounty,
            specHash: job.specHash,
            requirements: JobRequirements({
                gpuModel: job.gpuModel,
                minGpuCount: head.minGpuCount,
                minVramMiB: job.minVramMiB,
                minCpuCores: head.minCpuCores,
                minRamMiB: job.minRamMiB,
                maxPricePerGpuHour: job.maxPricePerGpuHour,
                maxRuntime: job.maxRuntime,
                priority: head.priority
            }),
            nodeId: job.nodeId,
            assignedAt: job.assignedAt,
            challengeEndsAt: job.challengeEndsAt,
            resultHash: job.resultHash,
            protocolFeeBps: job.protocolFeeBps
        });
    }

    /// @inheritdoc IJobMarket
    function params() external view returns (MarketParams memory) {
        return _params;
    }

    /// @inheritdoc IJobMarket
    function jobCount() external view returns (uint64) {
        return _nextJobId - 1;
    }

    /// @inheritdoc IJobMarket
    function creditOf(address account) external view returns (uint256) {
        return _credits[account];
    }

    // ================================================================ internal

    function _post(JobRequirements calldata requirements, uint96 bounty, uint40 deadline, bytes calldata spec)
        internal
        returns (uint64 jobId)
    {
        _checkRequirements(requirements);
        if (bounty == 0) revert JobMarket_ZeroBounty();
        if (deadline <= block.timestamp) revert JobMarket_DeadlineInPast(deadline);
        if (spec.length == 0) revert JobMarket_EmptySpec();
        if (spec.length > MAX_SPEC_BYTES) revert JobMarket_SpecTooLarge(spec.length, MAX_SPEC_BYTES);

        jobId = _nextJobId++;
        bytes32 specHash = keccak256(spec);
        JobRecord storage job = _jobs[jobId];
        job.head = JobHead({
            submitter: msg.sender,
            status: JobStatus.Open,
            attempts: 0,
            priority: requirements.priority,
            deadline: deadline,
            minGpuCount: requirements.minGpuCount,
            minCpuCores: requirements.minCpuCores
        });
        job.bounty = bounty;
        job.maxPricePerGpuHour = requirements.maxPricePerGpuHour;
        job.minVramMiB = requirements.minVramMiB;
        job.minRamMiB = requirements.minRamMiB;
        if (requirements.gpuModel != bytes32(0)) job.gpuModel = requirements.gpuModel;
        job.specHash = specHash;
        // Same slot: the rate the submitter saw is the rate they pay.
        job.maxRuntime = requirements.maxRuntime;
        job.protocolFeeBps = _params.protocolFeeBps;
        emit JobPosted(jobId, msg.sender, requirements, bounty, deadline, specHash, spec);

        token.safeTransferFrom(msg.sender, address(this), bounty);
    }

    function _assign(uint64 jobId, uint64 nodeId, bool claimed) internal {
        JobRecord storage job = _jobs[jobId];
        JobHead memory head = _head(job, jobId, JobStatus.Open);
        if (block.timestamp >= head.deadline) revert JobMarket_PastDeadline(jobId, head.deadline);
        // Only reachable when the admin lowered maxAttempts after this job was requeued.
        if (head.attempts >= _params.maxAttempts) revert JobMarket_NoAttemptsLeft(jobId, head.attempts);

        // Reverts unless the node is Active with a free slot; the checks below revert the
        // slot with everything else.
        (address agent, NodeCapabilities memory offered) = registry.takeSlot(nodeId);
        if (claimed && msg.sender != agent) revert JobMarket_NotNodeAgent(nodeId, msg.sender);
        _checkEligible(job, head, offered);

        uint8 attempt = head.attempts + 1;
        uint40 now40 = uint40(block.timestamp);
        head.status = JobStatus.Assigned;
        head.attempts = attempt;
        job.head = head;
        job.nodeId = nodeId;
        job.assignedAt = now40;
        emit JobAssigned(jobId, nodeId, agent, attempt, claimed, now40);
    }

    /// @dev Pays a Submitted or Disputed job's bounty to the node's operator (plus `bonus`,
    /// the dispute bond the provider won) and the fee to the fee recipient.
    function _pay(uint64 jobId, JobRecord storage job, uint96 bonus, CompletionKind kind) internal {
        uint64 nodeId = job.nodeId;
        (address operator,) = registry.release(nodeId, true, Release.Completed);
        uint96 bounty = job.bounty;
        uint96 fee = uint96((uint256(bounty) * job.protocolFeeBps) / BPS);
        uint96 payout = bounty - fee;

        job.head.status = JobStatus.Completed;
        _credits[operator] += uint256(payout) + bonus;
        if (fee != 0) _credits[_params.feeRecipient] += fee;
        emit JobCompleted(jobId, nodeId, operator, payout, fee, kind);
    }

    /// @dev After an attempt ended without fault of the submitter: Open again, or Failed
    /// and refunded when the attempts or the time are used up.
    function _requeueOrFail(uint64 jobId, JobRecord storage job, JobHead memory head) internal {
        FailureKind kind;
        if (head.attempts >= _params.maxAttempts) {
            kind = FailureKind.OutOfAttempts;
        } else if (block.timestamp >= head.deadline) {
            kind = FailureKind.PastDeadline;
        } else {
            job.head.status = JobStatus.Open;
            emit JobRequeued(jobId, head.attempts);
            return;
        }
        uint96 refund = job.bounty;
        job.head.status = JobStatus.Failed;
        _credits[head.submitter] += refund;
        emit JobFailed(jobId, kind, refund);
    }

    function _head(JobRecord storage job, uint64 jobId, JobStatus expected)
        internal
        view
        returns (JobHead memory head)
    {
        head = job.head;
        if (head.status != expected) {
            if (head.status == JobStatus.None) revert JobMarket_UnknownJob(jobId);
            revert JobMarket_WrongStatus(jobId, head.status);
        }
    }

    function _checkEligible(JobRecord storage job, JobHead memory head, NodeCapabilities memory offered) internal view {
        bytes32 model = job.gpuModel;
        if (model != bytes32(0) && model != offered.gpuModel) {
            revert JobMarket_GpuModelMismatch(model, offered.gpuModel);
        }
        if (offered.gpuCount < head.minGpuCount) revert JobMarket_InsufficientGpus(head.minGpuCount, offered.gpuCount);
        uint32 vram = job.minVramMiB;
        if (offered.vramMiB < vram) revert JobMarket_InsufficientVram(vram, offered.vramMiB);
        if (offered.cpuCores < head.minCpuCores) revert JobMarket_InsufficientCpu(head.minCpuCores, offered.cpuCores);
        uint32 ram = job.minRamMiB;
        if (offered.ramMiB < ram) revert JobMarket_InsufficientRam(ram, offered.ramMiB);
        uint96 maxPrice = job.maxPricePerGpuHour;
        if (offered.pricePerGpuHour > maxPrice) revert JobMarket_PriceTooHigh(maxPrice, offered.pricePerGpuHour);
    }

    function _checkRequirements(JobRequirements calldata requirements) internal pure {
        if (
            requirements.priority == 0 || requirements.priority > MAX_PRIORITY || requirements.maxRuntime == 0
                || (requirements.gpuModel != bytes32(0) && requirements.minGpuCount == 0)
        ) revert JobMarket_InvalidRequirements();
    }

    function _setParams(MarketParams memory params_) internal {
        if (
            params_.feeRecipient == address(0) || params_.protocolFeeBps > MAX_FEE_BPS || params_.maxAttempts == 0
                || params_.challengeWindow == 0
        ) revert JobMarket_InvalidParams();
        _params = params_;
        emit MarketParamsUpdated(params_);
    }
}
