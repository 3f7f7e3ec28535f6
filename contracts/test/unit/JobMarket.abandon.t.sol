// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_GiveBack_Shared} from "./JobMarket.agentCall.shared.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {FailureKind, JobStatus, ReclaimKind} from "../../src/types/Types.sol";

contract JobMarket_Abandon_Test is JobMarket_GiveBack_Shared {
    function abandon(address caller, uint64 id) internal {
        vm.prank(caller);
        market.abandon(id);
    }

    function actAs(address caller, uint64 id) internal override {
        abandon(caller, id);
    }

    function test_Abandon_SlashesAndRequeues() external {
        uint256 registryBefore = token.balanceOf(address(registry));

        vm.expectEmit(true, true, true, true, address(registry));
        emit INodeRegistry.NodeSlashed(nodeId, SLASH, STAKE - SLASH);
        expectReclaimed(jobId, nodeId, ReclaimKind.Abandoned, SLASH, agent);
        expectRequeued(jobId, 1);
        abandon(agent, jobId);

        assertRequeued(jobId, nodeId, SLASH, 1, registryBefore);
        assertEq(market.creditOf(agent), 0);
    }

    function test_Abandon_RequeuedJobIsAssignedAgain() external {
        abandon(agent, jobId);
        claimAgain();
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

        expectReclaimed(jobId, nodeId, ReclaimKind.Abandoned, lastSlash, agent);
        expectFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        abandon(agent, jobId);

        assertFailedOutOfAttempts(jobId, nodeId, slashed, MAX_ATTEMPTS);
    }

    function test_Abandon_FailsJobWhenMaxAttemptsLowered() external {
        setMaxAttempts(1);
        expectFailed(jobId, FailureKind.OutOfAttempts, BOUNTY);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Failed);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
    }

    /// A node already at fault may still give the job back: the slash is the one a reclaim takes.
    function test_Abandon_NodeInactive() external {
        makeInactive(nodeId);
        expectReclaimed(jobId, nodeId, ReclaimKind.Abandoned, SLASH, agent);
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
        address newAgent = setNewAgent(nodeId);
        expectReclaimed(jobId, nodeId, ReclaimKind.Abandoned, SLASH, newAgent);
        abandon(newAgent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    function test_Abandon_JustBeforeDeadline() external {
        vm.warp(uint256(deadline) - 1);
        abandon(agent, jobId);
        assertStatus(jobId, JobStatus.Open);
    }

    /// At the deadline the job is expired instead, with the same slash.
    function test_RevertWhen_AtDeadline() external {
        vm.warp(deadline);
        expectPastDeadline(jobId);
        abandon(agent, jobId);

        market.expire(jobId);
        assertStatus(jobId, JobStatus.Expired);
        assertEq(market.creditOf(submitter), uint256(BOUNTY) + SLASH);
    }

    function test_RevertWhen_PastDeadline() external {
        vm.warp(uint256(deadline) + 1);
        expectPastDeadline(jobId);
        abandon(agent, jobId);
    }

    function test_RevertWhen_CallerIsAnotherNodesAgent() external {
        address otherAgent = makeAddr("otherAgent");
        vm.prank(operator);
        registry.register(otherAgent, h100Node(), "", STAKE);
        expectNotAssignedAgent(jobId, otherAgent);
        abandon(otherAgent, jobId);
    }

    function test_RevertWhen_JobRequeued() external {
        abandon(agent, jobId);
        expectWrongStatus(JobStatus.Open);
        abandon(agent, jobId);
        assertEq(market.creditOf(submitter), SLASH, "slashed once");
    }
}
