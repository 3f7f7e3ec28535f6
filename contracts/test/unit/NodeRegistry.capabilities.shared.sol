// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistryUnitTest} from "./NodeRegistry.base.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {DETERMINISTIC_DOCKER, ENGINE_COUNT, ENGINE_DOCKER, NodeCapabilities} from "../../src/types/Types.sol";

/// @notice What `register` and `updateCapabilities` share: the rules of valid capabilities
/// and the metadata URI's length. Each entry point's test contract says how it submits them
/// and what a refused submission must leave unchanged.
abstract contract NodeRegistryCapabilitiesShared is NodeRegistryUnitTest {
    /// The rows of the capability table the market refuses, each breaking one rule.
    enum Broken {
        ModelWithoutGpus,
        GpusWithoutModel,
        GpusWithoutVram,
        NoCpuCores,
        NoJobSlots,
        NoEngine,
        UnknownEngine,
        SandboxWithoutDocker
    }

    /// Submits `caps` and `metadataURI` through the entry point under test, as the operator.
    function submitCapabilities(NodeCapabilities memory caps, string memory metadataURI) internal virtual;

    /// Asserts that a refused submission stored nothing.
    function assertNothingStored() internal view virtual;

    function broken(Broken row) internal pure returns (NodeCapabilities memory caps) {
        caps = a100Node();
        if (row == Broken.ModelWithoutGpus) caps.gpuCount = 0;
        if (row == Broken.GpusWithoutModel) caps.gpuModel = bytes32(0);
        if (row == Broken.GpusWithoutVram) caps.vramMiB = 0;
        if (row == Broken.NoCpuCores) caps.cpuCores = 0;
        if (row == Broken.NoJobSlots) caps.maxConcurrentJobs = 0;
        if (row == Broken.NoEngine) caps.engines = 0;
        if (row == Broken.UnknownEngine) caps.engines |= uint8(1) << ENGINE_COUNT;
        if (row == Broken.SandboxWithoutDocker) caps.engines = WASM_ONLY | uint8(1) << DETERMINISTIC_DOCKER;
    }

    function expectRefused(Broken row) internal {
        NodeCapabilities memory caps = broken(row);
        vm.expectRevert(INodeRegistry.NodeRegistry_InvalidCapabilities.selector);
        submitCapabilities(caps, META);
        assertNothingStored();
    }

    function test_Capabilities_RevertWhen_ModelWithoutGpus() external {
        expectRefused(Broken.ModelWithoutGpus);
    }

    function test_Capabilities_RevertWhen_GpusWithoutModel() external {
        expectRefused(Broken.GpusWithoutModel);
    }

    function test_Capabilities_RevertWhen_GpusWithoutVram() external {
        expectRefused(Broken.GpusWithoutVram);
    }

    function test_Capabilities_RevertWhen_NoCpuCores() external {
        expectRefused(Broken.NoCpuCores);
    }

    function test_Capabilities_RevertWhen_NoJobSlots() external {
        expectRefused(Broken.NoJobSlots);
    }

    function test_Capabilities_RevertWhen_NoEngine() external {
        expectRefused(Broken.NoEngine);
    }

    /// An engine this market does not know: no job could name it, and a later engine
    /// would find nodes claiming it before they could run it.
    function test_Capabilities_RevertWhen_UnknownEngine() external {
        expectRefused(Broken.UnknownEngine);
    }

    /// The deterministic Docker sandbox is a way to run Docker: a node without Docker
    /// cannot offer it (it would sit in the verification pool for jobs it cannot run).
    function test_Capabilities_RevertWhen_SandboxWithoutDocker() external {
        expectRefused(Broken.SandboxWithoutDocker);
    }

    function test_Capabilities_AcceptsADockerNodeWithTheSandbox() external {
        NodeCapabilities memory caps = cpuOnlyNode();
        caps.engines = uint8(1 << ENGINE_DOCKER | 1 << DETERMINISTIC_DOCKER);
        submitCapabilities(caps, META);
    }

    function test_Capabilities_AcceptsAWasmOnlyNodeWithoutDocker() external {
        NodeCapabilities memory caps = cpuOnlyNode();
        caps.engines = WASM_ONLY;
        submitCapabilities(caps, META);
    }

    function test_Capabilities_AcceptsACpuOnlyNode() external {
        submitCapabilities(cpuOnlyNode(), META);
    }

    /// Valid exactly when a model comes with GPUs that have memory (or neither is given),
    /// with at least one core, one job slot and one known engine.
    function testFuzz_Capabilities_ValidExactlyWhenConsistent(NodeCapabilities memory caps) external {
        bool hasGpus = caps.gpuCount != 0;
        bool valid = (caps.gpuModel != bytes32(0)) == hasGpus && (!hasGpus || caps.vramMiB != 0) && caps.cpuCores != 0
            && caps.maxConcurrentJobs != 0 && engineSetValid(caps.engines);
        if (!valid) vm.expectRevert(INodeRegistry.NodeRegistry_InvalidCapabilities.selector);
        submitCapabilities(caps, META);
        if (!valid) assertNothingStored();
    }

    /// At least one known engine; the sandbox bit only beside Docker's.
    function engineSetValid(uint8 engines) internal pure returns (bool) {
        uint8 sandbox = uint8(1) << DETERMINISTIC_DOCKER;
        uint8 known = engines & ~sandbox;
        return known != 0 && known >> ENGINE_COUNT == 0 && (engines & sandbox == 0 || (known >> ENGINE_DOCKER) & 1 == 1);
    }

    function test_Capabilities_AcceptsAMetadataURIOfTheLongestLength() external {
        submitCapabilities(a100Node(), string(new bytes(256)));
    }

    function test_Capabilities_RevertWhen_MetadataURITooLong() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_TextTooLong.selector, 257, 256));
        submitCapabilities(a100Node(), string(new bytes(257)));
        assertNothingStored();
    }

    function testFuzz_Capabilities_RevertWhen_MetadataURITooLong(uint256 length) external {
        length = bound(length, 257, 4096);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_TextTooLong.selector, length, 256));
        submitCapabilities(a100Node(), string(new bytes(length)));
    }
}
