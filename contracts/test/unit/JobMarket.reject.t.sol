// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {FailureKind, JobInfo, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Reject_Test is JobMarketBase {
    string internal constant REASON = "image pull failed";

    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
        assignJob(jobId, nodeId);
    }

    function reject(address caller, uint64 id) internal {
        vm.prank(caller);
        market.reject(id, REASON);
    }

    function test_Reject_RequeuesWithoutSlash() external {
        uint256 registryBefore = token.balanceOf(address(registry));
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobRejected(jobId, nodeId, REASON);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobRequeued(jobId, 1);
        reject(agent, jobId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Open));
        assertEq(job.attempts, 1);
        assertEq(market.creditOf(submitter), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
        assertEq(token.balanceOf(address(registry)), registryBefore);
        assertNodeCounters(nodeId, 0, 0, 0, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
        assertEq(nodeOf(nodeId).totalSlashed, 0);
    }

    function test_Reject_RequeuedJobIsAssignedAgain() external {
        reject(agent, jobId);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 2, true, uint40(block.timestamp));
        vm.prank(agent);
        market.claim(jobId, nodeId);
        assertEq(jobOf(jobId).attempts, 2);
    }

    function test_Reject_FailsJobOutOfAttempts() external {
        for (uint8 attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
            reject(agent, jobId);
            assignJob(jobId, nodeId);
        }
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobRejected(jobId, nodeId, REASON);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        reject(agent, jobId);

        assertStatus(jobId, JobStatus.Failed);
        assertEq(jobOf(jobId).attempts, MAX_ATTEMPTS);
        assertEq(market.creditOf(submitter), BOUNTY);
        assertNodeCounters(nodeId, 0, 0, 0, 0);
        assertEq(nodeOf(nodeId).stake, STAKE);
    }

    /// Past the deadline the node is at fault: the job is expired (with the slash), not rejected.
    function test_RevertWhen_PastDeadline() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        reject(agent, jobId);
    }

    function test_RevertWhen_PastMaxRuntime() external {
        vm.warp(block.timestamp + h100Job().maxRuntime + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        reject(agent, jobId);
    }

    function test_Reject_AtMaxRuntimeBoundary() external {
        vm.warp(block.timestamp + h100Job().maxRuntime);
        reject(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_RevertWhen_NodeInactive() external {
        makeInactive(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_MustBeReclaimed.selector, jobId));
        reject(agent, jobId);
    }

    function test_Reject_ByNewAgentAfterAgentChange() external {
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
        reject(newAgent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_RevertWhen_CallerNotAssignedAgent() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, stranger));
        reject(stranger, jobId);
    }

    function test_RevertWhen_CallerIsSubmitter() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, submitter));
        reject(submitter, jobId);
    }

    function test_RevertWhen_CallerIsOperator() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, operator));
        reject(operator, jobId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        reject(agent, 99);
    }

    function test_RevertWhen_JobOpen() external {
        uint64 open = postJob();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, open, JobStatus.Open));
        reject(agent, open);
    }

    function test_RevertWhen_JobSubmitted() external {
        submitJob(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Submitted));
        reject(agent, jobId);
    }
}
