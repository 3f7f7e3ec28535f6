// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {FailureKind, JobInfo, JobRequirements, JobStatus, MarketParams, ReclaimKind} from "../../src/types/Types.sol";

contract JobMarket_Reclaim_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;
    uint40 internal assignedAt;
    uint32 internal maxRuntime;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
        assignJob(jobId, nodeId);
        assignedAt = uint40(block.timestamp);
        maxRuntime = h100Job().maxRuntime;
    }

    function reclaim(uint64 id) internal {
        vm.prank(stranger);
        market.reclaim(id);
    }

    /// Warps just past the current attempt's runtime; the node keeps heartbeating.
    function exceedRuntime(uint64 id) internal {
        vm.warp(uint256(jobOf(id).assignedAt) + jobOf(id).requirements.maxRuntime + 1);
        heartbeat(nodeId);
    }

    function test_Reclaim_NodeInactive() external {
        makeInactive(nodeId);
        uint256 registryBefore = token.balanceOf(address(registry));

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.NodeInactive, SLASH, stranger);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobRequeued(jobId, 1);
        reclaim(jobId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Open));
        assertEq(job.attempts, 1, "attempts kept");
        assertEq(job.nodeId, nodeId, "last node kept");
        assertEq(job.bounty, BOUNTY);
        assertEq(market.creditOf(submitter), SLASH);
        assertEq(market.creditOf(stranger), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY + SLASH);
        assertEq(token.balanceOf(address(registry)), registryBefore - SLASH);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
        assertEq(nodeOf(nodeId).totalSlashed, SLASH);
    }

    function test_Reclaim_RuntimeExceeded() external {
        exceedRuntime(jobId);
        assertEq(block.timestamp, uint256(assignedAt) + maxRuntime + 1);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.RuntimeExceeded, SLASH, stranger);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobRequeued(jobId, 1);
        reclaim(jobId);

        assertStatus(jobId, JobStatus.Open);
        assertEq(jobOf(jobId).attempts, 1);
        assertEq(market.creditOf(submitter), SLASH);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
    }

    function test_Reclaim_RequeuedJobIsAssignedAgain() external {
        exceedRuntime(jobId);
        reclaim(jobId);

        vm.warp(block.timestamp + 10);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 2, false, uint40(block.timestamp));
        assignJob(jobId, nodeId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Assigned));
        assertEq(job.attempts, 2);
        assertEq(job.assignedAt, block.timestamp);
        assertNodeCounters(nodeId, 1, 0, 0, 1);

        // The runtime counts from the new assignment.
        vm.warp(uint256(job.assignedAt) + maxRuntime);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        reclaim(jobId);
    }

    function test_Reclaim_FailsJobOutOfAttempts() external {
        uint256 slashed;
        for (uint8 attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
            exceedRuntime(jobId);
            slashed += nodeOf(nodeId).stake * uint256(SLASH_BPS) / 10_000;
            reclaim(jobId);
            assignJob(jobId, nodeId);
        }
        assertEq(jobOf(jobId).attempts, MAX_ATTEMPTS);
        exceedRuntime(jobId);
        uint96 lastSlash = slashOf(nodeOf(nodeId).stake);
        slashed += lastSlash;

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.RuntimeExceeded, lastSlash, stranger);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reclaim(jobId);

        assertStatus(jobId, JobStatus.Failed);
        assertEq(jobOf(jobId).attempts, MAX_ATTEMPTS);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + slashed);
        assertEq(token.balanceOf(address(market)), uint256(BOUNTY) + slashed);
        assertNodeCounters(nodeId, 0, 0, 0, MAX_ATTEMPTS);
        assertEq(nodeOf(nodeId).stake, STAKE - slashed);
    }

    function test_Reclaim_FailsJobWhenMaxAttemptsLowered() external {
        MarketParams memory p = marketParams();
        p.maxAttempts = 1;
        setMarketParams(p);
        makeInactive(nodeId);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reclaim(jobId);
        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
    }

    function test_Reclaim_FailsJobPastDeadline() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        heartbeat(nodeId);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(jobId, nodeId, ReclaimKind.RuntimeExceeded, SLASH, stranger);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.PastDeadline, BOUNTY);
        reclaim(jobId);

        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
    }

    function test_Reclaim_FailsJobPastDeadlineOnInactiveNode() external {
        // The deadline comes before the runtime ends: only an Inactive node makes it reclaimable.
        JobRequirements memory req = h100Job();
        req.maxRuntime = 2 days;
        vm.prank(submitter);
        uint64 shortJob = market.postJob(req, BOUNTY, uint40(block.timestamp + 1 hours), specJson());
        assignJob(shortJob, nodeId);
        vm.warp(jobOf(shortJob).deadline);
        makeInactive(nodeId);

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobReclaimed(shortJob, nodeId, ReclaimKind.NodeInactive, SLASH, stranger);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(shortJob, FailureKind.PastDeadline, BOUNTY);
        reclaim(shortJob);
        assertStatus(shortJob, JobStatus.Failed);
    }

    function test_Reclaim_OutOfAttemptsTakesPrecedenceOverDeadline() external {
        MarketParams memory p = marketParams();
        p.maxAttempts = 1;
        setMarketParams(p);
        vm.warp(jobOf(jobId).deadline);
        heartbeat(nodeId);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reclaim(jobId);
    }

    function test_RevertWhen_DeadlinePassedBeforeRuntimeEnds() external {
        // Deadline before assignedAt + maxRuntime and a live node: reclaim is not the way
        // out, expire is.
        JobRequirements memory req = h100Job();
        req.maxRuntime = 2 days;
        vm.prank(submitter);
        uint64 shortJob = market.postJob(req, BOUNTY, uint40(block.timestamp + 1 hours), specJson());
        assignJob(shortJob, nodeId);
        vm.warp(uint256(jobOf(shortJob).deadline) + 1);
        heartbeat(nodeId);

        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, shortJob));
        reclaim(shortJob);

        market.expire(shortJob);
        assertStatus(shortJob, JobStatus.Expired);
    }

    function test_RevertWhen_NodeAliveAndRuntimeNotExceeded() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        reclaim(jobId);
    }

    function test_RevertWhen_RuntimeEndsExactlyNow() external {
        vm.warp(uint256(assignedAt) + maxRuntime);
        heartbeat(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        reclaim(jobId);
    }

    function test_RevertWhen_HeartbeatOverdueButNodeNotMarkedInactive() external {
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        reclaim(jobId);
    }

    function test_RevertWhen_NodeReactivated() external {
        makeInactive(nodeId);
        heartbeat(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        reclaim(jobId);
    }

    function test_RevertWhen_NodeExitingWithinRuntime() external {
        beginExit(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, jobId));
        reclaim(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        reclaim(99);
    }

    function test_RevertWhen_JobOpen() external {
        uint64 open = postJob();
        makeInactive(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, open, JobStatus.Open));
        reclaim(open);
    }

    function test_RevertWhen_JobRequeued() external {
        makeInactive(nodeId);
        reclaim(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Open));
        reclaim(jobId);
        assertEq(market.creditOf(submitter), SLASH);
    }

    function test_RevertWhen_JobSubmitted() external {
        submitJob(jobId);
        makeInactive(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Submitted));
        reclaim(jobId);
    }
}
