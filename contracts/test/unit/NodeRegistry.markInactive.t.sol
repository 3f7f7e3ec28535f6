// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_MarkInactive_Test is NodeRegistry_Node_Test {
    uint32 internal registeredAt;

    function setUp() public override {
        super.setUp();
        registeredAt = uint32(block.timestamp);
    }

    function markInactiveAs(address caller) internal {
        vm.prank(caller);
        registry.markInactive(nodeId);
    }

    /// The node's first heartbeat, the one at registration, has not expired yet.
    function expectFirstHeartbeatFresh() internal {
        expectHeartbeatNotExpired(nodeId, registeredAt + HEARTBEAT_TIMEOUT);
    }

    /// `caller` marks the node Inactive: the registry names it and keeps the node's heartbeat and stake.
    function assertMarkedInactiveBy(address caller) internal {
        expectMarkedInactive(nodeId, registeredAt, caller);
        markInactiveAs(caller);

        assertStatus(nodeId, NodeStatus.Inactive);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.lastHeartbeat, registeredAt);
        assertEq(node.stake, STAKE);
    }

    function test_MarkInactive_AfterTimeout() external {
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT + 1);
        assertMarkedInactiveBy(stranger);
    }

    function test_MarkInactive_CountsFromLastHeartbeat() external {
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        heartbeat(nodeId);
        uint32 beatAt = uint32(block.timestamp);

        vm.warp(uint256(beatAt) + HEARTBEAT_TIMEOUT);
        expectHeartbeatNotExpired(nodeId, beatAt + HEARTBEAT_TIMEOUT);
        registry.markInactive(nodeId);

        vm.warp(uint256(beatAt) + HEARTBEAT_TIMEOUT + 1);
        expectMarkedInactive(nodeId, beatAt, address(this));
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkInactive_UsesCurrentTimeout() external {
        setHeartbeatTimeout(30);
        vm.warp(uint256(registeredAt) + 31);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_RevertWhen_HeartbeatNotExpiredAtBoundary() external {
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        expectFirstHeartbeatFresh();
        markInactiveAs(stranger);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_RevertWhen_HeartbeatFresh() external {
        expectFirstHeartbeatFresh();
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_AlreadyInactive() external {
        makeInactive(nodeId);
        expectNotActive(NodeStatus.Inactive);
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_NodeIsExiting() external {
        beginExit(nodeId);
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT + 1);
        expectNotActive(NodeStatus.Exiting);
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        expectNotActive(NodeStatus.Exited);
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_MarkUnknownNode() external {
        expectUnknownNode(2);
        registry.markInactive(2);
    }

    // ---------------------------------------------------------------- by the node's agent

    function test_MarkInactive_ByAgentBeforeExpiry() external {
        vm.warp(uint256(registeredAt) + 1);
        assertMarkedInactiveBy(agent);
    }

    function test_MarkInactive_ByAgentInTheRegistrationBlock() external {
        expectMarkedInactive(nodeId, registeredAt, agent);
        markInactiveAs(agent);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkInactive_ByNewAgentAfterSetAgent() external {
        address newAgent = setNewAgent(nodeId);

        // The former agent is a stranger now and keeps to the expiry rule.
        expectFirstHeartbeatFresh();
        markInactiveAs(agent);

        expectMarkedInactive(nodeId, registeredAt, newAgent);
        markInactiveAs(newAgent);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkInactive_ByAgentThenHeartbeatReactivates() external {
        markInactiveAs(agent);
        vm.warp(uint256(registeredAt) + 60);
        uint32 beatAt = uint32(block.timestamp);

        expectRegistryEmit();
        emit INodeRegistry.NodeReactivated(nodeId, beatAt);
        expectRegistryEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, beatAt);
        heartbeat(nodeId);

        assertStatus(nodeId, NodeStatus.Active);
        assertEq(registry.getNode(nodeId).lastHeartbeat, beatAt);
        // Reactivated, the node is again subject to the expiry rule for everyone else.
        expectHeartbeatNotExpired(nodeId, beatAt + HEARTBEAT_TIMEOUT);
        markInactiveAs(stranger);
    }

    function test_RevertWhen_OperatorBeforeExpiry() external {
        assertTrue(operator != agent, "operator is a different account from the agent");
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        expectFirstHeartbeatFresh();
        markInactiveAs(operator);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_RevertWhen_StrangerBeforeExpiry() external {
        vm.warp(uint256(registeredAt) + 1);
        expectFirstHeartbeatFresh();
        markInactiveAs(stranger);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_RevertWhen_AgentAndAlreadyInactive() external {
        markInactiveAs(agent);
        expectNotActive(NodeStatus.Inactive);
        markInactiveAs(agent);
    }

    function test_RevertWhen_AgentAndNodeIsExiting() external {
        beginExit(nodeId);
        expectNotActive(NodeStatus.Exiting);
        markInactiveAs(agent);
    }

    function test_RevertWhen_AgentAndNodeIsExited() external {
        exitAndWithdraw(nodeId);
        expectNotActive(NodeStatus.Exited);
        markInactiveAs(agent);
    }
}
