// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus, RegistryParams} from "../../src/types/Types.sol";

contract NodeRegistry_BeginExit_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_BeginExit_StartsUnbonding() external {
        uint40 endsAt = uint40(block.timestamp) + UNBONDING;

        expectRegistryEmit();
        emit INodeRegistry.NodeExitBegun(nodeId, endsAt);
        vm.prank(operator);
        registry.beginExit(nodeId);

        assertStatus(nodeId, NodeStatus.Exiting);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.unbondingEndsAt, endsAt);
        assertEq(node.stake, STAKE);
        assertEq(token.balanceOf(address(registry)), STAKE);
    }

    function test_BeginExit_InactiveNode() external {
        makeInactive(nodeId);
        uint40 endsAt = uint40(block.timestamp) + UNBONDING;
        expectRegistryEmit();
        emit INodeRegistry.NodeExitBegun(nodeId, endsAt);
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
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_Exiting.selector, nodeId));
        vm.prank(operator);
        registry.beginExit(nodeId);
        // The first exit's unbonding end is kept.
        assertEq(registry.getNode(nodeId).unbondingEndsAt, uint40(block.timestamp - 1 days) + UNBONDING);
    }

    function test_RevertWhen_AlreadyExited() external {
        exitAndWithdraw(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_Exiting.selector, nodeId));
        vm.prank(operator);
        registry.beginExit(nodeId);
    }

    function test_RevertWhen_ExitUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(2)));
        vm.prank(operator);
        registry.beginExit(2);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, agent));
        vm.prank(agent);
        registry.beginExit(nodeId);
    }
}
