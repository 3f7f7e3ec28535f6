// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Base} from "../Base.t.sol";
import {NodeRegistryNodeTest} from "./NodeRegistry.base.sol";
import {NodeRegistryCapabilitiesShared} from "./NodeRegistry.capabilities.shared.sol";
import {JobView} from "../JobView.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {
    ENGINE_DOCKER,
    JobRequirements,
    JobState,
    JobStatus,
    NodeCapabilities,
    NodeInfo,
    NodeStatus
} from "../../src/types/Types.sol";

contract NodeRegistryUpdateCapabilitiesTest is NodeRegistryNodeTest, NodeRegistryCapabilitiesShared {
    using JobView for JobState;

    function setUp() public override(Base, NodeRegistryNodeTest) {
        super.setUp();
    }

    // ---------------------------------------------------------------- the shared rules' hooks

    function submitCapabilities(NodeCapabilities memory caps, string memory metadataURI) internal override {
        vm.prank(operator);
        nodes.updateCapabilities(nodeId, caps, metadataURI);
    }

    function assertNothingStored() internal view override {
        assertEq(nodes.getNode(nodeId).gpuModelTag, tagOf(H100), "the H100 node it was");
        assertStatus(nodeId, NodeStatus.Active);
    }

    // ---------------------------------------------------------------- helpers

    function update(NodeCapabilities memory caps) internal {
        submitCapabilities(caps, META);
        sync();
    }

    /// A job asking for exactly what `caps` offers.
    function requirementsOf(NodeCapabilities memory caps) internal pure returns (JobRequirements memory r) {
        r = JobRequirements({
            gpuModel: caps.gpuModel,
            minGpuCount: caps.gpuCount,
            minVramMiB: caps.vramMiB,
            minCpuCores: caps.cpuCores,
            minRamMiB: caps.ramMiB,
            maxPricePerGpuHour: caps.pricePerGpuHour,
            maxRuntime: RUNTIME,
            priority: 5,
            engine: ENGINE_DOCKER
        });
    }

    function post(JobRequirements memory r) internal returns (uint64) {
        return postJob(r, BOUNTY, uint40(block.timestamp + 1 days));
    }

    function expectAssignReverts(JobRequirements memory r, bytes memory reason) internal {
        uint64 jobId = post(r);
        vm.prank(matcher);
        vm.expectRevert(reason);
        market.assign(jobId, nodeId, jobs[jobId].terms, jobs[jobId].state);
    }

    // ---------------------------------------------------------------- updateCapabilities

    function test_UpdateCapabilities_ReplacesWhatAssignChecks() external {
        NodeInfo memory before = nodes.getNode(nodeId);
        expectNodeEmit();
        emit INodeRegistry.NodeCapabilitiesUpdated(nodeId, a100Node(), "ipfs://a100");
        vm.prank(operator);
        nodes.updateCapabilities(nodeId, a100Node(), "ipfs://a100");
        sync();

        NodeInfo memory after_ = nodes.getNode(nodeId);
        assertEq(after_.gpuModelTag, tagOf(A100));
        assertEq(uint8(after_.status), uint8(NodeStatus.Active), "the status is kept");
        assertEq(after_.stake, before.stake);
        assertEq(after_.agent, before.agent);
        assertEq(after_.lastHeartbeat, before.lastHeartbeat);

        // A job asking for the old model no longer assigns; one asking for the new one does.
        expectAssignReverts(h100Job(), abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100));
        uint64 jobId = post(requirementsOf(a100Node()));
        assign(jobId, nodeId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Assigned));
        assertReplay();
    }

    /// Every field `assign` checks is stored (packed in the node's first slot) as given: a
    /// job asking for exactly the new capabilities assigns, one asking for one unit more of
    /// any of them (or a cent less of the price) does not.
    function testFuzz_UpdateCapabilities_StoresEveryCheckedField(NodeCapabilities memory caps) external {
        caps.gpuModel = caps.gpuModel == bytes32(0) ? A100 : caps.gpuModel;
        caps.gpuCount = uint16(bound(caps.gpuCount, 1, type(uint16).max - 1));
        caps.vramMiB = uint32(bound(caps.vramMiB, 1, type(uint32).max - 1));
        caps.cpuCores = uint16(bound(caps.cpuCores, 1, type(uint16).max - 1));
        caps.ramMiB = uint32(bound(caps.ramMiB, 0, type(uint32).max - 1));
        caps.pricePerGpuHour = uint96(bound(caps.pricePerGpuHour, 1, type(uint96).max));
        caps.maxConcurrentJobs = uint8(bound(caps.maxConcurrentJobs, 1, type(uint8).max));
        // A GPU node's jobs run on Docker (a WASM job takes no GPU); WASM beside it or not.
        caps.engines = caps.engines % 2 == 0 ? DOCKER_AND_WASM : DOCKER_ONLY;
        update(caps);
        assertEq(nodes.getNode(nodeId).gpuModelTag, tagOf(caps.gpuModel));
        assertEq(nodes.getNode(nodeId).engines, caps.engines);

        JobRequirements memory r = requirementsOf(caps);
        r.gpuModel = H100 == caps.gpuModel ? A100 : H100;
        expectAssignReverts(r, abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, r.gpuModel));
        r = requirementsOf(caps);
        r.minGpuCount++;
        expectAssignReverts(
            r, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, r.minGpuCount, caps.gpuCount)
        );
        r = requirementsOf(caps);
        r.minVramMiB++;
        expectAssignReverts(
            r, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientVram.selector, r.minVramMiB, caps.vramMiB)
        );
        r = requirementsOf(caps);
        r.minCpuCores++;
        expectAssignReverts(
            r, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientCpu.selector, r.minCpuCores, caps.cpuCores)
        );
        r = requirementsOf(caps);
        r.minRamMiB++;
        expectAssignReverts(
            r, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientRam.selector, r.minRamMiB, caps.ramMiB)
        );
        r = requirementsOf(caps);
        r.maxPricePerGpuHour--;
        expectAssignReverts(
            r,
            abi.encodeWithSelector(
                IJobMarket.JobMarket_PriceTooHigh.selector, uint256(r.maxPricePerGpuHour), caps.pricePerGpuHour
            )
        );

        uint64 jobId = post(requirementsOf(caps));
        assign(jobId, nodeId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Assigned));
        assertReplay();
    }

    function test_UpdateCapabilities_ToCpuOnly_DropsTheModel() external {
        update(cpuOnlyNode());
        assertEq(nodes.getNode(nodeId).gpuModelTag, bytes6(0));
        expectAssignReverts(h100Job(), abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100));
        JobRequirements memory anyModel = h100Job();
        anyModel.gpuModel = bytes32(0);
        expectAssignReverts(
            anyModel, abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, uint16(1), uint16(0))
        );
        uint64 jobId = post(requirementsOf(cpuOnlyNode()));
        assign(jobId, nodeId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Assigned));
    }

    /// Eligibility is checked at assignment only: a job the node holds runs on after an
    /// update it would not pass.
    function test_UpdateCapabilities_LeavesAssignedJobsRunning() external {
        uint64 jobId = postJob();
        assign(jobId, nodeId);
        update(a100Node());
        submit(jobId);
        finalize(jobId);
        assertEq(uint8(status(jobId)), uint8(JobStatus.Completed));
        assertReplay();
    }

    function test_UpdateCapabilities_KeepsAnInactiveNodeInactive() external {
        makeInactive(nodeId);
        update(a100Node());
        assertStatus(nodeId, NodeStatus.Inactive);
        assertEq(nodes.getNode(nodeId).gpuModelTag, tagOf(A100));
    }

    function test_UpdateCapabilities_KeepsAnExitingNodeExiting() external {
        beginExit(nodeId);
        update(a100Node());
        assertStatus(nodeId, NodeStatus.Exiting);
    }

    function test_UpdateCapabilities_WhilePaused() external {
        vm.prank(pauser);
        market.setPaused(true);
        update(a100Node());
        assertEq(nodes.getNode(nodeId).gpuModelTag, tagOf(A100));
    }

    function test_UpdateCapabilities_RevertWhen_CallerIsNotTheOperator() external {
        expectNotOperator(nodeId, agent);
        vm.prank(agent);
        nodes.updateCapabilities(nodeId, a100Node(), META);
        expectNotOperator(nodeId, stranger);
        vm.prank(stranger);
        nodes.updateCapabilities(nodeId, a100Node(), META);
        assertNothingStored();
    }

    function test_UpdateCapabilities_RevertWhen_UnknownNode() external {
        expectUnknownNode(0);
        vm.prank(operator);
        nodes.updateCapabilities(0, a100Node(), META);
        expectUnknownNode(2);
        vm.prank(operator);
        nodes.updateCapabilities(2, a100Node(), META);
    }
}
