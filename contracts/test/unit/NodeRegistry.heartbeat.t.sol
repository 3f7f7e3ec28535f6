// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_Heartbeat_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_Heartbeat_UpdatesLastHeartbeat() external {
        vm.warp(block.timestamp + 60);
        uint32 now32 = uint32(block.timestamp);

        vm.recordLogs();
        expectRegistryEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, now32);
        vm.prank(agent);
        registry.heartbeat(nodeId);

        // No NodeReactivated for an Active node.
        assertEq(registryLogs().length, 1);
        assertEq(registry.getNode(nodeId).lastHeartbeat, now32);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_Heartbeat_ReactivatesInactiveNode() external {
        makeInactive(nodeId);
        vm.warp(block.timestamp + 1 hours);
        uint32 now32 = uint32(block.timestamp);

        vm.recordLogs();
        expectRegistryEmit();
        emit INodeRegistry.NodeReactivated(nodeId, now32);
        expectRegistryEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, now32);
        vm.prank(agent);
        registry.heartbeat(nodeId);

        Vm.Log[] memory logs = registryLogs();
        assertEq(logs.length, 2);
        assertEq(logs[0].topics[0], INodeRegistry.NodeReactivated.selector);
        assertEq(logs[1].topics[0], INodeRegistry.NodeHeartbeat.selector);
        assertStatus(nodeId, NodeStatus.Active);
        assertEq(registry.getNode(nodeId).lastHeartbeat, now32);
    }

    function test_Heartbeat_ExitingNodeStaysExiting() external {
        beginExit(nodeId);
        vm.warp(block.timestamp + 60);
        expectRegistryEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, uint32(block.timestamp));
        vm.prank(agent);
        registry.heartbeat(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertEq(registry.getNode(nodeId).lastHeartbeat, uint32(block.timestamp));
    }

    function test_RevertWhen_CallerIsNotAgent() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotAgent.selector, nodeId, operator));
        vm.prank(operator);
        registry.heartbeat(nodeId);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exited)
        );
        vm.prank(agent);
        registry.heartbeat(nodeId);
    }

    function test_RevertWhen_HeartbeatUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(2)));
        vm.prank(agent);
        registry.heartbeat(2);
    }
}
