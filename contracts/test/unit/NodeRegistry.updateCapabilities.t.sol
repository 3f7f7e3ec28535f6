// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities, NodeInfo, NodeStatus} from "../../src/types/Types.sol";

contract NodeRegistry_UpdateCapabilities_Test is NodeRegistry_Unit_Test {
    uint64 internal nodeId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
    }

    function test_UpdateCapabilities_ReplacesCapabilities() external {
        NodeInfo memory before = registry.getNode(nodeId);

        expectRegistryEmit();
        emit INodeRegistry.NodeCapabilitiesUpdated(nodeId, a100Node(), "ipfs://new-meta");
        vm.prank(operator);
        registry.updateCapabilities(nodeId, a100Node(), "ipfs://new-meta");

        NodeInfo memory node = registry.getNode(nodeId);
        assertCapabilities(node.capabilities, a100Node());
        assertEq(node.operator, before.operator);
        assertEq(node.agent, before.agent);
        assertEq(node.stake, before.stake);
        assertEq(node.lastHeartbeat, before.lastHeartbeat);
        assertStatus(nodeId, NodeStatus.Active);
    }

    function test_UpdateCapabilities_AcceptsCpuOnly() external {
        vm.prank(operator);
        registry.updateCapabilities(nodeId, cpuOnlyNode(), "");
        assertCapabilities(registry.getNode(nodeId).capabilities, cpuOnlyNode());
    }

    function test_RevertWhen_UpdateUnknownNode() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(2)));
        vm.prank(operator);
        registry.updateCapabilities(2, a100Node(), "");
    }

    function test_RevertWhen_CallerIsNotOperator() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotOperator.selector, nodeId, agent));
        vm.prank(agent);
        registry.updateCapabilities(nodeId, a100Node(), "");
    }

    function test_RevertWhen_ModelWithoutGpus() external {
        NodeCapabilities memory caps = a100Node();
        caps.gpuCount = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_GpusWithoutModel() external {
        NodeCapabilities memory caps = a100Node();
        caps.gpuModel = bytes32(0);
        expectInvalid(caps);
    }

    function test_RevertWhen_GpusWithoutVram() external {
        NodeCapabilities memory caps = a100Node();
        caps.vramMiB = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_CpuCoresIsZero() external {
        NodeCapabilities memory caps = a100Node();
        caps.cpuCores = 0;
        expectInvalid(caps);
    }

    function test_RevertWhen_MaxConcurrentJobsIsZero() external {
        NodeCapabilities memory caps = a100Node();
        caps.maxConcurrentJobs = 0;
        expectInvalid(caps);
    }

    function expectInvalid(NodeCapabilities memory caps) internal {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidCapabilities.selector));
        vm.prank(operator);
        registry.updateCapabilities(nodeId, caps, "");
        assertCapabilities(registry.getNode(nodeId).capabilities, h100Node());
    }
}
