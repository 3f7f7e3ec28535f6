// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";

import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistryTopUpStakeTest is NodeRegistryNodeTest {
    function test_TopUpStake_AddsToTheStake() external {
        uint256 operatorBefore = token.balanceOf(operator);
        expectNodeEmit();
        emit INodeRegistry.NodeStakeAdded(nodeId, 25e6, STAKE + 25e6);
        vm.prank(operator);
        nodes.topUpStake(nodeId, 25e6);
        sync();

        assertEq(nodes.getNode(nodeId).stake, STAKE + 25e6);
        assertEq(token.balanceOf(operator), operatorBefore - 25e6);
        assertEq(token.balanceOf(address(market)), STAKE + 25e6);
        assertReplay();
    }

    function testFuzz_TopUpStake_AddsExactlyTheAmount(uint96 amount) external {
        amount = uint96(bound(amount, 1, type(uint96).max - STAKE));
        fund(operator, amount);
        uint256 operatorBefore = token.balanceOf(operator);
        topUp(nodeId, amount);
        assertEq(nodes.getNode(nodeId).stake, uint256(STAKE) + amount);
        assertEq(token.balanceOf(operator), operatorBefore - amount);
        assertReplay();
    }

    function test_TopUpStake_ByAnAgentIsRefused_ItIsTheOperatorsMoney() external {
        fund(agent, 25e6);
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        nodes.topUpStake(nodeId, 25e6);
    }

    /// A top-up does not reactivate a node: its agent's next heartbeat does, once the
    /// stake is at the minimum again.
    function test_TopUpStake_LeavesAnInactiveNodeInactive() external {
        makeInactive(nodeId);
        topUp(nodeId, 25e6);
        assertStatus(nodeId, NodeStatus.Inactive);
        heartbeat(nodeId);
        assertStatus(nodeId, NodeStatus.Active);
        assertReplay();
    }

    function test_TopUpStake_WhilePaused() external {
        vm.prank(pauser);
        market.setPaused(true);
        topUp(nodeId, 25e6);
        assertEq(nodes.getNode(nodeId).stake, STAKE + 25e6);
    }

    /// A stake held for an open dispute grows the free part: a later dispute's exposure is
    /// a share of it.
    function test_TopUpStake_WhileStakeIsHeld() external {
        (uint64 jobId,) = submittedJob();
        dispute(jobId);
        uint96 locked = nodes.getNode(nodeId).lockedStake;
        assertEq(locked, (STAKE * SLASH_BPS) / 10_000);
        topUp(nodeId, 100e6);
        assertEq(nodes.getNode(nodeId).stake, STAKE + 100e6);
        assertEq(nodes.getNode(nodeId).lockedStake, locked, "the hold is unchanged");
        assertReplay();
    }

    function test_TopUpStake_RevertWhen_ZeroAmount() external {
        vm.expectRevert(INodeRegistry.NodeRegistry_ZeroAmount.selector);
        vm.prank(operator);
        nodes.topUpStake(nodeId, 0);
    }

    function test_TopUpStake_RevertWhen_Exiting() external {
        beginExit(nodeId);
        expectExiting(nodeId);
        vm.prank(operator);
        nodes.topUpStake(nodeId, 25e6);
    }

    function test_TopUpStake_RevertWhen_Exited() external {
        exitAndWithdraw(nodeId);
        expectExiting(nodeId);
        vm.prank(operator);
        nodes.topUpStake(nodeId, 25e6);
    }

    function test_TopUpStake_RevertWhen_CallerIsNotTheOperator() external {
        fund(stranger, 25e6);
        expectNotOperator(nodeId, stranger);
        vm.prank(stranger);
        nodes.topUpStake(nodeId, 25e6);
    }

    function test_TopUpStake_RevertWhen_UnknownNode() external {
        expectUnknownNode(2);
        vm.prank(operator);
        nodes.topUpStake(2, 25e6);
    }

    function test_TopUpStake_RevertWhen_NotApproved() external {
        vm.prank(operator);
        token.approve(address(market), 0);
        vm.expectRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(market), uint256(0), uint256(25e6)
            )
        );
        vm.prank(operator);
        nodes.topUpStake(nodeId, 25e6);
    }
}
