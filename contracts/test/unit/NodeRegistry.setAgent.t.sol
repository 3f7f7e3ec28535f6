// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {NodeRegistryConsentShared} from "./NodeRegistry.consent.shared.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobState, JobStatus, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistrySetAgentTest is NodeRegistryNodeTest, NodeRegistryConsentShared {
    using JobView for JobState;

    function setUp() public override(Base, NodeRegistryNodeTest) {
        super.setUp();
    }

    // ---------------------------------------------------------------- the shared rules' hooks

    function consentKey() internal pure override returns (uint256) {
        return OTHER_AGENT_KEY;
    }

    function bind(address caller, address agent_, uint256 deadline, bytes memory signature) internal override {
        vm.prank(caller);
        nodes.setAgent(nodeId, agent_, deadline, signature);
    }

    function boundAgent() internal view override returns (address) {
        return nodes.getNode(nodeId).agent;
    }

    // ---------------------------------------------------------------- helpers

    /// The operator moves the node to `otherAgent`, with its signed consent.
    function rotate() internal {
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory signature = signConsent(operator, OTHER_AGENT_KEY, deadline);
        vm.prank(operator);
        nodes.setAgent(nodeId, otherAgent, deadline, signature);
        sync();
    }

    // ---------------------------------------------------------------- setAgent

    function test_SetAgent_ReplacesTheAgent() external {
        NodeInfo memory before = nodes.getNode(nodeId);
        uint256 deadline = block.timestamp + 1 hours;
        bytes memory signature = signConsent(operator, OTHER_AGENT_KEY, deadline);
        expectNodeEmit();
        emit INodeRegistry.NodeAgentChanged(nodeId, otherAgent);
        vm.prank(operator);
        nodes.setAgent(nodeId, otherAgent, deadline, signature);
        sync();

        NodeInfo memory after_ = nodes.getNode(nodeId);
        assertEq(after_.agent, otherAgent);
        assertEq(after_.operator, operator);
        assertEq(uint8(after_.status), uint8(before.status));
        assertEq(after_.stake, before.stake);
        assertEq(after_.lastHeartbeat, before.lastHeartbeat);
        assertEq(nodes.agentNonce(otherAgent), 1);
        assertEq(nodes.agentNonce(agent), 1, "the old agent's nonce is its own");
        assertReplay();
    }

    function test_SetAgent_MovesTheHeartbeat() external {
        rotate();
        expectNotAgent(nodeId, agent);
        vm.prank(agent);
        nodes.heartbeat(nodeId);

        vm.warp(block.timestamp + 1 minutes);
        vm.prank(otherAgent);
        nodes.heartbeat(nodeId);
        assertEq(nodes.getNode(nodeId).lastHeartbeat, block.timestamp);
    }

    /// A job assigned before the rotation is answered by the new agent; the old one may
    /// neither submit nor reject it.
    function test_SetAgent_MovesTheRightToAnswerAssignedJobs() external {
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        rotate();

        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, agent));
        market.submitResult(jobId, jobs[jobId].state, keccak256("result"), "gantry://results/1");
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotAssignedAgent.selector, jobId, agent));
        market.reject(jobId, jobs[jobId].terms, jobs[jobId].state, "bad image");

        submit(jobId); // as the folded agent: the new one
        finalize(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Completed));
        assertReplay();
    }

    function test_SetAgent_MovesTheRightToClaim() external {
        rotate();
        uint64 jobId = postJob();
        vm.prank(agent);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, agent));
        market.claim(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
        claim(jobId, nodeId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Assigned));
    }

    /// The old agent is anyone now: it may mark the node Inactive only after the timeout.
    function test_SetAgent_MovesTheRightToTakeTheNodeOffline() external {
        rotate();
        expectHeartbeatNotExpired(nodeId, uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        vm.prank(agent);
        nodes.markInactive(nodeId);
        markInactive(nodeId, otherAgent);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_SetAgent_TheSameAgentAgain_NeedsAFreshConsent() external {
        // The registration's consent (nonce 0) is spent.
        bytes memory spent = signConsent(operator, AGENT_KEY, 0, block.timestamp + 1 hours);
        expectBadConsent(agent);
        vm.prank(operator);
        nodes.setAgent(nodeId, agent, block.timestamp + 1 hours, spent);

        bytes memory fresh = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        nodes.setAgent(nodeId, agent, block.timestamp + 1 hours, fresh);
        assertEq(nodes.getNode(nodeId).agent, agent);
        assertEq(nodes.agentNonce(agent), 2);
    }

    function test_SetAgent_OnAnInactiveOrExitingNode() external {
        makeInactive(nodeId);
        rotate();
        assertEq(nodes.getNode(nodeId).agent, otherAgent);
        assertStatus(nodeId, NodeStatus.Inactive);
        beginExit(nodeId);
        bytes memory signature = signConsent(operator, AGENT_KEY, block.timestamp + 1 hours);
        vm.prank(operator);
        nodes.setAgent(nodeId, agent, block.timestamp + 1 hours, signature);
        assertEq(nodes.getNode(nodeId).agent, agent);
        assertStatus(nodeId, NodeStatus.Exiting);
    }

    function test_SetAgent_RevertWhen_CallerIsNotTheOperator() external {
        // Not even the agent, with the new agent's consent for itself.
        bytes memory signature = signConsent(agent, OTHER_AGENT_KEY, block.timestamp + 1 hours);
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        nodes.setAgent(nodeId, otherAgent, block.timestamp + 1 hours, signature);
        expectNotOperator(nodeId, stranger);
        vm.prank(stranger);
        nodes.setAgent(nodeId, stranger, 0, "");
        assertEq(nodes.getNode(nodeId).agent, agent);
    }

    function test_SetAgent_RevertWhen_UnknownNode() external {
        expectUnknownNode(2);
        vm.prank(operator);
        nodes.setAgent(2, operator, 0, "");
    }
}
