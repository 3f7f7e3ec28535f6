// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Vm} from "forge-std/Vm.sol";

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus, Release} from "../../src/types/Types.sol";

contract NodeRegistry_WithdrawStake_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_WithdrawStake_PaysStakeBack() external {
        beginExit(nodeId);
        uint40 endsAt = registry.getNode(nodeId).unbondingEndsAt;
        vm.warp(endsAt); // exactly at the end of unbonding
        uint256 operatorBefore = token.balanceOf(operator);

        expectRegistryEmit();
        emit INodeRegistry.NodeStakeWithdrawn(nodeId, operator, STAKE);
        vm.prank(operator);
        registry.withdrawStake(nodeId);

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
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        uint256 operatorBefore = token.balanceOf(operator);

        expectRegistryEmit();
        emit INodeRegistry.NodeStakeWithdrawn(nodeId, operator, STAKE - slashed);
        vm.prank(operator);
        registry.withdrawStake(nodeId);

        assertEq(token.balanceOf(operator), operatorBefore + STAKE - slashed);
        assertEq(token.balanceOf(address(registry)), 0);
    }

    function test_WithdrawStake_ZeroStakeTransfersNothing() external {
        setSlashBps(10_000);
        takeSlot(nodeId);
        release(nodeId, false, Release.Faulted);
        assertEq(registry.getNode(nodeId).stake, 0);
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        uint256 operatorBefore = token.balanceOf(operator);

        vm.recordLogs();
        vm.prank(operator);
        registry.withdrawStake(nodeId);

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

        vm.prank(operator);
        registry.withdrawStake(nodeId);
        assertStatus(nodeId, NodeStatus.Exited);
        assertEq(registry.getNode(nodeId).completedJobs, 1);
    }

    function test_RevertWhen_NotExiting() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotExiting.selector, nodeId));
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    function test_RevertWhen_InactiveNotExiting() external {
        makeInactive(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotExiting.selector, nodeId));
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    function test_RevertWhen_AlreadyWithdrawn() external {
        exitAndWithdraw(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotExiting.selector, nodeId));
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    function test_RevertWhen_StillUnbonding() external {
        beginExit(nodeId);
        uint40 endsAt = registry.getNode(nodeId).unbondingEndsAt;
        vm.warp(endsAt - 1);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_StillUnbonding.selector, nodeId, endsAt));
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    function test_RevertWhen_HasActiveJob() external {
        takeSlot(nodeId);
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_HasJobs.selector, nodeId, uint8(1), uint16(0))
        );
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    function test_RevertWhen_HasSettlingJob() external {
        takeSlot(nodeId);
        markSettling(nodeId);
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_HasJobs.selector, nodeId, uint8(0), uint16(1))
        );
        vm.prank(operator);
        registry.withdrawStake(nodeId);
    }

    function test_RevertWhen_WithdrawUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(2)));
        vm.prank(operator);
        registry.withdrawStake(2);
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        beginExit(nodeId);
        vm.warp(block.timestamp + UNBONDING);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, agent));
        vm.prank(agent);
        registry.withdrawStake(nodeId);
    }
}
