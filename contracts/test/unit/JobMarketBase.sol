// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";

import {Base, RegisteredNode} from "../Base.t.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {CompletionKind, FailureKind, JobInfo, JobRequirements, JobStatus} from "../../src/types/Types.sol";
import {MarketParams, NodeCapabilities, NodeInfo, NodeStatus, ReclaimKind} from "../../src/types/Types.sol";

/// @notice Helpers shared by the JobMarket unit tests.
abstract contract JobMarketBase is Base {
    uint96 internal constant SLASH = uint96((uint256(STAKE) * SLASH_BPS) / 10_000);

    function jobOf(uint64 jobId) internal view returns (JobInfo memory) {
        return market.getJob(jobId);
    }

    function nodeOf(uint64 nodeId) internal view returns (NodeInfo memory) {
        return registry.getNode(nodeId);
    }

    /// The slash of a node with `stake` at the fixture's slash rate.
    function slashOf(uint96 stake) internal pure returns (uint96) {
        return uint96((uint256(stake) * SLASH_BPS) / 10_000);
    }

    // ---------------------------------------------------------------- steps

    /// Registers a node of `operator` run by `agent` with the given capabilities.
    function registerNodeWith(NodeCapabilities memory capabilities) internal returns (uint64 nodeId) {
        vm.prank(operator);
        nodeId = registry.register(agent, capabilities, "ipfs://node-meta", STAKE);
    }

    function postJobWith(JobRequirements memory requirements) internal returns (uint64 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(requirements, BOUNTY, uint40(block.timestamp + 1 days), specJson());
    }

    /// Warps past the node's heartbeat timeout and marks it Inactive.
    function makeInactive(uint64 nodeId) internal {
        uint256 expiresAt = uint256(registry.getNode(nodeId).lastHeartbeat) + HEARTBEAT_TIMEOUT;
        if (block.timestamp <= expiresAt) vm.warp(expiresAt + 1);
        registry.markInactive(nodeId);
        assertEq(uint8(registry.statusOf(nodeId)), uint8(NodeStatus.Inactive));
    }

    function disputeJob(uint64 jobId) internal {
        vm.prank(submitter);
        market.dispute(jobId);
    }

    /// Assigns `jobId` to `nodeId` and has the node's agent reject it: the job is Open again
    /// with one attempt used.
    function assignAndReject(uint64 jobId, uint64 nodeId) internal {
        assignJob(jobId, nodeId);
        vm.prank(agent);
        market.reject(jobId, "bad input");
    }

    /// Sets the protocol fee for jobs posted from now on, leaving the other parameters as deployed.
    function setProtocolFee(uint16 protocolFeeBps) internal {
        MarketParams memory p = marketParams();
        p.protocolFeeBps = protocolFeeBps;
        setMarketParams(p);
    }

    /// Sets the bond of disputes from now on, leaving the other parameters as deployed.
    function setDisputeBond(uint96 disputeBond) internal {
        MarketParams memory p = marketParams();
        p.disputeBond = disputeBond;
        setMarketParams(p);
    }

    /// Lowers (or raises) the attempts a job may use, leaving the other parameters as deployed.
    function setMaxAttempts(uint8 maxAttempts) internal {
        MarketParams memory p = marketParams();
        p.maxAttempts = maxAttempts;
        setMarketParams(p);
    }

    function setMarketParams(MarketParams memory p) internal {
        vm.prank(admin);
        market.setParams(p);
    }

    function pauseMarket() internal {
        vm.prank(pauser);
        market.pause();
    }

    // ---------------------------------------------------------------- expectations

    function expectMarketEmit() internal {
        vm.expectEmit(true, true, true, true, address(market));
    }

    function expectRequeued(uint64 jobId, uint8 attemptsUsed) internal {
        expectMarketEmit();
        emit IJobMarket.JobRequeued(jobId, attemptsUsed);
    }

    function expectReclaimed(uint64 jobId, uint64 nodeId, ReclaimKind kind, uint96 slashed, address by) internal {
        expectMarketEmit();
        emit IJobMarket.JobReclaimed(jobId, nodeId, kind, slashed, by);
    }

    function expectFailed(uint64 jobId, FailureKind kind, uint256 refund) internal {
        expectMarketEmit();
        emit IJobMarket.JobFailed(jobId, kind, refund);
    }

    function expectUnknownJob(uint64 jobId) internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, jobId));
    }

    function expectWrongStatus(uint64 jobId, JobStatus status) internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, status));
    }

    /// Expects the market's pull of `needed` tokens to fail on an allowance of `allowance`.
    function expectAllowanceShort(uint256 allowance, uint256 needed) internal {
        vm.expectRevert(
            abi.encodeWithSelector(IERC20Errors.ERC20InsufficientAllowance.selector, address(market), allowance, needed)
        );
    }

    function expectPastDeadline(uint64 jobId) internal {
        uint40 deadline = jobOf(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
    }

    function expectNotSubmitter(uint64 jobId, address caller) internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotSubmitter.selector, jobId, caller));
    }

    function expectNotAssignedAgent(uint64 jobId, address caller) internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, caller));
    }

    // ---------------------------------------------------------------- checks

    function assertStatus(uint64 jobId, JobStatus expected) internal view {
        assertEq(uint8(market.getJob(jobId).status), uint8(expected), "job status");
    }

    function assertMarketParams(MarketParams memory actual, MarketParams memory expected) internal pure {
        assertEq(actual.feeRecipient, expected.feeRecipient);
        assertEq(actual.challengeWindow, expected.challengeWindow);
        assertEq(actual.protocolFeeBps, expected.protocolFeeBps);
        assertEq(actual.maxAttempts, expected.maxAttempts);
        assertEq(actual.disputeBond, expected.disputeBond);
    }

    /// Asserts that `jobId` is Open again after its first attempt on `nodeId`, with its bounty
    /// still in escrow and `slashed` (zero for a rejection) moved from the node's stake to the
    /// submitter's credit; `failedJobs` is the node's fault count.
    function assertRequeued(uint64 jobId, uint64 nodeId, uint96 slashed, uint256 failedJobs, uint256 registryBefore)
        internal
        view
    {
        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Open));
        assertEq(job.attempts, 1, "attempts kept");
        assertEq(job.nodeId, nodeId, "last node kept");
        assertEq(job.bounty, BOUNTY);
        assertEq(market.creditOf(submitter), slashed);
        assertEq(token.balanceOf(address(market)), BOUNTY + slashed);
        assertEq(token.balanceOf(address(registry)), registryBefore - slashed);
        assertNodeCounters(nodeId, 0, 0, 0, failedJobs);
        assertEq(nodeOf(nodeId).stake, STAKE - slashed);
        assertEq(nodeOf(nodeId).totalSlashed, slashed);
    }

    /// Asserts that `jobId` failed with every attempt used, the submitter credited with the
    /// bounty plus the `slashed` total, and `nodeId` left with its stake less that total.
    function assertFailedOutOfAttempts(uint64 jobId, uint64 nodeId, uint256 slashed, uint256 failedJobs) internal view {
        assertStatus(jobId, JobStatus.Failed);
        assertEq(jobOf(jobId).attempts, MAX_ATTEMPTS);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + slashed);
        assertEq(token.balanceOf(address(market)), uint256(BOUNTY) + slashed);
        assertNodeCounters(nodeId, 0, 0, 0, failedJobs);
        assertEq(nodeOf(nodeId).stake, STAKE - slashed);
    }
}

/// @notice A job posted by `submitter`, Open with its bounty in escrow until `deadline`.
abstract contract JobMarket_PostedJob_Test is JobMarketBase {
    uint64 internal jobId;
    uint40 internal deadline;

    function setUp() public virtual override {
        super.setUp();
        jobId = postJob();
        deadline = jobOf(jobId).deadline;
    }

    /// Expects the fixture's job to be refused for being in `status`.
    function expectWrongStatus(JobStatus status) internal {
        expectWrongStatus(jobId, status);
    }
}

/// @notice The posted job and a registered node, not yet assigned to each other.
abstract contract JobMarket_OpenJob_Test is JobMarket_PostedJob_Test, RegisteredNode {
    function setUp() public virtual override(JobMarket_PostedJob_Test, RegisteredNode) {
        super.setUp();
    }
}

/// @notice The job assigned to the node by the matcher: its first attempt is running.
abstract contract JobMarket_AssignedJob_Test is JobMarket_OpenJob_Test {
    function setUp() public virtual override {
        super.setUp();
        assignJob(jobId, nodeId);
    }
}

/// @notice The node submitted the job's result: the challenge window runs until `endsAt`.
abstract contract JobMarket_SubmittedJob_Test is JobMarket_AssignedJob_Test {
    uint40 internal endsAt;

    function setUp() public virtual override {
        super.setUp();
        submitJob(jobId);
        endsAt = jobOf(jobId).challengeEndsAt;
    }

    /// A second job, assigned to the same node and still running.
    function assignAnotherJob() internal returns (uint64 assigned) {
        assigned = postJob();
        assignJob(assigned, nodeId);
    }

    function expectCompleted(uint64 id, uint96 payout, uint96 protocolFee, CompletionKind kind) internal {
        expectMarketEmit();
        emit IJobMarket.JobCompleted(id, nodeId, operator, payout, protocolFee, kind);
    }

    /// Asserts that the job completed: the operator is credited with `operatorCredit`, the
    /// fee recipient with the fee, and the market still holds `marketBalance`.
    function assertProviderPaid(uint256 operatorCredit, uint256 marketBalance) internal view {
        assertStatus(jobId, JobStatus.Completed);
        assertEq(market.creditOf(operator), operatorCredit, "operator credit");
        assertEq(market.creditOf(treasury), fee(BOUNTY));
        assertEq(market.creditOf(submitter), 0);
        assertEq(token.balanceOf(address(market)), marketBalance, "credits stay in the market until withdrawn");
        assertNodeCounters(nodeId, 0, 0, 1, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }
}
