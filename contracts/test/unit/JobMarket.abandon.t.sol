// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {FailureKind, JobInfo, JobStatus, MarketParams, ReclaimKind} from "../../src/types/Types.sol";

contract JobMarket_Abandon_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
        assignJob(jobId, nodeId);
    }

    function abandon(address caller, uint64 id) internal {
        vm.prank(caller);
        market.abandon(id);
    }

    function test_Abandon_SlashesAndRequeues() external {
        uint256 registryBefore = token.balanceOf(address(registry));

        vm.expectEmit(true, true, true, true, address(registry));
        emit INodeRegistry.NodeSlashed(nodeId, SLASH, STAKE - SLASH);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.Abandoned, SLASH, agent);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobRequeued(jobId, 1);
        abandon(agent, jobId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Open));
        assertEq(job.attempts, 1, "attempts kept");
        assertEq(job.nodeId, nodeId, "last node kept");
        assertEq(job.bounty, BOUNTY);
        assertEq(market.creditOf(submitter), SLASH);
        assertEq(market.creditOf(agent), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY + SLASH);
        assertEq(token.balanceOf(address(registry)), registryBefore - SLASH);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
        assertEq(nodeOf(nodeId).totalSlashed, SLASH);
    }

    function test_Abandon_RequeuedJobIsAssignedAgain() external {
        abandon(agent, jobId);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 2, true, uint40(block.timestamp));
        vm.prank(agent);
        market.claim(jobId, nodeId);
        assertEq(jobOf(jobId).attempts, 2);
        assertNodeCounters(nodeId, 1, 0, 0, 1);
    }

    function test_Abandon_FailsJobOutOfAttempts() external {
        uint256 slashed;
        for (uint8 attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
            slashed += slashOf(nodeOf(nodeId).stake);
            abandon(agent, jobId);
            assignJob(jobId, nodeId);
        }
        assertEq(jobOf(jobId).attempts, MAX_ATTEMPTS);
        uint96 lastSlash = slashOf(nodeOf(nodeId).stake);
        slashed += lastSlash;

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.Abandoned, lastSlash, agent);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        abandon(agent, jobId);

        assertStatus(jobId, JobStatus.Failed);
        assertEq(jobOf(jobId).attempts, MAX_ATTEMPTS);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + slashed);
        assertEq(token.balanceOf(address(market)), uint256(BOUNTY) + slashed);
        assertNodeCounters(nodeId, 0, 0, 0, MAX_ATTEMPTS);
        assertEq(nodeOf(nodeId).stake, STAKE - slashed);
    }

    function test_Abandon_FailsJobWhenMaxAttemptsLowered() external {
        MarketParams memory p = marketParams();
        p.maxAttempts = 1;
        setMarketParams(p);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
    }

    /// A node already at fault may still give the job back: the slash is the one a reclaim takes.
    function test_Abandon_NodeInactive() external {
        makeInactive(nodeId);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.Abandoned, SLASH, agent);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
    }

    function test_Abandon_PastMaxRuntime() external {
        vm.warp(block.timestamp + h100Job().maxRuntime + 1);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
        assertEq(market.creditOf(submitter), SLASH);
    }

    /// A node shutting down for good: it began its exit, then gives back what it runs.
    function test_Abandon_NodeExiting() external {
        beginExit(nodeId);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
    }

    function test_Abandon_WhilePaused() external {
        pauseMarket();
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_Abandon_ByNewAgentAfterAgentChange() external {
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.Abandoned, SLASH, newAgent);
        abandon(newAgent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_Abandon_JustBeforeDeadline() external {
        vm.warp(uint256(jobOf(jobId).deadline) - 1);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    /// At the deadline the job is expired instead, with the same slash.
    function test_RevertWhen_AtDeadline() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        abandon(agent, jobId);

        market.expire(jobId);
        assertStatus(jobId, JobStatus.Expired);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
    }

    function test_RevertWhen_PastDeadline() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(uint256(deadline) + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        abandon(agent, jobId);
    }

    function test_RevertWhen_CallerNotAssignedAgent() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, stranger));
        abandon(stranger, jobId);
    }

    function test_RevertWhen_CallerIsSubmitter() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, submitter));
        abandon(submitter, jobId);
    }

    function test_RevertWhen_CallerIsOperator() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, operator));
        abandon(operator, jobId);
    }

    function test_RevertWhen_CallerIsAnotherNodesAgent() external {
        address otherAgent = makeAddr("otherAgent");
        vm.prank(operator);
        registry.register(otherAgent, h100Node(), "", STAKE);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, otherAgent));
        abandon(otherAgent, jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        abandon(agent, 99);
    }

    function test_RevertWhen_JobOpen() external {
        uint64 open = postJob();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, open, JobStatus.Open));
        abandon(agent, open);
    }

    function test_RevertWhen_JobRequeued() external {
        abandon(agent, jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Open));
        abandon(agent, jobId);
        assertEq(market.creditOf(submitter), SLASH, "slashed once");
    }

    function test_RevertWhen_JobSubmitted() external {
        submitJob(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Submitted));
        abandon(agent, jobId);
    }
}
