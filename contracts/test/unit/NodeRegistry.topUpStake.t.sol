// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_TopUpStake_Test is NodeRegistry_Unit_Test {
    uint96 internal constant TOP_UP = 75e6;
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_TopUpStake_AddsToStake() external {
        uint256 operatorBefore = token.balanceOf(operator);

        expectRegistryEmit();
        emit INodeRegistry.NodeStakeAdded(nodeId, TOP_UP, STAKE + TOP_UP);
        vm.prank(operator);
        registry.topUpStake(nodeId, TOP_UP);

        assertEq(registry.getNode(nodeId).stake, STAKE + TOP_UP);
        assertEq(token.balanceOf(address(registry)), STAKE + TOP_UP);
        assertEq(token.balanceOf(operator), operatorBefore - TOP_UP);
    }

    function test_TopUpStake_InactiveNode() external {
        makeInactive(nodeId);
        vm.prank(operator);
        registry.topUpStake(nodeId, TOP_UP);
        assertEq(registry.getNode(nodeId).stake, STAKE + TOP_UP);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_RevertWhen_AmountIsZero() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAmount.selector));
        vm.prank(operator);
        registry.topUpStake(nodeId, 0);
    }

    function test_RevertWhen_NodeIsExiting() external {
        beginExit(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_Exiting.selector, nodeId));
        vm.prank(operator);
        registry.topUpStake(nodeId, TOP_UP);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_Exiting.selector, nodeId));
        vm.prank(operator);
        registry.topUpStake(nodeId, TOP_UP);
    }

    function test_RevertWhen_TopUpUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(7)));
        vm.prank(operator);
        registry.topUpStake(7, TOP_UP);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        fund(stranger, TOP_UP);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, stranger));
        vm.prank(stranger);
        registry.topUpStake(nodeId, TOP_UP);
    }
}
