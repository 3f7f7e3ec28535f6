// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeStatus, Release} from "../../src/types/Types.sol";

contract NodeRegistry_TakeSlot_Test is NodeRegistry_Node_Test {
    function expectNoFreeSlot(uint8 activeJobs, uint8 maxConcurrentJobs) internal {
        vm.expectRevert(
            abi.encodeWithSelector(
                INodeRegistry.NodeRegistry_NoFreeSlot.selector, nodeId, activeJobs, maxConcurrentJobs
            )
        );
    }

    function test_TakeSlot_ReturnsAgentAndCapabilities() external {
        vm.recordLogs();
        vm.prank(marketCaller);
        (address returnedAgent, NodeCapabilities memory caps) = registry.takeSlot(nodeId);

        assertEq(returnedAgent, agent);
        assertCapabilities(caps, h100Node());
        assertEq(registry.getNode(nodeId).activeJobs, 1);
        assertEq(registry.getNode(nodeId).settlingJobs, 0);
        assertStatus(nodeId, NodeStatus.Active);
        assertEq(vm.getRecordedLogs().length, 0, "takeSlot emits nothing");
    }

    function test_TakeSlot_UpToMaxConcurrentJobs() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        assertEq(registry.getNode(nodeId).activeJobs, 2);
    }

    function test_RevertWhen_NoFreeSlot() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        expectNoFreeSlot(2, 2);
        takeSlot(nodeId);
    }

    function test_RevertWhen_StakeSlashedBelowMinimum() external {
        // 500 staked, minimum 100: 25% slashes take it below the minimum after six faults.
        setSlashBps(2_500);
        uint96 stake = registry.getNode(nodeId).stake;
        while (stake >= MIN_STAKE) {
            takeSlot(nodeId);
            release(nodeId, false, Release.Faulted);
            stake = registry.getNode(nodeId).stake;
        }
        assertLt(stake, MIN_STAKE);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_StakeBelowMinimum.selector, nodeId, stake, MIN_STAKE)
        );
        takeSlot(nodeId);
    }

    function test_TakeSlot_AfterTopUpRestoresTheMinimum() external {
        setSlashBps(10_000);
        takeSlot(nodeId);
        release(nodeId, false, Release.Faulted);
        assertEq(registry.getNode(nodeId).stake, 0);
        vm.prank(operator);
        registry.topUpStake(nodeId, MIN_STAKE);
        takeSlot(nodeId);
        assertEq(registry.getNode(nodeId).activeJobs, 1);
    }

    function test_RevertWhen_MaxConcurrentJobsLoweredBelowActive() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        vm.prank(operator);
        registry.updateCapabilities(nodeId, a100Node(), ""); // maxConcurrentJobs 1
        expectNoFreeSlot(2, 1);
        takeSlot(nodeId);
    }

    function test_RevertWhen_CallerLacksMarketRole() external {
        bytes32 role = registry.MARKET_ROLE();
        vm.expectRevert(unauthorized(stranger, role));
        vm.prank(stranger);
        registry.takeSlot(nodeId);
    }

    function test_RevertWhen_AdminLacksMarketRole() external {
        bytes32 role = registry.MARKET_ROLE();
        vm.expectRevert(unauthorized(admin, role));
        vm.prank(admin);
        registry.takeSlot(nodeId);
    }

    function test_RevertWhen_NodeIsInactive() external {
        makeInactive(nodeId);
        expectNotActive(NodeStatus.Inactive);
        takeSlot(nodeId);
    }

    function test_RevertWhen_NodeIsExiting() external {
        beginExit(nodeId);
        expectNotActive(NodeStatus.Exiting);
        takeSlot(nodeId);
    }

    function test_RevertWhen_NodeIsExited() external {
        exitAndWithdraw(nodeId);
        expectNotActive(NodeStatus.Exited);
        takeSlot(nodeId);
    }

    function test_RevertWhen_TakeSlotOfUnknownNode() external {
        expectUnknownNode(2);
        takeSlot(2);
    }
}
