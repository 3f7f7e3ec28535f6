// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_MarkSettling_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_MarkSettling_MovesJobToSettling() external {
        takeSlot(nodeId);
        takeSlot(nodeId);

        vm.recordLogs();
        vm.prank(marketCaller);
        address returnedAgent = registry.markSettling(nodeId);

        assertEq(returnedAgent, agent);
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.activeJobs, 1);
        assertEq(node.settlingJobs, 1);
        assertEq(node.completedJobs, 0);
        assertEq(vm.getRecordedLogs().length, 0, "markSettling emits nothing");
    }

    function test_MarkSettling_FreesSlotForNextJob() external {
        takeSlot(nodeId);
        takeSlot(nodeId);
        markSettling(nodeId);
        takeSlot(nodeId); // a settling job does not hold a slot
        NodeInfo memory node = registry.getNode(nodeId);
        assertEq(node.activeJobs, 2);
        assertEq(node.settlingJobs, 1);
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
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
        vm.prank(marketCaller);
        assertEq(registry.markSettling(nodeId), newAgent);
    }

    function test_RevertWhen_NoActiveJob() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoActiveJob.selector, nodeId));
        vm.prank(marketCaller);
        registry.markSettling(nodeId);
    }

    function test_RevertWhen_AllJobsAlreadySettling() external {
        takeSlot(nodeId);
        markSettling(nodeId);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoActiveJob.selector, nodeId));
        vm.prank(marketCaller);
        registry.markSettling(nodeId);
    }

    function test_RevertWhen_CallerLacksMarketRole() external {
        takeSlot(nodeId);
        bytes32 role = registry.MARKET_ROLE();
        vm.expectRevert(unauthorized(agent, role));
        vm.prank(agent);
        registry.markSettling(nodeId);
    }

    function test_RevertWhen_MarkSettlingUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(2)));
        vm.prank(marketCaller);
        registry.markSettling(2);
    }
}
