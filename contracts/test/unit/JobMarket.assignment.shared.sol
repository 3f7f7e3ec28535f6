// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarket_OpenJob_Test} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobInfo, JobRequirements, JobStatus, NodeCapabilities, NodeStatus} from "../../src/types/Types.sol";

/// @notice What `assign` and `claim` share: both go through the same checks of the job,
/// the node and the requirements. Each entry point's test contract says how it takes a job.
abstract contract JobMarket_Assignment_Shared is JobMarket_OpenJob_Test {
    /// The rows of the eligibility table a node can fail on its own: each is a node like
    /// `h100Node` falling short of `h100Job` in one capability.
    enum Shortfall {
        Model,
        Vram,
        Cpu,
        Ram,
        Price
    }

    /// Assigns `id` to `node` through the entry point under test.
    function take(uint64 id, uint64 node) internal virtual;

    /// Registers the row's node and expects the fixture's job to be refused to it, naming
    /// what the job requires and what the node offers.
    function expectRefused(Shortfall row) internal {
        NodeCapabilities memory caps = h100Node();
        bytes memory reason;
        if (row == Shortfall.Model) {
            caps.gpuModel = A100;
            reason = abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100, A100);
        } else if (row == Shortfall.Vram) {
            caps.vramMiB = 40_959;
            reason =
                abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientVram.selector, uint32(40_960), caps.vramMiB);
        } else if (row == Shortfall.Cpu) {
            caps.cpuCores = 7;
            reason = abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientCpu.selector, uint16(8), caps.cpuCores);
        } else if (row == Shortfall.Ram) {
            caps.ramMiB = 65_535;
            reason = abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientRam.selector, uint32(65_536), caps.ramMiB);
        } else {
            caps.pricePerGpuHour = 3e6 + 1;
            reason =
                abi.encodeWithSelector(IJobMarket.JobMarket_PriceTooHigh.selector, uint96(3e6), caps.pricePerGpuHour);
        }
        uint64 shortNode = registerNodeWith(caps);
        vm.expectRevert(reason);
        take(jobId, shortNode);
    }

    /// Takes the fixture's job through the entry point under test and checks that its first
    /// attempt began on the fixture's node, `claimed` by its agent or assigned by the matcher.
    function assertTaken(bool claimed) internal {
        uint40 now40 = uint40(block.timestamp);
        expectMarketEmit();
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 1, claimed, now40);
        take(jobId, nodeId);

        JobInfo memory job = jobOf(jobId);
        assertEq(uint8(job.status), uint8(JobStatus.Assigned));
        assertEq(job.attempts, 1);
        assertEq(job.nodeId, nodeId);
        assertEq(job.assignedAt, now40);
        assertEq(job.challengeEndsAt, 0);
        assertEq(job.bounty, BOUNTY);
        assertNodeCounters(nodeId, 1, 0, 0, 0);
        assertEq(token.balanceOf(address(market)), BOUNTY);
    }

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
        vm.warp(deadline - 1);
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
        expectWrongStatus(JobStatus.Assigned);
        take(jobId, nodeId);
    }

    function test_RevertWhen_JobCancelled() external {
        vm.prank(submitter);
        market.cancel(jobId);
        expectWrongStatus(JobStatus.Cancelled);
        take(jobId, nodeId);
    }

    function test_RevertWhen_DeadlineReached() external {
        vm.warp(deadline);
        heartbeat(nodeId);
        expectPastDeadline(jobId);
        take(jobId, nodeId);
    }

    function test_RevertWhen_NodeUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(99)));
        take(jobId, 99);
    }

    function test_RevertWhen_NodeInactive() external {
        makeInactive(nodeId);
        expectNotActive(NodeStatus.Inactive);
        take(jobId, nodeId);
    }

    function test_RevertWhen_NodeExiting() external {
        beginExit(nodeId);
        expectNotActive(NodeStatus.Exiting);
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
        expectRefused(Shortfall.Model);
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
        expectRefused(Shortfall.Vram);
    }

    function test_RevertWhen_InsufficientCpu() external {
        expectRefused(Shortfall.Cpu);
    }

    function test_RevertWhen_InsufficientRam() external {
        expectRefused(Shortfall.Ram);
    }

    function test_RevertWhen_PriceTooHigh() external {
        expectRefused(Shortfall.Price);
    }

    function test_RevertWhen_Paused() external {
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        take(jobId, nodeId);
    }
}
