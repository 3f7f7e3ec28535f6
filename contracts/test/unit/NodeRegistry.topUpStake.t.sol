// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_TopUpStake_Test is NodeRegistry_Node_Test {
    uint96 internal constant TOP_UP = 75e6;

    function topUpAs(address caller, uint64 id, uint96 amount) internal {
        vm.prank(caller);
        registry.topUpStake(id, amount);
    }

    function test_TopUpStake_AddsToStake() external {
        uint256 operatorBefore = token.balanceOf(operator);

        expectRegistryEmit();
        emit INodeRegistry.NodeStakeAdded(nodeId, TOP_UP, STAKE + TOP_UP);
        topUpAs(operator, nodeId, TOP_UP);

        assertEq(registry.getNode(nodeId).stake, STAKE + TOP_UP);
        assertEq(token.balanceOf(address(registry)), STAKE + TOP_UP);
        assertEq(token.balanceOf(operator), operatorBefore - TOP_UP);
    }

    function test_TopUpStake_InactiveNode() external {
        makeInactive(nodeId);
        topUpAs(operator, nodeId, TOP_UP);
        assertEq(registry.getNode(nodeId).stake, STAKE + TOP_UP);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_RevertWhen_AmountIsZero() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_ZeroAmount.selector));
        topUpAs(operator, nodeId, 0);
    }

    function test_RevertWhen_NodeIsExiting() external {
        beginExit(nodeId);
        expectExiting(nodeId);
        topUpAs(operator, nodeId, TOP_UP);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        expectExiting(nodeId);
        topUpAs(operator, nodeId, TOP_UP);
    }

    function test_RevertWhen_TopUpUnknownNode() external {
        expectUnknownNode(7);
        topUpAs(operator, 7, TOP_UP);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        fund(stranger, TOP_UP);
        expectNotOperator(nodeId, stranger);
        topUpAs(stranger, nodeId, TOP_UP);
    }
}
