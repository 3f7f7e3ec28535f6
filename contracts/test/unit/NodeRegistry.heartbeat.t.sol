// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_Heartbeat_Test is NodeRegistry_Node_Test {
    function heartbeatAs(address caller, uint64 id) internal {
        vm.prank(caller);
        registry.heartbeat(id);
    }

    function expectHeartbeat(uint32 at) internal {
        expectRegistryEmit();
        emit INodeRegistry.NodeHeartbeat(nodeId, at);
    }

    function test_Heartbeat_UpdatesLastHeartbeat() external {
        vm.warp(block.timestamp + 60);
        uint32 now32 = uint32(block.timestamp);

        vm.recordLogs();
        expectHeartbeat(now32);
        heartbeatAs(agent, nodeId);

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
        expectHeartbeat(now32);
        heartbeatAs(agent, nodeId);

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
        expectHeartbeat(uint32(block.timestamp));
        heartbeatAs(agent, nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertEq(registry.getNode(nodeId).lastHeartbeat, uint32(block.timestamp));
    }

    function test_RevertWhen_CallerIsNotAgent() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotAgent.selector, nodeId, operator));
        heartbeatAs(operator, nodeId);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        expectNotActive(NodeStatus.Exited);
        heartbeatAs(agent, nodeId);
    }

    function test_RevertWhen_HeartbeatUnknownNode() external {
        expectUnknownNode(2);
        heartbeatAs(agent, 2);
    }
}
