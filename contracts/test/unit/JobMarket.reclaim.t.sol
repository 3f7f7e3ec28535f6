// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_AssignedJob_Test} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {FailureKind, JobInfo, JobRequirements, JobStatus, ReclaimKind} from "../../src/types/Types.sol";

contract JobMarket_Reclaim_Test is JobMarket_AssignedJob_Test {
    uint40 internal assignedAt;
    uint32 internal maxRuntime;

    function setUp() public override {
        super.setUp();
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

    function expectNotReclaimable(uint64 id) internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotReclaimable.selector, id));
    }

    /// Posts a job whose deadline (an hour away) comes before its runtime (two days) ends, and
    /// assigns it to the node.
    function assignShortJob() internal returns (uint64 shortJob) {
        JobRequirements memory req = h100Job();
        req.maxRuntime = 2 days;
        vm.prank(submitter);
        shortJob = market.postJob(req, BOUNTY, uint40(block.timestamp + 1 hours), specJson());
        assignJob(shortJob, nodeId);
    }

    function test_Reclaim_NodeInactive() external {
        makeInactive(nodeId);
        uint256 registryBefore = token.balanceOf(address(registry));

        expectReclaimed(jobId, nodeId, ReclaimKind.NodeInactive, SLASH, stranger);
        expectRequeued(jobId, 1);
        reclaim(jobId);

        assertRequeued(jobId, nodeId, SLASH, 1, registryBefore);
        assertEq(market.creditOf(stranger), 0);
    }

    function test_Reclaim_RuntimeExceeded() external {
        exceedRuntime(jobId);
        assertEq(block.timestamp, uint256(assignedAt) + maxRuntime + 1);
        uint256 registryBefore = token.balanceOf(address(registry));

        expectReclaimed(jobId, nodeId, ReclaimKind.RuntimeExceeded, SLASH, stranger);
        expectRequeued(jobId, 1);
        reclaim(jobId);

        assertRequeued(jobId, nodeId, SLASH, 1, registryBefore);
    }

    function test_Reclaim_RequeuedJobIsAssignedAgain() external {
        exceedRuntime(jobId);
        reclaim(jobId);

        vm.warp(block.timestamp + 10);
        expectMarketEmit();
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 2, false, uint40(block.timestamp));
        assignJob(jobId, nodeId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Assigned));
        assertEq(job.attempts, 2);
        assertEq(job.assignedAt, block.timestamp);
        assertNodeCounters(nodeId, 1, 0, 0, 1);

        // The runtime counts from the new assignment.
        vm.warp(uint256(job.assignedAt) + maxRuntime);
        expectNotReclaimable(jobId);
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

        expectReclaimed(jobId, nodeId, ReclaimKind.RuntimeExceeded, lastSlash, stranger);
        expectFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reclaim(jobId);

        assertFailedOutOfAttempts(jobId, nodeId, slashed, MAX_ATTEMPTS);
    }

    function test_Reclaim_FailsJobWhenMaxAttemptsLowered() external {
        setMaxAttempts(1);
        makeInactive(nodeId);
        expectFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reclaim(jobId);
        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
    }

    function test_Reclaim_FailsJobPastDeadline() external {
        vm.warp(deadline);
        heartbeat(nodeId);

        expectReclaimed(jobId, nodeId, ReclaimKind.RuntimeExceeded, SLASH, stranger);
        expectFailed(jobId, FailureKind.PastDeadline, BOUNTY);
        reclaim(jobId);

        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        assertEq(nodeOf(nodeId).stake, STAKE - SLASH);
    }

    function test_Reclaim_FailsJobPastDeadlineOnInactiveNode() external {
        // The deadline comes before the runtime ends: only an Inactive node makes it reclaimable.
        uint64 shortJob = assignShortJob();
        vm.warp(jobOf(shortJob).deadline);
        makeInactive(nodeId);

        expectReclaimed(shortJob, nodeId, ReclaimKind.NodeInactive, SLASH, stranger);
        expectFailed(shortJob, FailureKind.PastDeadline, BOUNTY);
        reclaim(shortJob);
        assertStatus(shortJob, JobStatus.Failed);
    }

    function test_Reclaim_OutOfAttemptsTakesPrecedenceOverDeadline() external {
        setMaxAttempts(1);
        vm.warp(deadline);
        heartbeat(nodeId);
        expectFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reclaim(jobId);
    }

    function test_RevertWhen_DeadlinePassedBeforeRuntimeEnds() external {
        // Deadline before assignedAt + maxRuntime and a live node: reclaim is not the way
        // out, expire is.
        uint64 shortJob = assignShortJob();
        vm.warp(uint256(jobOf(shortJob).deadline) + 1);
        heartbeat(nodeId);

        expectNotReclaimable(shortJob);
        reclaim(shortJob);

        market.expire(shortJob);
        assertStatus(shortJob, JobStatus.Expired);
    }

    function test_RevertWhen_NodeAliveAndRuntimeNotExceeded() external {
        expectNotReclaimable(jobId);
        reclaim(jobId);
    }

    function test_RevertWhen_RuntimeEndsExactlyNow() external {
        vm.warp(uint256(assignedAt) + maxRuntime);
        heartbeat(nodeId);
        expectNotReclaimable(jobId);
        reclaim(jobId);
    }

    function test_RevertWhen_HeartbeatOverdueButNodeNotMarkedInactive() external {
        vm.warp(block.timestamp + HEARTBEAT_TIMEOUT + 1);
        expectNotReclaimable(jobId);
        reclaim(jobId);
    }

    function test_RevertWhen_NodeReactivated() external {
        makeInactive(nodeId);
        heartbeat(nodeId);
        expectNotReclaimable(jobId);
        reclaim(jobId);
    }

    function test_RevertWhen_NodeExitingWithinRuntime() external {
        beginExit(nodeId);
        expectNotReclaimable(jobId);
        reclaim(jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        expectUnknownJob(99);
        reclaim(99);
    }

    function test_RevertWhen_JobOpen() external {
        uint64 open = postJob();
        makeInactive(nodeId);
        expectWrongStatus(open, JobStatus.Open);
        reclaim(open);
    }

    function test_RevertWhen_JobRequeued() external {
        makeInactive(nodeId);
        reclaim(jobId);
        expectWrongStatus(JobStatus.Open);
        reclaim(jobId);
        assertEq(market.creditOf(submitter), SLASH);
    }

    function test_RevertWhen_JobSubmitted() external {
        submitJob(jobId);
        makeInactive(nodeId);
        expectWrongStatus(JobStatus.Submitted);
        reclaim(jobId);
    }
}
