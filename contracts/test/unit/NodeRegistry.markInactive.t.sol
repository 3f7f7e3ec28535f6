// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus, RegistryParams} from "../../src/types/Types.sol";

contract NodeRegistry_MarkInactive_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;
    uint32 internal registeredAt;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        registeredAt = uint32(block.timestamp);
    }

    function test_MarkInactive_AfterTimeout() external {
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT + 1);

        expectRegistryEmit();
        emit INodeRegistry.NodeMarkedInactive(nodeId, registeredAt, stranger);
        vm.prank(stranger);
        registry.markInactive(nodeId);

        assertStatus(nodeId, NodeStatus.Inactive);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.lastHeartbeat, registeredAt);
        assertEq(node.stake, STAKE);
    }

    function test_MarkInactive_CountsFromLastHeartbeat() external {
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        vm.prank(agent);
        registry.heartbeat(nodeId);
        uint32 beatAt = uint32(block.timestamp);

        vm.warp(uint256(beatAt) + HEARTBEAT_TIMEOUT);
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, beatAt + HEARTBEAT_TIMEOUT
            )
        );
        registry.markInactive(nodeId);

        vm.warp(uint256(beatAt) + HEARTBEAT_TIMEOUT + 1);
        expectRegistryEmit();
        emit INodeRegistry.NodeMarkedInactive(nodeId, beatAt, address(this));
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkInactive_UsesCurrentTimeout() external {
        RegistryParams memory p = registryParams();
        p.heartbeatTimeout = 30;
        setRegistryParams(p);
        vm.warp(uint256(registeredAt) + 31);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_RevertWhen_HeartbeatNotExpiredAtBoundary() external {
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, registeredAt + HEARTBEAT_TIMEOUT
            )
        );
        vm.prank(stranger);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_RevertWhen_HeartbeatFresh() external {
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, registeredAt + HEARTBEAT_TIMEOUT
            )
        );
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_AlreadyInactive() external {
        makeInactive(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Inactive)
        );
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_NodeIsExiting() external {
        beginExit(nodeId);
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT + 1);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exiting)
        );
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exited)
        );
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_MarkUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(2)));
        registry.markInactive(2);
    }

    // ---------------------------------------------------------------- by the node's agent

    function test_MarkInactive_ByAgentBeforeExpiry() external {
        vm.warp(uint256(registeredAt) + 1);

        expectRegistryEmit();
        emit INodeRegistry.NodeMarkedInactive(nodeId, registeredAt, agent);
        vm.prank(agent);
        registry.markInactive(nodeId);

        assertStatus(nodeId, NodeStatus.Inactive);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.lastHeartbeat, registeredAt);
        assertEq(node.stake, STAKE);
    }

    function test_MarkInactive_ByAgentInTheRegistrationBlock() external {
        expectRegistryEmit();
        emit INodeRegistry.NodeMarkedInactive(nodeId, registeredAt, agent);
        vm.prank(agent);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkInactive_ByNewAgentAfterSetAgent() external {
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);

        // The former agent is a stranger now and keeps to the expiry rule.
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, registeredAt + HEARTBEAT_TIMEOUT
            )
        );
        vm.prank(agent);
        registry.markInactive(nodeId);

        expectRegistryEmit();
        emit INodeRegistry.NodeMarkedInactive(nodeId, registeredAt, newAgent);
        vm.prank(newAgent);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkInactive_ByAgentThenHeartbeatReactivates() external {
        vm.prank(agent);
        registry.markInactive(nodeId);
        vm.warp(uint256(registeredAt) + 60);
        uint32 beatAt = uint32(block.timestamp);

        expectRegistryEmit();
        emit INodeRegistry.NodeReactivated(nodeId, beatAt);
        expectRegistryEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, beatAt);
        vm.prank(agent);
        registry.heartbeat(nodeId);

        assertStatus(nodeId, NodeStatus.Active);
        assertEq(registry.getNode(nodeId).lastHeartbeat, beatAt);
        // Reactivated, the node is again subject to the expiry rule for everyone else.
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, beatAt + HEARTBEAT_TIMEOUT
            )
        );
        vm.prank(stranger);
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_OperatorBeforeExpiry() external {
        assertTrue(operator != agent, "operator is a different account from the agent");
        vm.warp(uint256(registeredAt) + HEARTBEAT_TIMEOUT);
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, registeredAt + HEARTBEAT_TIMEOUT
            )
        );
        vm.prank(operator);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_RevertWhen_StrangerBeforeExpiry() external {
        vm.warp(uint256(registeredAt) + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_HeartbeatNotExpired.selector, nodeId, registeredAt + HEARTBEAT_TIMEOUT
            )
        );
        vm.prank(stranger);
        registry.markInactive(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_RevertWhen_AgentAndAlreadyInactive() external {
        vm.prank(agent);
        registry.markInactive(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Inactive)
        );
        vm.prank(agent);
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_AgentAndNodeIsExiting() external {
        beginExit(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exiting)
        );
        vm.prank(agent);
        registry.markInactive(nodeId);
    }

    function test_RevertWhen_AgentAndNodeIsExited() external {
        exitAndWithdraw(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exited)
        );
        vm.prank(agent);
        registry.markInactive(nodeId);
    }
}
