// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus, Release} from "../../src/types/Types.sol";

contract NodeRegistry_Release_Test is NodeRegistry_Node_Test {
    uint96 internal constant SLASH = uint96((uint256(STAKE) * SLASH_BPS) / 10_000); // 50e6

    /// Releases a job of the node as the market and checks that the operator is returned.
    function releaseToOperator(bool settling, Release outcome) internal returns (uint96 slashed) {
        vm.prank(marketCaller);
        address returnedOperator;
        (returnedOperator, slashed) = registry.release(nodeId, settling, outcome);
        assertEq(returnedOperator, operator);
    }

    function expectSlashed(uint64 id, uint96 amount, uint96 stakeLeft) internal {
        expectRegistryEmit();
        emit INodeRegistry.NodeSlashed(id, amount, stakeLeft);
    }

    // ---------------------------------------------------------------- Completed

    function test_Release_CompletedRunningJob() external {
        takeSlot(nodeId);

        vm.recordLogs();
        uint96 slashed = releaseToOperator(false, Release.Completed);

        assertEq(slashed, 0);
        assertNodeCounters(nodeId, 0, 0, 1, 0);
        assertEq(registry.getNode(nodeId).stake, STAKE);
        assertEq(vm.getRecordedLogs().length, 0, "a completed release emits nothing");
    }

    function test_Release_CompletedSettlingJob() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        markSettling(nodeId);

        assertEq(releaseToOperator(true, Release.Completed), 0);
        assertNodeCounters(nodeId, 1, 0, 1, 0);
    }

    // ---------------------------------------------------------------- NoFault

    function test_Release_NoFaultChangesNoCounter() external {
        takeSlot(nodeId);
        markSettling(nodeId);

        vm.recordLogs();
        assertEq(releaseToOperator(true, Release.NoFault), 0);

        assertNodeCounters(nodeId, 0, 0, 0, 0);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.totalSlashed, 0);
        assertEq(node.stake, STAKE);
        assertEq(token.balanceOf(address(registry)), STAKE);
        assertEq(vm.getRecordedLogs().length, 0);
    }

    // ---------------------------------------------------------------- Faulted

    function test_Release_FaultedSlashesStake() external {
        takeSlot(nodeId);

        expectSlashed(nodeId, SLASH, STAKE - SLASH);
        uint96 slashed = releaseToOperator(false, Release.Faulted);

        assertEq(slashed, SLASH);
        assertEq(SLASH, 50e6);
        assertNodeCounters(nodeId, 0, 0, 0, 1);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.totalSlashed, SLASH);
        assertEq(node.stake, STAKE - SLASH);
        assertStatus(nodeId, NodeStatus.Active);
        assertEq(token.balanceOf(marketCaller), SLASH);
        assertEq(token.balanceOf(address(registry)), STAKE - SLASH);
    }

    function test_Release_FaultedSettlingJob() external {
        takeSlot(nodeId);
        markSettling(nodeId);
        uint96 slashed = release(nodeId, true, Release.Faulted);
        assertEq(slashed, SLASH);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.settlingJobs, 0);
        assertEq(node.failedJobs, 1);
    }

    function test_Release_FaultedTwiceCompounds() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        uint96 first = release(nodeId, false, Release.Faulted);
        uint96 second2 = uint96((uint256(STAKE - first) * SLASH_BPS) / 10_000); // 45e6

        expectSlashed(nodeId, second2, STAKE - first - second2);
        uint96 second = release(nodeId, false, Release.Faulted);

        assertEq(second, second2);
        assertEq(second, 45e6);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.failedJobs, 2);
        assertEq(node.totalSlashed, first + second);
        assertEq(node.stake, STAKE - first - second);
        assertEq(token.balanceOf(marketCaller), first + second);
    }

    function test_Release_FaultedWithZeroSlashBps() external {
        setSlashBps(0);
        takeSlot(nodeId);

        vm.recordLogs();
        uint96 slashed = release(nodeId, false, Release.Faulted);

        assertEq(slashed, 0);
        assertEq(vm.getRecordedLogs().length, 0, "no NodeSlashed, no Transfer");
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.failedJobs, 1);
        assertEq(node.totalSlashed, 0);
        assertEq(node.stake, STAKE);
        assertEq(token.balanceOf(marketCaller), 0);
    }

    function test_Release_FaultedWithFullSlash() external {
        setSlashBps(10_000);
        takeSlot(nodeId);

        expectSlashed(nodeId, STAKE, 0);
        uint96 slashed = release(nodeId, false, Release.Faulted);

        assertEq(slashed, STAKE);
        assertEq(registry.getNode(nodeId).stake, 0);
        assertEq(registry.getNode(nodeId).totalSlashed, STAKE);
        assertEq(token.balanceOf(marketCaller), STAKE);
        assertEq(token.balanceOf(address(registry)), 0);
    }

    function test_Release_SlashRoundsDown() external {
        vm.prank(operator);
        registry.topUpStake(nodeId, 9); // stake 500_000_009
        takeSlot(nodeId);
        uint96 slashed = release(nodeId, false, Release.Faulted);
        assertEq(slashed, 50_000_000); // 500_000_009 * 1000 / 10000 = 50_000_000.9
        assertEq(registry.getNode(nodeId).stake, 450_000_009);
    }

    function test_Release_SlashesOnlyFaultedNode() external {
        fund(stranger, STAKE);
        vm.prank(stranger);
        uint64 other = registry.register(stranger, h100Node(), "", STAKE);
        takeSlot(nodeId);
        takeSlot(other);
        release(other, false, Release.Faulted);
        assertEq(registry.getNode(nodeId).stake, STAKE);
        assertEq(registry.getNode(other).stake, STAKE - SLASH);
        assertEq(token.balanceOf(address(registry)), 2 * STAKE - SLASH);
    }

    function test_Release_ExitingNode() external {
        takeSlot(nodeId);
        beginExit(nodeId);
        uint96 slashed = release(nodeId, false, Release.Faulted);
        assertEq(slashed, SLASH);
        assertStatus(nodeId, NodeStatus.Exiting);
        assertEq(registry.getNode(nodeId).activeJobs, 0);
    }

    // ---------------------------------------------------------------- reverts

    function test_RevertWhen_NoActiveJob() external {
        expectNoActiveJob(nodeId);
        release(nodeId, false, Release.Completed);
    }

    function test_RevertWhen_OnlySettlingJobAndReleasingRunning() external {
        takeSlot(nodeId);
        markSettling(nodeId);
        expectNoActiveJob(nodeId);
        release(nodeId, false, Release.NoFault);
    }

    function test_RevertWhen_NoSettlingJob() external {
        takeSlot(nodeId); // a running job is not a settling one
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoSettlingJob.selector, nodeId));
        release(nodeId, true, Release.Completed);
    }

    function test_RevertWhen_CallerLacksMarketRole() external {
        takeSlot(nodeId);
        bytes32 role = registry.MARKET_ROLE();
        vm.expectRevert(unauthorized(operator, role));
        vm.prank(operator);
        registry.release(nodeId, false, Release.Completed);
    }

    function test_RevertWhen_ReleaseUnknownNode() external {
        expectUnknownNode(2);
        release(2, false, Release.Faulted);
    }
}
