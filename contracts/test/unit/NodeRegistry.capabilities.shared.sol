// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {NodeRegistry_Unit_Test} from "./NodeRegistryBase.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {NodeCapabilities} from "../../src/types/Types.sol";

/// @notice What `register` and `updateCapabilities` share: the same rules of valid
/// capabilities. Each entry point's test contract says how it submits capabilities and what
/// a refused submission must leave unchanged.
abstract contract NodeRegistry_Capabilities_Shared is NodeRegistry_Unit_Test {
    /// The rows of the capability table the registry refuses, each breaking one rule.
    enum Broken {
        ModelWithoutGpus,
        GpusWithoutModel,
        GpusWithoutVram,
        NoCpuCores,
        NoJobSlots
    }

    /// Valid capabilities that each row breaks in one field.
    function validCapabilities() internal pure virtual returns (NodeCapabilities memory);

    /// Submits `caps` through the entry point under test.
    function submitCapabilities(NodeCapabilities memory caps) internal virtual;

    /// Asserts that a refused submission stored nothing.
    function assertNothingStored() internal view virtual;

    function broken(Broken row) internal pure returns (NodeCapabilities memory caps) {
        caps = validCapabilities();
        if (row == Broken.ModelWithoutGpus) caps.gpuCount = 0;
        if (row == Broken.GpusWithoutModel) caps.gpuModel = bytes32(0);
        if (row == Broken.GpusWithoutVram) caps.vramMiB = 0;
        if (row == Broken.NoCpuCores) caps.cpuCores = 0;
        if (row == Broken.NoJobSlots) caps.maxConcurrentJobs = 0;
    }

    function expectRefused(Broken row) internal {
        NodeCapabilities memory caps = broken(row);
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_InvalidCapabilities.selector));
        submitCapabilities(caps);
        assertNothingStored();
    }

    function test_RevertWhen_ModelWithoutGpus() external {
        expectRefused(Broken.ModelWithoutGpus);
    }

    function test_RevertWhen_GpusWithoutModel() external {
        expectRefused(Broken.GpusWithoutModel);
    }

    function test_RevertWhen_GpusWithoutVram() external {
        expectRefused(Broken.GpusWithoutVram);
    }

    function test_RevertWhen_CpuCoresIsZero() external {
        expectRefused(Broken.NoCpuCores);
    }

    function test_RevertWhen_MaxConcurrentJobsIsZero() external {
        expectRefused(Broken.NoJobSlots);
    }
}
