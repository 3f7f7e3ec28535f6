// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Capabilities_Shared} from "./NodeRegistry.capabilities.shared.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_UpdateCapabilities_Test is NodeRegistry_Capabilities_Shared {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function update(uint64 id, NodeCapabilities memory caps, string memory metadataURI) internal {
        vm.prank(operator);
        registry.updateCapabilities(id, caps, metadataURI);
    }

    function validCapabilities() internal pure override returns (NodeCapabilities memory) {
        return a100Node();
    }

    function submitCapabilities(NodeCapabilities memory caps) internal override {
        update(nodeId, caps, "");
    }

    function assertNothingStored() internal view override {
        assertCapabilities(registry.getNode(nodeId).capabilities, h100Node());
    }

    function test_UpdateCapabilities_ReplacesCapabilities() external {
        NodeInfo memory before = registry.getNode(nodeId);

        expectRegistryEmit();
        emit INodeRegistry.NodeCapabilitiesUpdated(nodeId, a100Node(), "ipfs://new-meta");
        update(nodeId, a100Node(), "ipfs://new-meta");

        NodeInfo memory node = registry.getNode(nodeId);
        assertCapabilities(node.capabilities, a100Node());
        assertEq(node.operator, before.operator);
        assertEq(node.agent, before.agent);
        assertEq(node.stake, before.stake);
        assertEq(node.lastHeartbeat, before.lastHeartbeat);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_UpdateCapabilities_AcceptsCpuOnly() external {
        update(nodeId, cpuOnlyNode(), "");
        assertCapabilities(registry.getNode(nodeId).capabilities, cpuOnlyNode());
    }

    function test_RevertWhen_UpdateUnknownNode() external {
        expectUnknownNode(2);
        update(2, a100Node(), "");
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, agent));
        vm.prank(agent);
        registry.updateCapabilities(nodeId, a100Node(), "");
    }
}
