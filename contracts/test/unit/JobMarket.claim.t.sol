// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Pausable} from "@openzeppelin/contracts/utils/Pausable.sol";

import {JobMarketBase} from "./JobMarketBase.sol";
import {IJobMarket} from "../../src/interfaces/IJobMarket.sol";
import {INodeRegistry} from "../../src/interfaces/INodeRegistry.sol";
import {JobInfo, JobRequirements, JobStatus, NodeCapabilities, NodeStatus} from "../../src/types/Types.sol";

contract JobMarket_Claim_Test is JobMarketBase {
    uint64 internal nodeId;
    uint64 internal jobId;

    function setUp() public override {
        super.setUp();
        nodeId = registerNode();
        jobId = postJob();
    }

    function claimJob(uint64 id, uint64 node) internal {
        vm.prank(agent);
        market.claim(id, node);
    }

    function test_Claim_AssignsJob() external {
        uint40 now40 = uint40(block.timestamp);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, agent, 1, true, now40);
        claimJob(jobId, nodeId);

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

    function test_Claim_FillsEverySlot() external {
        uint64 second = postJob();
        claimJob(jobId, nodeId);
        claimJob(second, nodeId);
        assertNodeCounters(nodeId, 2, 0, 0, 0);
        assertEq(jobOf(second).nodeId, nodeId);
        assertStatus(second, JobStatus.Assigned);
    }

    function test_Claim_AnyGpuModelAcceptsOtherModel() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        uint64 a100 = registerNodeWith(caps);
        JobRequirements memory req = h100Job();
        req.gpuModel = bytes32(0);
        uint64 anyModel = postJobWith(req);

        claimJob(anyModel, a100);
        assertStatus(anyModel, JobStatus.Assigned);
        assertEq(jobOf(anyModel).nodeId, a100);
    }

    function test_Claim_AcceptsExactlyMatchingNode() external {
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
        claimJob(jobId, exact);
        assertEq(jobOf(jobId).nodeId, exact);
        assertNodeCounters(exact, 1, 0, 0, 0);
    }

    function test_Claim_AcceptsOneSecondBeforeDeadline() external {
        vm.warp(jobOf(jobId).deadline - 1);
        heartbeat(nodeId);
        claimJob(jobId, nodeId);
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_Claim_ByNewAgentAfterAgentChange() external {
        address newAgent = makeAddr("newAgent");
        vm.prank(operator);
        registry.setAgent(nodeId, newAgent);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobAssigned(jobId, nodeId, newAgent, 1, true, uint40(block.timestamp));
        vm.prank(newAgent);
        market.claim(jobId, nodeId);
        assertStatus(jobId, JobStatus.Assigned);
    }

    function test_RevertWhen_MatcherClaims() external {
        // The claim path checks the node's agent, not the matcher role.
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, matcher));
        vm.prank(matcher);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_CallerNotNodeAgent() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, stranger));
        vm.prank(stranger);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_CallerIsNodeOperator() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, operator));
        vm.prank(operator);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_CallerIsAgentOfAnotherNode() external {
        address otherAgent = makeAddr("otherAgent");
        vm.prank(operator);
        registry.register(otherAgent, h100Node(), "ipfs://other", STAKE);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_NotNodeAgent.selector, nodeId, otherAgent));
        vm.prank(otherAgent);
        market.claim(jobId, nodeId);
    }

    function test_RevertWhen_JobUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_UnknownJob.selector, uint64(99)));
        claimJob(99, nodeId);
    }

    function test_RevertWhen_JobAlreadyAssigned() external {
        claimJob(jobId, nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Assigned));
        claimJob(jobId, nodeId);
    }

    function test_RevertWhen_JobCancelled() external {
        vm.prank(submitter);
        market.cancel(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_WrongStatus.selector, jobId, JobStatus.Cancelled));
        claimJob(jobId, nodeId);
    }

    function test_RevertWhen_DeadlineReached() external {
        uint40 deadline = jobOf(jobId).deadline;
        vm.warp(deadline);
        heartbeat(nodeId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_PastDeadline.selector, jobId, deadline));
        claimJob(jobId, nodeId);
    }

    function test_RevertWhen_NodeUnknown() external {
        vm.expectRevert(abi.encodeWithSelector(INodeRegistry.NodeRegistry_UnknownNode.selector, uint64(99)));
        claimJob(jobId, 99);
    }

    function test_RevertWhen_NodeInactive() external {
        makeInactive(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Inactive)
        );
        claimJob(jobId, nodeId);
    }

    function test_RevertWhen_NodeExiting() external {
        beginExit(nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NotActive.selector, nodeId, NodeStatus.Exiting)
        );
        claimJob(jobId, nodeId);
    }

    function test_RevertWhen_NodeHasNoFreeSlot() external {
        claimJob(postJob(), nodeId);
        claimJob(postJob(), nodeId);
        vm.expectRevert(
            abi.encodeWithSelector(INodeRegistry.NodeRegistry_NoFreeSlot.selector, nodeId, uint8(2), uint8(2))
        );
        claimJob(jobId, nodeId);
    }

    function test_RevertWhen_GpuModelMismatch() external {
        NodeCapabilities memory caps = h100Node();
        caps.gpuModel = A100;
        uint64 other = registerNodeWith(caps);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_GpuModelMismatch.selector, H100, A100));
        claimJob(jobId, other);
    }

    function test_RevertWhen_InsufficientGpus() external {
        JobRequirements memory req = h100Job();
        req.minGpuCount = 9;
        uint64 big = postJobWith(req);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientGpus.selector, uint16(9), uint16(8)));
        claimJob(big, nodeId);
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
        claimJob(anyGpu, cpuOnly);
    }

    function test_RevertWhen_InsufficientVram() external {
        NodeCapabilities memory caps = h100Node();
        caps.vramMiB = 40_959;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientVram.selector, uint32(40_960), uint32(40_959))
        );
        claimJob(jobId, small);
    }

    function test_RevertWhen_InsufficientCpu() external {
        NodeCapabilities memory caps = h100Node();
        caps.cpuCores = 7;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientCpu.selector, uint16(8), uint16(7)));
        claimJob(jobId, small);
    }

    function test_RevertWhen_InsufficientRam() external {
        NodeCapabilities memory caps = h100Node();
        caps.ramMiB = 65_535;
        uint64 small = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_InsufficientRam.selector, uint32(65_536), uint32(65_535))
        );
        claimJob(jobId, small);
    }

    function test_RevertWhen_PriceTooHigh() external {
        NodeCapabilities memory caps = h100Node();
        caps.pricePerGpuHour = 3e6 + 1;
        uint64 pricey = registerNodeWith(caps);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.JobMarket_PriceTooHigh.selector, uint96(3e6), uint96(3e6 + 1))
        );
        claimJob(jobId, pricey);
    }

    function test_RevertWhen_Paused() external {
        pauseMarket();
        vm.expectRevert(Pausable.EnforcedPause.selector);
        claimJob(jobId, nodeId);
    }
}
