// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarket_Assignment_Shared} from "./JobMarket.assignment.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobInfo, JobRequirements, JobStatus, NodeCapabilities, NodeStatus} from "../../src/types/Types.sol";

contract JobMarket_Claim_Test is JobMarket_Assignment_Shared {
    function take(uint64 id, uint64 node) internal override {
        claimJob(id, node);
    }

    function claimJob(uint64 id, uint64 node) internal {
        vm.prank(agent);
        market.claim(id, node);
    }

    function test_Claim_AssignsJob() external {
        uint40 now40 = uint40(block.timestamp);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 1, true, now40);
        claimJob(jobId, nodeId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Assigned));
        assertEq(job.attempts, 1);
        assertEq(job.nodeId, nodeId);
        assertEq(job.assignedAt, now40);
        assertEq(job.challengeEndsAt, 0);
        assertEq(job.bounty, BOUNTY);
        assertNodeCounters(nodeId, 1, 0, 0, 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

    function test_Claim_ByNewAgentAfterAgentChange() external {
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, newAgent, 1, true, uint40(block.timestamp));
        vm.prank(newAgent);
        market.claim(jobId, nodeId);
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_RevertWhen_MatcherClaims() external {
        // The claim path checks the node's agent, not the matcher role.
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, matcher));
        vm.prank(matcher);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_CallerNotNodeAgent() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, stranger));
        vm.prank(stranger);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_CallerIsNodeOperator() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, operator));
        vm.prank(operator);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_CallerIsAgentOfAnotherNode() external {
        address otherAgent = makeAddr("otherAgent");
        vm.prank(operator);
        registry.register(otherAgent, h100Node(), "ipfs://other", STAKE);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, otherAgent));
        vm.prank(otherAgent);
        market.claim(jobId, nodeId);
    }
}
