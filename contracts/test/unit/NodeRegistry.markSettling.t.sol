// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Node_Test} from "./NodeRegistryBase.sol";
import {NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_MarkSettling_Test is NodeRegistry_Node_Test {
    function test_MarkSettling_MovesJobToSettling() external {
        takeSlot(nodeId);
        takeSlot(nodeId);

        vm.recordLogs();
        vm.prank(marketCaller);
        address returnedAgent = registry.markSettling(nodeId);

        assertEq(returnedAgent, agent);
        assertNodeCounters(nodeId, 1, 1, 0, 0);
        assertEq(vm.getRecordedLogs().length, 0, "markSettling emits nothing");
    }

    function test_MarkSettling_FreesSlotForNextJob() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        markSettling(nodeId);
        takeSlot(nodeId); // a settling job does not hold a slot
        assertNodeCounters(nodeId, 2, 1, 0, 0);
    }

    function test_MarkSettling_InactiveNode() external {
        takeSlot(nodeId);
        makeInactive(nodeId);
        markSettling(nodeId);
        assertEq(registry.getNode(nodeId).settlingJobs, 1);
        assertStatus(nodeId, NodeStatus.Inactive);
    }

    function test_MarkSettling_ReturnsCurrentAgent() external {
        takeSlot(nodeId);
        address newAgent = setNewAgent(nodeId);
        vm.prank(marketCaller);
        assertEq(registry.markSettling(nodeId), newAgent);
    }

    function test_RevertWhen_NoActiveJob() external {
        expectNoActiveJob(nodeId);
        markSettling(nodeId);
    }

    function test_RevertWhen_AllJobsAlreadySettling() external {
        takeSlot(nodeId);
        markSettling(nodeId);
        expectNoActiveJob(nodeId);
        markSettling(nodeId);
    }

    function test_RevertWhen_CallerLacksMarketRole() external {
        takeSlot(nodeId);
        bytes32 role = registry.MARKET_ROLE();
        vm.expectRevert(unauthorized(agent, role));
        vm.prank(agent);
        registry.markSettling(nodeId);
    }

    function test_RevertWhen_MarkSettlingUnknownNode() external {
        expectUnknownNode(2);
        markSettling(2);
    }
}
