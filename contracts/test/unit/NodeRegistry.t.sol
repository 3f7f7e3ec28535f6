// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeRegistry} from "../../src/NodeRegistry.sol";
import {JobState, NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

/// The node calls, served at the market's address by the extension.
contract NodeRegistryTest is Base {
    using JobView for JobState;

    function test_Register_BindsTheConsentingAgent_AndTakesTheStake() public {
        uint256 before = token.balanceOf(operator);
        uint64 nodeId = registerNode();
        NodeInfo memory n = node(nodeId);
        assertEq(n.operator, operator);
        assertEq(n.agent, agent);
        assertEq(uint8(n.status), uint8(NodeStatus.Active));
        assertEq(n.stake, STAKE);
        assertEq(before - token.balanceOf(operator), STAKE);
        assertEq(nodes.agentNonce(agent), 1, "the consent is spent");
        assertReplay();
    }

    function test_Register_ByTheAgentItself_NeedsNoSignature() public {
        fund(agent, 1_000e6);
        vm.prank(agent);
        uint64 nodeId = nodes.register(h100Node(), "ipfs://self", STAKE, agent, 0, "");
        assertEq(node(nodeId).operator, agent);
    }

    function test_Register_RefusesAStakeBelowTheMinimum() public {
        bytes memory consent = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeTooLow.selector, MIN_STAKE - 1, MIN_STAKE)
        );
        nodes.register(h100Node(), "ipfs://x", MIN_STAKE - 1, agent, block.timestamp + 1 hours, consent);
    }

    function test_Register_RefusesInconsistentCapabilities() public {
        NodeCapabilities memory caps = h100Node();
        caps.gpuCount = 0;
        bytes memory consent = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        vm.expectRevert(INodeRegistry.NodeRegistry_InvalidCapabilities.selector);
        nodes.register(caps, "ipfs://x", STAKE, agent, block.timestamp + 1 hours, consent);
    }

    function test_TheExtension_RefusesDirectCalls() public {
        NodeRegistry extension = NodeRegistry(market.nodeRegistry());
        vm.prank(agent);
        vm.expectRevert(NodeRegistry.NodeRegistry_OnlyThroughMarket.selector);
        extension.register(h100Node(), "ipfs://x", STAKE, agent, 0, "");
    }

    function test_UpdateCapabilities_ChangesWhatAssignChecks() public {
        uint64 nodeId = registerNode();
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        vm.prank(operator);
        nodes.updateCapabilities(nodeId, caps, "ipfs://a100");
        sync();
        uint64 jobId = postJob();
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100));
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    function test_MarkInactive_ByAnyone_OnlyAfterTheTimeout() public {
        uint64 nodeId = registerNode();
        uint256 expiresAt = block.timestamp + HEARTBEAT_TIMEOUT;
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, expiresAt)
        );
        nodes.markInactive(nodeId);
        vm.warp(expiresAt + 1);
        vm.prank(stranger);
        nodes.markInactive(nodeId);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Inactive));
        assertEq(node(nodeId).inactiveSince, expiresAt + 1);
    }

    function test_Heartbeat_Reactivates_OnlyWithTheMinimumStake() public {
        uint64 nodeId = registerNode(operator, AGENT_KEY, h100Node(), MIN_STAKE);
        // One reclaim takes the stake below the minimum: Inactive, no new work.
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        vm.warp(jobs[jobId].state.until() + 1);
        reclaim(jobId);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Inactive));
        assertEq(node(nodeId).inactiveSince, 0, "a slash stops new work, it makes nothing reclaimable");
        vm.prank(agent);
        nodes.heartbeat(nodeId);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Inactive), "still below the minimum");
        vm.prank(operator);
        nodes.topUpStake(nodeId, MIN_STAKE);
        vm.prank(agent);
        nodes.heartbeat(nodeId);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Active));
        sync();
        assertReplay();
    }

    function test_WithdrawStake_OnlyAfterTheUnbondingPeriod() public {
        uint64 nodeId = registerNode();
        beginExit(nodeId);
        uint40 endsAt = uint40(block.timestamp + UNBONDING);
        withdrawStakeAt(nodeId, endsAt);
        assertEq(uint8(node(nodeId).status), uint8(NodeStatus.Exited));
        assertReplay();
    }

    function test_AnExitingNode_GetsNoNewWork() public {
        uint64 nodeId = registerNode();
        beginExit(nodeId);
        uint64 jobId = postJob();
        vm.prank(matcher);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NodeNotActive.selector, nodeId, NodeStatus.Exiting));
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    function test_SetAgent_MovesTheRightsToTheNewAgent() public {
        uint64 nodeId = registerNode();
        bytes memory consent = signConsent(operator, OTHER_AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        nodes.setAgent(nodeId, otherAgent, block.timestamp + 1 hours, consent);
        sync();
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotAgent.selector, nodeId, agent));
        nodes.heartbeat(nodeId);
        vm.prank(otherAgent);
        nodes.heartbeat(nodeId);
    }
}
