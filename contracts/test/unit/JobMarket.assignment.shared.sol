// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobRequirements, JobStatus, NodeCapabilities, NodeStatus} from "../../src/types/Types.sol";

/// @notice What `assign` and `claim` share: both go through the same checks of the job,
/// the node and the requirements. Each entry point's test contract says how it takes a job.
abstract contract JobMarket_Assignment_Shared is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public virtual override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
    }

    /// Assigns `id` to `node` through the entry point under test.
    function take(uint64 id, uint64 node) internal virtual;

    function test_Take_FillsEverySlot() external {
        uint64 second = postJob();
        take(jobId, nodeId);
        take(second, nodeId);
        assertNodeCounters(nodeId, 2, 0, 0, 0);
        assertEq(jobOf(second).nodeId, nodeId);
        assertStatus(second, JobStatus.Assigned);
    }

    function test_Take_AnyGpuModelAcceptsOtherModel() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        uint64 a100 = registerNodeWith(caps);
        JobRequirements memory req = h100Job();
        req.gpuModel = bytes32(0);
        uint64 anyModel = postJobWith(req);

        take(anyModel, a100);
        assertStatus(anyModel, JobStatus.Assigned);
        assertEq(jobOf(anyModel).nodeId, a100);
    }

    function test_Take_AcceptsExactlyMatchingNode() external {
        JobRequirements memory req = h100Job();
        NodeCapabilities memory caps = NodeCapabilities({
            gpuModel: req.gpuModel,
            gpuCount: req.minGpuCount,
            vramMiB: req.minVramMiB,
            cpuCores: req.minCpuCores,
            ramMiB: req.minRamMiB,
            pricePerGpuHour: req.maxPricePerGpuHour,
            maxConcurrentJobs: 1
        });
        uint64 exact = registerNodeWith(caps);
        take(jobId, exact);
        assertEq(jobOf(jobId).nodeId, exact);
        assertNodeCounters(exact, 1, 0, 0, 0);
    }

    function test_Take_AcceptsOneSecondBeforeDeadline() external {
        vm.warp(jobOf(jobId).deadline - 1);
        heartbeat(nodeId);
        take(jobId, nodeId);
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        take(99, nodeId);
    }

    function test_RevertWhen_JobAlreadyAssigned() external {
        take(jobId, nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Assigned));
        take(jobId, nodeId);
    }

    function test_RevertWhen_JobCancelled() external {
        vm.prank(submitter);
        market.cancel(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Cancelled));
        take(jobId, nodeId);
    }

    function test_RevertWhen_DeadlineReached() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        heartbeat(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        take(jobId, nodeId);
    }

    function test_RevertWhen_NodeUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(99)));
        take(jobId, 99);
    }

    function test_RevertWhen_NodeInactive() external {
        makeInactive(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Inactive)
        );
        take(jobId, nodeId);
    }

    function test_RevertWhen_NodeExiting() external {
        beginExit(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exiting)
        );
        take(jobId, nodeId);
    }

    function test_RevertWhen_NodeHasNoFreeSlot() external {
        take(postJob(), nodeId);
        take(postJob(), nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoFreeSlot.selector, nodeId, uint8(2), uint8(2))
        );
        take(jobId, nodeId);
    }

    function test_RevertWhen_GpuModelMismatch() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        uint64 other = registerNodeWith(caps);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100, A100));
        take(jobId, other);
    }

    function test_RevertWhen_InsufficientGpus() external {
        JobRequirements memory req = h100Job();
        req.minGpuCount = 9;
        uint64 big = postJobWith(req);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, uint16(9), uint16(8)));
        take(big, nodeId);
    }

    function test_RevertWhen_NodeWithoutGpus() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = bytes32(0);
        caps.gpuCount = 0;
        caps.vramMiB = 0;
        uint64 cpuOnly = registerNodeWith(caps);
        JobRequirements memory req = h100Job();
        req.gpuModel = bytes32(0);
        uint64 anyGpu = postJobWith(req);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, uint16(1), uint16(0)));
        take(anyGpu, cpuOnly);
    }

    function test_RevertWhen_InsufficientVram() external {
        NodeCapabilities memory caps = h100Node();
        caps.vramMiB = 40_959;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientVram.selector, uint32(40_960), uint32(40_959))
        );
        take(jobId, small);
    }

    function test_RevertWhen_InsufficientCpu() external {
        NodeCapabilities memory caps = h100Node();
        caps.cpuCores = 7;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientCpu.selector, uint16(8), uint16(7)));
        take(jobId, small);
    }

    function test_RevertWhen_InsufficientRam() external {
        NodeCapabilities memory caps = h100Node();
        caps.ramMiB = 65_535;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientRam.selector, uint32(65_536), uint32(65_535))
        );
        take(jobId, small);
    }

    function test_RevertWhen_PriceTooHigh() external {
        NodeCapabilities memory caps = h100Node();
        caps.pricePerGpuHour = 3e6 + 1;
        uint64 pricey = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_PriceTooHigh.selector, uint96(3e6), uint96(3e6 + 1))
        );
        take(jobId, pricey);
    }

    function test_RevertWhen_Paused() external {
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        take(jobId, nodeId);
    }
}
