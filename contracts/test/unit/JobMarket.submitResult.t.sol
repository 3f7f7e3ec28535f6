// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_AgentCall_Shared} from "./JobMarket.agentCall.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobInfo, JobStatus} from "../../src/types/Types.sol";

contract JobMarket_SubmitResult_Test is JobMarket_AgentCall_Shared {
    bytes32 internal constant RESULT = keccak256("result");

    function actAs(address caller, uint64 id) internal override {
        vm.prank(caller);
        market.submitResult(id, RESULT, "ipfs://result");
    }

    function submitAs(address caller) internal {
        actAs(caller, jobId);
    }

    function test_SubmitResult_SubmitsResult() external {
        vm.warp(block.timestamp + 30 minutes);
        uint40 endsAt = uint40(block.timestamp) + CHALLENGE_WINDOW;
        expectMarketEmit();
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
        vm.warp(deadline - 1);
        submitAs(agent);
        assertStatus(jobId, JobStatus.Submitted);
        assertEq(jobOf(jobId).challengeEndsAt, deadline - 1 + CHALLENGE_WINDOW);
    }

    function test_SubmitResult_ByNewAgentAfterAgentChange() external {
        submitAs(setNewAgent(nodeId));
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

    function test_RevertWhen_CallerIsFormerAgent() external {
        setNewAgent(nodeId);
        expectNotAssignedAgent(jobId, agent);
        submitAs(agent);
    }

    function test_RevertWhen_SubmittedTwice() external {
        submitAs(agent);
        expectWrongStatus(JobStatus.Submitted);
        submitAs(agent);
        assertNodeCounters(nodeId, 0, 1, 0, 0);
    }

    function test_RevertWhen_DeadlineReached() external {
        vm.warp(deadline);
        expectPastDeadline(jobId);
        submitAs(agent);
    }

    function test_RevertWhen_DeadlinePassed() external {
        vm.warp(uint256(deadline) + 1 hours);
        expectPastDeadline(jobId);
        submitAs(agent);
    }
}
