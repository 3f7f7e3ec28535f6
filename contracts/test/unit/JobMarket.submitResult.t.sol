// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobInfo, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_SubmitResult_Test is JobMarketBase {
    bytes32 internal constant RESULT = keccak256("result");

    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
        assignJob(jobId, nodeId);
    }

    function submitAs(address caller) internal {
        vm.prank(caller);
        market.submitResult(jobId, RESULT, "ipfs://result");
    }

    function test_SubmitResult_SubmitsResult() external {
        vm.warp(block.timestamp + 30 minutes);
        uint40 endsAt = uint40(block.timestamp) + CHALLENGE_WINDOW;
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.ResultSubmitted(jobId, nodeId, RESULT, "ipfs://result", endsAt);
        submitAs(agent);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Submitted));
        assertEq(job.challengeEndsAt, endsAt);
        assertEq(job.resultHash, RESULT);
        assertEq(job.nodeId, nodeId);
        assertEq(job.attempts, 1);
        assertNodeCounters(nodeId, 0, 1, 0, 0);
        assertEq(market.creditOf(operator), 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    function test_SubmitResult_OneSecondBeforeDeadline() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline - 1);
        submitAs(agent);
        assertStatus(jobId, JobStatus.Submitted);
        assertEq(jobOf(jobId).challengeEndsAt, deadline - 1 + CHALLENGE_WINDOW);
    }

    function test_SubmitResult_ByNewAgentAfterAgentChange() external {
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
        submitAs(newAgent);
        assertStatus(jobId, JobStatus.Submitted);
        assertNodeCounters(nodeId, 0, 1, 0, 0);
    }

    function test_SubmitResult_ByInactiveNode() external {
        // A node marked Inactive may still deliver as long as the job was not reclaimed.
        makeInactive(nodeId);
        submitAs(agent);
        assertStatus(jobId, JobStatus.Submitted);
        assertNodeCounters(nodeId, 0, 1, 0, 0);
    }

    function test_RevertWhen_CallerNotAssignedAgent() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, stranger));
        submitAs(stranger);
        assertNodeCounters(nodeId, 1, 0, 0, 0);
    }

    function test_RevertWhen_CallerIsOperator() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, operator));
        submitAs(operator);
    }

    function test_RevertWhen_CallerIsFormerAgent() external {
        vm.prank(operator);
        registry.setAgent(nodeId, makeAddr("newAgent"));
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, agent));
        submitAs(agent);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        vm.prank(agent);
        market.submitResult(99, RESULT, "ipfs://result");
    }

    function test_RevertWhen_JobOpen() external {
        uint64 open = postJob();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, open, JobStatus.Open));
        vm.prank(agent);
        market.submitResult(open, RESULT, "ipfs://result");
    }

    function test_RevertWhen_SubmittedTwice() external {
        submitAs(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Submitted));
        submitAs(agent);
        assertNodeCounters(nodeId, 0, 1, 0, 0);
    }

    function test_RevertWhen_DeadlineReached() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        submitAs(agent);
    }

    function test_RevertWhen_DeadlinePassed() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(uint256(deadline) + 1 hours);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        submitAs(agent);
    }
}
