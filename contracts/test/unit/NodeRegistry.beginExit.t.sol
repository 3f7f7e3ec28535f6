// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus, RegistryParams} from "../../src/types/Types.sol";

contract NodeRegistry_BeginExit_Test is NodeRegistry_Node_Test {
    function expectExitBegun() internal {
        expectRegistryEmit();
        emit INodeRegistry.NodeExitBegun(nodeId, uint40(block.timestamp) + UNBONDING);
    }

    function test_BeginExit_StartsUnbonding() external {
        expectExitBegun();
        beginExit(nodeId);

        assertStatus(nodeId, NodeStatus.Exiting);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.unbondingEndsAt, uint40(block.timestamp) + UNBONDING);
        assertEq(node.stake, STAKE);
        assertEq(token.balanceOf(address(registry)), STAKE);
    }

    function test_BeginExit_InactiveNode() external {
        makeInactive(nodeId);
        expectExitBegun();
        beginExit(nodeId);
        assertStatus(nodeId, NodeStatus.Exiting);
    }

    function test_BeginExit_UsesCurrentUnbondingPeriod() external {
        RegistryParams memory p = registryParams();
        p.unbondingPeriod = 1 days;
        setRegistryParams(p);
        beginExit(nodeId);
        assertEq(registry.getNode(nodeId).unbondingEndsAt, uint40(block.timestamp) + 1 days);
    }

    function test_RevertWhen_AlreadyExiting() external {
        beginExit(nodeId);
        vm.warp(block.timestamp + 1 days);
        expectExiting(nodeId);
        beginExit(nodeId);
        // The first exit's unbonding end is kept.
        assertEq(registry.getNode(nodeId).unbondingEndsAt, uint40(block.timestamp - 1 days) + UNBONDING);
    }

    function test_RevertWhen_AlreadyExited() external {
        exitAndWithdraw(nodeId);
        expectExiting(nodeId);
        beginExit(nodeId);
    }

    function test_RevertWhen_ExitUnknownNode() external {
        expectUnknownNode(2);
        beginExit(2);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        registry.beginExit(nodeId);
    }
}
