// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus, Release} from "../../src/types/Types.sol";

contract NodeRegistry_WithdrawStake_Test is NodeRegistry_Node_Test {
    function withdrawAs(address caller, uint64 id) internal {
        vm.prank(caller);
        registry.withdrawStake(id);
    }

    /// Begins the node's exit and waits out the unbonding period.
    function exitAndUnbond() internal {
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
    }

    function expectNotExiting() internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotExiting.selector, nodeId));
    }

    function expectHasJobs(uint8 activeJobs, uint16 settlingJobs) internal {
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_HasJobs.selector, nodeId, activeJobs, settlingJobs)
        );
    }

    function test_WithdrawStake_PaysStakeBack() external {
        beginExit(nodeId);
        uint40 endsAt = registry.getNode(nodeId).unbondingEndsAt;
        vm.warp(endsAt); // exactly at the end of unbonding
        uint256 operatorBefore = token.balanceOf(operator);

        expectRegistryEmit();
        emit INodeRegistry.NodeStakeWithdrawn(nodeId, operator, STAKE);
        withdrawAs(operator, nodeId);

        assertStatus(nodeId, NodeStatus.Exited);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.stake, 0);
        assertEq(node.unbondingEndsAt, endsAt);
        assertEq(node.operator, operator);
        assertEq(token.balanceOf(operator), operatorBefore + STAKE);
        assertEq(token.balanceOf(address(registry)), 0);
        assertEq(registry.nodeCount(), 1);
    }

    function test_WithdrawStake_PaysWhatIsLeftAfterSlash() external {
        takeSlot(nodeId);
        uint96 slashed = release(nodeId, false, Release.Faulted);
        exitAndUnbond();
        uint256 operatorBefore = token.balanceOf(operator);

        expectRegistryEmit();
        emit INodeRegistry.NodeStakeWithdrawn(nodeId, operator, STAKE - slashed);
        withdrawAs(operator, nodeId);

        assertEq(token.balanceOf(operator), operatorBefore + STAKE - slashed);
        assertEq(token.balanceOf(address(registry)), 0);
    }

    function test_WithdrawStake_ZeroStakeTransfersNothing() external {
        setSlashBps(10_000);
        takeSlot(nodeId);
        release(nodeId, false, Release.Faulted);
        assertEq(registry.getNode(nodeId).stake, 0);
        exitAndUnbond();
        uint256 operatorBefore = token.balanceOf(operator);

        vm.recordLogs();
        withdrawAs(operator, nodeId);

        // Only NodeStakeWithdrawn, no Transfer.
        Vm.Log[] memory logs = vm.getRecordedLogs();
        assertEq(logs.length, 1);
        assertEq(logs[0].topics[0], INodeRegistry.NodeStakeWithdrawn.selector);
        assertEq(abi.decode(logs[0].data, (uint96)), 0);
        assertEq(token.balanceOf(operator), operatorBefore);
        assertStatus(nodeId, NodeStatus.Exited);
    }

    function test_WithdrawStake_AfterJobsDrain() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        markSettling(nodeId);
        beginExit(nodeId);
        release(nodeId, false, Release.NoFault);
        release(nodeId, true, Release.Completed);
        vm.warp(block.timestamp + UNBONDING);

        withdrawAs(operator, nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
        assertEq(registry.getNode(nodeId).completedJobs, 1);
    }

    function test_RevertWhen_NotExiting() external {
        expectNotExiting();
        withdrawAs(operator, nodeId);
    }

    function test_RevertWhen_InactiveNotExiting() external {
        makeInactive(nodeId);
        expectNotExiting();
        withdrawAs(operator, nodeId);
    }

    function test_RevertWhen_AlreadyWithdrawn() external {
        exitAndWithdraw(nodeId);
        expectNotExiting();
        withdrawAs(operator, nodeId);
    }

    function test_RevertWhen_StillUnbonding() external {
        beginExit(nodeId);
        uint40 endsAt = registry.getNode(nodeId).unbondingEndsAt;
        vm.warp(endsAt - 1);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StillUnbonding.selector, nodeId, endsAt));
        withdrawAs(operator, nodeId);
    }

    function test_RevertWhen_HasActiveJob() external {
        takeSlot(nodeId);
        exitAndUnbond();
        expectHasJobs(1, 0);
        withdrawAs(operator, nodeId);
    }

    function test_RevertWhen_HasSettlingJob() external {
        takeSlot(nodeId);
        markSettling(nodeId);
        exitAndUnbond();
        expectHasJobs(0, 1);
        withdrawAs(operator, nodeId);
    }

    function test_RevertWhen_WithdrawUnknownNode() external {
        expectUnknownNode(2);
        withdrawAs(operator, 2);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        exitAndUnbond();
        expectNotOperator(nodeId, agent);
        withdrawAs(agent, nodeId);
    }
}
