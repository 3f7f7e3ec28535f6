// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {JobMarket_Assignment_Shared} from "./JobMarket.assignment.shared.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {JobStatus} from "../../src/types/Types.sol";

contract JobMarket_Claim_Test is JobMarket_Assignment_Shared {
    function take(uint64 id, uint64 node) internal override {
        claimAs(agent, id, node);
    }

    function claimAs(address caller, uint64 id, uint64 node) internal {
        vm.prank(caller);
        market.claim(id, node);
    }

    function expectNotNodeAgent(address caller) internal {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, caller));
    }

    function test_Claim_AssignsJob() external {
        assertTaken(true);
    }

    function test_Claim_ByNewAgentAfterAgentChange() external {
        address newAgent = setNewAgent(nodeId);
        expectMarketEmit();
        emit IJobMarket.JobAssigned(jobId, nodeId, newAgent, 1, true, uint40(block.timestamp));
        claimAs(newAgent, jobId, nodeId);
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_RevertWhen_MatcherClaims() external {
        // The claim path checks the node's agent, not the matcher role.
        expectNotNodeAgent(matcher);
        claimAs(matcher, jobId, nodeId);
    }

    function test_RevertWhen_CallerNotNodeAgent() external {
        expectNotNodeAgent(stranger);
        claimAs(stranger, jobId, nodeId);
    }

    function test_RevertWhen_CallerIsNodeOperator() external {
        expectNotNodeAgent(operator);
        claimAs(operator, jobId, nodeId);
    }

    function test_RevertWhen_CallerIsAgentOfAnotherNode() external {
        address otherAgent = makeAddr("otherAgent");
        vm.prank(operator);
        registry.register(otherAgent, h100Node(), "ipfs://other", STAKE);
        expectNotNodeAgent(otherAgent);
        claimAs(otherAgent, jobId, nodeId);
    }
}
