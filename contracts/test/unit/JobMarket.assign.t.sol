// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IAccessControl} from "@openzeppelin/contracts/access/IAccessControl.sol";
import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {
    JobInfo,
    JobRequirements,
    JobStatus,
    MarketParams,
    NodeCapabilities,
    NodeStatus
} from "../../src/types/Types.sol";

contract JobMarket_Assign_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
    }

    function test_Assign_AssignsJob() external {
        uint40 now40 = uint40(block.timestamp);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 1, false, now40);
        assignJob(jobId, nodeId);

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

    /// The admin lowered maxAttempts after the job was requeued: no attempt is left.
    function test_RevertWhen_NoAttemptsLeft() external {
        assignJob(jobId, nodeId);
        vm.prank(agent);
        market.reject(jobId, "bad input");
        MarketParams memory p = marketParams();
        p.maxAttempts = 1;
        setMarketParams(p);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NoAttemptsLeft.selector, jobId, uint8(1)));
        assignJob(jobId, nodeId);
    }

    function test_Assign_FillsEverySlot() external {
        uint64 second = postJob();
        assignJob(jobId, nodeId);
        assignJob(second, nodeId);
        assertNodeCounters(nodeId, 2, 0, 0, 0);
        assertEq(jobOf(second).nodeId, nodeId);
        assertStatus(second, JobStatus.Assigned);
    }

    function test_Assign_AnyGpuModelAcceptsOtherModel() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        uint64 a100 = registerNodeWith(caps);
        JobRequirements memory req = h100Job();
        req.gpuModel = bytes32(0);
        uint64 anyModel = postJobWith(req);

        assignJob(anyModel, a100);
        assertStatus(anyModel, JobStatus.Assigned);
        assertEq(jobOf(anyModel).nodeId, a100);
    }

    function test_Assign_AcceptsExactlyMatchingNode() external {
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
        assignJob(jobId, exact);
        assertEq(jobOf(jobId).nodeId, exact);
        assertNodeCounters(exact, 1, 0, 0, 0);
    }

    function test_Assign_AcceptsOneSecondBeforeDeadline() external {
        vm.warp(jobOf(jobId).deadline - 1);
        heartbeat(nodeId);
        assignJob(jobId, nodeId);
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_RevertWhen_CallerNotMatcher() external {
        bytes32 role = market.MATCHER_ROLE();
        vm.expectRevert(abi.encodeWithSelector(IAccessControl.AccessControlUnauthorizedAccount.selector, agent, role));
        vm.prank(agent);
        market.assign(jobId, nodeId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        assignJob(99, nodeId);
    }

    function test_RevertWhen_JobAlreadyAssigned() external {
        assignJob(jobId, nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Assigned));
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_JobCancelled() external {
        vm.prank(submitter);
        market.cancel(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Cancelled));
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_DeadlineReached() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        heartbeat(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_NodeUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(99)));
        assignJob(jobId, 99);
    }

    function test_RevertWhen_NodeInactive() external {
        makeInactive(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Inactive)
        );
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_NodeExiting() external {
        beginExit(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exiting)
        );
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_NodeHasNoFreeSlot() external {
        assignJob(postJob(), nodeId);
        assignJob(postJob(), nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoFreeSlot.selector, nodeId, uint8(2), uint8(2))
        );
        assignJob(jobId, nodeId);
    }

    function test_RevertWhen_GpuModelMismatch() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        uint64 other = registerNodeWith(caps);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100, A100));
        assignJob(jobId, other);
    }

    function test_RevertWhen_InsufficientGpus() external {
        JobRequirements memory req = h100Job();
        req.minGpuCount = 9;
        uint64 big = postJobWith(req);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, uint16(9), uint16(8)));
        assignJob(big, nodeId);
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
        assignJob(anyGpu, cpuOnly);
    }

    function test_RevertWhen_InsufficientVram() external {
        NodeCapabilities memory caps = h100Node();
        caps.vramMiB = 40_959;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientVram.selector, uint32(40_960), uint32(40_959))
        );
        assignJob(jobId, small);
    }

    function test_RevertWhen_InsufficientCpu() external {
        NodeCapabilities memory caps = h100Node();
        caps.cpuCores = 7;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientCpu.selector, uint16(8), uint16(7)));
        assignJob(jobId, small);
    }

    function test_RevertWhen_InsufficientRam() external {
        NodeCapabilities memory caps = h100Node();
        caps.ramMiB = 65_535;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientRam.selector, uint32(65_536), uint32(65_535))
        );
        assignJob(jobId, small);
    }

    function test_RevertWhen_PriceTooHigh() external {
        NodeCapabilities memory caps = h100Node();
        caps.pricePerGpuHour = 3e6 + 1;
        uint64 pricey = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_PriceTooHigh.selector, uint96(3e6), uint96(3e6 + 1))
        );
        assignJob(jobId, pricey);
    }

    function test_RevertWhen_Paused() external {
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        assignJob(jobId, nodeId);
    }
}
